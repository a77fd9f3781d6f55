-- Records one result the trial scheduler read (ty_sweep_new_results) and what it decided: the
-- trial's cursor, last and best value move on, the result (when it has a value) is kept in
-- sweep_results (at ASHA rung p_rung when set), PBT's perturbation time becomes p_perturbed_t
-- when set, and with p_stop the trial is stopped with that reason (ty_sweep_trial_stop).
CREATE OR REPLACE FUNCTION ty_sweep_record(p_sweep bigint, p_trial integer, p_attempt integer,
                                           p_seq bigint, p_t double precision,
                                           p_value double precision, p_rung double precision,
                                           p_perturbed_t double precision, p_stop text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sweep_trials st
       SET seen_attempt = p_attempt, seen_seq = p_seq, last_t = p_t,
           last_value = coalesce(p_value, st.last_value),
           best_value = CASE WHEN st.best_value IS NULL OR p_value IS NULL
                             THEN coalesce(p_value, st.best_value)
                             WHEN s.mode = 'min' THEN least(st.best_value, p_value)
                             ELSE greatest(st.best_value, p_value) END,
           perturbed_t = coalesce(p_perturbed_t, st.perturbed_t)
      FROM sweeps s
     WHERE s.id = st.sweep_id AND st.sweep_id = p_sweep AND st.trial_index = p_trial;
    IF p_value IS NOT NULL THEN
        INSERT INTO sweep_results (sweep_id, trial_index, t, value, rung)
        VALUES (p_sweep, p_trial, p_t, p_value, p_rung);
    END IF;
    IF p_stop IS NOT NULL THEN
        PERFORM ty_sweep_trial_stop(p_sweep, p_trial, p_stop);
    END IF;
END $$;
COMMENT ON FUNCTION ty_sweep_record(bigint, integer, integer, bigint, double precision, double precision, double precision, double precision, text) IS 'Records a result read by the trial scheduler and its decision (a rung, a PBT perturbation time, a stop with its reason).';
