-- Issue 14 (finding 10): a deleted job's staging (logs, checkpoints, spool) goes from every node
-- that ran it, also from nodes whose agent was away when it was deleted. Deleting a job records,
-- for each node that ran one of its workers, that the node must forget it; the server sends
-- `forget` for these when the node next registers (agents connected at the time get it at once,
-- as before), and the row goes once sent.

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

CREATE FUNCTION ty_job_deleted_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO node_forgets (node_id, job_id)
    SELECT DISTINCT w.node_id, OLD.id FROM workers w WHERE w.job_id = OLD.id
    ON CONFLICT DO NOTHING;
    RETURN OLD;
END $$;
COMMENT ON FUNCTION ty_job_deleted_forget() IS 'Trigger: a job is being deleted; the nodes that ran it must forget it.';
CREATE TRIGGER job_deleted_forget BEFORE DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION ty_job_deleted_forget();
