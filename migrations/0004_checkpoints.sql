-- Checkpoint registration (DESIGN.md section 4, docs/report-protocol.md): the agent takes each
-- rank's checkpoint directory into its own data directory before acking the report, and tells the
-- server how many bytes its merged copy holds; checkpoint k of an attempt is registered once every
-- rank made its k-th report and at least one of them passed a directory.

ALTER TABLE reports ADD COLUMN checkpoint_bytes bigint CHECK (checkpoint_bytes >= 0);
COMMENT ON COLUMN reports.checkpoint_bytes IS 'Bytes of regular files in the agent-owned checkpoint directory (checkpoint_dir) right after this rank''s part was merged into it; NULL when the agent did not say (no checkpoint, or an older agent).';

COMMENT ON COLUMN checkpoints.location IS 'Where its files live: JSON text, an array of {"node_id", "path"} (one entry per agent-owned directory holding parts, ordered by node_id then path), read as jsonb by the API.';
COMMENT ON COLUMN checkpoints.size_bytes IS 'Total size of its files: the sum, over its location entries, of checkpoint_bytes of the last report merged into that directory; NULL when no agent reported a size.';
COMMENT ON COLUMN checkpoints.metrics IS 'Rank 0''s metrics (numbers) of the same report, without "step" (see the step column).';
