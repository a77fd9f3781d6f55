-- One job state machine (docs/lifecycle.md, docs/decisions.md). Until now the lifecycle was split
-- between the functions of 0002, statements in the server's C code (submit, stop, delete,
-- timeouts) and the CHECK on jobs.status. From here on:
--   job_statuses     the statuses, and which are terminal;
--   job_transitions  every legal (status, event) -> status;
--   ty_job_transition() the only writer of jobs.status: it looks the change up in the table and
--                    refuses (raises SQLSTATE TY001) one that is not there;
--   ty_job_request() the events a user asks for (stop, delete): refused without an error when
--                    the job's status does not allow them, so the API can answer 409.
-- The functions of 0002 are replaced to go through these; ty_job_set_status is dropped.

CREATE TABLE job_statuses (
    name        text PRIMARY KEY,
    terminal    boolean NOT NULL,
    description text NOT NULL
);
COMMENT ON TABLE job_statuses IS 'Every job status (DESIGN.md section 2); the C enum in common/job_status.h spells the same names.';
COMMENT ON COLUMN job_statuses.name IS 'The status as the API spells it.';
COMMENT ON COLUMN job_statuses.terminal IS 'A job never leaves it; it sets finished_at and ends the attempt, and only then may the job be deleted.';
COMMENT ON COLUMN job_statuses.description IS 'What the status means, in words.';

INSERT INTO job_statuses (name, terminal, description) VALUES
    ('PENDING', false, 'Submitted; waiting until all its workers can be placed at once.'),
    ('STARTING', false, 'An attempt is placed; its workers are being launched.'),
    ('RUNNING', false, 'Every worker of the current attempt has started.'),
    ('RESTARTING', false, 'Between a failed attempt and the next one (restarts are not yet implemented: no transition enters it).'),
    ('STOPPING', false, 'Its workers are being stopped: a stop was requested, a worker failed, it timed out or a node was lost.'),
    ('SUCCEEDED', true, 'Every worker of its final attempt exited 0.'),
    ('FAILED', true, 'A worker failed, it timed out or a node was lost, and its workers are gone.'),
    ('STOPPED', true, 'Stopped on request; its workers are gone.');

ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_fkey FOREIGN KEY (status) REFERENCES job_statuses (name);
ALTER TABLE attempts ADD CONSTRAINT attempts_status_fkey
    FOREIGN KEY (status) REFERENCES job_statuses (name);
COMMENT ON COLUMN jobs.status IS 'One of job_statuses; changed only by ty_job_transition().';

CREATE TABLE job_transitions (
    from_status text REFERENCES job_statuses (name),
    event       text NOT NULL,
    to_status   text REFERENCES job_statuses (name)
);
CREATE UNIQUE INDEX job_transitions_key ON job_transitions (coalesce(from_status, ''), event);
COMMENT ON TABLE job_transitions IS 'Every legal job status change; docs/lifecycle.md is its table with who triggers each and what else happens (tests/integration/test_lifecycle.py keeps the two equal).';
COMMENT ON COLUMN job_transitions.from_status IS 'Status the event applies to; NULL for submit (no job yet).';
COMMENT ON COLUMN job_transitions.event IS 'What happened: submit, place, running, worker_failed, timeout, node_lost, stop, succeeded, stopped, failed, delete.';
COMMENT ON COLUMN job_transitions.to_status IS 'Status after the event (equal to from_status: accepted and ignored); NULL for delete (the job is removed).';
COMMENT ON INDEX job_transitions_key IS 'One row per (status, event): the machine is deterministic.';

