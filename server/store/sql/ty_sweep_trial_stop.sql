-- The trial scheduler (or a stop of the sweep) stops trial p_trial of sweep p_sweep: its job is
-- stopped through the state machine with p_reason as the event's message, and the reason kept
-- as the trial's stopped_by. Returns whether its job was still unfinished.
CREATE OR REPLACE FUNCTION ty_sweep_trial_stop(p_sweep bigint, p_trial integer, p_reason text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint;
    r record;
BEGIN
    SELECT job_id INTO v_job FROM sweep_trials
     WHERE sweep_id = p_sweep AND trial_index = p_trial FOR UPDATE;
    IF v_job IS NULL THEN
        RETURN false;
    END IF;
    r := ty_job_request(v_job, 'stop', p_reason);
    IF r.o_allowed THEN
        UPDATE sweep_trials SET stopped_by = p_reason
         WHERE sweep_id = p_sweep AND trial_index = p_trial;
    END IF;
    RETURN coalesce(r.o_allowed, false);
END $$;
COMMENT ON FUNCTION ty_sweep_trial_stop(bigint, integer, text) IS 'Stops a trial''s job with the reason as its event and records the reason as stopped_by.';
