-- The project as the API shows it (GET /api/v1/projects, /projects/{name}): one definition.
CREATE OR REPLACE FUNCTION ty_project_json(p projects) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'name', p.name, 'visibility', p.visibility, 'created_by', p.created_by,
        'created_at', ty_ts(p.created_at),
        'members', (SELECT coalesce(jsonb_agg(m.member ORDER BY m.member), '[]')
                      FROM project_members m WHERE m.project = p.name))
$$;
COMMENT ON FUNCTION ty_project_json(projects) IS 'The project object of the REST API: name, visibility, created_by, created_at, members (sorted).';
