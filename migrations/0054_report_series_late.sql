-- Issue 27 (ingest3): the leader's maintenance of report_blocks (ty_report_blocks_fill) runs on a
-- thread of its own, beside the server's report batches, and no longer holds the series' rows
-- locked while it sums their blocks up (a batch's trigger waited for it: a quarter of a batch's
-- time under a flood). It reads the series without a lock and moves block_next on only when no
-- report came meanwhile for a block below the series' newest: late_writes counts the statements
-- that stored such a report (ty_reports_added), so a report appended after the newest (every
-- report of a running job) never holds the maintenance back, and a late one sends it round again.
ALTER TABLE report_series ADD COLUMN late_writes bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN report_series.late_writes IS 'How many statements stored a report of this series for a block below the block of its newest report (a resend after a gap, a late INSERT): the maintenance moves block_next on only when it saw them all.';
