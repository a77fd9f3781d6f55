-- Issue 26 (dashboard benchmark, docs/dashboard.md): a summary of each series in blocks of 16
-- consecutive reports (block = seq >> 4 of one job, attempt, rank and name), so that a chart's
-- band of a long series reads a block per 16 points instead of every report (a 125,000-point
-- series is 7,813 rows, not 125,000). Kept by the statement trigger report_blocks on reports
-- (server/store/sql/ty_report_blocks_add.sql), whatever writes the rows; store_metrics.c reads it
-- for a band without a step or time range when every series has at least 2 blocks per bucket.
CREATE TABLE report_blocks (
    job_id     bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    rank       integer NOT NULL,
    name       text NOT NULL,
    attempt    integer NOT NULL,
    block      bigint NOT NULL,
    count      bigint NOT NULL,
    seq_first  bigint NOT NULL,
    seq_last   bigint NOT NULL,
    start_at   timestamptz NOT NULL,
    end_at     timestamptz NOT NULL,
    step_first bigint,
    step_last  bigint,
    v_first    text NOT NULL,
    v_last     text NOT NULL,
    v_min      double precision,
    v_max      double precision,
    PRIMARY KEY (job_id, rank, name, attempt, block) -- a chart reads one rank (or all) in this order
);
COMMENT ON TABLE report_blocks IS 'Each series (job, name, rank, attempt) summed up per 16 consecutive reports (block = seq >> 4): what a chart''s band reads for a long series.';
COMMENT ON COLUMN report_blocks.job_id IS 'The job.';
COMMENT ON COLUMN report_blocks.name IS 'The reported name (a key of reports.metrics).';
COMMENT ON COLUMN report_blocks.rank IS 'Reporting rank.';
COMMENT ON COLUMN report_blocks.attempt IS 'Attempt of the reports.';
COMMENT ON COLUMN report_blocks.block IS 'seq >> 4 of the reports it sums up.';
COMMENT ON COLUMN report_blocks.count IS 'How many of the block''s reports carry the name.';
COMMENT ON COLUMN report_blocks.seq_first IS 'seq of its first report.';
COMMENT ON COLUMN report_blocks.seq_last IS 'seq of its last report.';
COMMENT ON COLUMN report_blocks.start_at IS 'reported_at of its first report.';
COMMENT ON COLUMN report_blocks.end_at IS 'reported_at of its last report.';
COMMENT ON COLUMN report_blocks.step_first IS 'step of its first report.';
COMMENT ON COLUMN report_blocks.step_last IS 'step of its last report.';
COMMENT ON COLUMN report_blocks.v_first IS 'Value of its first report as the API writes it (JSON text; null for a number that is not finite).';
COMMENT ON COLUMN report_blocks.v_last IS 'Value of its last report as the API writes it.';
COMMENT ON COLUMN report_blocks.v_min IS 'Least finite number among its values (NULL when none).';
COMMENT ON COLUMN report_blocks.v_max IS 'Greatest finite number among its values (NULL when none).';

-- The reports already stored, summed up as the trigger sums up new ones (functions are defined
-- after the migrations, so the one-off fill spells the values out).
INSERT INTO report_blocks
SELECT job_id, rank, name, attempt, seq >> 4, count(*), min(seq), max(seq),
       (array_agg(reported_at ORDER BY seq))[1], (array_agg(reported_at ORDER BY seq DESC))[1],
       (array_agg(step ORDER BY seq))[1], (array_agg(step ORDER BY seq DESC))[1],
       (array_agg(t ORDER BY seq))[1], (array_agg(t ORDER BY seq DESC))[1],
       min(v) FILTER (WHERE v NOT IN ('NaN', 'Infinity', '-Infinity')),
       max(v) FILTER (WHERE v NOT IN ('NaN', 'Infinity', '-Infinity'))
  FROM (SELECT r.job_id, k.key AS name, r.rank, r.attempt, r.seq, r.step, r.reported_at,
               CASE WHEN jsonb_typeof(k.value) = 'number' THEN k.value::double precision
                    ELSE 'NaN' END AS v,
               CASE WHEN jsonb_typeof(k.value) <> 'number' THEN k.value::text
                    ELSE k.value::double precision::text END AS t
          FROM reports r CROSS JOIN LATERAL jsonb_each(r.metrics) k) e
 GROUP BY job_id, rank, name, attempt, seq >> 4;
