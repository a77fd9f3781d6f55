CREATE OR REPLACE FUNCTION ty_checkpoint_location_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ty_checkpoint_artifact_refresh(NEW.job_id, NEW.attempt, NEW.idx);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_checkpoint_location_changed() IS 'Trigger: a checkpoint was registered or its location grew, so parts uploaded earlier may now complete it (or no longer do).';
CREATE OR REPLACE TRIGGER checkpoint_location_changed AFTER INSERT OR UPDATE OF location ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION ty_checkpoint_location_changed();
