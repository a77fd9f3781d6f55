-- The leader's maintenance of report_blocks (server/control/control.c, every tick): up to
-- p_series series whose reports reach past their block_next's block have their complete blocks
-- summed up, once, in bulk: blocks block_next to the one before the block of their newest report
-- (that last block may still be filling; it stays read from the reports), and block_next moves on.
-- A series whose row another transaction holds (a batch storing its reports) waits for the next
-- call: the control thread never waits for another server's batch.
-- A report that comes later for a block already stored (a resend after a gap) is summed up by
-- ty_report_ingest_batch's own call of ty_report_blocks_sum. Locks the series' rows first, so
-- that a batch storing reports of the same series either committed before (and its reports are
-- read here) or sees the new block_next after. Restartable: what is not committed is redone.
-- Returns how many series moved on.
CREATE OR REPLACE FUNCTION ty_report_blocks_fill(p_series integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    todo jsonb;
BEGIN
    SELECT jsonb_agg(jsonb_build_object('job_id', job_id, 'attempt', attempt, 'rank', rank,
                                        'b_from', block_next, 'b_to', (seq_max >> 4) - 1))
      INTO todo
      FROM (SELECT job_id, attempt, rank, block_next, seq_max FROM report_series
             WHERE seq_max >> 4 > block_next
             ORDER BY job_id, attempt, rank LIMIT p_series
               FOR UPDATE SKIP LOCKED) s;
    IF todo IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM ty_report_blocks_sum(todo);
    UPDATE report_series s SET block_next = t.b_to + 1
      FROM jsonb_to_recordset(todo) AS t(job_id bigint, attempt integer, rank integer, b_to bigint)
     WHERE s.job_id = t.job_id AND s.attempt = t.attempt AND s.rank = t.rank;
    RETURN jsonb_array_length(todo);
END $$;
COMMENT ON FUNCTION ty_report_blocks_fill(integer) IS 'Maintenance: sums up the complete blocks of up to p_series series not yet in report_blocks; returns how many series moved on.';
