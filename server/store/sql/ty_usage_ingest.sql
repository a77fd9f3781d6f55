-- Stores one `usage` message of node p_node: p_rows is a JSON array of {job_id, attempt, rank,
-- cpu_usec, memory_bytes, memory_peak_bytes, final}. Rows of workers that are not placed on that
-- node in that attempt are ignored (a node speaks only for its own workers); so is a second row
-- for the same worker, and any sample after a worker's final one. CPU time and the peak never go
-- down. Each stored row is also kept in worker_usage_samples (migration 0043) when its worker's
-- last kept sample is 10 s old or more, or it is the final one: the series the dashboard draws.
-- Each kept sample is also appended to its job's stream as a `usage` row (body: the object
-- GET /jobs/{id}/usage returns for it), for /stream subscribers. Kept samples are thinned as they
-- age (on write, for the worker that writes): those between one hour and one hour and two minutes
-- old lose all but the first of each minute, so a long run keeps full resolution for its last
-- hour and one sample a minute before; its `usage` stream rows over an hour old go.
-- One statement per message. Returns the rows stored.
CREATE OR REPLACE FUNCTION ty_usage_ingest(p_node text, p_rows jsonb) RETURNS integer
LANGUAGE sql AS $$
    WITH inp AS (
        SELECT DISTINCT ON (x.job_id, x.attempt, x.rank) x.*
          FROM jsonb_to_recordset(p_rows) AS x(job_id bigint, attempt integer, rank integer,
                                               cpu_usec bigint, memory_bytes bigint,
                                               memory_peak_bytes bigint, final boolean)
          JOIN workers w ON w.job_id = x.job_id AND w.attempt = x.attempt AND w.rank = x.rank
                        AND w.node_id = p_node
         ORDER BY x.job_id, x.attempt, x.rank, x.final DESC
    ), up AS (
        INSERT INTO worker_usage AS u (job_id, attempt, rank, cpu_usec, memory_bytes,
                                       memory_peak_bytes, final, sampled_at)
        SELECT job_id, attempt, rank, cpu_usec, memory_bytes,
               greatest(memory_peak_bytes, memory_bytes), coalesce(final, false), now()
          FROM inp
        ON CONFLICT (job_id, attempt, rank) DO UPDATE
           SET cpu_usec = greatest(u.cpu_usec, EXCLUDED.cpu_usec),
               memory_bytes = EXCLUDED.memory_bytes,
               memory_peak_bytes = greatest(u.memory_peak_bytes, EXCLUDED.memory_peak_bytes),
               final = EXCLUDED.final, sampled_at = EXCLUDED.sampled_at
         WHERE NOT u.final
        RETURNING u.job_id, u.attempt, u.rank, u.cpu_usec, u.memory_bytes, u.final
    ), kept AS (
        INSERT INTO worker_usage_samples (job_id, attempt, rank, sampled_at, node_id, cpu_usec,
                                          memory_bytes)
        SELECT up.job_id, up.attempt, up.rank, now(), p_node, up.cpu_usec, up.memory_bytes
          FROM up
         WHERE up.final OR NOT EXISTS (
               SELECT 1 FROM worker_usage_samples s
                WHERE s.job_id = up.job_id AND s.attempt = up.attempt AND s.rank = up.rank
                  AND s.sampled_at > now() - interval '10 seconds')
        ON CONFLICT DO NOTHING
        RETURNING job_id, attempt, rank, sampled_at, node_id, cpu_usec, memory_bytes
    ), pushed AS (
        SELECT ty_stream_append_batch(coalesce(jsonb_agg(jsonb_build_object(
                   'job_id', k.job_id, 'kind', 'usage', 'attempt', k.attempt, 'rank', k.rank,
                   'body', ty_usage_sample_json(k.attempt, k.rank, k.node_id, k.sampled_at,
                                                k.cpu_usec, k.memory_bytes,
                                                coalesce(p.sampled_at, w.started_at),
                                                coalesce(p.cpu_usec, 0)))
                   ORDER BY k.job_id, k.rank), '[]')) AS n
          FROM kept k
          JOIN workers w ON w.job_id = k.job_id AND w.attempt = k.attempt AND w.rank = k.rank
          LEFT JOIN LATERAL (
               SELECT s.sampled_at, s.cpu_usec FROM worker_usage_samples s
                WHERE s.job_id = k.job_id AND s.attempt = k.attempt AND s.rank = k.rank
                  AND s.sampled_at < k.sampled_at
                ORDER BY s.sampled_at DESC LIMIT 1) p ON true
    ), thinned AS (
        DELETE FROM worker_usage_samples s
         USING kept k
         WHERE s.job_id = k.job_id AND s.attempt = k.attempt AND s.rank = k.rank
           AND s.sampled_at >= now() - interval '62 minutes'
           AND s.sampled_at < now() - interval '1 hour'
           AND EXISTS (SELECT 1 FROM worker_usage_samples f
                        WHERE f.job_id = s.job_id AND f.attempt = s.attempt AND f.rank = s.rank
                          AND f.sampled_at >= date_trunc('minute', s.sampled_at)
                          AND f.sampled_at < s.sampled_at)
    ), aged AS (
        DELETE FROM job_stream j
         USING (SELECT DISTINCT job_id FROM kept) k
         WHERE j.job_id = k.job_id AND j.kind = 'usage' AND j.at < now() - interval '1 hour'
    )
    SELECT count(*)::integer FROM up, pushed
$$;
COMMENT ON FUNCTION ty_usage_ingest(text, jsonb) IS 'Stores a node''s batch of worker resource-use samples (agent message usage) in one statement.';
