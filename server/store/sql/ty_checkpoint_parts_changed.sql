CREATE OR REPLACE FUNCTION ty_checkpoint_parts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ty_checkpoint_artifact_refresh(NEW.job_id, NEW.attempt, NEW.idx);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_checkpoint_parts_changed() IS 'Trigger: a part changed, so its checkpoint''s artifact state may have.';
CREATE OR REPLACE TRIGGER checkpoint_parts_changed AFTER INSERT OR UPDATE OF state ON checkpoint_parts
    FOR EACH ROW EXECUTE FUNCTION ty_checkpoint_parts_changed();
