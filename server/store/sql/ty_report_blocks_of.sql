-- The report_blocks rows (migration 0046) of one series (job, attempt, rank) for its blocks
-- p_from to p_to (NULL: the last), summed up from its reports: per reported name and block of 16
-- consecutive reports (block = seq >> 4), how many reports carry the name, the first and last
-- (seq, time, step, value as JSON text) and the least and greatest finite number. What
-- ty_report_blocks_fill stores and what a chart's read sums up from the reports not yet stored
-- (store_metrics.c).
CREATE OR REPLACE FUNCTION ty_report_blocks_of(p_job bigint, p_attempt integer, p_rank integer,
                                               p_from bigint, p_to bigint)
RETURNS SETOF report_blocks LANGUAGE sql STABLE AS $$
    -- first and last by the window's min and max seq (seq is unique in a series): one sort for
    -- all, where array_agg(... ORDER BY seq) sorted each group six times (PostgreSQL 15). Each
    -- value is read as numeric (a copy, where float8 went through numeric's text); only the
    -- least and greatest are made float8 (the cast is monotonic), and only the first and last
    -- written as text (an aggregate's FILTER skips its argument).
    SELECT p_job, p_rank, name, p_attempt, block, count(*), min(seq), max(seq),
           min(reported_at) FILTER (WHERE seq = s_first),
           min(reported_at) FILTER (WHERE seq = s_last),
           min(step) FILTER (WHERE seq = s_first), min(step) FILTER (WHERE seq = s_last),
           min(ty_metric_text(value)) FILTER (WHERE seq = s_first),
           min(ty_metric_text(value)) FILTER (WHERE seq = s_last),
           min(n)::double precision, max(n)::double precision
      FROM (SELECT e.*, min(seq) OVER w AS s_first, max(seq) OVER w AS s_last
              FROM (SELECT k.key AS name, r.seq >> 4 AS block, r.seq, r.step, r.reported_at,
                           k.value,
                           CASE WHEN jsonb_typeof(k.value) = 'number' THEN k.value::numeric
                           END AS n
                      FROM reports r CROSS JOIN LATERAL jsonb_each(r.metrics) k
                     WHERE r.job_id = p_job AND r.attempt = p_attempt AND r.rank = p_rank
                       AND r.seq >= p_from * 16
                       AND (p_to IS NULL OR r.seq < (p_to + 1) * 16)) e
            WINDOW w AS (PARTITION BY name, block)) x
     GROUP BY name, block
$$;
COMMENT ON FUNCTION ty_report_blocks_of(bigint, integer, integer, bigint, bigint) IS 'The report_blocks rows of blocks p_from..p_to (NULL: all from p_from) of one series, summed up from its reports.';
