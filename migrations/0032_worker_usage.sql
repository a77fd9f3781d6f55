-- Issue 22: each worker's CPU and memory use, as its agent reads them from the worker's cgroup
-- (agent message `usage`, docs/agent-protocol.md): the last sample of each worker, kept after it
-- ended so that a finished worker shows its totals. Workers without a cgroup have no row.
-- Schema only: the function that stores a sample is server/store/sql/ty_usage_ingest.sql.

CREATE TABLE worker_usage (
    job_id            bigint NOT NULL,
    attempt           integer NOT NULL,
    rank              integer NOT NULL,
    cpu_usec          bigint NOT NULL,
    memory_bytes      bigint NOT NULL,
    memory_peak_bytes bigint NOT NULL,
    final             boolean NOT NULL,
    sampled_at        timestamptz NOT NULL,
    PRIMARY KEY (job_id, attempt, rank),
    FOREIGN KEY (job_id, attempt, rank) REFERENCES workers (job_id, attempt, rank)
        ON DELETE CASCADE
);
COMMENT ON TABLE worker_usage IS 'The last resource-use sample of each worker that runs or ran in a cgroup of its own (agent message usage).';
COMMENT ON COLUMN worker_usage.job_id IS 'The job.';
COMMENT ON COLUMN worker_usage.attempt IS 'The attempt.';
COMMENT ON COLUMN worker_usage.rank IS 'The worker''s global rank.';
COMMENT ON COLUMN worker_usage.cpu_usec IS 'CPU time of all the worker''s processes since it started (microseconds, user and system).';
COMMENT ON COLUMN worker_usage.memory_bytes IS 'Memory its cgroup charged at the sample (bytes, page cache included).';
COMMENT ON COLUMN worker_usage.memory_peak_bytes IS 'The most memory its cgroup was charged (bytes): the cgroup''s own peak where it keeps one, else the largest sample.';
COMMENT ON COLUMN worker_usage.final IS 'Whether this is the sample its agent took once it exited: its totals.';
COMMENT ON COLUMN worker_usage.sampled_at IS 'When the sample reached the server (on the server''s clock).';
