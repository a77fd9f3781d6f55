CREATE OR REPLACE FUNCTION ty_artifact_lock_key(p_sha256 text) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT ('x' || substr(p_sha256, 1, 16))::bit(64)::bigint
$$;
COMMENT ON FUNCTION ty_artifact_lock_key(text) IS 'The advisory lock key of a content address: its first 64 bits.';
