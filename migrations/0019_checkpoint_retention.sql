-- Issue 11 (checkpoints): num_to_keep deletes. The server chooses which of a job's stored
-- checkpoints to delete (server/artifacts/retention.c, by checkpoint_config) and retires them here,
-- in one transaction: the checkpoint and its parts become 'deleted', and the content addresses no
-- complete part refers to any more are returned, for the caller to remove from the artifact store
-- (docs/artifacts.md, "Retention"). The rows stay: the checkpoint list shows what was deleted.

CREATE FUNCTION ty_checkpoints_retire(p_job bigint, p_ids bigint[])
RETURNS TABLE (sha256 text, location text) LANGUAGE sql AS $$
    WITH gone AS (
        UPDATE checkpoints c SET artifact_state = 'deleted'
         WHERE c.job_id = p_job AND c.id = ANY (p_ids) AND c.artifact_state = 'complete'
        RETURNING c.job_id, c.attempt, c.idx),
    parts AS (
        UPDATE checkpoint_parts p SET state = 'deleted', updated_at = now()
          FROM gone
         WHERE p.job_id = gone.job_id AND p.attempt = gone.attempt AND p.idx = gone.idx
           AND p.state = 'complete'
        RETURNING p.sha256, p.location)
    SELECT DISTINCT parts.sha256, parts.location FROM parts
$$;
COMMENT ON FUNCTION ty_checkpoints_retire(bigint, bigint[]) IS 'Marks the job''s listed complete checkpoints and their parts deleted (num_to_keep); returns the content addresses they used. Whether another part still uses one is checked by the caller under that address''s lock (ty_artifact_in_use).';

-- Whether a complete part other than the ones being retired still uses a content address. The
-- caller holds pg_advisory_lock(ty_artifact_lock_key(sha256)) around this and the removal, and the
-- upload completion holds it around storing the object and marking its part complete, so an object
-- is never removed under a part that was just completed with the same bytes.
CREATE FUNCTION ty_artifact_in_use(p_sha256 text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM checkpoint_parts WHERE sha256 = p_sha256 AND state = 'complete')
$$;
COMMENT ON FUNCTION ty_artifact_in_use(text) IS 'Whether a complete checkpoint part is stored under this SHA-256.';

CREATE FUNCTION ty_artifact_lock_key(p_sha256 text) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT ('x' || substr(p_sha256, 1, 16))::bit(64)::bigint
$$;
COMMENT ON FUNCTION ty_artifact_lock_key(text) IS 'The advisory lock key of a content address: its first 64 bits.';
