-- Applies p_event to job p_job: the one writer of jobs.status. Locks the job, looks the change
-- up in job_transitions and raises SQLSTATE TY001 when the table does not have it (the caller's
-- transaction is rolled back: a bug, never a user's mistake). A change to another status sets
-- status and status_message (p_message), started_at on the first RUNNING, finished_at on a
-- terminal status, moves the current attempt into RUNNING and terminal statuses (terminal: its
-- finished_at and the job's error too; an attempt that has already ended is left alone, so the
-- attempt a restart ended keeps its FAILED and its error when the job is then stopped) and
-- records a job_events row. An event the status accepts and ignores (to = from) changes nothing.
-- delete removes the job (with its events, attempts, metrics, checkpoints by cascade). Returns
-- the status after the event (NULL after delete).
CREATE OR REPLACE FUNCTION ty_job_transition(p_job bigint, p_event text, p_message text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    t job_transitions;
    fin boolean;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'illegal job transition: no job % for event %', p_job, p_event
            USING ERRCODE = 'TY001';
    END IF;
    SELECT * INTO t FROM job_transitions WHERE from_status = j.status AND event = p_event;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'illegal job transition: job % is %, event % is not allowed there',
                        p_job, j.status, p_event
            USING ERRCODE = 'TY001';
    END IF;
    IF t.to_status IS NULL THEN
        DELETE FROM jobs WHERE id = p_job;
        RETURN NULL;
    END IF;
    IF t.to_status = j.status THEN
        RETURN j.status;
    END IF;
    SELECT terminal INTO fin FROM job_statuses WHERE name = t.to_status;
    UPDATE jobs SET status = t.to_status, status_message = p_message,
                    started_at = CASE WHEN t.to_status = 'RUNNING' THEN coalesce(started_at, now())
                                      ELSE started_at END,
                    finished_at = CASE WHEN fin THEN now() ELSE finished_at END
     WHERE id = p_job;
    IF fin THEN
        UPDATE attempts SET status = t.to_status, finished_at = now(), error = j.error
         WHERE job_id = p_job AND attempt = j.attempt
           AND status NOT IN (SELECT name FROM job_statuses WHERE terminal);
    ELSIF t.to_status = 'RUNNING' THEN
        UPDATE attempts SET status = t.to_status WHERE job_id = p_job AND attempt = j.attempt;
    END IF;
    INSERT INTO job_events (job_id, attempt, status, message)
    VALUES (p_job, j.attempt, t.to_status, p_message);
    RETURN t.to_status;
END $$;
COMMENT ON FUNCTION ty_job_transition(bigint, text, text) IS 'The one writer of jobs.status: applies a legal event (job_transitions) and records it; raises TY001 for an illegal one.';
