-- A trial as the API shows it (GET /api/v1/sweeps/{id}): its config, its current job and that
-- job's status, its last and best metric, and who stopped it early.
CREATE OR REPLACE FUNCTION ty_sweep_trial_json(t sweep_trials) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'index', t.trial_index, 'config', t.config, 'job_id', t.job_id,
        'status', CASE WHEN NOT t.started THEN 'PENDING'
                       ELSE (SELECT j.status FROM jobs j WHERE j.id = t.job_id) END,
        'last_t', t.last_t, 'last_metric', t.last_value, 'best_metric', t.best_value,
        'metrics', (SELECT j.last_metrics FROM jobs j WHERE j.id = t.job_id),
        'stopped_by', t.stopped_by)
$$;
COMMENT ON FUNCTION ty_sweep_trial_json(sweep_trials) IS 'A trial object of the REST API: config, job, status, last and best metric, stopped_by.';
