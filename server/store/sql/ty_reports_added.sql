-- Row trigger on reports, for every writer but the server's batches (SQL, COPY): a report's names
-- join report_names (migration 0043), the names store_metrics_series looks up in each report of
-- a job; and its series (job, attempt, rank) is noted in report_series (migration 0047): its
-- newest seq, its block_next lowered to the report's block, and (migration 0054) late_writes
-- counts the report when that block lies below the block of the series' newest report, which the
-- maintenance may be summing up without a lock. The leader's maintenance (ty_report_blocks_fill)
-- finds every series there and sums up its complete blocks from block_next on; reads take the
-- stored blocks below block_next and sum up the rest from the reports (store_metrics.c). So a
-- report that comes for a block already stored (a resend after a gap, a late INSERT) makes that
-- block read from the reports until the maintenance has summed it up again.
--
-- ty_report_ingest_batch keeps both itself, from what it knows of its reports, and sets
-- trainyard.reports_batch to 'on' for its insert, so that the trigger does not fire for it (issue
-- 27: a statement trigger, as this was until then, copied every row the batch stored, values
-- and all, into its transition table: a sixth of PostgreSQL's cost per report). A writer of many
-- rows by SQL pays a row's two upserts per row instead.
CREATE OR REPLACE FUNCTION ty_reports_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO report_names (job_id, name)
    SELECT NEW.job_id, k FROM jsonb_object_keys(NEW.metrics) k ORDER BY 2
    ON CONFLICT DO NOTHING;
    INSERT INTO report_series AS s (job_id, attempt, rank, seq_max, block_next)
    VALUES (NEW.job_id, NEW.attempt, NEW.rank, NEW.seq, NEW.seq >> 4)
    ON CONFLICT (job_id, attempt, rank)
       DO UPDATE SET seq_max = greatest(s.seq_max, excluded.seq_max),
                     block_next = least(s.block_next, excluded.block_next),
                     late_writes = s.late_writes
                                   + (excluded.block_next < s.seq_max >> 4)::integer;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_reports_added() IS 'Trigger: a newly inserted report (but a server batch''s) joins report_names and report_series (newest seq; block_next lowered to its block).';
CREATE OR REPLACE TRIGGER reports_added AFTER INSERT ON reports FOR EACH ROW
    WHEN (current_setting('trainyard.reports_batch', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION ty_reports_added();
