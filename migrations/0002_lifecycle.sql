-- Job lifecycle as transactions: placement, worker start and exit, node loss. Each function
-- changes every affected row at once and records the status events, so the server never leaves a
-- job half-updated. The decisions are small; the scheduler (scheduler/) decides placements.

ALTER TABLE nodes ADD COLUMN port_lo integer NOT NULL DEFAULT 29500;
ALTER TABLE nodes ADD COLUMN port_hi integer NOT NULL DEFAULT 29999;
COMMENT ON COLUMN nodes.port_lo IS 'First port the agent lets jobs use for MASTER_PORT.';
COMMENT ON COLUMN nodes.port_hi IS 'Last port the agent lets jobs use for MASTER_PORT.';

ALTER TABLE attempts ADD COLUMN nports integer NOT NULL DEFAULT 1;
COMMENT ON COLUMN attempts.nports IS 'Ports held from master_port on (world_size for tensorflow).';

-- Records a status change of a job (and its event) in one place.
CREATE FUNCTION ty_job_set_status(p_job bigint, p_status text, p_message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET status = p_status, status_message = p_message,
                    started_at = CASE WHEN p_status = 'RUNNING' THEN coalesce(started_at, now())
                                      ELSE started_at END,
                    finished_at = CASE WHEN p_status IN ('SUCCEEDED', 'FAILED', 'STOPPED')
                                       THEN now() ELSE finished_at END
     WHERE id = p_job;
    INSERT INTO job_events (job_id, attempt, status, message)
    SELECT id, attempt, p_status, p_message FROM jobs WHERE id = p_job;
END $$;
COMMENT ON FUNCTION ty_job_set_status(bigint, text, text) IS 'Sets a job''s status and records the event.';

-- Places a PENDING job: a new attempt with its workers, a free master port on the rank-0 node.
-- p_workers: [{"rank","local_rank","node_rank","node_id","gpus":[..],"resources":{..}}].
-- Returns the attempt number and port, or NULL when the job is no longer pending or no port is
-- free.
CREATE FUNCTION ty_place(p_job bigint, p_workers jsonb, p_nports integer,
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
    IF NOT FOUND OR j.status <> 'PENDING' THEN
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
    PERFORM ty_job_set_status(p_job, 'STARTING',
        format('starting %s workers on %s nodes', jsonb_array_length(p_workers),
               array_length(nodes_used, 1)));
END $$;
COMMENT ON FUNCTION ty_place(bigint, jsonb, integer) IS 'Commits a gang placement of a pending job.';

-- Ends a job whose current attempt has no live worker left: SUCCEEDED, FAILED or STOPPED.
-- Returns the final status, or NULL when the job goes on.
CREATE FUNCTION ty_job_settle(p_job bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    final text;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR j.status NOT IN ('STARTING', 'RUNNING', 'STOPPING') THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM workers WHERE job_id = p_job AND attempt = j.attempt
                  AND status IN ('PLACED', 'RUNNING')) THEN
        RETURN NULL;
    END IF;
    IF j.error IS NOT NULL THEN
        final := 'FAILED';
    ELSIF j.status = 'STOPPING' THEN
        final := 'STOPPED';
    ELSE
        final := 'SUCCEEDED';
    END IF;
    UPDATE attempts SET status = final, finished_at = now(), error = j.error
     WHERE job_id = p_job AND attempt = j.attempt;
    PERFORM ty_job_set_status(p_job, final,
        CASE final WHEN 'SUCCEEDED' THEN 'all workers exited 0'
                   WHEN 'FAILED' THEN j.error
                   ELSE coalesce(j.status_message, 'stopped') END);
    RETURN final;
END $$;
COMMENT ON FUNCTION ty_job_settle(bigint) IS 'Finishes a job once no worker of its attempt is alive.';

-- Fails a running job: records the error and starts stopping its other workers.
CREATE FUNCTION ty_job_fail(p_job bigint, p_error text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET error = p_error WHERE id = p_job AND status IN ('STARTING', 'RUNNING');
    IF FOUND THEN
        PERFORM ty_job_set_status(p_job, 'STOPPING', 'failing: ' || p_error);
    END IF;
END $$;
COMMENT ON FUNCTION ty_job_fail(bigint, text) IS 'Marks a job as failing with its error; its other workers are then stopped.';

CREATE FUNCTION ty_worker_started(p_job bigint, p_attempt integer, p_rank integer, p_pid integer)
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
    IF j.status = 'STARTING' AND j.attempt = p_attempt AND NOT EXISTS (
        SELECT 1 FROM workers WHERE job_id = p_job AND attempt = p_attempt AND status = 'PLACED') THEN
        UPDATE attempts SET status = 'RUNNING' WHERE job_id = p_job AND attempt = p_attempt;
        PERFORM ty_job_set_status(p_job, 'RUNNING',
            format('%s workers running', (SELECT world_size FROM attempts
                                          WHERE job_id = p_job AND attempt = p_attempt)));
    END IF;
END $$;
COMMENT ON FUNCTION ty_worker_started(bigint, integer, integer, integer) IS 'Records a worker start; the job runs once all its workers do.';

-- Records a worker exit. Returns 'stop' when the job's other workers must now be stopped,
-- 'settled' when the job just finished, NULL otherwise (including a duplicate event).
CREATE FUNCTION ty_worker_exited(p_job bigint, p_attempt integer, p_rank integer,
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
        PERFORM ty_job_fail(p_job, msg);
    END IF;
    IF ty_job_settle(p_job) IS NOT NULL THEN
        RETURN 'settled';
    END IF;
    RETURN CASE WHEN (SELECT status FROM jobs WHERE id = p_job) = 'STOPPING' THEN 'stop' END;
END $$;
COMMENT ON FUNCTION ty_worker_exited(bigint, integer, integer, integer, integer, text) IS 'Records a worker exit and fails or finishes its job.';

-- Marks a node lost: its live workers are lost and their jobs fail.
CREATE FUNCTION ty_node_lost(p_node text) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    UPDATE nodes SET status = 'LOST' WHERE id = p_node AND status = 'ALIVE';
    FOR jid IN
        UPDATE workers SET status = 'LOST', finished_at = now()
         WHERE node_id = p_node AND status IN ('PLACED', 'RUNNING')
        RETURNING job_id
    LOOP
        PERFORM ty_job_fail(jid, format('node %s was lost', p_node));
        PERFORM ty_job_settle(jid);
        RETURN NEXT jid;
    END LOOP;
END $$;
COMMENT ON FUNCTION ty_node_lost(text) IS 'Marks a node LOST and fails the jobs that had workers on it; returns those jobs.';
