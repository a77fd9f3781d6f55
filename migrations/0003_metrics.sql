-- Reports (trainyard.report / ty_report, relayed by the agents): one row per report, beside the
-- one row per number already kept in `metrics`. The report row is what makes a resent report a
-- no-op even when it carries no number, what records the checkpoint directory a rank passed (on
-- its node), and what checkpoint registration counts: round k is complete once every rank of the
-- attempt has a report with seq k (DESIGN.md section 4).

CREATE TABLE reports (
    job_id         bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt        integer NOT NULL,
    rank           integer NOT NULL,
    seq            bigint NOT NULL CHECK (seq >= 1),
    step           bigint,
    checkpoint_dir text,
    node_id        text NOT NULL REFERENCES nodes (id),
    reported_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, attempt, rank, seq)
);
CREATE INDEX reports_round_idx ON reports (job_id, attempt, seq);
COMMENT ON TABLE reports IS 'Every report a worker made, once (resent reports are ignored by the key).';
COMMENT ON COLUMN reports.job_id IS 'The job.';
COMMENT ON COLUMN reports.attempt IS 'The attempt of the reporting worker.';
COMMENT ON COLUMN reports.rank IS 'Reporting rank.';
COMMENT ON COLUMN reports.seq IS 'k: the rank''s report number within the attempt (1, 2, ...); the k-th reports of all ranks form round k.';
COMMENT ON COLUMN reports.step IS 'Training step the worker attached, if any.';
COMMENT ON COLUMN reports.checkpoint_dir IS 'Directory holding this rank''s part of checkpoint k, on node_id (agent staging); NULL when the report carried no checkpoint.';
COMMENT ON COLUMN reports.node_id IS 'Node whose agent relayed the report (where checkpoint_dir lives).';
COMMENT ON COLUMN reports.reported_at IS 'When the worker reported (the agent''s clock).';
COMMENT ON COLUMN reports.received_at IS 'When the server committed it.';

-- jobs.last_metrics (the job's result.metrics) holds rank 0's newest report; these say which one,
-- so that a late or resent older report never replaces a newer one.
ALTER TABLE jobs ADD COLUMN last_metrics_attempt integer;
ALTER TABLE jobs ADD COLUMN last_metrics_seq bigint;
COMMENT ON COLUMN jobs.last_metrics_attempt IS 'Attempt of the rank 0 report held in last_metrics (NULL before any).';
COMMENT ON COLUMN jobs.last_metrics_seq IS 'seq of the rank 0 report held in last_metrics (NULL before any); newer = higher (attempt, seq).';
