-- One trigger on jobs deletes a deleted job's rows from the tables without a foreign key to jobs,
-- report_blocks (migration 0057) and job_stream (0059): ty_job_deleted_rows
-- (server/store/sql/ty_job_deleted_rows.sql). The two it replaces go.
DROP TRIGGER IF EXISTS job_deleted_blocks ON jobs;
DROP FUNCTION IF EXISTS ty_job_deleted_blocks();
DROP TRIGGER IF EXISTS job_deleted_stream ON jobs;
DROP FUNCTION IF EXISTS ty_job_deleted_stream();
