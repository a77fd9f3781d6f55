-- Issue 26: every log chunk says which of its worker's output streams it holds (stdout or
-- stderr; vocab.h TY_LOG_STREAM_MAP). Agents write the two streams to two files, each with
-- offsets of its own, so a chunk is known by its job, attempt, rank, stream and offset. Rows
-- stored before this migration held both streams as one and read as stdout.
ALTER TABLE job_stream ADD COLUMN stream text NOT NULL DEFAULT 'stdout'
    CHECK (stream IN ('stdout', 'stderr'));
COMMENT ON COLUMN job_stream.stream IS 'kind log: the worker''s output stream the chunk holds, stdout or stderr (log_offset counts bytes of that stream); stdout on every other row.';
DROP INDEX job_stream_log_idx;
CREATE UNIQUE INDEX job_stream_log_idx ON job_stream (job_id, attempt, rank, stream, log_offset)
    WHERE kind = 'log';
COMMENT ON COLUMN job_stream.log_offset IS 'kind log: byte offset, in the rank''s output stream (column stream) of that attempt, of the chunk''s first byte (a resent chunk has the same offset and is ignored).';

-- Issue 26: each worker's resource-use sample that worker_usage_samples keeps is also a row of
-- kind usage in its job's stream, so that /stream subscribers (the dashboard's System tab) get
-- the series live. ty_usage_ingest writes them and removes those over an hour old (the series
-- itself stays in worker_usage_samples), through this index.
ALTER TABLE job_stream DROP CONSTRAINT job_stream_kind_check;
ALTER TABLE job_stream ADD CONSTRAINT job_stream_kind_check
    CHECK (kind IN ('event', 'worker', 'report', 'log', 'log_dropped', 'checkpoint', 'usage'));
CREATE INDEX job_stream_usage_idx ON job_stream (job_id, at) WHERE kind = 'usage';
COMMENT ON COLUMN job_stream.kind IS 'event (a job_events row), worker (a worker''s status changed), report (one report of one rank, with its numbers), log (a chunk of one rank''s output), log_dropped (the log cap removed older chunks), checkpoint (registered or changed), usage (a resource-use sample of one worker, kept for an hour).';
