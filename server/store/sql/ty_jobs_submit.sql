-- Submits jobs: the transition out of "no job yet", for each element of p_jobs, a JSON array of
-- [name, owner, priority, spec]. Returns the new rows, whose ids ascend in the order of p_jobs.
-- The spec's tags and notes (common/jobspec.c checked them) become the job's (PATCH
-- /api/v1/jobs/{id} changes those). All the jobs, then all their submit events, are inserted by one
-- statement each (a data-modifying CTE; the events' stream trigger runs once at its end and sees
-- the jobs): what a submission costs PostgreSQL is mostly per statement, not per row, so a batch
-- of submissions shares it. A job starts with its submit event as seq 1 of its stream, which the
-- event carries, so the stream trigger does not update the new row (docs/decisions.md,
-- "Submissions: SQL functions …").
CREATE OR REPLACE FUNCTION ty_jobs_submit(p_jobs jsonb) RETURNS SETOF jobs
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH s AS MATERIALIZED (
        -- Ids taken in the array's order (the scan's), so that they ascend with it.
        SELECT nextval('jobs_id_seq'::regclass) AS id, e.s
          FROM jsonb_array_elements(p_jobs) AS e (s)
    ), n AS (
        INSERT INTO jobs (id, name, owner, status, status_message, priority, spec, tags, notes,
                          stream_seq)
        SELECT s.id, s.s ->> 0, s.s ->> 1, t.to_status, 'waiting to be scheduled',
               (s.s ->> 2)::integer, s.s -> 3,
               ARRAY(SELECT DISTINCT x
                       FROM jsonb_array_elements_text(coalesce(s.s -> 3 -> 'tags', '[]')) x
                      ORDER BY x),
               coalesce(s.s -> 3 ->> 'notes', ''), 1
          FROM s, job_transitions t WHERE t.from_status IS NULL AND t.event = 'submit'
         ORDER BY s.id
        RETURNING *
    ), e AS (
        INSERT INTO job_events (job_id, attempt, status, message, stream_seq)
        SELECT n.id, n.attempt, n.status, 'submitted by ' || n.owner, 1 FROM n ORDER BY n.id
    )
    SELECT * FROM n ORDER BY n.id;
END $$;
COMMENT ON FUNCTION ty_jobs_submit(jsonb) IS 'Inserts jobs ([name, owner, priority, spec] each) in the status of the submit transition and records their events, in one statement; ids ascend in the array''s order.';
