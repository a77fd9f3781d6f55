-- The results the trial schedulers have not read yet, oldest first: every rank-0 report of a
-- RUNNING sweep's trial (its current job and attempt) after the trial's cursor that carries
-- the sweep's metric as a number (every report when the sweep has no metric but stopping
-- criteria, tune_config.stop; value is then NULL), with its numbers. t is the sweep's time attribute: the report's number of that
-- name when it has one; else for time_total_s the seconds since the job started, and for any
-- other its training_iteration (its seq, counted from 1 per attempt).
CREATE OR REPLACE FUNCTION ty_sweep_new_results(p_limit integer)
RETURNS TABLE (sweep_id bigint, trial_index integer, attempt integer, seq bigint,
               t double precision, value double precision, metrics jsonb)
LANGUAGE sql STABLE AS $$
    SELECT st.sweep_id, st.trial_index, r.attempt, r.seq,
           coalesce(CASE WHEN jsonb_typeof(r.metrics -> (s.spec #>> '{tune_config,scheduler,time_attr}')) = 'number'
                         THEN (r.metrics ->> (s.spec #>> '{tune_config,scheduler,time_attr}'))::float8 END,
                    CASE WHEN s.spec #>> '{tune_config,scheduler,time_attr}' = 'time_total_s'
                         THEN extract(epoch FROM r.reported_at - coalesce(j.started_at, j.created_at))::float8 END,
                    r.seq::float8),
           CASE WHEN s.metric IS NOT NULL THEN (r.metrics ->> s.metric)::float8 END,
           r.metrics
      FROM sweeps s
      JOIN sweep_trials st ON st.sweep_id = s.id
      JOIN jobs j ON j.id = st.job_id
      JOIN reports r ON r.job_id = j.id AND r.rank = 0 AND r.attempt = j.attempt
     WHERE s.status = 'RUNNING' AND st.stopped_by IS NULL
       AND (r.attempt, r.seq) > (st.seen_attempt, st.seen_seq)
       AND (jsonb_typeof(r.metrics -> s.metric) = 'number'
            OR (s.metric IS NULL AND s.spec #> '{tune_config,stop}' IS NOT NULL))
     ORDER BY r.received_at, r.job_id, r.seq
     LIMIT p_limit
$$;
COMMENT ON FUNCTION ty_sweep_new_results(integer) IS 'Rank-0 results of RUNNING sweeps'' trials not yet read by the trial scheduler, oldest first.';
