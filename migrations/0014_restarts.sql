-- Issue 12 (fault tolerance), restarts (docs/lifecycle.md "Restarts", docs/fault-tolerance.md).
-- A worker failure or a lost node no longer ends a job while it has failures left
-- (run_config.failure_config.max_failures, -1 unlimited): ty_job_fail fires `retry` (to
-- RESTARTING) instead, the surviving workers are stopped, and once the ended attempt has no live
-- worker the scheduler places the job again (`place` from RESTARTING), resuming from its latest
-- committed checkpoint. Each attempt records why it ended and which checkpoint it started from.
-- Draining a node preempts the jobs running on it (`preempted`, to RESTARTING): counted apart
-- from failures (jobs.preemptions) and capped (ty_preemptions_max), never counted as a failure.

ALTER TABLE jobs ADD COLUMN failures integer NOT NULL DEFAULT 0 CHECK (failures >= 0);
COMMENT ON COLUMN jobs.failures IS 'Restarts caused by failures (worker failed, node lost), compared with run_config.failure_config.max_failures; user stops and preemptions never count.';

ALTER TABLE jobs ADD COLUMN preemptions integer NOT NULL DEFAULT 0 CHECK (preemptions >= 0);
COMMENT ON COLUMN jobs.preemptions IS 'Restarts caused by draining a node the job ran on; capped by ty_preemptions_max(), never counted in failures.';

ALTER TABLE attempts ADD COLUMN resumed_from bigint REFERENCES checkpoints (id) ON DELETE SET NULL;
ALTER TABLE attempts ADD COLUMN end_reason jsonb;
COMMENT ON COLUMN attempts.resumed_from IS 'The checkpoint its workers started from (TRAINYARD_CHECKPOINT_DIR): resume_from_checkpoint for the first attempt, the job''s latest usable committed checkpoint for a restart; NULL: started fresh.';
COMMENT ON COLUMN attempts.end_reason IS 'Why it ended early, first cause wins: {"event": worker_failed|node_lost|timeout|..., "error", "rank", "exit_code", "signal", "node_id", "restarted"}; NULL when it ran to its end or was stopped by a user.';

UPDATE job_statuses SET description = 'Between an attempt that failed and the next one: the ended attempt''s workers are being stopped, then the job waits to be placed again.'
 WHERE name = 'RESTARTING';

INSERT INTO job_transitions (from_status, event, to_status) VALUES
    ('STARTING', 'retry', 'RESTARTING'),
    ('RUNNING', 'retry', 'RESTARTING'),
    ('RESTARTING', 'retry', 'RESTARTING'),
    ('RESTARTING', 'worker_failed', 'RESTARTING'),
    ('RESTARTING', 'node_lost', 'RESTARTING'),
    ('RESTARTING', 'place', 'STARTING'),
    ('RESTARTING', 'stop', 'STOPPING'),
    ('STARTING', 'preempted', 'RESTARTING'),
    ('RUNNING', 'preempted', 'RESTARTING'),
    ('RESTARTING', 'preempted', 'RESTARTING'),
    ('STARTING', 'resize', 'RESTARTING'),
    ('RUNNING', 'resize', 'RESTARTING'),
    ('RESTARTING', 'resize', 'RESTARTING');

-- How many times a job may be preempted (drains) and restarted; the next preemption fails it.
CREATE FUNCTION ty_preemptions_max() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 10';
COMMENT ON FUNCTION ty_preemptions_max() IS 'The cap on jobs.preemptions (docs/fault-tolerance.md).';

