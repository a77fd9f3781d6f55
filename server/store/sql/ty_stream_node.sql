-- Nodes: joined (or re-registered), lost, drained, undrained. Heartbeats change none of these.
CREATE OR REPLACE FUNCTION ty_stream_node() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status IS NOT DISTINCT FROM NEW.status
       AND OLD.draining IS NOT DISTINCT FROM NEW.draining
       AND OLD.address IS NOT DISTINCT FROM NEW.address
       AND OLD.resources IS NOT DISTINCT FROM NEW.resources THEN
        RETURN NULL;
    END IF;
    INSERT INTO cluster_stream (kind, node_id, body)
    VALUES ('node', NEW.id,
            jsonb_build_object('id', NEW.id, 'hostname', NEW.hostname, 'address', NEW.address,
                               'status', NEW.status, 'draining', NEW.draining,
                               'resources', NEW.resources, 'gpu_type', NEW.gpu_type));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER nodes_stream AFTER INSERT OR UPDATE ON nodes
    FOR EACH ROW EXECUTE FUNCTION ty_stream_node();
