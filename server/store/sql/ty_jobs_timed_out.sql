-- Fails the jobs whose current attempt has run past the job's timeout_s. Returns how many. FOR
-- UPDATE re-checks each job's status once it is locked, so a job stopped meanwhile is skipped.
CREATE OR REPLACE FUNCTION ty_jobs_timed_out() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer := 0;
    r record;
    -- The statuses as a value, not a sub-select: planned with the value, the query reads the few
    -- jobs in them through jobs_status_id_idx; a semi-join with job_transitions made PostgreSQL
    -- scan every job ever submitted, at every control tick.
    statuses text[] := ARRAY(SELECT from_status FROM job_transitions
                              WHERE event = 'timeout' AND to_status <> from_status);
BEGIN
    FOR r IN
        SELECT j.id, j.spec->>'timeout_s' AS timeout_s
          FROM jobs j JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempt
         WHERE j.status = ANY (statuses)
           AND j.spec->>'timeout_s' IS NOT NULL
           AND a.created_at + make_interval(secs => (j.spec->>'timeout_s')::float8) < now()
         ORDER BY j.id
           FOR UPDATE OF j
    LOOP
        PERFORM ty_job_fail(r.id, 'timeout', format('timed out after %s s', r.timeout_s));
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;
COMMENT ON FUNCTION ty_jobs_timed_out() IS 'Fails (event timeout) the jobs past their timeout_s; returns how many.';
