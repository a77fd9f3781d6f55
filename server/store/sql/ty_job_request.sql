-- An event a user asks for (stop, delete) on job p_job. o_from: the job's status (NULL: there is
-- no such job, nothing else is set). o_allowed: whether the status allows the event; when it
-- does, the event was applied and o_to is the status after it (NULL after delete).
CREATE OR REPLACE FUNCTION ty_job_request(p_job bigint, p_event text, p_message text,
                               OUT o_from text, OUT o_allowed boolean, OUT o_to text)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT status INTO o_from FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    o_allowed := ty_job_allows(o_from, p_event);
    IF o_allowed THEN
        o_to := ty_job_transition(p_job, p_event, p_message);
    END IF;
END $$;
COMMENT ON FUNCTION ty_job_request(bigint, text, text) IS 'Applies a user''s stop or delete when the job''s status allows it; says whether it did.';
