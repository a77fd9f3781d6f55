-- Appends a batch of log chunks. p_rows: a JSON array of {job_id, node_id, attempt, rank, stream,
-- log_offset, log_bytes, dropped, body} (body: {rank, attempt, stream, offset, bytes, lines}). A
-- chunk of a worker that node_id does not run (or of a deleted job), already stored, older than a
-- chunk of its rank's stream already stored (a resend of one the cap removed: agents send each
-- stream's chunks in offset order), or repeated in the batch, is skipped; one announcing `dropped` > 0 bytes skipped by its
-- agent is preceded by a log_dropped row. Then every job whose log passes p_cap bytes (p_cap > 0)
-- loses its oldest chunks down to 90 % of the cap (its newest chunk always stays, even when it
-- alone is over the cap), and a log_dropped row says how many bytes.
-- Returns the lines and bytes appended and the bytes removed by the cap.
CREATE OR REPLACE FUNCTION ty_log_append_batch(p_rows jsonb, p_cap bigint,
                                    OUT lines bigint, OUT bytes bigint, OUT dropped bigint)
LANGUAGE plpgsql AS $$
DECLARE
    fresh jsonb;
    j record;
    r record;
    freed bigint;
    last_seq bigint;
BEGIN
    WITH r AS (
        SELECT e, ord, (e->>'job_id')::bigint AS job_id, (e->>'attempt')::integer AS attempt,
               (e->>'rank')::integer AS rank, coalesce(e->>'stream', 'stdout') AS stream,
               (e->>'log_offset')::bigint AS log_offset
        FROM jsonb_array_elements(p_rows) WITH ORDINALITY AS t(e, ord)
    ), once AS (
        SELECT DISTINCT ON (job_id, attempt, rank, stream, log_offset) * FROM r
        ORDER BY job_id, attempt, rank, stream, log_offset, ord
    ), f AS (
        SELECT * FROM once o
        WHERE EXISTS (SELECT 1 FROM workers w
                      WHERE w.job_id = o.job_id AND w.attempt = o.attempt AND w.rank = o.rank
                        AND w.node_id = o.e->>'node_id')
          AND NOT EXISTS (SELECT 1 FROM job_stream s
                          WHERE s.job_id = o.job_id AND s.attempt = o.attempt AND s.rank = o.rank
                            AND s.stream = o.stream AND s.log_offset >= o.log_offset
                            AND s.kind = 'log')
    ), x AS (
        SELECT ord, 0 AS k, jsonb_build_object(
                   'job_id', job_id, 'kind', 'log_dropped', 'attempt', attempt, 'rank', rank,
                   'body', jsonb_build_object('rank', rank, 'attempt', attempt, 'stream', stream,
                                              'bytes', (e->>'dropped')::bigint,
                                              'reason', 'the agent''s backlog was over its cap')) AS r_json
        FROM f WHERE coalesce((e->>'dropped')::bigint, 0) > 0
        UNION ALL
        SELECT ord, 1, jsonb_build_object('job_id', job_id, 'kind', 'log', 'attempt', attempt,
                                          'rank', rank, 'stream', stream, 'log_offset', log_offset,
                                          'log_bytes', (e->>'log_bytes')::integer,
                                          'body', e->'body')
        FROM f
    )
    SELECT coalesce(jsonb_agg(r_json ORDER BY ord, k), '[]'::jsonb) INTO fresh FROM x;

    PERFORM ty_stream_append_batch(fresh);
    SELECT coalesce(sum(jsonb_array_length(e->'body'->'lines')), 0),
           coalesce(sum((e->>'log_bytes')::bigint), 0)
      INTO lines, bytes
      FROM jsonb_array_elements(fresh) e WHERE e->>'kind' = 'log';
    dropped := 0;

    FOR j IN
        UPDATE jobs SET log_bytes = jobs.log_bytes + s.n
        FROM (SELECT (e->>'job_id')::bigint AS id, sum((e->>'log_bytes')::bigint) AS n
              FROM jsonb_array_elements(fresh) e WHERE e->>'kind' = 'log' GROUP BY 1) s
        WHERE jobs.id = s.id
        RETURNING jobs.id, jobs.log_bytes
    LOOP
        CONTINUE WHEN p_cap <= 0 OR j.log_bytes <= p_cap;
        freed := 0;
        last_seq := 0;
        FOR r IN SELECT seq, log_bytes FROM job_stream
                 WHERE job_id = j.id AND kind = 'log' ORDER BY seq LOOP
            EXIT WHEN j.log_bytes - freed <= p_cap * 9 / 10 OR j.log_bytes - freed = r.log_bytes;
            freed := freed + r.log_bytes;
            last_seq := r.seq;
        END LOOP;
        DELETE FROM job_stream WHERE job_id = j.id AND kind = 'log' AND seq <= last_seq;
        UPDATE jobs SET log_bytes = log_bytes - freed WHERE id = j.id;
        PERFORM ty_stream_append(j.id, 'log_dropped', NULL, NULL,
                                 jsonb_build_object('rank', NULL, 'bytes', freed,
                                                    'reason', 'the job''s log cap'));
        dropped := dropped + freed;
    END LOOP;
END $$;
