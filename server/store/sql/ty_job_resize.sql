-- Restarts elastic job p_job to grow it (scaling_config.num_workers {"min", "max"}): the control
-- loop saw room for more workers for elastic_resize_interval_s. `resize` (to RESTARTING), not a
-- failure and not a preemption; the attempt's end_reason says why (p_message) and it ends STOPPED;
-- its workers are stopped with the preemption notice, and the next placement takes as many
-- workers as fit. A job that is not STARTING or RUNNING is left alone. Returns its status.
CREATE OR REPLACE FUNCTION ty_job_resize(p_job bigint, p_message text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_changes(j.status, 'resize') THEN
        RETURN j.status;
    END IF;
    UPDATE attempts SET end_reason = jsonb_build_object('event', 'resize', 'error', p_message,
                                                        'restarted', true)
     WHERE job_id = p_job AND attempt = j.attempt;
    RETURN ty_job_transition(p_job, 'resize',
                             p_message || '; restarting to grow (not a failure)');
END $$;
COMMENT ON FUNCTION ty_job_resize(bigint, text) IS 'Restarts an elastic job to grow it (event resize; not a failure).';
