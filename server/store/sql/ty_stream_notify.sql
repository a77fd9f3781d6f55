-- Notifications: one per job (or one for the cluster) per statement, sent at commit.
CREATE OR REPLACE FUNCTION ty_stream_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ty_stream', job_id::text) FROM (SELECT DISTINCT job_id FROM new_rows) j;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER job_stream_notify AFTER INSERT ON job_stream
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ty_stream_notify();
