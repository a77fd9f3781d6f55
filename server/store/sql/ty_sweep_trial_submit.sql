-- Submits trial p_trial of sweep s as an ordinary job: the sweep's base job spec named
-- <sweep>/trial-<index>, its train_loop_config merged with p_config (but for a searched
-- "scaling_config", which replaces the spec's own), resuming from checkpoint
-- p_resume when set (PBT), in the sweep owner's name; the trial then points at the new job.
-- Returns the job's id.
CREATE OR REPLACE FUNCTION ty_sweep_trial_submit(s sweeps, p_trial integer, p_config jsonb,
                                                 p_resume bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_name text := s.name || '/trial-' || p_trial;
    v_spec jsonb;
    j jobs;
BEGIN
    v_spec := (s.spec -> 'job')
              || jsonb_build_object('name', v_name, 'train_loop_config',
                     coalesce(s.spec #> '{job,train_loop_config}', '{}'::jsonb)
                     || (p_config - 'scaling_config'));
    IF p_config ? 'scaling_config' THEN  -- searched: validated whole at submission (h_sweeps.c)
        v_spec := v_spec || jsonb_build_object('scaling_config', p_config -> 'scaling_config');
    END IF;
    IF p_resume IS NOT NULL THEN
        v_spec := v_spec || jsonb_build_object('resume_from_checkpoint', p_resume);
    END IF;
    j := ty_job_submit(v_name, s.owner, coalesce((s.spec #>> '{job,priority}')::integer, 0), v_spec);
    UPDATE jobs SET sweep_id = s.id, trial_index = p_trial WHERE id = j.id;
    UPDATE sweep_trials SET job_id = j.id, started = true, config = p_config,
           seen_attempt = 0, seen_seq = 0
     WHERE sweep_id = s.id AND trial_index = p_trial;
    RETURN j.id;
END $$;
COMMENT ON FUNCTION ty_sweep_trial_submit(sweeps, integer, jsonb, bigint) IS 'Submits a trial of a sweep as a job (base spec, config merged into train_loop_config, optional checkpoint to resume from).';
