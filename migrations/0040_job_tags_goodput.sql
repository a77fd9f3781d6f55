-- Issue 26: tags and notes on jobs, and the startup breakdown of each attempt (README, "Goodput
-- and the startup breakdown"). Schema only: the functions that read them are
-- server/store/sql/ty_attempt_startup.sql and ty_job_goodput.sql;
-- the first SDK contact is stamped by ty_progress_ingest.sql.

ALTER TABLE jobs ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN notes text NOT NULL DEFAULT '';
CREATE INDEX jobs_tags_idx ON jobs USING gin (tags);
COMMENT ON COLUMN jobs.tags IS 'Free labels to find the job by (GET /api/v1/jobs?tag=): set at submit (spec.tags) or later (PATCH /api/v1/jobs/{id}) by its owner or an admin.';
COMMENT ON COLUMN jobs.notes IS 'Free text about the run, set at submit (spec.notes) or later (PATCH /api/v1/jobs/{id}).';

ALTER TABLE workers ADD COLUMN sdk_init_at timestamptz;
COMMENT ON COLUMN workers.sdk_init_at IS 'When the worker''s SDK first reached its agent (its first progress heartbeat, or else its first report), on the server''s clock: the end of framework init.';
