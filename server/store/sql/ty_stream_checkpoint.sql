-- Checkpoints: registered, and every change of status.
CREATE OR REPLACE FUNCTION ty_stream_checkpoint() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status IS NOT DISTINCT FROM NEW.status
       AND OLD.size_bytes IS NOT DISTINCT FROM NEW.size_bytes THEN
        RETURN NULL;
    END IF;
    PERFORM ty_stream_append(NEW.job_id, 'checkpoint', NEW.attempt, NULL,
                             jsonb_build_object('id', NEW.id, 'attempt', NEW.attempt,
                                                'index', NEW.idx, 'step', NEW.step,
                                                'metrics', NEW.metrics, 'status', NEW.status,
                                                'size_bytes', NEW.size_bytes));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER checkpoints_stream AFTER INSERT OR UPDATE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION ty_stream_checkpoint();
