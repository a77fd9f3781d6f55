-- Records a worker start and the agent's step times of its launch (seconds, NULL: none; read by
-- ty_attempt_startup); the job runs once every worker of its attempt has started.
CREATE OR REPLACE FUNCTION ty_worker_started(p_job bigint, p_attempt integer, p_rank integer,
                                             p_pid integer,
                                             p_code_fetch_s float8 DEFAULT NULL,
                                             p_checkpoint_fetch_s float8 DEFAULT NULL,
                                             p_process_start_s float8 DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    UPDATE workers SET status = 'RUNNING', pid = p_pid, started_at = now(),
                       code_fetch_s = p_code_fetch_s, checkpoint_fetch_s = p_checkpoint_fetch_s,
                       process_start_s = p_process_start_s
     WHERE job_id = p_job AND attempt = p_attempt AND rank = p_rank AND status = 'PLACED';
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF ty_job_allows(j.status, 'running') AND j.attempt = p_attempt AND NOT EXISTS (
        SELECT 1 FROM workers WHERE job_id = p_job AND attempt = p_attempt AND status = 'PLACED') THEN
        PERFORM ty_job_transition(p_job, 'running',
            format('%s workers running', (SELECT world_size FROM attempts
                                          WHERE job_id = p_job AND attempt = p_attempt)));
    END IF;
END $$;
COMMENT ON FUNCTION ty_worker_started(bigint, integer, integer, integer, float8, float8, float8) IS 'Records a worker start; the job runs once all its workers do.';
