-- Issue 25: RunConfig(stop={"metric": value}) for a plain fit() (docs/python-api.md), decided on
-- the server as reports arrive: the job spec's run_config.stop holds the criteria, and the
-- leader's control thread reads each rank-0 report of such a job once, after this cursor, as it
-- does a sweep trial's (migration 0037). Schema only: the functions are in server/store/sql/.

ALTER TABLE jobs ADD COLUMN stop_seen_attempt integer NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stop_seen_seq bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN jobs.stop_seen_attempt IS 'With stop_seen_seq: the last rank-0 report the stopping criteria (spec run_config.stop) were checked against.';
COMMENT ON COLUMN jobs.stop_seen_seq IS 'See stop_seen_attempt.';
CREATE INDEX jobs_stop_running_idx ON jobs (id)
    WHERE status = 'RUNNING' AND sweep_id IS NULL AND spec #> '{run_config,stop}' IS NOT NULL;
