-- Submits a job: the transition out of "no job yet". Returns the new row. The spec's tags and
-- notes (common/jobspec.c checked them) become the job's (PATCH /api/v1/jobs/{id} changes those).
-- The job and its submit event are inserted by one statement (the event's stream trigger runs at
-- its end and sees the job): a submission's cost is mostly per statement (docs/decisions.md,
-- "Submissions: SQL functions …").
CREATE OR REPLACE FUNCTION ty_job_submit(p_name text, p_owner text, p_priority integer, p_spec jsonb)
RETURNS jobs LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    WITH n AS (
        INSERT INTO jobs (name, owner, status, status_message, priority, spec, tags, notes)
        SELECT p_name, p_owner, t.to_status, 'waiting to be scheduled', p_priority, p_spec,
               ARRAY(SELECT DISTINCT x FROM jsonb_array_elements_text(coalesce(p_spec -> 'tags', '[]')) x
                      ORDER BY x),
               coalesce(p_spec ->> 'notes', '')
          FROM job_transitions t WHERE t.from_status IS NULL AND t.event = 'submit'
        RETURNING *
    ), e AS (
        INSERT INTO job_events (job_id, attempt, status, message)
        SELECT n.id, n.attempt, n.status, 'submitted by ' || p_owner FROM n
    )
    SELECT * INTO STRICT j FROM n;
    RETURN j;
END $$;
COMMENT ON FUNCTION ty_job_submit(text, text, integer, jsonb) IS 'Inserts a job in the status of the submit transition and records the event.';
