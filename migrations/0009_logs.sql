-- Worker logs (docs/streams.md): log chunks sent by agents are stored as job_stream rows of kind
-- 'log' through ty_stream_append_batch (0007); this adds the per-job log cap.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

-- Log chunks are big bodies written once: lz4 compresses them several times faster than pglz.
-- (Measured: bench/log_throughput.py, docs/bench-streams.md.)
ALTER TABLE job_stream ALTER COLUMN body SET COMPRESSION lz4;

ALTER TABLE jobs ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN jobs.log_bytes IS 'Bytes of worker output the job''s stored log chunks cover (kept by ty_log_append_batch, for the log cap).';