-- As in 0006, except that a terminal status no longer rewrites an attempt that has already ended
-- (the attempt a restart ended keeps its FAILED and its error when the job is then stopped).
CREATE OR REPLACE FUNCTION ty_job_transition(p_job bigint, p_event text, p_message text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    t job_transitions;
    fin boolean;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'illegal job transition: no job % for event %', p_job, p_event
            USING ERRCODE = 'TY001';
    END IF;
    SELECT * INTO t FROM job_transitions WHERE from_status = j.status AND event = p_event;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'illegal job transition: job % is %, event % is not allowed there',
                        p_job, j.status, p_event
            USING ERRCODE = 'TY001';
    END IF;
    IF t.to_status IS NULL THEN
        DELETE FROM jobs WHERE id = p_job;
        RETURN NULL;
    END IF;
    IF t.to_status = j.status THEN
        RETURN j.status;
    END IF;
    SELECT terminal INTO fin FROM job_statuses WHERE name = t.to_status;
    UPDATE jobs SET status = t.to_status, status_message = p_message,
                    started_at = CASE WHEN t.to_status = 'RUNNING' THEN coalesce(started_at, now())
                                      ELSE started_at END,
                    finished_at = CASE WHEN fin THEN now() ELSE finished_at END
     WHERE id = p_job;
    IF fin THEN
        UPDATE attempts SET status = t.to_status, finished_at = now(), error = j.error
         WHERE job_id = p_job AND attempt = j.attempt
           AND status NOT IN (SELECT name FROM job_statuses WHERE terminal);
    ELSIF t.to_status = 'RUNNING' THEN
        UPDATE attempts SET status = t.to_status WHERE job_id = p_job AND attempt = j.attempt;
    END IF;
    INSERT INTO job_events (job_id, attempt, status, message)
    VALUES (p_job, j.attempt, t.to_status, p_message);
    RETURN t.to_status;
END $$;

-- Fails a job with p_event (worker_failed, node_lost, timeout, or another failure event) and
-- p_error; p_reason: what the caller knows of the cause (rank, exit_code, signal, node_id).
-- A live job (STARTING, RUNNING) with failures left (failures < max_failures, or max_failures
-- -1) and an event other than timeout restarts: failures + 1, the attempt records the error and
-- the reason (restarted: true), and `retry` moves the job to RESTARTING. Otherwise as in 0006:
-- the job's error is set when the event changes its status (the first failure wins) and the event
-- is applied; the attempt records the reason when it did. A RESTARTING job ignores every failure
-- (`retry` to itself): its attempt has already ended. The server then stops the other workers.
CREATE FUNCTION ty_job_fail(p_job bigint, p_event text, p_error text, p_reason jsonb)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    max_f integer;
    reason jsonb;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN ty_job_transition(p_job, p_event, p_error);
    END IF;
    reason := coalesce(p_reason, '{}'::jsonb)
              || jsonb_build_object('event', p_event, 'error', p_error);
    max_f := coalesce((j.spec #>> '{run_config,failure_config,max_failures}')::integer, 0);
    IF j.status = 'RESTARTING' THEN
        RETURN ty_job_transition(p_job, 'retry', j.status_message);
    END IF;
    IF p_event <> 'timeout' AND ty_job_changes(j.status, 'retry')
       AND (max_f = -1 OR j.failures < max_f) THEN
        UPDATE jobs SET failures = failures + 1 WHERE id = p_job;
        UPDATE attempts SET error = p_error,
                            end_reason = reason || jsonb_build_object('restarted', true)
         WHERE job_id = p_job AND attempt = j.attempt;
        RETURN ty_job_transition(p_job, 'retry',
            format('restarting after failure %s of %s: %s%s', j.failures + 1,
                   CASE WHEN max_f = -1 THEN 'unlimited' ELSE max_f::text END, p_error,
                   CASE WHEN p_event = 'worker_failed' AND p_reason ? 'node_id'
                        THEN ' on node ' || (p_reason->>'node_id') ELSE '' END));
    END IF;
    IF ty_job_changes(j.status, p_event) THEN
        UPDATE jobs SET error = p_error WHERE id = p_job;
        UPDATE attempts SET end_reason = coalesce(end_reason, reason || jsonb_build_object('restarted', false))
         WHERE job_id = p_job AND attempt = j.attempt;
    END IF;
    RETURN ty_job_transition(p_job, p_event, 'failing: ' || p_error);
END $$;
COMMENT ON FUNCTION ty_job_fail(bigint, text, text, jsonb) IS 'Fails a job (worker_failed, node_lost, timeout): restarts it (retry) while failures are left, else fails it; records why its attempt ended.';

CREATE OR REPLACE FUNCTION ty_job_fail(p_job bigint, p_event text, p_error text) RETURNS text
LANGUAGE sql AS $$
    SELECT ty_job_fail(p_job, p_event, p_error, NULL::jsonb)
$$;
COMMENT ON FUNCTION ty_job_fail(bigint, text, text) IS 'ty_job_fail without details of the cause.';

-- Ends a job whose current attempt has no live worker left. A RESTARTING job is not ended: its
-- attempt is (FAILED, or STOPPED after a preemption or a resize; finished_at, an event), once, and the job waits for the scheduler's `place`;
-- NULL is returned. Otherwise as in 0006: succeeded, stopped or failed. Returns the final status,
-- or NULL when the job goes on (a live worker left, restarting, not yet placed, or finished).
CREATE OR REPLACE FUNCTION ty_job_settle(p_job bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    ev text;
    a attempts;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM workers WHERE job_id = p_job AND attempt = j.attempt
                  AND status IN ('PLACED', 'RUNNING')) THEN
        RETURN NULL;
    END IF;
    IF j.status = 'RESTARTING' THEN
        UPDATE attempts SET status = CASE WHEN end_reason->>'event' IN ('preempted', 'resize')
                                          THEN 'STOPPED' ELSE 'FAILED' END,
                            finished_at = now()
         WHERE job_id = p_job AND attempt = j.attempt
           AND status NOT IN (SELECT name FROM job_statuses WHERE terminal)
        RETURNING * INTO a;
        IF FOUND THEN
            INSERT INTO job_events (job_id, attempt, status, message)
            VALUES (p_job, j.attempt, j.status,
                    format('attempt %s ended (%s): its workers are gone; waiting to be placed again',
                           j.attempt, coalesce(a.error, a.end_reason->>'error', 'failed')));
        END IF;
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM job_transitions
                    WHERE from_status = j.status AND event IN ('succeeded', 'stopped', 'failed')) THEN
        RETURN NULL;
    END IF;
    ev := CASE WHEN j.error IS NOT NULL THEN 'failed'
               WHEN ty_job_allows(j.status, 'stopped') THEN 'stopped'
               ELSE 'succeeded' END;
    RETURN ty_job_transition(p_job, ev,
        CASE ev WHEN 'succeeded' THEN 'all workers exited 0'
                WHEN 'failed' THEN j.error
                ELSE coalesce(j.status_message, 'stopped') END);
END $$;

-- The checkpoint a new attempt of job p_job on the nodes p_nodes starts from: for the first
-- attempt the spec's resume_from_checkpoint; for a restart the job's latest committed checkpoint
-- that every one of those nodes can get (it holds a copy, or the artifact store holds a complete
-- one), else the spec's resume_from_checkpoint. NULL: start fresh.
CREATE FUNCTION ty_resume_point(p_job bigint, p_attempt integer, p_nodes text[]) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT c.id FROM checkpoints c
          WHERE p_attempt > 1 AND c.job_id = p_job AND c.status = 'COMMITTED'
            AND (c.artifact_state = 'complete' OR NOT EXISTS (
                    SELECT 1 FROM unnest(p_nodes) nd
                     WHERE NOT EXISTS (
                        SELECT 1 FROM jsonb_array_elements(coalesce(c.location::jsonb, '[]'))  e
                         WHERE e->>'node_id' = nd)))
          ORDER BY c.attempt DESC, c.idx DESC LIMIT 1),
        (SELECT c.id FROM checkpoints c, jobs j
          WHERE j.id = p_job AND c.status = 'COMMITTED'
            AND c.id = (j.spec->>'resume_from_checkpoint')::bigint))
