-- Job events (every status change, and the warnings recorded beside them) → the job's stream and
-- the cluster's. One statement (the job's next seq, as ty_stream_append takes it, and both stream
-- rows): it runs in every submission's transaction, where each statement of a trigger costs its
-- own executor start-up (docs/decisions.md,
-- "Submissions: SQL functions …").
CREATE OR REPLACE FUNCTION ty_stream_job_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH j AS (
        UPDATE jobs SET stream_seq = stream_seq + 1 WHERE id = NEW.job_id
        RETURNING id, stream_seq, name, owner
    ), s AS (
        INSERT INTO job_stream (job_id, seq, kind, attempt, body)
        SELECT j.id, j.stream_seq, 'event', NEW.attempt,
               jsonb_build_object('status', NEW.status, 'message', NEW.message,
                                  'attempt', NEW.attempt, 'time', NEW.at)
          FROM j
    )
    INSERT INTO cluster_stream (kind, job_id, body)
    SELECT 'job', NEW.job_id,
           jsonb_build_object('id', NEW.job_id, 'name', j.name, 'owner', j.owner,
                              'status', NEW.status, 'message', NEW.message,
                              'attempt', NEW.attempt, 'time', NEW.at)
      FROM j;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER job_events_stream AFTER INSERT ON job_events
    FOR EACH ROW EXECUTE FUNCTION ty_stream_job_event();
