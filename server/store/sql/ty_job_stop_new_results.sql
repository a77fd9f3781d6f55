-- The reports a plain job's stopping criteria (spec run_config.stop, migration 0041) have not
-- been checked against, oldest first: every rank-0 report of a RUNNING job that is not a sweep's
-- trial (a sweep checks tune_config.stop itself) after the job's cursor, with its values.
CREATE OR REPLACE FUNCTION ty_job_stop_new_results(p_limit integer)
RETURNS TABLE (job_id bigint, attempt integer, seq bigint, metrics jsonb, stop jsonb)
LANGUAGE sql STABLE AS $$
    SELECT j.id, r.attempt, r.seq, r.metrics, j.spec #> '{run_config,stop}'
      FROM jobs j
      JOIN reports r ON r.job_id = j.id AND r.rank = 0 AND r.attempt = j.attempt
     WHERE j.status = 'RUNNING' AND j.sweep_id IS NULL
       AND j.spec #> '{run_config,stop}' IS NOT NULL
       AND (r.attempt, r.seq) > (j.stop_seen_attempt, j.stop_seen_seq)
     ORDER BY r.received_at, r.job_id, r.seq
     LIMIT p_limit
$$;
COMMENT ON FUNCTION ty_job_stop_new_results(integer) IS 'Rank-0 reports of RUNNING jobs with stopping criteria (run_config.stop) not yet checked, oldest first.';
