-- Stores the blocks of the given ranges, summed up from their reports again (ty_report_blocks_of),
-- replacing what report_blocks held for them: idempotent. p_ranges: a JSON array of
-- {job_id, attempt, rank, b_from, b_to}. The caller holds the report_series rows of these series
-- (row locks), so that no other writer sums them up at the same time. Returns the rows written.
CREATE OR REPLACE FUNCTION ty_report_blocks_sum(p_ranges jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    INSERT INTO report_blocks AS b
    SELECT e.*
      FROM jsonb_to_recordset(p_ranges) AS s(job_id bigint, attempt integer, rank integer,
                                            b_from bigint, b_to bigint)
     CROSS JOIN LATERAL ty_report_blocks_of(s.job_id, s.attempt, s.rank, s.b_from, s.b_to) e
     ORDER BY 1, 2, 3, 4, 5 -- one order for every writer: two writers never wait in a cycle
    ON CONFLICT (job_id, rank, name, attempt, block) DO UPDATE SET
        count = excluded.count, seq_first = excluded.seq_first, seq_last = excluded.seq_last,
        start_at = excluded.start_at, end_at = excluded.end_at,
        step_first = excluded.step_first, step_last = excluded.step_last,
        v_first = excluded.v_first, v_last = excluded.v_last,
        v_min = excluded.v_min, v_max = excluded.v_max;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END $$;
COMMENT ON FUNCTION ty_report_blocks_sum(jsonb) IS 'Sums up the given block ranges of series into report_blocks again, from their reports (idempotent).';