$$;
COMMENT ON FUNCTION ty_resume_point(bigint, integer, text[]) IS 'The checkpoint a new attempt starts from: the latest committed one its nodes can get on a restart, else resume_from_checkpoint.';

-- Places a PENDING or RESTARTING job (as in 0006): a new attempt with its workers and a free
-- master port on the rank-0 node, and now the checkpoint it resumes from (ty_resume_point). A
-- RESTARTING job is placed only once its ended attempt has no live worker (that attempt is then
-- settled first). A restart whose nodes cannot get the job's latest committed checkpoint yet
-- waits (up to 120 s after that checkpoint was registered, while a node holding it is alive) for
-- its upload to the artifact store rather than resume from an older one. Returns the attempt
-- number and port, or NULL when the job cannot be placed now.
CREATE OR REPLACE FUNCTION ty_place(p_job bigint, p_workers jsonb, p_nports integer,
                                    OUT o_attempt integer, OUT o_port integer, OUT o_addr text)
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    rank0 text;
    nodes_used text[];
    lo integer;
    hi integer;
    ck bigint;
    latest bigint;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_allows(j.status, 'place') THEN
        RETURN;
    END IF;
    IF j.status = 'RESTARTING' THEN
        IF EXISTS (SELECT 1 FROM workers WHERE job_id = p_job AND attempt = j.attempt
                      AND status IN ('PLACED', 'RUNNING')) THEN
            RETURN;
        END IF;
        PERFORM ty_job_settle(p_job);
    END IF;
    SELECT w->>'node_id' INTO rank0 FROM jsonb_array_elements(p_workers) w
     WHERE (w->>'rank')::int = 0;
    SELECT array_agg(DISTINCT w->>'node_id') INTO nodes_used FROM jsonb_array_elements(p_workers) w;
    SELECT n.address, n.port_lo, n.port_hi INTO o_addr, lo, hi FROM nodes n WHERE n.id = rank0;
    SELECT min(p) INTO o_port FROM generate_series(lo, hi - p_nports + 1) p
     WHERE NOT EXISTS (
        SELECT 1 FROM attempts a
         WHERE a.status IN ('STARTING', 'RUNNING', 'STOPPING')
           AND int4range(a.master_port, a.master_port + a.nports) && int4range(p, p + p_nports)
           AND EXISTS (SELECT 1 FROM workers w WHERE w.job_id = a.job_id AND w.attempt = a.attempt
                          AND w.node_id = ANY (nodes_used)));
    IF o_port IS NULL THEN
        UPDATE jobs SET status_message = 'waiting for a free port on node ' || rank0 WHERE id = p_job;
        RETURN;
    END IF;
    o_attempt := j.attempt + 1;
    ck := ty_resume_point(p_job, o_attempt, nodes_used);
    SELECT c.id INTO latest FROM checkpoints c
     WHERE o_attempt > 1 AND c.job_id = p_job AND c.status = 'COMMITTED'
     ORDER BY c.attempt DESC, c.idx DESC LIMIT 1;
    IF latest IS DISTINCT FROM ck AND EXISTS (
        SELECT 1 FROM checkpoints c
         WHERE c.id = latest AND c.created_at > now() - interval '120 seconds'
           AND c.artifact_state IS DISTINCT FROM 'deleted'
           AND EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(c.location::jsonb, '[]')) e
                         JOIN nodes n ON n.id = e->>'node_id' WHERE n.status = 'ALIVE')) THEN
        UPDATE jobs SET status_message = format(
            'waiting for checkpoint %s to reach the artifact store (the new placement holds no copy)',
            latest) WHERE id = p_job;
        o_attempt := NULL;
        o_port := NULL;
        o_addr := NULL;
        RETURN;
    END IF;
    INSERT INTO attempts (job_id, attempt, status, world_size, master_addr, master_port, nports,
                          resumed_from)
    VALUES (p_job, o_attempt, 'STARTING', jsonb_array_length(p_workers), o_addr, o_port,
            p_nports, ck);
    INSERT INTO workers (job_id, attempt, rank, local_rank, node_rank, node_id, gpus, resources, status)
    SELECT p_job, o_attempt, (w->>'rank')::int, (w->>'local_rank')::int, (w->>'node_rank')::int,
           w->>'node_id', ARRAY(SELECT jsonb_array_elements_text(w->'gpus'))::int[], w->'resources',
           'PLACED'
      FROM jsonb_array_elements(p_workers) w;
    UPDATE jobs SET attempt = o_attempt WHERE id = p_job;
    PERFORM ty_job_transition(p_job, 'place',
        format('starting %s workers on %s nodes%s', jsonb_array_length(p_workers),
               array_length(nodes_used, 1),
               CASE WHEN o_attempt = 1 AND ck IS NULL THEN ''
                    WHEN ck IS NULL THEN format(' (attempt %s, from scratch: no usable checkpoint)', o_attempt)
                    ELSE format(' (attempt %s, resuming from checkpoint %s)', o_attempt, ck) END));
