CREATE OR REPLACE FUNCTION ty_cluster_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ty_cluster', '');
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER cluster_stream_notify AFTER INSERT ON cluster_stream
    FOR EACH STATEMENT EXECUTE FUNCTION ty_cluster_notify();
