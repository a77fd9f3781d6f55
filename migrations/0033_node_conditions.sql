-- Issue 23: a node's conditions, problems its agent reports that the API and the dashboard show
-- (GET /api/v1/nodes/{id} "conditions"). Each element is
-- {"type": ..., "message": ..., "since": RFC 3339 time it became true}; one per type, removed
-- when it no longer holds. The first type: "artifact-store-unreachable", set while the agent's
-- checkpoint uploads or package fetches fail (server/control/control_store.c).

ALTER TABLE nodes ADD COLUMN conditions jsonb NOT NULL DEFAULT '[]';
COMMENT ON COLUMN nodes.conditions IS 'Conditions the node''s agent reports (array of {type, message, since}), one per type; empty when all is well.';

-- The REST URLs of the servers sharing this database (HA, docs/high-availability.md): each server
-- started with --public-url writes its own every few seconds, and whether it leads; a server tells
-- a registering agent those heard lately, the leader's first, so its uploads can go to another
-- server when one fails.
CREATE TABLE servers (
    url      text PRIMARY KEY,
    leader   boolean NOT NULL DEFAULT false,
    heard_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE servers IS 'Servers with a --public-url: their REST URL, whether they lead, when last heard.';
