-- Issue 11 (checkpoints): the artifact store. Each node holding a part of checkpoint k (its merged
-- agent directory, packed as one tar) uploads it to the server in chunks; the server keeps the
-- bytes content-addressed under --artifact-dir and the state here. A checkpoint's artifact is
-- complete only when every node of its location has a verified part: never half-written.

CREATE TABLE checkpoint_parts (
    job_id         bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt        integer NOT NULL,
    idx            integer NOT NULL,
    node_id        text NOT NULL,
    state          text NOT NULL DEFAULT 'uploading'
                   CHECK (state IN ('uploading', 'complete', 'deleted')),
    received_bytes bigint NOT NULL DEFAULT 0 CHECK (received_bytes >= 0),
    size_bytes     bigint CHECK (size_bytes >= 0),
    file_count     integer CHECK (file_count >= 0),
    sha256         text,
    location       text,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt, idx, node_id)
);
COMMENT ON TABLE checkpoint_parts IS 'One node''s part of checkpoint idx of an attempt (its merged directory as a tar), uploaded to the artifact store. Keyed like the checkpoint, not by its id: an agent may upload before the last rank reported.';
COMMENT ON COLUMN checkpoint_parts.job_id IS 'The job.';
COMMENT ON COLUMN checkpoint_parts.attempt IS 'The attempt that wrote it.';
COMMENT ON COLUMN checkpoint_parts.idx IS 'k: the report number within the attempt.';
COMMENT ON COLUMN checkpoint_parts.node_id IS 'The node whose agent-owned directory this part is.';
COMMENT ON COLUMN checkpoint_parts.state IS 'uploading: bytes arriving; complete: stored and its SHA-256 verified by the server; deleted: removed by retention.';
COMMENT ON COLUMN checkpoint_parts.received_bytes IS 'Bytes the server holds so far (progress; the staged file is the truth on resume).';
COMMENT ON COLUMN checkpoint_parts.size_bytes IS 'Size of the part''s tar, set when complete.';
COMMENT ON COLUMN checkpoint_parts.file_count IS 'Regular files in the part, as the agent declared them.';
COMMENT ON COLUMN checkpoint_parts.sha256 IS 'SHA-256 (hex) of the part''s tar, verified by the server; also its content address.';
COMMENT ON COLUMN checkpoint_parts.location IS 'Where the artifact store keeps it (backend key, e.g. sha256/ab/ab12...).';
COMMENT ON COLUMN checkpoint_parts.updated_at IS 'Last change (a chunk, completion, deletion).';

ALTER TABLE checkpoints ADD COLUMN artifact_state text
    CHECK (artifact_state IN ('uploading', 'complete', 'deleted'));
ALTER TABLE checkpoints ADD COLUMN file_count integer CHECK (file_count >= 0);
COMMENT ON COLUMN checkpoints.artifact_state IS 'The artifact store''s copy: NULL none started, uploading, complete (every node of location has a complete part), deleted.';
COMMENT ON COLUMN checkpoints.file_count IS 'Regular files over its complete parts (set with artifact_state complete).';
COMMENT ON COLUMN checkpoints.sha256 IS 'When the artifact is complete: SHA-256 (hex) of its parts'' SHA-256s in node order, joined by newlines.';

-- Recomputes checkpoint (job, attempt, idx)'s artifact state from its parts: complete when every
-- node of its location has a complete part (then file_count and sha256 are set), uploading when
-- any part exists, unchanged otherwise; a deleted checkpoint stays deleted. Called by the
-- triggers below after their row was written. The advisory lock (held to commit) serialises the
-- two writers that decide it, a part's completion and the checkpoint's registration: the second
-- waits for the first to commit, and its UPDATE (a new statement of a VOLATILE function, so a new
-- snapshot under READ COMMITTED) then sees the first's row. Without it each could miss the other
-- and a fully uploaded checkpoint stay 'uploading'.
CREATE FUNCTION ty_checkpoint_artifact_refresh(j bigint, a integer, k integer) RETURNS void
LANGUAGE sql VOLATILE AS $$
    SELECT pg_advisory_xact_lock(11, hashtext(j::text || '/' || a::text || '/' || k::text));
    WITH c AS (SELECT id, coalesce(location::jsonb, '[]'::jsonb) AS loc FROM checkpoints
                WHERE job_id = j AND attempt = a AND idx = k
                  AND artifact_state IS DISTINCT FROM 'deleted'),
         n AS (SELECT DISTINCT e->>'node_id' AS node_id FROM c, jsonb_array_elements(c.loc) e),
         p AS (SELECT n.node_id, cp.state, cp.file_count, cp.sha256 FROM n
                 LEFT JOIN checkpoint_parts cp ON cp.job_id = j AND cp.attempt = a
                       AND cp.idx = k AND cp.node_id = n.node_id),
         s AS (SELECT count(*) > 0 AND bool_and(state = 'complete') AS done,
                      bool_or(state IS NOT NULL) AS started,
                      sum(file_count) AS files,
                      encode(sha256(convert_to(string_agg(sha256, E'\n' ORDER BY node_id),
                                               'UTF8')), 'hex') AS sum
                 FROM p)
    UPDATE checkpoints ck
       SET artifact_state = CASE WHEN s.done THEN 'complete' ELSE 'uploading' END,
           file_count = CASE WHEN s.done THEN s.files END,
           sha256 = CASE WHEN s.done THEN s.sum END
      FROM c, s
     WHERE ck.id = c.id AND (s.done OR coalesce(s.started, false))
