-- Names the hang of job p_job's attempt p_attempt in its events (p_message), once: unless the
-- attempt already named the hang that began at its current last progress time. Returns whether
-- it recorded the event.
CREATE OR REPLACE FUNCTION ty_hang_warn(p_job bigint, p_attempt integer, p_message text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    last timestamptz;
    st text;
BEGIN
    SELECT max(progress_at) INTO last FROM worker_progress
     WHERE job_id = p_job AND attempt = p_attempt;
    SELECT j.status INTO st FROM jobs j JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempt
     WHERE j.id = p_job AND j.attempt = p_attempt AND a.hang_warned_at IS DISTINCT FROM last
       FOR UPDATE OF a;
    IF NOT FOUND OR last IS NULL THEN
        RETURN false;
    END IF;
    UPDATE attempts SET hang_warned_at = last WHERE job_id = p_job AND attempt = p_attempt;
    INSERT INTO job_events (job_id, attempt, status, message)
    VALUES (p_job, p_attempt, st, 'hang: ' || p_message);
    RETURN true;
END $$;
COMMENT ON FUNCTION ty_hang_warn(bigint, integer, text) IS 'Records a job event naming a hang, once per hang (attempts.hang_warned_at).';
