-- A user stops sweep p_sweep: no further trial starts, and every unfinished trial is stopped
-- with "sweep <id> stopped by <who>". Returns the sweep's status before (NULL: no such sweep).
CREATE OR REPLACE FUNCTION ty_sweep_stop(p_sweep bigint, p_by text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_from text;
    t sweep_trials;
BEGIN
    SELECT status INTO v_from FROM sweeps WHERE id = p_sweep FOR UPDATE;
    IF NOT FOUND OR v_from <> 'RUNNING' THEN
        RETURN v_from;
    END IF;
    UPDATE sweeps SET status = 'STOPPED', finished_at = now(),
           status_message = 'stopped by ' || p_by
     WHERE id = p_sweep;
    FOR t IN SELECT st.* FROM sweep_trials st JOIN jobs j ON j.id = st.job_id
              JOIN job_statuses js ON js.name = j.status
             WHERE st.sweep_id = p_sweep AND NOT js.terminal LOOP
        PERFORM ty_sweep_trial_stop(p_sweep, t.trial_index,
                                    'sweep ' || p_sweep || ' stopped by ' || p_by);
    END LOOP;
    RETURN v_from;
END $$;
COMMENT ON FUNCTION ty_sweep_stop(bigint, text) IS 'Stops a RUNNING sweep and its unfinished trials; returns the status it had.';
