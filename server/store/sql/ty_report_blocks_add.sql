-- Statement trigger on reports: the rows just inserted are summed up into report_blocks
-- (migration 0046), 16 consecutive reports (seq >> 4) of a job, attempt, rank and name per row,
-- merged with what the block already holds (a block's reports may come in several batches).
CREATE OR REPLACE FUNCTION ty_report_blocks_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO report_blocks AS b
    SELECT job_id, rank, name, attempt, seq >> 4, count(*), min(seq), max(seq),
           (array_agg(reported_at ORDER BY seq))[1], (array_agg(reported_at ORDER BY seq DESC))[1],
           (array_agg(step ORDER BY seq))[1], (array_agg(step ORDER BY seq DESC))[1],
           (array_agg(t ORDER BY seq))[1], (array_agg(t ORDER BY seq DESC))[1],
           min(v) FILTER (WHERE v NOT IN ('NaN', 'Infinity', '-Infinity')),
           max(v) FILTER (WHERE v NOT IN ('NaN', 'Infinity', '-Infinity'))
      FROM (SELECT n.job_id, k.key AS name, n.rank, n.attempt, n.seq, n.step, n.reported_at,
                   ty_metric_value(k.value) AS v, ty_metric_text(k.value) AS t
              FROM new_reports n CROSS JOIN LATERAL jsonb_each(n.metrics) k) e
     GROUP BY job_id, rank, name, attempt, seq >> 4
     ORDER BY 1, 2, 3, 4, 5 -- one order for every writer: two batches never wait in a cycle
    ON CONFLICT (job_id, rank, name, attempt, block) DO UPDATE SET
        count = b.count + excluded.count,
        seq_first = least(b.seq_first, excluded.seq_first),
        seq_last = greatest(b.seq_last, excluded.seq_last),
        start_at = CASE WHEN excluded.seq_first < b.seq_first THEN excluded.start_at ELSE b.start_at END,
        end_at = CASE WHEN excluded.seq_last > b.seq_last THEN excluded.end_at ELSE b.end_at END,
        step_first = CASE WHEN excluded.seq_first < b.seq_first THEN excluded.step_first ELSE b.step_first END,
        step_last = CASE WHEN excluded.seq_last > b.seq_last THEN excluded.step_last ELSE b.step_last END,
        v_first = CASE WHEN excluded.seq_first < b.seq_first THEN excluded.v_first ELSE b.v_first END,
        v_last = CASE WHEN excluded.seq_last > b.seq_last THEN excluded.v_last ELSE b.v_last END,
        v_min = least(b.v_min, excluded.v_min),
        v_max = greatest(b.v_max, excluded.v_max);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_report_blocks_add() IS 'Trigger: newly inserted reports are summed up into report_blocks, 16 reports per block.';
CREATE OR REPLACE TRIGGER report_blocks AFTER INSERT ON reports
    REFERENCING NEW TABLE AS new_reports FOR EACH STATEMENT EXECUTE FUNCTION ty_report_blocks_add();
