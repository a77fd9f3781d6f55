-- Issue 27 (ingest): the leader's maintenance stores report_blocks in bulk, ~100 rows per block
-- of 16 reports, and two per-row costs were most of it (measured by hand, 3,200 rows: 94 ms as
-- it was, 20 ms as plain inserts without the foreign key). report_blocks no longer has a foreign
-- key to jobs: the maintenance holds each job's row once (FOR KEY SHARE, as the key's check held
-- it per row) and leaves out a job deleted meanwhile; a deleted job's blocks are deleted by a
-- trigger on jobs (server/store/sql/ty_job_deleted_blocks.sql), as ON DELETE CASCADE did. And
-- report_series.block_end notes where the series' blocks never stored begin, so that those are
-- plain inserts and only blocks summed up again (after a late report) are upserts
-- (server/store/sql/ty_report_blocks_fill.sql).
ALTER TABLE report_series ADD COLUMN block_end bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN report_series.block_end IS 'No block at or past it was ever stored in report_blocks (blocks below it may have been).';
UPDATE report_series s SET block_end = m.block_end
  FROM (SELECT job_id, attempt, rank, max(block) + 1 AS block_end FROM report_blocks
         GROUP BY job_id, attempt, rank) m
 WHERE s.job_id = m.job_id AND s.attempt = m.attempt AND s.rank = m.rank;
ALTER TABLE report_blocks DROP CONSTRAINT IF EXISTS report_blocks_job_id_fkey;
