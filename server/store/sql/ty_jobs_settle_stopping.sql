-- Settles every job that is being stopped and has no live worker left. Returns how many. The
-- statuses are a value, not a sub-select, so the query is planned with them and reads the few
-- jobs in them through jobs_status_id_idx: a semi-join with job_transitions made PostgreSQL read
-- every job ever submitted, at every control tick (docs/decisions.md).
CREATE OR REPLACE FUNCTION ty_jobs_settle_stopping() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    statuses text[] := ARRAY(SELECT from_status FROM job_transitions WHERE event = 'stopped');
    n integer;
BEGIN
    SELECT count(*)::integer INTO n
      FROM (SELECT ty_job_settle(id) AS s FROM jobs WHERE status = ANY (statuses) ORDER BY id) x
     WHERE s IS NOT NULL;
    RETURN n;
END $$;
COMMENT ON FUNCTION ty_jobs_settle_stopping() IS 'Finishes the stopping jobs whose workers are all gone; returns how many.';
