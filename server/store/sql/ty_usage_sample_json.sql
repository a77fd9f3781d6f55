-- One stored usage sample of a worker as the API writes it (GET /jobs/{id}/usage) and /stream
-- carries it (`usage` rows): cpu_percent is the CPU time since the sample before (prev_at,
-- prev_cpu_usec: the worker's start and 0 for its first) over the wall time between the two.
CREATE OR REPLACE FUNCTION ty_usage_sample_json(attempt integer, rank integer, node_id text,
                                                sampled_at timestamptz, cpu_usec bigint,
                                                memory_bytes bigint, prev_at timestamptz,
                                                prev_cpu_usec bigint)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'attempt', attempt, 'rank', rank, 'node_id', node_id, 'time', ty_ts(sampled_at),
        'cpu_seconds', (cpu_usec / 1e6)::float8,
        'cpu_percent', CASE WHEN sampled_at > prev_at
            THEN round((100.0 * (cpu_usec - prev_cpu_usec)
                        / (extract(epoch FROM sampled_at - prev_at) * 1e6))::numeric, 1)::float8
            END,
        'memory_bytes', memory_bytes)
$$;
COMMENT ON FUNCTION ty_usage_sample_json(integer, integer, text, timestamptz, bigint, bigint, timestamptz, bigint) IS 'A worker''s usage sample as the API and /stream write it, its CPU percent over the interval since the sample before.';
