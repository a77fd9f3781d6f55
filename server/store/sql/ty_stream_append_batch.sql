-- Appends rows to job streams in one statement. p_rows: a JSON array of objects {job_id, kind,
-- attempt, rank, stream (log rows: stdout, the default, or stderr), log_offset, log_bytes, body};
-- rows of a job that no longer exists, and log chunks already stored (same job, attempt, rank,
-- stream, log_offset), are skipped without using a seq. Returns
-- the number of rows appended. Each job's seqs are reserved with one UPDATE of its row.
CREATE OR REPLACE FUNCTION ty_stream_append_batch(p_rows jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    appended integer;
BEGIN
    WITH r AS (
        SELECT (e->>'job_id')::bigint AS job_id, e->>'kind' AS kind,
               (e->>'attempt')::integer AS attempt, (e->>'rank')::integer AS rank,
               coalesce(e->>'stream', 'stdout') AS stream,
               (e->>'log_offset')::bigint AS log_offset, (e->>'log_bytes')::integer AS log_bytes,
               e->'body' AS body, ord
        FROM jsonb_array_elements(p_rows) WITH ORDINALITY AS t(e, ord)
    ), fresh AS (
        SELECT r.*, row_number() OVER (PARTITION BY r.job_id ORDER BY r.ord) AS n
        FROM r
        WHERE r.kind <> 'log' OR NOT EXISTS (
            SELECT 1 FROM job_stream s
            WHERE s.job_id = r.job_id AND s.attempt = r.attempt AND s.rank = r.rank
              AND s.stream = r.stream AND s.log_offset = r.log_offset AND s.kind = 'log')
    ), counts AS (
        SELECT job_id, count(*) AS n FROM fresh GROUP BY job_id
    ), bumped AS (
        UPDATE jobs j SET stream_seq = j.stream_seq + c.n
        FROM counts c WHERE j.id = c.job_id
        RETURNING j.id, j.stream_seq - c.n AS base
    )
    INSERT INTO job_stream (job_id, seq, kind, attempt, rank, stream, log_offset, log_bytes, body)
    SELECT f.job_id, b.base + f.n, f.kind, f.attempt, f.rank, f.stream, f.log_offset, f.log_bytes,
           f.body
    FROM fresh f JOIN bumped b ON b.id = f.job_id
    ORDER BY f.job_id, f.n;
    GET DIAGNOSTICS appended = ROW_COUNT;
    RETURN appended;
END $$;
