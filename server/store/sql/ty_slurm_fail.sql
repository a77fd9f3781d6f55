-- With --slurm: Slurm rejected the allocation of waiting job p_job (an unknown partition, more
-- nodes than the partition has): the job fails with Slurm's message p_message as its error. A
-- PENDING job ends at once (`failed`); a RESTARTING one (its new allocation rejected) is stopped
-- as failing (`stop`, then ty_job_settle ends it FAILED once its last worker is gone). A job in
-- any other status is left alone. Returns the status.
CREATE OR REPLACE FUNCTION ty_slurm_fail(p_job bigint, p_message text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st text;
    msg text := 'Slurm rejected the allocation: ' || p_message;
BEGIN
    SELECT status INTO st FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR st NOT IN ('PENDING', 'RESTARTING') THEN
        RETURN st;
    END IF;
    UPDATE jobs SET error = msg, slurm_job_id = NULL WHERE id = p_job;
    IF st = 'PENDING' THEN
        RETURN ty_job_transition(p_job, 'failed', msg);
    END IF;
    PERFORM ty_job_transition(p_job, 'stop', 'failing: ' || msg);
    RETURN coalesce(ty_job_settle(p_job), 'STOPPING');
END $$;
COMMENT ON FUNCTION ty_slurm_fail(bigint, text) IS 'With --slurm: fails a waiting (pending or restarting) job whose allocation Slurm rejected, with Slurm''s message.';
