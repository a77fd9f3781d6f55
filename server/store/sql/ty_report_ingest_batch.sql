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
CREATE OR REPLACE FUNCTION ty_report_ingest_batch(p_reports jsonb)
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
