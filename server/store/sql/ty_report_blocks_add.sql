-- Statement trigger on reports: rows written by any statement but the server's batches (SQL,
-- COPY) are summed up into report_blocks (migration 0046) at once. For each series (job, attempt,
-- rank) the rows touch: report_series (migration 0047) notes the newest seq, the blocks from the
-- lowest one touched (or the series' block_next, if lower) to the highest touched are summed up
-- again from all their reports, last block included, and block_next moves past them. The
-- server's batches (ty_report_ingest_batch, which sets trainyard.report_blocks to 'deferred' for
-- its transaction) leave that to the leader's maintenance (ty_report_blocks_fill): the trigger
-- returns at once.
CREATE OR REPLACE FUNCTION ty_report_blocks_add() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ranges jsonb;
BEGIN
    IF current_setting('trainyard.report_blocks', true) = 'deferred' THEN
        RETURN NULL;
    END IF;
    WITH t AS (
        SELECT job_id, attempt, rank, max(seq) AS seq_max, min(seq) >> 4 AS b_from,
               max(seq) >> 4 AS b_to
          FROM new_reports GROUP BY job_id, attempt, rank
    ), u AS (
        INSERT INTO report_series AS s (job_id, attempt, rank, seq_max, block_next)
        SELECT job_id, attempt, rank, seq_max, b_to + 1 FROM t
         ORDER BY job_id, attempt, rank -- one order for every writer
        ON CONFLICT (job_id, attempt, rank)
           DO UPDATE SET seq_max = greatest(s.seq_max, excluded.seq_max)
        RETURNING s.job_id, s.attempt, s.rank, s.block_next
    )
    SELECT jsonb_agg(jsonb_build_object('job_id', t.job_id, 'attempt', t.attempt, 'rank', t.rank,
                                        'b_from', least(t.b_from, u.block_next),
                                        'b_to', t.b_to))
      INTO ranges
      FROM t JOIN u USING (job_id, attempt, rank);
    PERFORM ty_report_blocks_sum(ranges);
    UPDATE report_series s SET block_next = greatest(s.block_next, t.b_to + 1)
      FROM jsonb_to_recordset(ranges)
           AS t(job_id bigint, attempt integer, rank integer, b_to bigint)
     WHERE s.job_id = t.job_id AND s.attempt = t.attempt AND s.rank = t.rank;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_report_blocks_add() IS 'Trigger: reports inserted by other statements than the server''s batches are summed up into report_blocks at once.';
CREATE OR REPLACE TRIGGER report_blocks AFTER INSERT ON reports
    REFERENCING NEW TABLE AS new_reports FOR EACH STATEMENT EXECUTE FUNCTION ty_report_blocks_add();
