-- A report's numbers live in its `reports` row (reports.metrics, one jsonb object), not in one
-- `metrics` row per number: ingesting a report of 100 numbers writes one row and its index
-- entries instead of 100 rows and 200 index entries (docs/bench-streams.md, docs/decisions.md).
-- The old rows are moved into their reports here; `metrics` becomes a read-only view with the
-- old columns, one row per number, for SQL users. Superseded attempts' numbers stay where they
-- were (reports of older attempts); the API still marks them.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

ALTER TABLE reports ADD COLUMN metrics jsonb NOT NULL DEFAULT '{}'
    CHECK (jsonb_typeof(metrics) = 'object');
COMMENT ON COLUMN reports.metrics IS 'The report''s numbers, {"name": number, ...}, as the worker sent them (non-numbers dropped by the server); {} when none.';

-- Numbers written by SQL (not by a worker) may have no report row: they get one without a node
-- (rows with a seq below 1, which no worker sends and reports refuse, are dropped).
ALTER TABLE reports ALTER COLUMN node_id DROP NOT NULL;
COMMENT ON COLUMN reports.node_id IS 'Node whose agent relayed the report (where checkpoint_dir lives); NULL only for rows migration 0022 made from metrics rows that had no report (written by SQL, not relayed by an agent).';

UPDATE reports r SET metrics = m.obj
  FROM (SELECT job_id, attempt, rank, seq, jsonb_object_agg(name, value) AS obj
          FROM metrics GROUP BY job_id, attempt, rank, seq) m
 WHERE r.job_id = m.job_id AND r.attempt = m.attempt AND r.rank = m.rank AND r.seq = m.seq;

INSERT INTO reports (job_id, attempt, rank, seq, step, node_id, reported_at, metrics)
SELECT m.job_id, m.attempt, m.rank, m.seq, max(m.step), NULL, min(m.reported_at),
       jsonb_object_agg(m.name, m.value)
  FROM metrics m
 WHERE m.seq >= 1
   AND NOT EXISTS (SELECT 1 FROM reports r
                    WHERE r.job_id = m.job_id AND r.attempt = m.attempt AND r.rank = m.rank
                      AND r.seq = m.seq)
 GROUP BY m.job_id, m.attempt, m.rank, m.seq;

DROP TABLE metrics;

-- Reading one series of a long job: the job's reports of one rank in time order.
CREATE INDEX reports_series_idx ON reports (job_id, rank, reported_at);
