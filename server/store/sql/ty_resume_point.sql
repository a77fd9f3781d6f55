-- The checkpoint a new attempt of job p_job on the nodes p_nodes starts from: for the first
-- attempt the spec's resume_from_checkpoint; for a restart the job's latest committed checkpoint
-- that every one of those nodes can get (it holds a copy, or the artifact store holds a complete
-- one), else the spec's resume_from_checkpoint. NULL: start fresh.
CREATE OR REPLACE FUNCTION ty_resume_point(p_job bigint, p_attempt integer, p_nodes text[]) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(
        (SELECT c.id FROM checkpoints c
          WHERE p_attempt > 1 AND c.job_id = p_job AND c.status = 'COMMITTED'
            AND (c.artifact_state = 'complete' OR NOT EXISTS (
                    SELECT 1 FROM unnest(p_nodes) nd
                     WHERE NOT EXISTS (
                        SELECT 1 FROM jsonb_array_elements(coalesce(c.location::jsonb, '[]'))  e
                         WHERE e->>'node_id' = nd)))
          ORDER BY c.attempt DESC, c.idx DESC LIMIT 1),
        (SELECT c.id FROM checkpoints c, jobs j
          WHERE j.id = p_job AND c.status = 'COMMITTED'
            AND c.id = (j.spec->>'resume_from_checkpoint')::bigint))
$$;
COMMENT ON FUNCTION ty_resume_point(bigint, integer, text[]) IS 'The checkpoint a new attempt starts from: the latest committed one its nodes can get on a restart, else resume_from_checkpoint.';
