-- Whether p_who (a token name; p_admin: its role is admin) may name stored code package p_sha256
-- in a job spec (code_package, resume_from_package): admins, a user who uploaded its bytes, and
-- the members of a project with a job that names it, who can read that job's spec and fetch its
-- package already (issue 22, finding 6).
CREATE OR REPLACE FUNCTION ty_package_usable(p_sha256 text, p_who text, p_admin boolean)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT p_admin
        OR EXISTS (SELECT 1 FROM code_package_owners o WHERE o.sha256 = p_sha256 AND o.owner = p_who)
        OR EXISTS (SELECT 1 FROM project_members m JOIN jobs j ON j.project = m.project
                   WHERE m.member = p_who
                     AND (j.spec ->> 'code_package' = p_sha256
                          OR j.spec ->> 'resume_from_package' = p_sha256))
$$;
COMMENT ON FUNCTION ty_package_usable(text, text, boolean) IS 'Whether a token name may name a code package in a job spec: admins, its uploaders, the members of a project with a job that names it.';
