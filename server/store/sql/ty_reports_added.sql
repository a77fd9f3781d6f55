-- Statement trigger on reports, for every writer alike (the server's batches, SQL, COPY): the
-- names of the rows just inserted join report_names (migration 0043), the names
-- store_metrics_series looks up in each report of a job (unless the statement is a server batch
-- that stored the names it did not know stored itself: ty_report_ingest_batch sets
-- trainyard.report_names to 'batch' for its insert); and each series (job, attempt, rank)
-- they belong to is noted in report_series (migration 0047): its newest seq, its block_next
-- lowered to the block of the lowest seq inserted, and (migration 0054) late_writes counts this
-- statement when that block lies below the block of the series' newest report, which the
-- maintenance may be summing up without a lock. The leader's maintenance
-- (ty_report_blocks_fill) finds every series there and sums up its complete blocks from
-- block_next on; reads take the stored blocks below block_next and sum up the rest from the
-- reports (store_metrics.c). So a report that comes for a block already stored (a resend after a
-- gap, a late INSERT) makes that block read from the reports until the maintenance has summed it
-- up again. One key order for every writer: two writers never wait on each other in a cycle.
CREATE OR REPLACE FUNCTION ty_reports_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('trainyard.report_names', true) IS DISTINCT FROM 'batch' THEN
        INSERT INTO report_names (job_id, name)
        SELECT DISTINCT n.job_id, k
          FROM new_reports n CROSS JOIN LATERAL jsonb_object_keys(n.metrics) k
         ORDER BY 1, 2
        ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO report_series AS s (job_id, attempt, rank, seq_max, block_next)
    SELECT job_id, attempt, rank, max(seq), min(seq) >> 4 FROM new_reports
     GROUP BY job_id, attempt, rank
     ORDER BY job_id, attempt, rank
    ON CONFLICT (job_id, attempt, rank)
       DO UPDATE SET seq_max = greatest(s.seq_max, excluded.seq_max),
                     block_next = least(s.block_next, excluded.block_next),
                     late_writes = s.late_writes
                                   + (excluded.block_next < s.seq_max >> 4)::integer;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_reports_added() IS 'Trigger: newly inserted reports join report_names and report_series (newest seq; block_next lowered to the lowest block touched).';
CREATE OR REPLACE TRIGGER reports_added AFTER INSERT ON reports
    REFERENCING NEW TABLE AS new_reports FOR EACH STATEMENT EXECUTE FUNCTION ty_reports_added();
