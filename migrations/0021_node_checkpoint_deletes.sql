-- Issue 11 (retention): a checkpoint num_to_keep deletes (ty_checkpoints_retire, migration 0019)
-- also goes from the staging directories of the agents that hold it, the nodes of its location,
-- including those whose agent is away at the time. When a checkpoint becomes 'deleted', each node
-- of its location gets a row here; the control thread of the server holding the node's connection
-- sends `checkpoint_delete` for it (at register, and on its periodic tick), and the row goes once
-- sent.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

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
