-- Whether p_event moves a job in p_from to another status (legal and not ignored).
CREATE OR REPLACE FUNCTION ty_job_changes(p_from text, p_event text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM job_transitions t
                    WHERE t.event = p_event AND t.from_status = p_from
                      AND t.to_status IS DISTINCT FROM t.from_status)
$$;
COMMENT ON FUNCTION ty_job_changes(text, text) IS 'Whether the event is legal for that status and changes it.';
