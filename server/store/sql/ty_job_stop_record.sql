-- Records that a job's stopping criteria were checked against its report (p_attempt, p_seq);
-- with p_reason the job is stopped through the state machine with that reason as the event's
-- message ("stop: acc 0.93 >= 0.9"). Returns whether it was stopped.
CREATE OR REPLACE FUNCTION ty_job_stop_record(p_job bigint, p_attempt integer, p_seq bigint,
                                              p_reason text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    UPDATE jobs SET stop_seen_attempt = p_attempt, stop_seen_seq = p_seq
     WHERE id = p_job AND (stop_seen_attempt, stop_seen_seq) < (p_attempt, p_seq);
    IF p_reason IS NULL THEN
        RETURN false;
    END IF;
    r := ty_job_request(p_job, 'stop', p_reason);
    RETURN coalesce(r.o_allowed, false);
END $$;
COMMENT ON FUNCTION ty_job_stop_record(bigint, integer, bigint, text) IS 'Moves a job''s stopping-criteria cursor and, with a reason, stops the job with it as the event.';
