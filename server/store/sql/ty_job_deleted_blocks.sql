-- A deleted job's report_blocks go with it (migration 0057: report_blocks has no foreign key to
-- jobs, so that the maintenance does not check one per row). The maintenance holds the rows of
-- the jobs it stores blocks for (FOR KEY SHARE) until it commits, so a deletion waits for it and
-- then finds its blocks here; a job deleted first is left out by the maintenance.
CREATE OR REPLACE FUNCTION ty_job_deleted_blocks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM report_blocks b USING deleted_jobs d WHERE b.job_id = d.id;
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_job_deleted_blocks() IS 'Trigger: deleted jobs'' report_blocks are deleted.';
CREATE OR REPLACE TRIGGER job_deleted_blocks AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS deleted_jobs FOR EACH STATEMENT EXECUTE FUNCTION ty_job_deleted_blocks();
