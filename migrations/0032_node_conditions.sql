-- Issue 23: a node's conditions, problems its agent reports that the API and the dashboard show
-- (GET /api/v1/nodes/{id} "conditions"). Each element is
-- {"type": ..., "message": ..., "since": RFC 3339 time it became true}; one per type, removed
-- when it no longer holds. The first type: "artifact-store-unreachable", set while the agent's
-- checkpoint uploads or package fetches fail (server/control/control_store.c).

ALTER TABLE nodes ADD COLUMN conditions jsonb NOT NULL DEFAULT '[]';
COMMENT ON COLUMN nodes.conditions IS 'Conditions the node''s agent reports (array of {type, message, since}), one per type; empty when all is well.';
