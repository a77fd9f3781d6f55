-- The port search of ty_place() looks only at live attempts; without an index it scanned the
-- whole attempt history (2.2 ms at 10,000 attempts, docs/bench-launch.md).
CREATE INDEX attempts_active_idx ON attempts (job_id, attempt)
    WHERE status IN ('STARTING', 'RUNNING', 'STOPPING');
COMMENT ON INDEX attempts_active_idx IS 'Live attempts, for the MASTER_PORT search when placing a job.';
