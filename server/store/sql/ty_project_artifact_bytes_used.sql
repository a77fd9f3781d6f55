-- Bytes a project keeps in the artifact store: the complete checkpoint parts of its jobs held by
-- the store (as ty_artifact_bytes_used counts them for a job's owner). Code packages belong to the
-- users who uploaded them, not to projects: they count against their uploaders only.
CREATE OR REPLACE FUNCTION ty_project_artifact_bytes_used(p_project text) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT sum(p.size_bytes) FROM checkpoint_parts p
                     JOIN jobs j ON j.id = p.job_id
                     WHERE j.project = p_project AND p.state = 'complete'
                       AND p.location LIKE 'sha256/%'), 0)::bigint
$$;
COMMENT ON FUNCTION ty_project_artifact_bytes_used(text) IS 'Bytes a project keeps in the artifact store (complete checkpoint parts of its jobs).';
