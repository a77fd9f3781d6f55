-- Bytes a user keeps in the artifact store: every code package they uploaded (each counted in
-- full for each of its uploaders: any of them may keep it alive) and the complete checkpoint
-- parts of their jobs held by the store (not those on a job's shared storage_path, whose
-- location is an absolute path). Uploads still being staged are not counted.
CREATE OR REPLACE FUNCTION ty_artifact_bytes_used(p_owner text) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT sum(c.size_bytes) FROM code_packages c
                     JOIN code_package_owners o ON o.sha256 = c.sha256
                     WHERE o.owner = p_owner), 0)::bigint
         + COALESCE((SELECT sum(p.size_bytes) FROM checkpoint_parts p
                     JOIN jobs j ON j.id = p.job_id
                     WHERE j.owner = p_owner AND p.state = 'complete'
                       AND p.location LIKE 'sha256/%'), 0)::bigint
$$;
COMMENT ON FUNCTION ty_artifact_bytes_used(text) IS 'Bytes a user keeps in the artifact store (packages uploaded, complete parts of their jobs).';
