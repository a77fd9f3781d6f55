-- Fails a job with p_event (worker_failed, node_lost, timeout, or another failure event) and
-- p_error; p_reason: what the caller knows of the cause (rank, exit_code, signal, node_id).
-- A live job (STARTING, RUNNING) with failures left (failures < max_failures, or max_failures
-- -1) and an event other than timeout restarts: failures + 1, the attempt records the error and
-- the reason (restarted: true), and `retry` moves the job to RESTARTING. Otherwise the job's
-- error is set when the event changes its status (the first failure wins) and the event is
-- applied (illegal for the job's status: ty_job_transition raises TY001); the attempt records
-- the reason when it did. A RESTARTING job ignores every failure
-- (`retry` to itself): its attempt has already ended. The server then stops the other workers.
CREATE OR REPLACE FUNCTION ty_job_fail(p_job bigint, p_event text, p_error text, p_reason jsonb)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    max_f integer;
    reason jsonb;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN ty_job_transition(p_job, p_event, p_error);
    END IF;
    reason := coalesce(p_reason, '{}'::jsonb)
              || jsonb_build_object('event', p_event, 'error', p_error);
    max_f := coalesce((j.spec #>> '{run_config,failure_config,max_failures}')::integer, 0);
    IF j.status = 'RESTARTING' THEN
        RETURN ty_job_transition(p_job, 'retry', j.status_message);
    END IF;
    IF p_event <> 'timeout' AND ty_job_changes(j.status, 'retry')
       AND (max_f = -1 OR j.failures < max_f) THEN
        UPDATE jobs SET failures = failures + 1 WHERE id = p_job;
        UPDATE attempts SET error = p_error,
                            end_reason = reason || jsonb_build_object('restarted', true)
         WHERE job_id = p_job AND attempt = j.attempt;
        RETURN ty_job_transition(p_job, 'retry',
            format('restarting after failure %s of %s: %s%s', j.failures + 1,
                   CASE WHEN max_f = -1 THEN 'unlimited' ELSE max_f::text END, p_error,
                   CASE WHEN p_event = 'worker_failed' AND p_reason ? 'node_id'
                        THEN ' on node ' || (p_reason->>'node_id') ELSE '' END));
    END IF;
    IF ty_job_changes(j.status, p_event) THEN
        UPDATE jobs SET error = p_error WHERE id = p_job;
        UPDATE attempts SET end_reason = coalesce(end_reason, reason || jsonb_build_object('restarted', false))
         WHERE job_id = p_job AND attempt = j.attempt;
    END IF;
    RETURN ty_job_transition(p_job, p_event, 'failing: ' || p_error);
END $$;
COMMENT ON FUNCTION ty_job_fail(bigint, text, text, jsonb) IS 'Fails a job (worker_failed, node_lost, timeout): restarts it (retry) while failures are left, else fails it; records why its attempt ended.';

-- The same without details of the cause.
CREATE OR REPLACE FUNCTION ty_job_fail(p_job bigint, p_event text, p_error text) RETURNS text
LANGUAGE sql AS $$
    SELECT ty_job_fail(p_job, p_event, p_error, NULL::jsonb)
$$;
COMMENT ON FUNCTION ty_job_fail(bigint, text, text) IS 'ty_job_fail without details of the cause.';
