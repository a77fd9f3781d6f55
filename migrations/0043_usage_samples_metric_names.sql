-- Issue 26: each worker's resource use over time, for the dashboard's system charts and
-- GET /api/v1/jobs/{id}/usage, /nodes/{id}/usage. worker_usage (0032) keeps only the last sample;
-- this keeps one sample per worker about every 10 s (and its final one), written by
-- ty_usage_ingest (server/store/sql/ty_usage_ingest.sql). Schema only.

CREATE TABLE worker_usage_samples (
    job_id       bigint NOT NULL,
    attempt      integer NOT NULL,
    rank         integer NOT NULL,
    sampled_at   timestamptz NOT NULL,
    node_id      text NOT NULL,
    cpu_usec     bigint NOT NULL,
    memory_bytes bigint NOT NULL,
    PRIMARY KEY (job_id, attempt, rank, sampled_at),
    FOREIGN KEY (job_id, attempt, rank) REFERENCES workers (job_id, attempt, rank)
        ON DELETE CASCADE
);
CREATE INDEX worker_usage_samples_node_idx ON worker_usage_samples (node_id, sampled_at);
COMMENT ON TABLE worker_usage_samples IS 'Resource-use samples of each worker over time: about one per 10 s and its final one (agent message usage).';
COMMENT ON COLUMN worker_usage_samples.job_id IS 'The job.';
COMMENT ON COLUMN worker_usage_samples.attempt IS 'The attempt.';
COMMENT ON COLUMN worker_usage_samples.rank IS 'The worker''s global rank.';
COMMENT ON COLUMN worker_usage_samples.sampled_at IS 'When the sample reached the server (on the server''s clock).';
COMMENT ON COLUMN worker_usage_samples.node_id IS 'The node the worker ran on.';
COMMENT ON COLUMN worker_usage_samples.cpu_usec IS 'CPU time of all the worker''s processes since it started (microseconds).';
COMMENT ON COLUMN worker_usage_samples.memory_bytes IS 'Memory its cgroup charged at the sample (bytes).';

-- Issue 26 (dashboard benchmark): the names each job reported, so that reading a job's series
-- looks each name up in its reports (reports.metrics -> name) instead of expanding every report
-- with jsonb_each, the most of a chart's read. Kept by the statement trigger report_names on
-- reports (server/store/sql/ty_report_names_add.sql), whatever writes the rows.
CREATE TABLE report_names (
    job_id bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name   text NOT NULL,
    PRIMARY KEY (job_id, name)
);
COMMENT ON TABLE report_names IS 'Every key any report of the job carried (reports.metrics), once.';
COMMENT ON COLUMN report_names.job_id IS 'The job.';
COMMENT ON COLUMN report_names.name IS 'A reported name (a key of reports.metrics).';
INSERT INTO report_names (job_id, name)
SELECT DISTINCT r.job_id, k FROM reports r CROSS JOIN LATERAL jsonb_object_keys(r.metrics) k;
