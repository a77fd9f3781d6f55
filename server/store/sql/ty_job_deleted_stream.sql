-- A deleted job's stream goes with it (migration 0059: job_stream has no foreign key to jobs, so
-- that appending a report's row checks none). Every writer of job_stream holds the job's row
-- until it commits (ty_stream_append, ty_stream_append_batch and ty_report_ingest_batch update
-- it; a job event's row is checked against it), so a deletion waits for it and then finds its
-- rows here; a writer after the deletion finds no job and appends nothing.
CREATE OR REPLACE FUNCTION ty_job_deleted_stream() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_stream s USING deleted_jobs d WHERE s.job_id = d.id;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_job_deleted_stream() IS 'Trigger: deleted jobs'' stream rows are deleted.';
CREATE OR REPLACE TRIGGER job_deleted_stream AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS deleted_jobs FOR EACH STATEMENT EXECUTE FUNCTION ty_job_deleted_stream();
