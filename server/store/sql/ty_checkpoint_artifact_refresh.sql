-- Recomputes checkpoint (job, attempt, idx)'s artifact state from its parts: complete when every
-- node of its location has a complete part (then file_count and sha256 are set), uploading when
-- any part exists, unchanged otherwise; a deleted checkpoint stays deleted. Called by the
-- triggers below after their row was written. The advisory lock (held to commit) serialises the
-- two writers that decide it, a part's completion and the checkpoint's registration: the second
-- waits for the first to commit, and its UPDATE (a new statement of a VOLATILE function, so a new
-- snapshot under READ COMMITTED) then sees the first's row. Without it each could miss the other
-- and a fully uploaded checkpoint stay 'uploading'.
CREATE OR REPLACE FUNCTION ty_checkpoint_artifact_refresh(j bigint, a integer, k integer) RETURNS void
LANGUAGE sql VOLATILE AS $$
    SELECT pg_advisory_xact_lock(11, hashtext(j::text || '/' || a::text || '/' || k::text));
    WITH c AS (SELECT id, coalesce(location::jsonb, '[]'::jsonb) AS loc FROM checkpoints
                WHERE job_id = j AND attempt = a AND idx = k
                  AND artifact_state IS DISTINCT FROM 'deleted'),
         n AS (SELECT DISTINCT e->>'node_id' AS node_id FROM c, jsonb_array_elements(c.loc) e),
         p AS (SELECT n.node_id, cp.state, cp.file_count, cp.sha256 FROM n
                 LEFT JOIN checkpoint_parts cp ON cp.job_id = j AND cp.attempt = a
                       AND cp.idx = k AND cp.node_id = n.node_id),
         s AS (SELECT count(*) > 0 AND bool_and(state = 'complete') AS done,
                      bool_or(state IS NOT NULL) AS started,
                      sum(file_count) AS files,
                      encode(sha256(convert_to(string_agg(sha256, E'\n' ORDER BY node_id),
                                               'UTF8')), 'hex') AS sum
                 FROM p)
    UPDATE checkpoints ck
       SET artifact_state = CASE WHEN s.done THEN 'complete' ELSE 'uploading' END,
           file_count = CASE WHEN s.done THEN s.files END,
           sha256 = CASE WHEN s.done THEN s.sum END
      FROM c, s
     WHERE ck.id = c.id AND (s.done OR coalesce(s.started, false))
$$;
COMMENT ON FUNCTION ty_checkpoint_artifact_refresh(bigint, integer, integer) IS 'Sets a checkpoint''s artifact_state (and file_count, sha256 when complete) from its parts.';
