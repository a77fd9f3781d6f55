-- Records a worker exit; a failure (non-zero code, signal or error) passes its rank, code, signal
-- and node to ty_job_fail, which restarts the job or fails it, and the last exit settles it.
-- p_error: the exit in words, after "worker rank R " in the job's error (the server passes
-- aproto_exit_words: "exited with code 1: ValueError: bad lr 3.0", "was killed by SIGSEGV");
-- NULL: said from the code or signal.
-- Returns the job's status after the exit, or NULL when nothing was recorded (a duplicate event,
-- or no such live worker). The server stops the job's other workers when it is STOPPING or
-- RESTARTING.
CREATE OR REPLACE FUNCTION ty_worker_exited(p_job bigint, p_attempt integer, p_rank integer,
                                            p_code integer, p_signal integer, p_error text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    node text;
BEGIN
    UPDATE workers SET status = 'EXITED', exit_code = p_code, signal = p_signal, finished_at = now()
     WHERE job_id = p_job AND attempt = p_attempt AND rank = p_rank
       AND status IN ('PLACED', 'RUNNING')
    RETURNING node_id INTO node;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_code IS DISTINCT FROM 0 OR p_signal IS NOT NULL OR p_error IS NOT NULL THEN
        msg := format('worker rank %s %s', p_rank,
                      coalesce(p_error, CASE WHEN p_signal IS NOT NULL
                                             THEN 'was killed by signal ' || p_signal
                                             ELSE 'exited with code ' || p_code END));
        PERFORM ty_job_fail(p_job, 'worker_failed', msg,
                            jsonb_build_object('attempt', p_attempt, 'rank', p_rank,
                                               'exit_code', p_code, 'signal', p_signal,
                                               'node_id', node));
    END IF;
    PERFORM ty_job_settle(p_job);
    RETURN (SELECT status FROM jobs WHERE id = p_job);
END $$;
COMMENT ON FUNCTION ty_worker_exited(bigint, integer, integer, integer, integer, text) IS 'Records a worker exit, fails or finishes its job; returns the job''s status after it (NULL: duplicate).';
