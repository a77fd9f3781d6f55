-- Issue 14 (security): secret environment values hidden from the API, node credentials, and
-- submissions made idempotent by a client key.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

-- The collective rendezvous of an attempt is bound to its workers by a secret the server makes
-- and sends only in that attempt's launch messages (TRAINYARD_RENDEZVOUS_SECRET).
ALTER TABLE attempts ADD COLUMN rendezvous_secret text NOT NULL
    DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
COMMENT ON COLUMN attempts.rendezvous_secret IS 'Random hex; sent in the launch of the attempt, put in every worker''s environment, checked by rank 0 in the collective rendezvous handshake.';

-- Each node has a credential of its own: minted by the server when the node joins with the
-- cluster token, kept by its agent, and required to register that node id again while it is ALIVE.
ALTER TABLE nodes ADD COLUMN credential_hash text;
COMMENT ON COLUMN nodes.credential_hash IS 'Lowercase hex SHA-256 of the node''s credential (NULL: none minted yet); a register naming this node id must carry the credential while the node is ALIVE.';

-- A submission retried after a lost connection carries the same Idempotency-Key and gets the
-- job the first one created instead of a second job.
ALTER TABLE jobs ADD COLUMN idempotency_key text;
COMMENT ON COLUMN jobs.idempotency_key IS 'The Idempotency-Key header of the submission that created the job (NULL: none); unique per owner.';
CREATE UNIQUE INDEX jobs_owner_idempotency_key ON jobs (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Jobs are owned by token name, so two live tokens may not share a name (a second "alice" would
-- own the first one's jobs). Duplicates from before get their id appended, oldest keeps the name.
UPDATE api_tokens t SET name = left(t.name, 100) || '#' || t.id
 WHERE t.revoked_at IS NULL
   AND EXISTS (SELECT 1 FROM api_tokens o
                WHERE o.name = t.name AND o.revoked_at IS NULL AND o.id < t.id);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;
COMMENT ON INDEX api_tokens_live_name IS 'A name (the owner of the jobs submitted with it) belongs to one live token at a time; a revoked token''s name may be given again (rotation keeps the jobs).';
