-- Whether a complete part other than the ones being retired still uses a content address. The
-- caller holds pg_advisory_lock(ty_artifact_lock_key(sha256)) around this and the removal, and the
-- upload completion holds it around storing the object and marking its part complete, so an object
-- is never removed under a part that was just completed with the same bytes.
CREATE OR REPLACE FUNCTION ty_artifact_in_use(p_sha256 text) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM checkpoint_parts WHERE sha256 = p_sha256 AND state = 'complete')
$$;
COMMENT ON FUNCTION ty_artifact_in_use(text) IS 'Whether a complete checkpoint part is stored under this SHA-256.';
