CREATE OR REPLACE FUNCTION ty_checkpoint_deleted_notify_nodes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO node_checkpoint_deletes (node_id, job_id, attempt, idx)
    SELECT DISTINCT l->>'node_id', NEW.job_id, NEW.attempt, NEW.idx
      FROM jsonb_array_elements(coalesce(NEW.location::jsonb, '[]'::jsonb)) AS l
      JOIN nodes n ON n.id = l->>'node_id'
    ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION ty_checkpoint_deleted_notify_nodes() IS 'Trigger: a checkpoint became deleted; the nodes of its location must remove their staging copies.';
CREATE OR REPLACE TRIGGER checkpoint_deleted_notify_nodes AFTER UPDATE OF artifact_state ON checkpoints
    FOR EACH ROW WHEN (NEW.artifact_state = 'deleted' AND OLD.artifact_state IS DISTINCT FROM 'deleted')
    EXECUTE FUNCTION ty_checkpoint_deleted_notify_nodes();
