-- Issue 23: the free space of each node's agent data directory (the agent's heartbeat `disk`,
-- docs/agent-protocol.md), and whether it is under disk pressure (below the server's
-- --disk-pressure-mb): such a node takes no new workers.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

ALTER TABLE nodes ADD COLUMN disk jsonb;
COMMENT ON COLUMN nodes.disk IS 'The agent data directory''s file system as its last heartbeat said: {"path", "free_mb", "total_mb", "pressure"} (pressure: free_mb below the server''s --disk-pressure-mb; no new workers are placed there); NULL until an agent says.';
