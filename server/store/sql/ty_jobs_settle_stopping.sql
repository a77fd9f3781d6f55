-- Settles every job that is being stopped and has no live worker left. Returns how many.
CREATE OR REPLACE FUNCTION ty_jobs_settle_stopping() RETURNS integer LANGUAGE sql AS $$
    SELECT count(*)::integer
      FROM (SELECT ty_job_settle(id) AS s FROM jobs
             WHERE status IN (SELECT from_status FROM job_transitions WHERE event = 'stopped')
             ORDER BY id) x
     WHERE s IS NOT NULL
$$;
COMMENT ON FUNCTION ty_jobs_settle_stopping() IS 'Finishes the stopping jobs whose workers are all gone; returns how many.';
