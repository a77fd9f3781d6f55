-- With --slurm: Slurm rejected the allocation of pending job p_job (an unknown partition, more
-- nodes than the partition has): the job fails (`failed`, PENDING -> FAILED) with Slurm's
-- message p_message as its error. A job that left PENDING is left alone. Returns the status.
CREATE OR REPLACE FUNCTION ty_slurm_fail(p_job bigint, p_message text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    SELECT status INTO st FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR st <> 'PENDING' THEN
        RETURN st;
    END IF;
    UPDATE jobs SET error = 'Slurm rejected the allocation: ' || p_message, slurm_job_id = NULL
     WHERE id = p_job;
    RETURN ty_job_transition(p_job, 'failed', 'Slurm rejected the allocation: ' || p_message);
END $$;
COMMENT ON FUNCTION ty_slurm_fail(bigint, text) IS 'With --slurm: fails a pending job whose allocation Slurm rejected, with Slurm''s message.';