INSERT INTO job_transitions (from_status, event, to_status) VALUES
    (NULL, 'submit', 'PENDING'),
    ('PENDING', 'place', 'STARTING'),
    ('STARTING', 'running', 'RUNNING'),
    ('STARTING', 'worker_failed', 'STOPPING'),
    ('RUNNING', 'worker_failed', 'STOPPING'),
    ('STOPPING', 'worker_failed', 'STOPPING'),
    ('STARTING', 'timeout', 'STOPPING'),
    ('RUNNING', 'timeout', 'STOPPING'),
    ('STOPPING', 'timeout', 'STOPPING'),
    ('STARTING', 'node_lost', 'STOPPING'),
    ('RUNNING', 'node_lost', 'STOPPING'),
    ('STOPPING', 'node_lost', 'STOPPING'),
    ('PENDING', 'stop', 'STOPPED'),
    ('STARTING', 'stop', 'STOPPING'),
    ('RUNNING', 'stop', 'STOPPING'),
    ('STOPPING', 'stop', 'STOPPING'),
    ('STARTING', 'succeeded', 'SUCCEEDED'),
    ('RUNNING', 'succeeded', 'SUCCEEDED'),
    ('STOPPING', 'stopped', 'STOPPED'),
    ('STOPPING', 'failed', 'FAILED'),
    ('SUCCEEDED', 'delete', NULL),
    ('FAILED', 'delete', NULL),
    ('STOPPED', 'delete', NULL);

-- Whether p_event is legal for a job in p_from (NULL: not yet submitted).
CREATE FUNCTION ty_job_allows(p_from text, p_event text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM job_transitions t
                    WHERE t.event = p_event
                      AND (t.from_status = p_from OR (t.from_status IS NULL AND p_from IS NULL)))
$$;
COMMENT ON FUNCTION ty_job_allows(text, text) IS 'Whether job_transitions has the event for that status.';

-- Whether p_event moves a job in p_from to another status (legal and not ignored).
CREATE FUNCTION ty_job_changes(p_from text, p_event text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM job_transitions t
                    WHERE t.event = p_event AND t.from_status = p_from
                      AND t.to_status IS DISTINCT FROM t.from_status)
$$;
COMMENT ON FUNCTION ty_job_changes(text, text) IS 'Whether the event is legal for that status and changes it.';

