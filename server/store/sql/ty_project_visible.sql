-- Whether p_who (a token name; p_admin: its role is admin) may see the jobs of project
-- p_project: admins see every project, every role sees a shared one, members see a private one.
-- The one rule for every read of a job (its spec, workers, events, metrics, logs, checkpoints and
-- archives, list entries, /stream subscriptions) and of a project (issue 22, finding 13).
CREATE OR REPLACE FUNCTION ty_project_visible(p_project text, p_who text, p_admin boolean)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT p_admin
        OR EXISTS (SELECT 1 FROM projects p WHERE p.name = p_project AND p.visibility = 'shared')
        OR EXISTS (SELECT 1 FROM project_members m WHERE m.project = p_project AND m.member = p_who)
$$;
COMMENT ON FUNCTION ty_project_visible(text, text, boolean) IS 'Whether a token name (admin or not) may see a project and its jobs: admins all, everyone a shared one, members a private one.';
