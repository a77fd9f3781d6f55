-- A report's numbers live in its `reports` row (reports.metrics, one jsonb object), not in one
-- `metrics` row per number: ingesting a report of 100 numbers writes one row and its index
-- entries instead of 100 rows and 200 index entries (docs/bench-streams.md, docs/decisions.md).
-- The old rows are moved into their reports here; `metrics` becomes a read-only view with the
-- old columns, one row per number, for SQL users. Superseded attempts' numbers stay where they
-- were (reports of older attempts); the API still marks them.

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

-- A number as the API writes it: NaN for what is not a finite number (written out as null).
CREATE FUNCTION ty_metric_value(v jsonb) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'number' THEN v::double precision
                ELSE 'NaN'::double precision END
$$;
COMMENT ON FUNCTION ty_metric_value(jsonb) IS 'A reported number as float8; NaN when the jsonb value is not a number (written out as null by the API).';

CREATE VIEW metrics AS
SELECT r.job_id, r.attempt, r.rank, r.seq, e.key AS name, r.step,
       ty_metric_value(e.value) AS value, r.reported_at
  FROM reports r CROSS JOIN LATERAL jsonb_each(r.metrics) e;
COMMENT ON VIEW metrics IS 'Numbers each worker reported, one row per number (read-only; stored inline in reports.metrics since migration 0022).';

-- Ingests a batch of reports (server/control/control_report.c). p_reports: a JSON array of
-- objects {i, job_id, attempt, rank, seq, step, checkpoint_dir, node_id, time, metrics}
-- (i: the caller's index; metrics: an object of numbers). For each report of a worker that runs
-- in that attempt on that node: one reports row holding its numbers, and one `report` row
-- appended to the job's stream (ty_stream_append_batch); a report already stored (a resend, or
-- twice in the batch) changes nothing. jobs.last_metrics takes each job's newest rank 0 report
-- (by attempt, then seq) when it is newer than the one held. Returns one row per input element:
-- whether its worker is known, whether it was stored now (fresh), and whether its round (k of
-- every rank) is now complete with a checkpoint_dir among its reports, so that the caller
-- registers checkpoint k. A time PostgreSQL refuses fails the whole call (SQLSTATE class 22):
-- the caller then retries the reports one by one.
DROP FUNCTION ty_report_ingest_batch(jsonb);
CREATE FUNCTION ty_report_ingest_batch(p_reports jsonb)
RETURNS TABLE (i integer, known boolean, fresh boolean, round_ready boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    res jsonb;
    stream jsonb;
BEGIN
    WITH inp AS (
        SELECT x.*, EXISTS (SELECT 1 FROM workers w
                            WHERE w.job_id = x.job_id AND w.attempt = x.attempt
                              AND w.rank = x.rank AND w.node_id = x.node_id) AS known
        FROM jsonb_to_recordset(p_reports) AS x(i integer, job_id bigint, attempt integer,
                                                rank integer, seq bigint, step bigint,
                                                checkpoint_dir text, node_id text,
                                                "time" timestamptz, metrics jsonb)
    ), uniq AS (
        SELECT DISTINCT ON (job_id, attempt, rank, seq) * FROM inp WHERE known
        ORDER BY job_id, attempt, rank, seq, i
    ), r AS (
        INSERT INTO reports (job_id, attempt, rank, seq, step, checkpoint_dir, node_id,
                             reported_at, metrics)
        SELECT job_id, attempt, rank, seq, step, checkpoint_dir, node_id, "time",
               coalesce(metrics, '{}'::jsonb)
          FROM uniq
        ON CONFLICT DO NOTHING
        RETURNING job_id, attempt, rank, seq
    ), rw AS (
        SELECT u.* FROM uniq u JOIN r USING (job_id, attempt, rank, seq)
    ), best AS (
        SELECT DISTINCT ON (job_id) * FROM rw WHERE rank = 0
        ORDER BY job_id, attempt DESC, seq DESC
    ), j AS (
        UPDATE jobs SET last_metrics = CASE WHEN b.step IS NULL THEN b.metrics
                                            ELSE b.metrics || jsonb_build_object('step', b.step)
                                       END,
                        last_metrics_attempt = b.attempt, last_metrics_seq = b.seq
        FROM best b
        WHERE jobs.id = b.job_id
          AND (b.attempt, b.seq) > (coalesce(jobs.last_metrics_attempt, -1),
                                    coalesce(jobs.last_metrics_seq, -1))
        RETURNING 1
    )
    SELECT jsonb_agg(jsonb_build_object('i', inp.i, 'known', inp.known,
                                        'fresh', rw.i IS NOT NULL) ORDER BY inp.i),
           coalesce(jsonb_agg(jsonb_build_object(
                        'job_id', rw.job_id, 'kind', 'report', 'attempt', rw.attempt,
                        'rank', rw.rank,
                        'body', jsonb_build_object('rank', rw.rank, 'attempt', rw.attempt,
                                                   'k', rw.seq, 'step', rw.step,
                                                   'metrics', rw.metrics, 'time', rw."time",
                                                   'checkpoint', rw.checkpoint_dir IS NOT NULL)
                    ) ORDER BY inp.i) FILTER (WHERE rw.i IS NOT NULL), '[]'::jsonb)
    INTO res, stream
    FROM inp
    LEFT JOIN rw ON rw.i = inp.i;

    IF jsonb_array_length(stream) > 0 THEN
        PERFORM ty_stream_append_batch(stream);
    END IF;

    RETURN QUERY
    SELECT o.i, o.known, o.fresh,
           o.fresh AND EXISTS (
               SELECT 1 FROM reports x
               WHERE x.job_id = s.job_id AND x.attempt = s.attempt AND x.seq = s.seq
                 AND x.checkpoint_dir IS NOT NULL)
           AND (SELECT count(*) FROM reports x
                WHERE x.job_id = s.job_id AND x.attempt = s.attempt AND x.seq = s.seq)
               >= (SELECT a.world_size FROM attempts a
                   WHERE a.job_id = s.job_id AND a.attempt = s.attempt)
    FROM jsonb_to_recordset(res) AS o(i integer, known boolean, fresh boolean)
    JOIN jsonb_to_recordset(p_reports) AS s(i integer, job_id bigint, attempt integer,
                                            seq bigint) ON s.i = o.i
    ORDER BY o.i;
END $$;
