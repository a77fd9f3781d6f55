/* The cluster's figures for GET /metrics (store_cluster_stats): jobs by status, the queue,
 * nodes by state, CPUs and GPUs. One read-only statement. */
#include "store.h"

#include "db_query.h"

#include <stdlib.h>
#include <string.h>

int store_cluster_stats(struct db_conn *c, struct store_cluster_stats *out)
{
    static const struct db_stmt st = {
        "cluster_stats",
        "SELECT (SELECT coalesce(string_agg(status || '=' || n, ','), '') "
        "          FROM (SELECT status, count(*) AS n FROM jobs GROUP BY status) s), "
        "       (SELECT count(*) FROM jobs WHERE status = 'PENDING'), "
        "       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) "
        "          FROM jobs WHERE status = 'PENDING'), "
        "       (SELECT count(*) FROM nodes WHERE status = 'ALIVE' AND NOT draining), "
        "       (SELECT count(*) FROM nodes WHERE status = 'ALIVE' AND draining), "
        "       (SELECT count(*) FROM nodes WHERE status = 'LOST'), "
        "       (SELECT coalesce(sum((resources->>'CPU')::double precision), 0) "
        "          FROM nodes WHERE status = 'ALIVE' AND jsonb_typeof(resources->'CPU') = "
        "'number'), "
        "       (SELECT coalesce(sum(jsonb_array_length(resources->'GPU')), 0) "
        "          FROM nodes WHERE status = 'ALIVE' AND jsonb_typeof(resources->'GPU') = "
        "'array'), "
        "       (SELECT coalesce(sum(CASE WHEN jsonb_typeof(resources->'CPU') = 'number' "
        "                                 THEN (resources->>'CPU')::double precision END), 0) "
        "          FROM workers WHERE status IN ('PLACED', 'RUNNING')), "
        "       (SELECT coalesce(sum(cardinality(gpus)), 0) "
        "          FROM workers WHERE status IN ('PLACED', 'RUNNING'))",
        0, true};
    memset(out, 0, sizeof(*out));
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    if (qs <= 0) {
        PQclear(res);
        return qs < 0 ? qs : DB_HARD_ERROR;
    }
    /* "RUNNING=3,PENDING=1" */
    const char *p = PQgetvalue(res, 0, 0);
    while (*p) {
        const char *eq = strchr(p, '=');
        if (eq == NULL)
            break;
        enum job_status s;
        long long n = strtoll(eq + 1, NULL, 10);
        if (job_status_from_token(p, (size_t)(eq - p), &s) == 0)
            out->jobs_by_status[s] = n;
        const char *comma = strchr(eq, ',');
        p = comma ? comma + 1 : eq + strlen(eq);
    }
    out->queue_length = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    out->oldest_pending_s = strtod(PQgetvalue(res, 0, 2), NULL);
    out->nodes_alive = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
    out->nodes_draining = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
    out->nodes_lost = strtoll(PQgetvalue(res, 0, 5), NULL, 10);
    out->cpus_total = strtod(PQgetvalue(res, 0, 6), NULL);
    out->gpus_total = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
    out->cpus_allocated = strtod(PQgetvalue(res, 0, 8), NULL);
    out->gpus_allocated = strtoll(PQgetvalue(res, 0, 9), NULL, 10);
    PQclear(res);
    return 1;
}

int store_node_gpus(struct db_conn *c, char **json)
{
    static const struct db_stmt st = {
        "node_gpus",
        "SELECT coalesce(jsonb_agg(g || jsonb_build_object('node', n.id) ORDER BY n.id, "
        "(g->>'index')::integer), '[]')::text "
        "FROM nodes n, jsonb_array_elements(n.gpus) g WHERE n.status = 'ALIVE'",
        0, true};
    *json = NULL;
    int qs = db_exec_text(c, &st, NULL, json);
    return qs < 0 ? qs : 1;
}
