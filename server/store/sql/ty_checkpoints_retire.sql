CREATE OR REPLACE FUNCTION ty_checkpoints_retire(p_job bigint, p_ids bigint[])
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
