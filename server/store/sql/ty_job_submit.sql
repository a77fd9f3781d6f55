-- Submits one job (ty_jobs_submit, which defines the insert). Returns the new row.
CREATE OR REPLACE FUNCTION ty_job_submit(p_name text, p_owner text, p_priority integer, p_spec jsonb)
RETURNS jobs LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    SELECT * INTO STRICT j
      FROM ty_jobs_submit(jsonb_build_array(jsonb_build_array(p_name, p_owner, p_priority, p_spec)));
    RETURN j;
END $$;
COMMENT ON FUNCTION ty_job_submit(text, text, integer, jsonb) IS 'Inserts a job in the status of the submit transition and records the event (ty_jobs_submit of one).';
