CREATE OR REPLACE FUNCTION ty_stream_job_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO cluster_stream (kind, job_id, body)
    VALUES ('job', OLD.id, jsonb_build_object('id', OLD.id, 'name', OLD.name, 'owner', OLD.owner,
                                              'deleted', true));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER jobs_deleted_stream AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION ty_stream_job_deleted();
