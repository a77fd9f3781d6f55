-- Stores one `progress` message of node p_node: p_rows is a JSON array of {job_id, attempt,
-- rank, op, coll_seq, in_collective, report_seq, heartbeat_age_ms, progress_age_ms}. Rows of
-- workers that are not placed on that node in that attempt are ignored (a node speaks only for
-- its own workers); so is a second row for the same worker. progress_at moves only when the
-- worker's place changed; a worker's first row stamps workers.sdk_init_at (its SDK's first contact,
-- the end of framework init: ty_attempt_startup). One statement per message. Returns the rows stored.
CREATE OR REPLACE FUNCTION ty_progress_ingest(p_node text, p_rows jsonb) RETURNS integer
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
    ), first_contact AS (
        UPDATE workers w SET sdk_init_at = now() - make_interval(secs => inp.heartbeat_age_ms / 1000.0)
          FROM inp
         WHERE w.job_id = inp.job_id AND w.attempt = inp.attempt AND w.rank = inp.rank
           AND w.sdk_init_at IS NULL
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
