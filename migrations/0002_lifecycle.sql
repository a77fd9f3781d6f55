-- Job lifecycle as transactions: placement, worker start and exit, node loss. Each function
-- changes every affected row at once and records the status events, so the server never leaves a
-- job half-updated. The decisions are small; the scheduler (scheduler/) decides placements.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

ALTER TABLE nodes ADD COLUMN port_lo integer NOT NULL DEFAULT 29500;
ALTER TABLE nodes ADD COLUMN port_hi integer NOT NULL DEFAULT 29999;
COMMENT ON COLUMN nodes.port_lo IS 'First port the agent lets jobs use for MASTER_PORT.';
COMMENT ON COLUMN nodes.port_hi IS 'Last port the agent lets jobs use for MASTER_PORT.';

ALTER TABLE attempts ADD COLUMN nports integer NOT NULL DEFAULT 1;
COMMENT ON COLUMN attempts.nports IS 'Ports held from master_port on (world_size for tensorflow).';
