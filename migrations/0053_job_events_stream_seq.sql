-- Issue 27 (submissions): a job event may carry its seq in its job's stream, taken by whoever
-- inserted it. A submission inserts the job with stream_seq 1 and its submit event with seq 1, so
-- the job-event stream trigger (server/store/sql/ty_stream_job_event.sql) writes the event's
-- stream rows without updating the job row the same statement has just inserted: inserted in
-- batches, a third of those updates found no room on the row's page and wrote an entry into every
-- index of jobs, and the update alone was a third of PostgreSQL's CPU per submitted job
-- (docs/benchmarks.md, REST API).
ALTER TABLE job_events ADD COLUMN stream_seq bigint;
COMMENT ON COLUMN job_events.stream_seq IS 'The event''s seq in its job''s stream (job_stream.seq) when its inserter took it (a submitted job''s first event: 1, with jobs.stream_seq 1); NULL: the stream trigger takes the job''s next.';
