-- Job events (every status change, and the warnings recorded beside them) → the job's stream and
-- the cluster's.
CREATE OR REPLACE FUNCTION ty_stream_job_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    j jobs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = NEW.job_id;
    PERFORM ty_stream_append(NEW.job_id, 'event', NEW.attempt, NULL,
                             jsonb_build_object('status', NEW.status, 'message', NEW.message,
                                                'attempt', NEW.attempt, 'time', NEW.at));
    INSERT INTO cluster_stream (kind, job_id, body)
    VALUES ('job', NEW.job_id,
            jsonb_build_object('id', NEW.job_id, 'name', j.name, 'owner', j.owner,
                               'status', NEW.status, 'message', NEW.message,
                               'attempt', NEW.attempt, 'time', NEW.at));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER job_events_stream AFTER INSERT ON job_events
    FOR EACH ROW EXECUTE FUNCTION ty_stream_job_event();
