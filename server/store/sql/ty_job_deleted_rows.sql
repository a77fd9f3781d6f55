-- A deleted job's rows in the tables without a foreign key to jobs go with it, as ON DELETE
-- CASCADE took them: report_blocks (migration 0057: so that the maintenance does not check the
-- key on each of its ~100 rows per block) and job_stream (migration 0059: so that a report's
-- stream row does not check it). Their writers hold the job's row until they commit — the
-- maintenance FOR KEY SHARE, and leaves out a job deleted first; a stream writer by updating
-- jobs.stream_seq or by its job event's key check — so a deletion waits for them and then finds
-- their rows here.
CREATE OR REPLACE FUNCTION ty_job_deleted_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM report_blocks b USING deleted_jobs d WHERE b.job_id = d.id;
    DELETE FROM job_stream s USING deleted_jobs d WHERE s.job_id = d.id;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_job_deleted_rows() IS 'Trigger: deleted jobs'' report_blocks and job_stream rows are deleted.';
CREATE OR REPLACE TRIGGER job_deleted_rows AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS deleted_jobs FOR EACH STATEMENT EXECUTE FUNCTION ty_job_deleted_rows();
