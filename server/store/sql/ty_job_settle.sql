-- Ends a job whose current attempt has no live worker left. A RESTARTING job is not ended: its
-- attempt is (FAILED, or STOPPED after a preemption or a resize; finished_at, an event), once,
-- and the job waits for the scheduler's `place`; NULL is returned. Otherwise the job takes the
-- event its status allows: failed (it has an error), stopped or succeeded. Returns the final
-- status, or NULL when the job goes on (a live worker left, restarting, not yet placed, or
-- finished).
CREATE OR REPLACE FUNCTION ty_job_settle(p_job bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    ev text;
    a attempts;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM workers WHERE job_id = p_job AND attempt = j.attempt
                  AND status IN ('PLACED', 'RUNNING')) THEN
        RETURN NULL;
    END IF;
    IF j.status = 'RESTARTING' THEN
        UPDATE attempts SET status = CASE WHEN end_reason->>'event' IN ('preempted', 'resize')
                                          THEN 'STOPPED' ELSE 'FAILED' END,
                            finished_at = now()
         WHERE job_id = p_job AND attempt = j.attempt
           AND status NOT IN (SELECT name FROM job_statuses WHERE terminal)
        RETURNING * INTO a;
        IF FOUND THEN
            INSERT INTO job_events (job_id, attempt, status, message)
            VALUES (p_job, j.attempt, j.status,
                    format('attempt %s ended (%s): its workers are gone; waiting to be placed again',
                           j.attempt, coalesce(a.error, a.end_reason->>'error', 'failed')));
        END IF;
        RETURN NULL;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM job_transitions
                    WHERE from_status = j.status AND event IN ('succeeded', 'stopped', 'failed')) THEN
        RETURN NULL;
    END IF;
    ev := CASE WHEN j.error IS NOT NULL THEN 'failed'
               WHEN ty_job_allows(j.status, 'stopped') THEN 'stopped'
               ELSE 'succeeded' END;
    RETURN ty_job_transition(p_job, ev,
        CASE ev WHEN 'succeeded' THEN 'all workers exited 0'
                WHEN 'failed' THEN j.error
                ELSE coalesce(j.status_message, 'stopped') END);
END $$;
COMMENT ON FUNCTION ty_job_settle(bigint) IS 'Finishes a job once no worker of its attempt is alive.';
