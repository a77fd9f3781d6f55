-- Whether p_event is legal for a job in p_from (NULL: not yet submitted).
CREATE OR REPLACE FUNCTION ty_job_allows(p_from text, p_event text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM job_transitions t
                    WHERE t.event = p_event
                      AND (t.from_status = p_from OR (t.from_status IS NULL AND p_from IS NULL)))
$$;
COMMENT ON FUNCTION ty_job_allows(text, text) IS 'Whether job_transitions has the event for that status.';
