-- The leader's sweep driver (control thread, every tick): for each RUNNING sweep, submits the
-- next trials in index order as ordinary jobs (ty_sweep_trial_submit) while fewer than
-- max_concurrent_trials of its trials are unfinished; a sweep whose trials have all run and
-- finished becomes SUCCEEDED. A sweep whose metric is in no report gets an event saying so
-- (ty_sweep_check_metric). Returns how many jobs were submitted plus sweeps finished.
CREATE OR REPLACE FUNCTION ty_sweeps_advance() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    s sweeps;
    t sweep_trials;
    unfinished integer;
    changed integer := 0;
BEGIN
    FOR s IN SELECT * FROM sweeps WHERE status = 'RUNNING' ORDER BY id FOR UPDATE SKIP LOCKED LOOP
        PERFORM ty_sweep_check_metric(s);
        SELECT count(*) INTO unfinished
          FROM sweep_trials st JOIN jobs jj ON jj.id = st.job_id
          JOIN job_statuses js ON js.name = jj.status
         WHERE st.sweep_id = s.id AND NOT js.terminal;
        FOR t IN SELECT * FROM sweep_trials st WHERE st.sweep_id = s.id AND NOT st.started
                  ORDER BY st.trial_index LIMIT greatest(s.max_concurrent_trials - unfinished, 0) LOOP
            PERFORM ty_sweep_trial_submit(s, t.trial_index, t.config, NULL);
            changed := changed + 1;
        END LOOP;
        IF NOT EXISTS (SELECT 1 FROM sweep_trials st WHERE st.sweep_id = s.id AND NOT st.started)
           AND NOT EXISTS (SELECT 1 FROM sweep_trials st JOIN jobs jj ON jj.id = st.job_id
                             JOIN job_statuses js ON js.name = jj.status
                            WHERE st.sweep_id = s.id AND NOT js.terminal) THEN
            UPDATE sweeps SET status = 'SUCCEEDED', finished_at = now(),
                   status_message = 'every trial finished'
             WHERE id = s.id;
            s.status := 'SUCCEEDED';
            PERFORM ty_sweep_check_metric(s);
            changed := changed + 1;
        END IF;
    END LOOP;
    RETURN changed;
END $$;
COMMENT ON FUNCTION ty_sweeps_advance() IS 'Submits the next trials of every RUNNING sweep up to max_concurrent_trials unfinished; marks sweeps whose trials all finished SUCCEEDED. Returns the number of changes.';
