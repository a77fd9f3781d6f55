-- Issue 12 (fault tolerance), restarts (docs/lifecycle.md "Restarts", docs/fault-tolerance.md).
-- A worker failure or a lost node no longer ends a job while it has failures left
-- (run_config.failure_config.max_failures, -1 unlimited): ty_job_fail fires `retry` (to
-- RESTARTING) instead, the surviving workers are stopped, and once the ended attempt has no live
-- worker the scheduler places the job again (`place` from RESTARTING), resuming from its latest
-- committed checkpoint. Each attempt records why it ended and which checkpoint it started from.
-- Draining a node preempts the jobs running on it (`preempted`, to RESTARTING): counted apart
-- from failures (jobs.preemptions) and capped (ty_preemptions_max), never counted as a failure.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

ALTER TABLE jobs ADD COLUMN failures integer NOT NULL DEFAULT 0 CHECK (failures >= 0);
COMMENT ON COLUMN jobs.failures IS 'Restarts caused by failures (worker failed, node lost), compared with run_config.failure_config.max_failures; user stops and preemptions never count.';

ALTER TABLE jobs ADD COLUMN preemptions integer NOT NULL DEFAULT 0 CHECK (preemptions >= 0);
COMMENT ON COLUMN jobs.preemptions IS 'Restarts caused by draining a node the job ran on; capped by ty_preemptions_max(), never counted in failures.';

ALTER TABLE attempts ADD COLUMN resumed_from bigint REFERENCES checkpoints (id) ON DELETE SET NULL;
ALTER TABLE attempts ADD COLUMN end_reason jsonb;
COMMENT ON COLUMN attempts.resumed_from IS 'The checkpoint its workers started from (TRAINYARD_CHECKPOINT_DIR): resume_from_checkpoint for the first attempt, the job''s latest usable committed checkpoint for a restart; NULL: started fresh.';
COMMENT ON COLUMN attempts.end_reason IS 'Why it ended early, first cause wins: {"event": worker_failed|node_lost|timeout|..., "error", "rank", "exit_code", "signal", "node_id", "restarted"}; NULL when it ran to its end or was stopped by a user.';
