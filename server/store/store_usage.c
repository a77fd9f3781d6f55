/* Workers' resource use over time (GET /jobs/{id}/usage, /nodes/{id}/usage): the samples that
 * ty_usage_ingest keeps in worker_usage_samples (about one per worker every 10 s, and its final
 * one), with each sample's CPU use as a percentage of one CPU over the time since the sample
 * before it (the worker's start for its first). */
#include "store.h"

#include "db_query.h"

#include <stdio.h>

int store_job_usage(struct db_conn *c, int64_t job, int attempt, int max_points, char **json_out)
{
    /* Each (attempt, rank) series thinned to about max_points (every k-th sample and the last)
     * before the CPU rates are taken: a kept sample's rate covers the samples thinned away. */
    static const struct db_stmt st = {
        "job_usage",
        "WITH n AS ("
        "  SELECT s.*, w.started_at,"
        "         row_number() OVER (PARTITION BY s.attempt, s.rank ORDER BY s.sampled_at) AS i,"
        "         count(*) OVER (PARTITION BY s.attempt, s.rank) AS total"
        "    FROM worker_usage_samples s JOIN workers w ON w.job_id = s.job_id"
        "     AND w.attempt = s.attempt AND w.rank = s.rank"
        "   WHERE s.job_id = $1::bigint AND ($2::int IS NULL OR s.attempt = $2::int)"
        "), k AS ("
        "  SELECT n.*, lag(cpu_usec, 1, 0::bigint) OVER w AS prev_cpu,"
        "         coalesce(lag(sampled_at) OVER w, started_at) AS prev_at"
        "    FROM n WHERE total <= $3::int OR i = total"
        "      OR i % ((total + $3::int - 1) / $3::int) = 0"
        "  WINDOW w AS (PARTITION BY attempt, rank ORDER BY sampled_at)"
        ") "
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN NULL ELSE "
        " coalesce(jsonb_agg(ty_usage_sample_json(attempt, rank, node_id, sampled_at, cpu_usec,"
        "  memory_bytes, prev_at, prev_cpu) ORDER BY attempt, rank, sampled_at), '[]') "
        "END::text FROM k",
        3, true};
    char j[32], a[32], m[32];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    STORE_NUM(m, max_points);
    const char *p[] = {j, attempt > 0 ? a : NULL, m};
    return db_exec_text(c, &st, p, json_out);
}

int store_node_usage(struct db_conn *c, const char *node, int minutes, char **json_out)
{
    /* The node's workers summed per bucket (10 s for an hour, longer for longer windows): each
     * worker's mean over the bucket, then the sum over workers. */
    static const struct db_stmt st = {
        "node_usage",
        "WITH s AS ("
        "  SELECT s.job_id, s.attempt, s.rank, s.sampled_at, s.memory_bytes, s.cpu_usec,"
        "         lag(s.cpu_usec, 1, 0::bigint) OVER w AS prev_cpu,"
        "         coalesce(lag(s.sampled_at) OVER w, wk.started_at) AS prev_at"
        "    FROM worker_usage_samples s JOIN workers wk ON wk.job_id = s.job_id"
        "     AND wk.attempt = s.attempt AND wk.rank = s.rank"
        "   WHERE s.node_id = $1 AND s.sampled_at > now() - ($2::int + 1) * interval '1 minute'"
        "  WINDOW w AS (PARTITION BY s.job_id, s.attempt, s.rank ORDER BY s.sampled_at)"
        "), b AS ("
        "  SELECT floor(extract(epoch FROM sampled_at) / (10 * (($2::int + 59) / 60))) AS b,"
        "         job_id, attempt, rank, avg(memory_bytes) AS mem,"
        "         avg(CASE WHEN sampled_at > prev_at THEN 100.0 * (cpu_usec - prev_cpu) / "
        "             (extract(epoch FROM sampled_at - prev_at) * 1e6) END) AS cpu"
        "    FROM s WHERE sampled_at > now() - $2::int * interval '1 minute'"
        "   GROUP BY 1, 2, 3, 4"
        "), t AS ("
        "  SELECT b, sum(cpu) AS cpu, sum(mem) AS mem, count(*) AS workers FROM b GROUP BY b"
        ") "
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM nodes WHERE id = $1) THEN NULL ELSE "
        " coalesce(jsonb_agg(jsonb_build_object('time', ty_ts(to_timestamp(b * 10 * (($2::int "
        "  + 59) / 60))), 'cpu_percent', round(cpu::numeric, 1)::float8, 'memory_bytes', "
        "  mem::bigint, 'workers', workers) ORDER BY b), '[]') END::text FROM t",
        2, true};
    char m[32];
    STORE_NUM(m, minutes);
    const char *p[] = {node, m};
    return db_exec_text(c, &st, p, json_out);
}
