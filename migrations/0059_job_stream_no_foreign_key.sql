-- Issue 27 (ingest): every stored report appends a row to its job's stream, and the check of
-- job_stream's foreign key to jobs, one per row, was a tenth of what PostgreSQL spent per report
-- beyond the report itself (measured by hand: 10,240 rows in one statement, 93 ms with the key,
-- 24 ms without). Every writer of job_stream holds the job's row when it appends (it reserves the
-- seqs by updating jobs.stream_seq, or its job event's own key check holds it), so the key
-- checked nothing they did not; a deleted job's stream rows are deleted by a trigger on jobs
-- (server/store/sql/ty_job_deleted_stream.sql), as ON DELETE CASCADE did.
ALTER TABLE job_stream DROP CONSTRAINT IF EXISTS job_stream_job_id_fkey;