END $$;

-- Records a worker exit (as in 0006); a failure now passes its rank, code, signal and node to
-- ty_job_fail, which restarts the job or fails it.
CREATE OR REPLACE FUNCTION ty_worker_exited(p_job bigint, p_attempt integer, p_rank integer,
                                            p_code integer, p_signal integer, p_error text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    node text;
BEGIN
    UPDATE workers SET status = 'EXITED', exit_code = p_code, signal = p_signal, finished_at = now()
     WHERE job_id = p_job AND attempt = p_attempt AND rank = p_rank
       AND status IN ('PLACED', 'RUNNING')
    RETURNING node_id INTO node;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_code IS DISTINCT FROM 0 OR p_signal IS NOT NULL OR p_error IS NOT NULL THEN
        msg := format('worker rank %s %s', p_rank,
                      coalesce(p_error, CASE WHEN p_signal IS NOT NULL
                                             THEN 'was killed by signal ' || p_signal
                                             ELSE 'exited with code ' || p_code END));
        PERFORM ty_job_fail(p_job, 'worker_failed', msg,
                            jsonb_build_object('attempt', p_attempt, 'rank', p_rank,
                                               'exit_code', p_code, 'signal', p_signal,
                                               'node_id', node));
    END IF;
    PERFORM ty_job_settle(p_job);
    RETURN (SELECT status FROM jobs WHERE id = p_job);
END $$;

-- Marks a node lost (as in 0006); the failure of each job names the node.
CREATE OR REPLACE FUNCTION ty_node_lost(p_node text) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    UPDATE nodes SET status = 'LOST' WHERE id = p_node AND status = 'ALIVE';
    FOR jid IN
        WITH lost AS (
            UPDATE workers SET status = 'LOST', finished_at = now()
             WHERE node_id = p_node AND status IN ('PLACED', 'RUNNING')
            RETURNING job_id)
        SELECT DISTINCT job_id FROM lost ORDER BY job_id
    LOOP
        PERFORM ty_job_fail(jid, 'node_lost', format('node %s was lost', p_node),
                            jsonb_build_object('node_id', p_node));
        PERFORM ty_job_settle(jid);
        RETURN NEXT jid;
    END LOOP;
END $$;

-- The job as the API shows it: the object of the latest definition (0013's, kept under another
-- name so that this one does not copy it) with the job's failures and preemptions counts.
ALTER FUNCTION ty_job_json(jobs) RENAME TO ty_job_json_without_restarts;
CREATE FUNCTION ty_job_json(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT ty_job_json_without_restarts(j)
           || jsonb_build_object('failures', j.failures, 'preemptions', j.preemptions)
$$;
COMMENT ON FUNCTION ty_job_json(jobs) IS 'The job object of the REST API (GET /api/v1/jobs/{id}): ty_job_json_without_restarts plus failures and preemptions (migration 0014).';

-- Preempts job p_job because node p_node is being drained: `preempted` (to RESTARTING), NOT a
-- failure; preemptions + 1; the attempt's end_reason names the node. Past ty_preemptions_max()
-- the job fails instead (its error says so, `stop` then `failed`). A job that is not STARTING or
-- RUNNING is left alone. Returns the job's status after it.
CREATE FUNCTION ty_job_preempt(p_job bigint, p_node text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    msg text;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_changes(j.status, 'preempted') THEN
        RETURN j.status;
    END IF;
    IF j.preemptions >= ty_preemptions_max() THEN
        msg := format('node %s is draining and the job was already preempted %s times (the cap)',
                      p_node, j.preemptions);
        UPDATE jobs SET error = msg WHERE id = p_job;
        UPDATE attempts SET end_reason = jsonb_build_object('event', 'preempted', 'error', msg,
                                                            'node_id', p_node, 'restarted', false)
         WHERE job_id = p_job AND attempt = j.attempt;
        RETURN ty_job_transition(p_job, 'stop', 'failing: ' || msg);
    END IF;
    msg := format('preempted: node %s is draining', p_node);
    UPDATE jobs SET preemptions = preemptions + 1 WHERE id = p_job;
    UPDATE attempts SET end_reason = jsonb_build_object('event', 'preempted', 'error', msg,
                                                        'node_id', p_node, 'restarted', true)
     WHERE job_id = p_job AND attempt = j.attempt;
    RETURN ty_job_transition(p_job, 'preempted',
        format('%s; restarting elsewhere (preemption %s of at most %s, not a failure)', msg,
               j.preemptions + 1, ty_preemptions_max()));
END $$;
COMMENT ON FUNCTION ty_job_preempt(bigint, text) IS 'Preempts a job off a draining node: restarts it elsewhere (not a failure), or fails it past the cap.';

-- Drains node p_node: no new work is placed there (nodes.draining) and every job with a live
-- worker of its current attempt there is preempted (ty_job_preempt), in id order. Returns those
-- jobs.
CREATE FUNCTION ty_node_drain(p_node text) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    UPDATE nodes SET draining = true WHERE id = p_node AND NOT draining;
    FOR jid IN
        SELECT DISTINCT w.job_id FROM workers w JOIN jobs j ON j.id = w.job_id
         WHERE w.node_id = p_node AND w.attempt = j.attempt AND w.status IN ('PLACED', 'RUNNING')
         ORDER BY w.job_id
    LOOP
        PERFORM ty_job_preempt(jid, p_node);
        RETURN NEXT jid;
    END LOOP;
END $$;
COMMENT ON FUNCTION ty_node_drain(text) IS 'Marks a node draining and preempts the jobs running on it; returns them.';

-- Restarts elastic job p_job to grow it (scaling_config.num_workers {"min", "max"}): the control
-- loop saw room for more workers for elastic_resize_interval_s. `resize` (to RESTARTING), not a
-- failure and not a preemption; the attempt's end_reason says why (p_message) and it ends STOPPED;
-- its workers are stopped with the preemption notice, and the next placement takes as many
-- workers as fit. A job that is not STARTING or RUNNING is left alone. Returns its status.
CREATE FUNCTION ty_job_resize(p_job bigint, p_message text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_changes(j.status, 'resize') THEN
        RETURN j.status;
    END IF;
    UPDATE attempts SET end_reason = jsonb_build_object('event', 'resize', 'error', p_message,
                                                        'restarted', true)
     WHERE job_id = p_job AND attempt = j.attempt;
    RETURN ty_job_transition(p_job, 'resize',
                             p_message || '; restarting to grow (not a failure)');
END $$;
COMMENT ON FUNCTION ty_job_resize(bigint, text) IS 'Restarts an elastic job to grow it (event resize; not a failure).';