-- Applies p_event to job p_job: the one writer of jobs.status. Locks the job, looks the change
-- up in job_transitions and raises SQLSTATE TY001 when the table does not have it (the caller's
-- transaction is rolled back: a bug, never a user's mistake). A change to another status sets
-- status and status_message (p_message), started_at on the first RUNNING, finished_at on a
-- terminal status, moves the current attempt into RUNNING and terminal statuses (terminal: its
-- finished_at and the job's error too) and records a job_events row. An event the status accepts
-- and ignores (to = from) changes nothing. delete removes the job (with its events, attempts,
-- metrics, checkpoints by cascade). Returns the status after the event (NULL after delete).
CREATE FUNCTION ty_job_transition(p_job bigint, p_event text, p_message text) RETURNS text
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
         WHERE job_id = p_job AND attempt = j.attempt;
    ELSIF t.to_status = 'RUNNING' THEN
        UPDATE attempts SET status = t.to_status WHERE job_id = p_job AND attempt = j.attempt;
    END IF;
    INSERT INTO job_events (job_id, attempt, status, message)
    VALUES (p_job, j.attempt, t.to_status, p_message);
    RETURN t.to_status;
END $$;
COMMENT ON FUNCTION ty_job_transition(bigint, text, text) IS 'The one writer of jobs.status: applies a legal event (job_transitions) and records it; raises TY001 for an illegal one.';

-- An event a user asks for (stop, delete) on job p_job. o_from: the job's status (NULL: there is
-- no such job, nothing else is set). o_allowed: whether the status allows the event; when it
-- does, the event was applied and o_to is the status after it (NULL after delete).
CREATE FUNCTION ty_job_request(p_job bigint, p_event text, p_message text,
                               OUT o_from text, OUT o_allowed boolean, OUT o_to text)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT status INTO o_from FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    o_allowed := ty_job_allows(o_from, p_event);
    IF o_allowed THEN
        o_to := ty_job_transition(p_job, p_event, p_message);
    END IF;
END $$;
COMMENT ON FUNCTION ty_job_request(bigint, text, text) IS 'Applies a user''s stop or delete when the job''s status allows it; says whether it did.';

-- Submits a job: the transition out of "no job yet". Returns the new row.
CREATE FUNCTION ty_job_submit(p_name text, p_owner text, p_priority integer, p_spec jsonb)
RETURNS jobs LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    INSERT INTO jobs (name, owner, status, status_message, priority, spec)
    SELECT p_name, p_owner, t.to_status, 'waiting to be scheduled', p_priority, p_spec
      FROM job_transitions t WHERE t.from_status IS NULL AND t.event = 'submit'
    RETURNING * INTO STRICT j;
    INSERT INTO job_events (job_id, attempt, status, message)
    VALUES (j.id, j.attempt, j.status, 'submitted by ' || p_owner);
    RETURN j;
END $$;
COMMENT ON FUNCTION ty_job_submit(text, text, integer, jsonb) IS 'Inserts a job in the status of the submit transition and records the event.';

-- Fails a live job with p_event (worker_failed, timeout, node_lost): records p_error as the
-- job's error when the event changes its status (the first failure wins) and moves it on; its
-- other workers are then stopped by the server. Illegal for the job's status: raises TY001.
DROP FUNCTION ty_job_fail(bigint, text);
CREATE FUNCTION ty_job_fail(p_job bigint, p_event text, p_error text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    cur text;
BEGIN
    SELECT status INTO cur FROM jobs WHERE id = p_job FOR UPDATE;
    IF ty_job_changes(cur, p_event) THEN
        UPDATE jobs SET error = p_error WHERE id = p_job;
    END IF;
    RETURN ty_job_transition(p_job, p_event, 'failing: ' || p_error);
END $$;
COMMENT ON FUNCTION ty_job_fail(bigint, text, text) IS 'Fails a job with its error (worker_failed, timeout, node_lost); its other workers are then stopped.';

-- Ends a job whose current attempt has no live worker left: succeeded, stopped or failed.
-- Returns the final status, or NULL when the job goes on (a live worker left, or a status with
-- nothing to settle: not yet placed, or already finished).
CREATE OR REPLACE FUNCTION ty_job_settle(p_job bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    ev text;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM job_transitions
                                 WHERE from_status = j.status
                                   AND event IN ('succeeded', 'stopped', 'failed')) THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM workers WHERE job_id = p_job AND attempt = j.attempt
                  AND status IN ('PLACED', 'RUNNING')) THEN
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

-- Places a PENDING job: a new attempt with its workers, a free master port on the rank-0 node.
-- p_workers: [{"rank","local_rank","node_rank","node_id","gpus":[..],"resources":{..}}].
-- Returns the attempt number and port, or NULL when the job can no longer be placed (stopped
-- meanwhile) or no port is free. The port search reads attempts by the literal live statuses of
-- the partial index attempts_active_idx (0005).
CREATE OR REPLACE FUNCTION ty_place(p_job bigint, p_workers jsonb, p_nports integer,
                                    OUT o_attempt integer, OUT o_port integer, OUT o_addr text)
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    rank0 text;
    nodes_used text[];
    lo integer;
    hi integer;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_allows(j.status, 'place') THEN
        RETURN;
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
    INSERT INTO attempts (job_id, attempt, status, world_size, master_addr, master_port, nports)
    VALUES (p_job, o_attempt, 'STARTING', jsonb_array_length(p_workers), o_addr, o_port,
            p_nports);
    INSERT INTO workers (job_id, attempt, rank, local_rank, node_rank, node_id, gpus, resources, status)
    SELECT p_job, o_attempt, (w->>'rank')::int, (w->>'local_rank')::int, (w->>'node_rank')::int,
           w->>'node_id', ARRAY(SELECT jsonb_array_elements_text(w->'gpus'))::int[], w->'resources',
           'PLACED'
      FROM jsonb_array_elements(p_workers) w;
    UPDATE jobs SET attempt = o_attempt WHERE id = p_job;
    PERFORM ty_job_transition(p_job, 'place',
        format('starting %s workers on %s nodes', jsonb_array_length(p_workers),
               array_length(nodes_used, 1)));
END $$;

-- Records a worker start; the job runs once every worker of its attempt has started.
CREATE OR REPLACE FUNCTION ty_worker_started(p_job bigint, p_attempt integer, p_rank integer,
                                             p_pid integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE workers SET status = 'RUNNING', pid = p_pid, started_at = now()
     WHERE job_id = p_job AND attempt = p_attempt AND rank = p_rank AND status = 'PLACED';
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF ty_job_allows(j.status, 'running') AND j.attempt = p_attempt AND NOT EXISTS (
        SELECT 1 FROM workers WHERE job_id = p_job AND attempt = p_attempt AND status = 'PLACED') THEN
        PERFORM ty_job_transition(p_job, 'running',
            format('%s workers running', (SELECT world_size FROM attempts
                                          WHERE job_id = p_job AND attempt = p_attempt)));
    END IF;
END $$;

-- Records a worker exit; a failure (non-zero code, signal or error) fails the job, and the last
-- exit settles it. Returns the job's status after the exit, or NULL when nothing was recorded (a
-- duplicate event, or no such live worker). The server stops the job's other workers when it is
-- STOPPING.
CREATE OR REPLACE FUNCTION ty_worker_exited(p_job bigint, p_attempt integer, p_rank integer,
                                            p_code integer, p_signal integer, p_error text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
BEGIN
    UPDATE workers SET status = 'EXITED', exit_code = p_code, signal = p_signal, finished_at = now()
     WHERE job_id = p_job AND attempt = p_attempt AND rank = p_rank
       AND status IN ('PLACED', 'RUNNING');
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_code IS DISTINCT FROM 0 OR p_signal IS NOT NULL OR p_error IS NOT NULL THEN
        msg := format('worker rank %s %s', p_rank,
                      coalesce(p_error, CASE WHEN p_signal IS NOT NULL
                                             THEN 'was killed by signal ' || p_signal
                                             ELSE 'exited with code ' || p_code END));
        PERFORM ty_job_fail(p_job, 'worker_failed', msg);
    END IF;
    PERFORM ty_job_settle(p_job);
    RETURN (SELECT status FROM jobs WHERE id = p_job);
END $$;
COMMENT ON FUNCTION ty_worker_exited(bigint, integer, integer, integer, integer, text) IS 'Records a worker exit, fails or finishes its job; returns the job''s status after it (NULL: duplicate).';

-- Marks a node lost: its live workers are lost and their jobs fail (each job once, in id order
-- so that concurrent callers lock jobs in the same order). Returns those jobs.
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
        PERFORM ty_job_fail(jid, 'node_lost', format('node %s was lost', p_node));
        PERFORM ty_job_settle(jid);
        RETURN NEXT jid;
    END LOOP;
END $$;
COMMENT ON FUNCTION ty_node_lost(text) IS 'Marks a node LOST and fails the jobs that had workers on it; returns those jobs, once each.';

-- Fails the jobs whose current attempt has run past the job's timeout_s. Returns how many. FOR
-- UPDATE re-checks each job's status once it is locked, so a job stopped meanwhile is skipped.
CREATE FUNCTION ty_jobs_timed_out() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    r record;
BEGIN
    FOR r IN
        SELECT j.id, j.spec->>'timeout_s' AS timeout_s
          FROM jobs j JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempt
         WHERE j.status IN (SELECT from_status FROM job_transitions
                             WHERE event = 'timeout' AND to_status <> from_status)
           AND j.spec->>'timeout_s' IS NOT NULL
           AND a.created_at + make_interval(secs => (j.spec->>'timeout_s')::float8) < now()
         ORDER BY j.id
           FOR UPDATE OF j
    LOOP
        PERFORM ty_job_fail(r.id, 'timeout', format('timed out after %s s', r.timeout_s));
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;
COMMENT ON FUNCTION ty_jobs_timed_out() IS 'Fails (event timeout) the jobs past their timeout_s; returns how many.';

-- Settles every job that is being stopped and has no live worker left. Returns how many.
CREATE FUNCTION ty_jobs_settle_stopping() RETURNS integer LANGUAGE sql AS $$
    SELECT count(*)::integer
      FROM (SELECT ty_job_settle(id) AS s FROM jobs
             WHERE status IN (SELECT from_status FROM job_transitions WHERE event = 'stopped')
             ORDER BY id) x
     WHERE s IS NOT NULL
$$;
COMMENT ON FUNCTION ty_jobs_settle_stopping() IS 'Finishes the stopping jobs whose workers are all gone; returns how many.';

DROP FUNCTION ty_job_set_status(bigint, text, text);
