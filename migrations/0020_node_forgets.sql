-- Issue 14 (finding 10): a deleted job's staging (logs, checkpoints, spool) goes from every node
-- that ran it, also from nodes whose agent was away when it was deleted. Deleting a job records,
-- for each node that ran one of its workers, that the node must forget it; the server sends
-- `forget` for these when the node next registers (agents connected at the time get it at once,
-- as before), and the row goes once sent.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

CREATE TABLE node_forgets (
    node_id    text NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    job_id     bigint NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node_id, job_id)
);
COMMENT ON TABLE node_forgets IS 'Deleted jobs whose staging a node may still hold: sent as `forget` when the node registers.';
COMMENT ON COLUMN node_forgets.node_id IS 'A node that ran a worker of the job.';
COMMENT ON COLUMN node_forgets.job_id IS 'The deleted job (its row is gone).';
COMMENT ON COLUMN node_forgets.deleted_at IS 'When the job was deleted.';
