-- The maintenance of report_blocks (migration 0046), the one place that stores blocks: the
-- leader calls it from a thread of its own, beside the control thread's report batches, call
-- after call while series move on (server/control/control_report.c), and anyone may call it
-- (tests, after writing reports with SQL). Up to p_series series of report_series (which every
-- writer keeps: ty_reports_added) whose newest report lies past their block_next's block have
-- their complete blocks summed up from all their reports (ty_report_blocks_of), once, in bulk:
-- blocks block_next to the one before the block of their newest report (that last block may still
-- be filling; reads sum it up from the reports), at most 16 of them (256 reports) per series
-- per call so that a call stays short, replacing what report_blocks held for them; and
-- block_next moves past them, in the same statement. A series whose row another transaction
-- holds (a writer storing its reports, whose trigger may lower block_next) waits for the next
-- call: the caller never waits for a writer. Rows are locked first, so that a writer storing
-- reports of the same series either committed before (its reports are read here) or lowers the
-- new block_next after. Restartable: what is not committed is redone. Returns how many series
-- moved on (0: nothing left to do).
CREATE OR REPLACE FUNCTION ty_report_blocks_fill(p_series integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    moved integer;
BEGIN
    WITH s AS MATERIALIZED (
        SELECT job_id, attempt, rank, block_next AS b_from,
               least((seq_max >> 4) - 1, block_next + 15) AS b_to
          FROM report_series
         WHERE seq_max >> 4 > block_next
         ORDER BY job_id, attempt, rank LIMIT p_series
           FOR UPDATE SKIP LOCKED
    ), stored AS (
        INSERT INTO report_blocks AS b
        SELECT e.*
          FROM s CROSS JOIN LATERAL ty_report_blocks_of(s.job_id, s.attempt, s.rank, s.b_from,
                                                        s.b_to) e
         ORDER BY 1, 2, 3, 4, 5 -- one order for every call: two never wait on each other in a cycle
        ON CONFLICT (job_id, rank, name, attempt, block) DO UPDATE SET
            count = excluded.count, seq_first = excluded.seq_first, seq_last = excluded.seq_last,
            start_at = excluded.start_at, end_at = excluded.end_at,
            step_first = excluded.step_first, step_last = excluded.step_last,
            v_first = excluded.v_first, v_last = excluded.v_last,
            v_min = excluded.v_min, v_max = excluded.v_max
    )
    UPDATE report_series r SET block_next = s.b_to + 1
      FROM s
     WHERE r.job_id = s.job_id AND r.attempt = s.attempt AND r.rank = s.rank;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
END $$;
COMMENT ON FUNCTION ty_report_blocks_fill(integer) IS 'Maintenance: sums up the complete blocks of up to p_series series not yet in report_blocks; returns how many series moved on.';
