-- Issue 16: the GPUs of a node as its agent's NVML sees them (identity and the latest sample),
-- sent in the agent message `gpus` every few seconds (docs/agent-protocol.md). A GPU that is lost
-- (gone from NVML, or another UUID at its index) leaves the node's capacity, and every job with a
-- worker on it gets an event.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

ALTER TABLE nodes ADD COLUMN gpus jsonb NOT NULL DEFAULT '[]';
COMMENT ON COLUMN nodes.gpus IS 'The node''s GPUs from NVML with their latest sample: [{"index","uuid","name","memory_mb","memory_used_mb","utilization_pct","temperature_c","power_mw","lost","sampled_at"}]; [] for declared GPUs or none.';
