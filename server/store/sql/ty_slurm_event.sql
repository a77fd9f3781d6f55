-- With --slurm: a job event p_message (Slurm unreachable, refusing the token, pending with a
-- reason) for job p_job, unless it is the job's last event already; the job's status_message
-- becomes p_message too. Nothing for a job that is neither PENDING nor RESTARTING. Returns whether the event was
-- recorded.
CREATE OR REPLACE FUNCTION ty_slurm_event(p_job bigint, p_message text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR j.status NOT IN ('PENDING', 'RESTARTING') THEN
        RETURN false;
    END IF;
    UPDATE jobs SET status_message = p_message WHERE id = p_job AND status_message IS DISTINCT FROM p_message;
    IF (SELECT message FROM job_events WHERE job_id = p_job ORDER BY id DESC LIMIT 1)
       IS NOT DISTINCT FROM p_message THEN
        RETURN false;
    END IF;
    INSERT INTO job_events (job_id, attempt, status, message)
    VALUES (p_job, j.attempt, j.status, p_message);
    RETURN true;
END $$;
COMMENT ON FUNCTION ty_slurm_event(bigint, text) IS 'With --slurm: names what Slurm says of a pending job in its events (once) and status message.';
