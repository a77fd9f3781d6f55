CREATE OR REPLACE FUNCTION ty_job_submit_once(p_name text, p_owner text, p_priority integer, p_spec jsonb,
                                   p_key text)
RETURNS TABLE (job jobs, created boolean, same_spec boolean) LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    -- Two submissions with one key wait for each other: the second then finds the first's job.
    PERFORM pg_advisory_xact_lock(hashtext(p_owner), hashtext(p_key));
    SELECT * INTO j FROM jobs WHERE owner = p_owner AND idempotency_key = p_key;
    IF FOUND THEN
        RETURN QUERY SELECT j, false, j.spec = p_spec;
        RETURN;
    END IF;
    j := ty_job_submit(p_name, p_owner, p_priority, p_spec);
    UPDATE jobs SET idempotency_key = p_key WHERE id = j.id RETURNING * INTO STRICT j;
    RETURN QUERY SELECT j, true, true;
END $$;
COMMENT ON FUNCTION ty_job_submit_once(text, text, integer, jsonb, text) IS 'ty_job_submit under an idempotency key: the owner''s job with that key when there is one (created false; same_spec says whether it was submitted with this spec), else a new job.';
