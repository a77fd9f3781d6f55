-- Issue 11 (retention): a checkpoint num_to_keep deletes (ty_checkpoints_retire, migration 0019)
-- also goes from the staging directories of the agents that hold it, the nodes of its location,
-- including those whose agent is away at the time. When a checkpoint becomes 'deleted', each node
-- of its location gets a row here; the control thread of the server holding the node's connection
-- sends `checkpoint_delete` for it (at register, and on its periodic tick), and the row goes once
-- sent.

CREATE TABLE node_checkpoint_deletes (
    node_id    text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    job_id     bigint NOT NULL,
    attempt    integer NOT NULL,
    idx        integer NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node_id, job_id, attempt, idx)
);
COMMENT ON TABLE node_checkpoint_deletes IS 'Checkpoints deleted by retention whose staging copy a node may still hold: sent as `checkpoint_delete` to the node''s agent, then removed.';
COMMENT ON COLUMN node_checkpoint_deletes.node_id IS 'A node of the checkpoint''s location.';
COMMENT ON COLUMN node_checkpoint_deletes.job_id IS 'The checkpoint''s job.';
COMMENT ON COLUMN node_checkpoint_deletes.attempt IS 'The checkpoint''s attempt.';
COMMENT ON COLUMN node_checkpoint_deletes.idx IS 'The checkpoint''s index (round) within the attempt.';
COMMENT ON COLUMN node_checkpoint_deletes.deleted_at IS 'When retention deleted it.';

CREATE FUNCTION ty_checkpoint_deleted_notify_nodes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO node_checkpoint_deletes (node_id, job_id, attempt, idx)
    SELECT DISTINCT l->>'node_id', NEW.job_id, NEW.attempt, NEW.idx
      FROM jsonb_array_elements(coalesce(NEW.location::jsonb, '[]'::jsonb)) AS l
      JOIN nodes n ON n.id = l->>'node_id'
    ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION ty_checkpoint_deleted_notify_nodes() IS 'Trigger: a checkpoint became deleted; the nodes of its location must remove their staging copies.';
CREATE TRIGGER checkpoint_deleted_notify_nodes AFTER UPDATE OF artifact_state ON checkpoints
    FOR EACH ROW WHEN (NEW.artifact_state = 'deleted' AND OLD.artifact_state IS DISTINCT FROM 'deleted')
    EXECUTE FUNCTION ty_checkpoint_deleted_notify_nodes();
