-- Hangs (issue 12): every worker's last heartbeat, as its agent relays it (agent message
-- `progress`, docs/agent-protocol.md), and what the control loop needs to name a hang once.

CREATE TABLE worker_progress (
    job_id        bigint NOT NULL,
    attempt       integer NOT NULL,
    rank          integer NOT NULL,
    op            text,
    coll_seq      bigint NOT NULL,
    in_collective boolean NOT NULL,
    report_seq    bigint NOT NULL,
    progress_at   timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    PRIMARY KEY (job_id, attempt, rank),
    FOREIGN KEY (job_id, attempt, rank) REFERENCES workers (job_id, attempt, rank)
        ON DELETE CASCADE
);
COMMENT ON TABLE worker_progress IS 'The last heartbeat of each worker that sent one (SDK heartbeat thread, trainyard.py): where it is, for naming hangs.';
COMMENT ON COLUMN worker_progress.job_id IS 'The job.';
COMMENT ON COLUMN worker_progress.attempt IS 'The attempt.';
COMMENT ON COLUMN worker_progress.rank IS 'The worker''s global rank.';
COMMENT ON COLUMN worker_progress.op IS 'The collective it is in or last left (allreduce, broadcast, allgather); NULL before its first.';
COMMENT ON COLUMN worker_progress.coll_seq IS 'That collective''s number, counting the rank''s collectives from 1; 0 before its first.';
COMMENT ON COLUMN worker_progress.in_collective IS 'Whether it is inside collective coll_seq.';
COMMENT ON COLUMN worker_progress.report_seq IS 'How many reports it made (trainyard.report / ty_report).';
COMMENT ON COLUMN worker_progress.progress_at IS 'When op, coll_seq, in_collective or report_seq last changed (its agent''s measure, on the server''s clock).';
COMMENT ON COLUMN worker_progress.heartbeat_at IS 'When its last heartbeat reached its agent (on the server''s clock).';
COMMENT ON COLUMN worker_progress.updated_at IS 'When its agent last relayed it: older than a few seconds means its agent is not reporting.';

ALTER TABLE attempts ADD COLUMN hang_warned_at timestamptz;
COMMENT ON COLUMN attempts.hang_warned_at IS 'The last progress time (max worker_progress.progress_at) of the hang last named in the job events: a hang is named once until some rank progresses.';

-- Stores one `progress` message of node p_node: p_rows is a JSON array of {job_id, attempt,
-- rank, op, coll_seq, in_collective, report_seq, heartbeat_age_ms, progress_age_ms}. Rows of
-- workers that are not placed on that node in that attempt are ignored (a node speaks only for
-- its own workers); so is a second row for the same worker. progress_at moves only when the
-- worker's place changed. One statement per message. Returns the rows stored.
CREATE FUNCTION ty_progress_ingest(p_node text, p_rows jsonb) RETURNS integer
LANGUAGE sql AS $$
    WITH inp AS (
        SELECT DISTINCT ON (x.job_id, x.attempt, x.rank) x.*
          FROM jsonb_to_recordset(p_rows) AS x(job_id bigint, attempt integer, rank integer,
                                               op text, coll_seq bigint, in_collective boolean,
                                               report_seq bigint, heartbeat_age_ms bigint,
                                               progress_age_ms bigint)
          JOIN workers w ON w.job_id = x.job_id AND w.attempt = x.attempt AND w.rank = x.rank
                        AND w.node_id = p_node
         ORDER BY x.job_id, x.attempt, x.rank
    ), up AS (
        INSERT INTO worker_progress AS p (job_id, attempt, rank, op, coll_seq, in_collective,
                                          report_seq, progress_at, heartbeat_at, updated_at)
        SELECT job_id, attempt, rank, op, coll_seq, in_collective, report_seq,
               now() - make_interval(secs => progress_age_ms / 1000.0),
               now() - make_interval(secs => heartbeat_age_ms / 1000.0), now()
          FROM inp
        ON CONFLICT (job_id, attempt, rank) DO UPDATE
           SET op = EXCLUDED.op, coll_seq = EXCLUDED.coll_seq,
               in_collective = EXCLUDED.in_collective, report_seq = EXCLUDED.report_seq,
               progress_at = CASE WHEN (p.op, p.coll_seq, p.in_collective, p.report_seq)
                                       IS NOT DISTINCT FROM
                                       (EXCLUDED.op, EXCLUDED.coll_seq, EXCLUDED.in_collective,
                                        EXCLUDED.report_seq)
                                  THEN p.progress_at ELSE EXCLUDED.progress_at END,
               heartbeat_at = EXCLUDED.heartbeat_at, updated_at = EXCLUDED.updated_at
        RETURNING 1
    )
    SELECT count(*)::integer FROM up
$$;
COMMENT ON FUNCTION ty_progress_ingest(text, jsonb) IS 'Stores a node''s batch of worker heartbeats (agent message progress) in one statement.';

-- Names the hang of job p_job's attempt p_attempt in its events (p_message), once: unless the
-- attempt already named the hang that began at its current last progress time. Returns whether
-- it recorded the event.
CREATE FUNCTION ty_hang_warn(p_job bigint, p_attempt integer, p_message text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    last timestamptz;
    st text;
BEGIN
    SELECT max(progress_at) INTO last FROM worker_progress
     WHERE job_id = p_job AND attempt = p_attempt;
    SELECT j.status INTO st FROM jobs j JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempt
     WHERE j.id = p_job AND j.attempt = p_attempt AND a.hang_warned_at IS DISTINCT FROM last
       FOR UPDATE OF a;
    IF NOT FOUND OR last IS NULL THEN
        RETURN false;
    END IF;
    UPDATE attempts SET hang_warned_at = last WHERE job_id = p_job AND attempt = p_attempt;
    INSERT INTO job_events (job_id, attempt, status, message)
    VALUES (p_job, p_attempt, st, 'hang: ' || p_message);
    RETURN true;
END $$;
COMMENT ON FUNCTION ty_hang_warn(bigint, integer, text) IS 'Records a job event naming a hang, once per hang (attempts.hang_warned_at).';

-- Fails job p_job because its attempt p_attempt hangs (past hang_timeout_s), through the same
-- ty_job_fail a worker failure uses (event worker_failed). Nothing happens when the job moved on
-- to another attempt or its status does not change on worker_failed. Returns whether it failed.
CREATE FUNCTION ty_hang_fail(p_job bigint, p_attempt integer, p_message text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    SELECT status INTO st FROM jobs WHERE id = p_job AND attempt = p_attempt FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_changes(st, 'worker_failed') THEN
        RETURN false;
    END IF;
    PERFORM ty_job_fail(p_job, 'worker_failed', 'hang: ' || p_message);
    RETURN true;
END $$;
COMMENT ON FUNCTION ty_hang_fail(bigint, integer, text) IS 'Fails a hung job (past hang_timeout_s) with a message naming the hang.';
