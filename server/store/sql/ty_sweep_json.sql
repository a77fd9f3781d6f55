-- The sweep as the API shows it: the submission, its status, the number of trials by status and
-- the best trial so far (by the sweep's metric and mode, over every trial's best result); with
-- p_trials, every trial (ty_sweep_trial_json) in index order and the sweep's events (sweep_events).
CREATE OR REPLACE FUNCTION ty_sweep_json(s sweeps, p_trials boolean) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', s.id, 'name', s.name, 'owner', s.owner, 'project', s.project, 'status', s.status,
        'status_message', s.status_message, 'metric', s.metric, 'mode', s.mode,
        'max_concurrent_trials', s.max_concurrent_trials, 'seed', s.seed,
        'param_space', s.spec -> 'param_space', 'tune_config', s.spec -> 'tune_config',
        'job', ty_spec_public(s.spec -> 'job'),
        'created_at', ty_ts(s.created_at), 'finished_at', ty_ts(s.finished_at),
        'num_trials', (SELECT count(*) FROM sweep_trials t WHERE t.sweep_id = s.id),
        'best_trial', (SELECT ty_sweep_trial_json(t) FROM sweep_trials t
                        WHERE t.sweep_id = s.id AND t.best_value IS NOT NULL
                        ORDER BY CASE WHEN s.mode = 'min' THEN t.best_value ELSE -t.best_value END,
                                 t.trial_index
                        LIMIT 1))
        || CASE WHEN p_trials THEN jsonb_build_object('trials',
               (SELECT coalesce(jsonb_agg(ty_sweep_trial_json(t) ORDER BY t.trial_index), '[]')
                  FROM sweep_trials t WHERE t.sweep_id = s.id),
               'events',
               (SELECT coalesce(jsonb_agg(jsonb_build_object('at', ty_ts(e.at), 'topic', e.topic,
                                                             'message', e.message) ORDER BY e.id),
                                '[]')
                  FROM sweep_events e WHERE e.sweep_id = s.id))
           ELSE '{}'::jsonb END
$$;
COMMENT ON FUNCTION ty_sweep_json(sweeps, boolean) IS 'The sweep object of the REST API, with its best trial and, when asked, every trial.';