$$;
COMMENT ON FUNCTION ty_checkpoint_artifact_refresh(bigint, integer, integer) IS 'Sets a checkpoint''s artifact_state (and file_count, sha256 when complete) from its parts.';

CREATE FUNCTION ty_checkpoint_parts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ty_checkpoint_artifact_refresh(NEW.job_id, NEW.attempt, NEW.idx);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_checkpoint_parts_changed() IS 'Trigger: a part changed, so its checkpoint''s artifact state may have.';
CREATE TRIGGER checkpoint_parts_changed AFTER INSERT OR UPDATE OF state ON checkpoint_parts
    FOR EACH ROW EXECUTE FUNCTION ty_checkpoint_parts_changed();

CREATE FUNCTION ty_checkpoint_location_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ty_checkpoint_artifact_refresh(NEW.job_id, NEW.attempt, NEW.idx);
    RETURN NULL;
END $$;
COMMENT ON FUNCTION ty_checkpoint_location_changed() IS 'Trigger: a checkpoint was registered or its location grew, so parts uploaded earlier may now complete it (or no longer do).';
CREATE TRIGGER checkpoint_location_changed AFTER INSERT OR UPDATE OF location ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION ty_checkpoint_location_changed();

-- The job's result names its best checkpoint too: by run_config.checkpoint_config.checkpoint_score_attribute
-- (a number among rank 0's metrics) in checkpoint_score_order (max by default), the newer on a
-- tie; null without an attribute or when no checkpoint has it. Otherwise as in 0011.
CREATE OR REPLACE FUNCTION ty_job_json(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'name', j.name, 'owner', j.owner, 'status', j.status,
        'status_message', j.status_message, 'priority', j.priority, 'attempt', j.attempt,
        'spec', ty_spec_public(j.spec), 'created_at', ty_ts(j.created_at),
        'started_at', ty_ts(j.started_at), 'finished_at', ty_ts(j.finished_at),
        'result', jsonb_build_object('metrics', j.last_metrics, 'error', j.error,
            'latest_checkpoint', (SELECT jsonb_build_object('id', c.id, 'step', c.step, 'metrics', c.metrics)
                                    FROM checkpoints c WHERE c.job_id = j.id AND c.status = 'COMMITTED'
                                    ORDER BY c.attempt DESC, c.idx DESC LIMIT 1),
            'best_checkpoint', (SELECT jsonb_build_object('id', c.id, 'step', c.step, 'metrics', c.metrics)
                                  FROM checkpoints c,
                                       LATERAL (SELECT j.spec #>> '{run_config,checkpoint_config,checkpoint_score_attribute}' AS attr,
                                                       coalesce(j.spec #>> '{run_config,checkpoint_config,checkpoint_score_order}', 'max') AS ord) s
                                 WHERE c.job_id = j.id AND c.status = 'COMMITTED' AND s.attr IS NOT NULL
                                   AND jsonb_typeof(c.metrics -> s.attr) = 'number'
                                 ORDER BY CASE WHEN s.ord = 'min' THEN (c.metrics ->> s.attr)::float8
                                               ELSE -(c.metrics ->> s.attr)::float8 END,
                                          c.attempt DESC, c.idx DESC
                                 LIMIT 1)))
$$;
COMMENT ON FUNCTION ty_job_json(jobs) IS 'The job object of the REST API (GET /api/v1/jobs/{id}); secret_env values redacted; result.best_checkpoint by checkpoint_config (migration 0013).';
