-- Issue 23 (point 4): when a node's agent's connection closed. A failing attempt (its job
-- RESTARTING or STOPPING) counts its workers on such a node as lost at once instead of waiting
-- for the heartbeat timeout's LOST mark (ty_jobs_drop_disconnected), and the scheduler places no
-- new workers there until its agent registers again (which clears it).
-- Schema only: the functions are definitions in server/store/sql/.

ALTER TABLE nodes ADD COLUMN disconnected_at timestamptz;
COMMENT ON COLUMN nodes.disconnected_at IS 'When its agent''s connection to a server closed; NULL while connected (set again at each registration). A failing attempt counts the node''s workers as lost; no new workers go there.';
