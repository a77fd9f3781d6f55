CREATE OR REPLACE FUNCTION ty_job_deleted_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO node_forgets (node_id, job_id)
    SELECT DISTINCT w.node_id, OLD.id FROM workers w WHERE w.job_id = OLD.id
    ON CONFLICT DO NOTHING;
    RETURN OLD;
END $$;
COMMENT ON FUNCTION ty_job_deleted_forget() IS 'Trigger: a job is being deleted; the nodes that ran it must forget it.';
CREATE OR REPLACE TRIGGER job_deleted_forget BEFORE DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION ty_job_deleted_forget();
