-- Creates a sweep and its trials (their configs resolved by the server, tune/tune_space.c). Its
-- trials' jobs are submitted later, by ty_sweeps_advance. Returns the new row.
CREATE OR REPLACE FUNCTION ty_sweep_submit(p_name text, p_owner text, p_spec jsonb, p_metric text,
                                           p_mode text, p_max_concurrent integer, p_seed bigint,
                                           p_configs jsonb)
RETURNS sweeps LANGUAGE plpgsql AS $$
DECLARE
    s sweeps;
BEGIN
    INSERT INTO sweeps (name, owner, project, status, status_message, spec, metric, mode,
                        max_concurrent_trials, seed)
    VALUES (p_name, p_owner, coalesce(p_spec #>> '{job,project}', 'default'), 'RUNNING',
            'submitted by ' || p_owner, p_spec, p_metric, p_mode, p_max_concurrent, p_seed)
    RETURNING * INTO STRICT s;
    INSERT INTO sweep_trials (sweep_id, trial_index, config)
    SELECT s.id, (c.ord - 1)::integer, c.cfg
      FROM jsonb_array_elements(p_configs) WITH ORDINALITY AS c (cfg, ord);
    RETURN s;
END $$;
COMMENT ON FUNCTION ty_sweep_submit(text, text, jsonb, text, text, integer, bigint, jsonb) IS 'Inserts a RUNNING sweep and one sweep_trials row per resolved config.';
