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
