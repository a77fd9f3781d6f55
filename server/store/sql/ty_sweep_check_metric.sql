-- Says once, as a sweep event (topic metric), that the sweep's metric is in no report, so the
-- trial scheduler has nothing to decide on: as soon as a trial's job reported without it while
-- no result of the sweep carried it, or when the sweep ended without any result. Called for a
-- RUNNING sweep by ty_sweeps_advance after the results were read, and as the sweep ends.
CREATE OR REPLACE FUNCTION ty_sweep_check_metric(s sweeps) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_trial integer;
    v_keys text;
BEGIN
    IF s.metric IS NULL OR EXISTS (SELECT 1 FROM sweep_results WHERE sweep_id = s.id)
       OR EXISTS (SELECT 1 FROM sweep_events WHERE sweep_id = s.id AND topic = 'metric') THEN
        RETURN;
    END IF;
    SELECT st.trial_index, (SELECT string_agg(k, ', ' ORDER BY k)
                              FROM jsonb_object_keys(r.metrics) k)
      INTO v_trial, v_keys
      FROM sweep_trials st JOIN reports r ON r.job_id = st.job_id AND r.rank = 0
     WHERE st.sweep_id = s.id
       AND NOT EXISTS (SELECT 1 FROM reports r2
                        WHERE r2.job_id = st.job_id AND r2.rank = 0
                          AND jsonb_typeof(r2.metrics -> s.metric) = 'number')
     ORDER BY r.received_at, r.job_id, r.seq LIMIT 1;
    IF v_trial IS NOT NULL THEN
        INSERT INTO sweep_events (sweep_id, topic, message)
        VALUES (s.id, 'metric', format(
            'tune_config.metric: trial %s reported %s but no number named "%s"; the trial '
            'scheduler has nothing to compare until a trial reports it',
            v_trial, coalesce(nullif(v_keys, ''), 'no metrics'), s.metric))
        ON CONFLICT DO NOTHING;
    ELSIF s.status <> 'RUNNING' THEN
        INSERT INTO sweep_events (sweep_id, topic, message)
        VALUES (s.id, 'metric', format('tune_config.metric: no trial reported "%s"', s.metric))
        ON CONFLICT DO NOTHING;
    END IF;
END $$;
COMMENT ON FUNCTION ty_sweep_check_metric(sweeps) IS 'Records once, as a sweep event, that the sweep''s metric is in no report of its trials.';
