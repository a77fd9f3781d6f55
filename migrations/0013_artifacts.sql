-- Issue 11 (checkpoints): the artifact store. Each node holding a part of checkpoint k (its merged
-- agent directory, packed as one tar) uploads it to the server in chunks; the server keeps the
-- bytes content-addressed under --artifact-dir and the state here. A checkpoint's artifact is
-- complete only when every node of its location has a verified part: never half-written.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

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
