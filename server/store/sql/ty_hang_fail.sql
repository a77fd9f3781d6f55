-- Fails job p_job because its attempt p_attempt hangs (past hang_timeout_s), through the same
-- ty_job_fail a worker failure uses (event worker_failed). Nothing happens when the job moved on
-- to another attempt or its status does not change on worker_failed. Returns whether it failed.
CREATE OR REPLACE FUNCTION ty_hang_fail(p_job bigint, p_attempt integer, p_message text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    st text;
BEGIN
    SELECT status INTO st FROM jobs WHERE id = p_job AND attempt = p_attempt FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_changes(st, 'worker_failed') THEN
        RETURN false;
    END IF;
    PERFORM ty_job_fail(p_job, 'worker_failed', 'hang: ' || p_message);
    RETURN true;
END $$;
COMMENT ON FUNCTION ty_hang_fail(bigint, integer, text) IS 'Fails a hung job (past hang_timeout_s) with a message naming the hang.';
