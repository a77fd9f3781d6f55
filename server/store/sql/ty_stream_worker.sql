-- Workers: placed, started, exited, lost.
CREATE OR REPLACE FUNCTION ty_stream_worker() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status IS NOT DISTINCT FROM NEW.status
       AND OLD.pid IS NOT DISTINCT FROM NEW.pid THEN
        RETURN NULL;
    END IF;
    PERFORM ty_stream_append(NEW.job_id, 'worker', NEW.attempt, NEW.rank,
                             jsonb_build_object('rank', NEW.rank, 'attempt', NEW.attempt,
                                                'node_id', NEW.node_id, 'status', NEW.status,
                                                'pid', NEW.pid, 'gpus', to_jsonb(NEW.gpus),
                                                'exit_code', NEW.exit_code,
                                                'signal', NEW.signal));
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER workers_stream AFTER INSERT OR UPDATE ON workers
    FOR EACH ROW EXECUTE FUNCTION ty_stream_worker();
