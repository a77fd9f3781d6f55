-- Issue 27 (ingest): report_blocks (migration 0046) is no longer filled on the hot path. The
-- server's batches (ty_report_ingest_batch) only note, per series (job, attempt, rank), the
-- newest seq stored; the leader's maintenance (ty_report_blocks_fill, every control tick) sums
-- up each block of 16 once, in bulk, from the reports, and moves the series' block_next on;
-- reads combine the stored blocks (those below block_next) with the blocks of the reports from
-- block_next on, summed up at read time (ty_report_blocks_of), so a read right after ingest sees
-- every report. Rows written by other statements (SQL, COPY) are still summed up at once by the
-- report_blocks trigger (server/store/sql/ty_report_blocks_add.sql).
CREATE TABLE report_series (
    job_id     bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt    integer NOT NULL,
    rank       integer NOT NULL,
    seq_max    bigint NOT NULL,
    block_next bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, attempt, rank)
);
COMMENT ON TABLE report_series IS 'Each series of reports (job, attempt, rank): the newest seq stored and how far report_blocks sums it up.';
COMMENT ON COLUMN report_series.job_id IS 'The job.';
COMMENT ON COLUMN report_series.attempt IS 'Attempt of the reports.';
COMMENT ON COLUMN report_series.rank IS 'Reporting rank.';
COMMENT ON COLUMN report_series.seq_max IS 'Greatest seq among the series'' reports.';
COMMENT ON COLUMN report_series.block_next IS 'report_blocks holds the series'' blocks below this one (block = seq >> 4), summed up from all their reports; its reports from block block_next on (seq >= 16 * block_next) are summed up when read.';

-- Until now the trigger summed up every report as it came: every block is stored.
INSERT INTO report_series (job_id, attempt, rank, seq_max, block_next)
SELECT job_id, attempt, rank, max(seq), (max(seq) >> 4) + 1
  FROM reports GROUP BY job_id, attempt, rank;
