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
        "          FROM (SELECT status, count(*) AS n FROM jobs GROUP BY status) s) AS by_status, "
        "       (SELECT count(*) FROM jobs WHERE status = 'PENDING') AS queue_length, "
        "       (SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) "
        "          FROM jobs WHERE status = 'PENDING') AS oldest_pending_s, "
        "       (SELECT count(*) FROM nodes WHERE status = 'ALIVE' AND NOT draining) AS "
        "nodes_alive, "
        "       (SELECT count(*) FROM nodes WHERE status = 'ALIVE' AND draining) AS "
        "nodes_draining, "
        "       (SELECT count(*) FROM nodes WHERE status = 'LOST') AS nodes_lost, "
        "       (SELECT coalesce(sum((resources->>'CPU')::double precision), 0) "
        "          FROM nodes WHERE status = 'ALIVE' AND jsonb_typeof(resources->'CPU') = "
        "'number') AS cpus_total, "
        "       (SELECT coalesce(sum(jsonb_array_length(resources->'GPU')), 0) "
        "          FROM nodes WHERE status = 'ALIVE' AND jsonb_typeof(resources->'GPU') = "
        "'array') AS gpus_total, "
        "       (SELECT coalesce(sum(CASE WHEN jsonb_typeof(resources->'CPU') = 'number' "
        "                                 THEN (resources->>'CPU')::double precision END), 0) "
        "          FROM workers WHERE status IN ('PLACED', 'RUNNING')) AS cpus_allocated, "
        "       (SELECT coalesce(sum(cardinality(gpus)), 0) "
        "          FROM workers WHERE status IN ('PLACED', 'RUNNING')) AS gpus_allocated",
        0, true};
    memset(out, 0, sizeof(*out));
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    if (qs <= 0) {
        PQclear(res);
        return qs < 0 ? qs : DB_HARD_ERROR;
    }
    /* "RUNNING=3,PENDING=1" */
    const char *p = "";
    if (db_col_text(res, 0, "by_status", &p) != 0 ||
        db_col_int64(res, 0, "queue_length", &out->queue_length) != 0 ||
        db_col_double(res, 0, "oldest_pending_s", &out->oldest_pending_s) != 0 ||
        db_col_int64(res, 0, "nodes_alive", &out->nodes_alive) != 0 ||
        db_col_int64(res, 0, "nodes_draining", &out->nodes_draining) != 0 ||
        db_col_int64(res, 0, "nodes_lost", &out->nodes_lost) != 0 ||
        db_col_double(res, 0, "cpus_total", &out->cpus_total) != 0 ||
        db_col_int64(res, 0, "gpus_total", &out->gpus_total) != 0 ||
        db_col_double(res, 0, "cpus_allocated", &out->cpus_allocated) != 0 ||
        db_col_int64(res, 0, "gpus_allocated", &out->gpus_allocated) != 0) {
        PQclear(res);
        return DB_HARD_ERROR;
    }
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

int store_running_usage(struct db_conn *c, const struct srv_identity *who, char **json)
{
    static const struct db_stmt st = {
        "running_usage",
        "SELECT coalesce(jsonb_agg(jsonb_build_array(w.job_id, w.rank, w.node_id, u.cpu_usec, "
        "u.memory_bytes) ORDER BY w.job_id, w.rank), '[]')::text "
        "FROM workers w JOIN jobs j ON j.id = w.job_id "
        "JOIN worker_usage u ON u.job_id = w.job_id AND u.attempt = w.attempt AND u.rank = w.rank "
        "WHERE w.status = 'RUNNING' AND ty_project_visible(j.project, $1, $2::boolean)",
        2, true};
    const char *p[] = {who->name, who->role == SRV_ROLE_ADMIN ? "t" : "f"};
    *json = NULL;
    int qs = db_exec_text(c, &st, p, json);
    return qs < 0 ? qs : 1;
}

int store_goodput_by_owner(struct db_conn *c, const struct srv_identity *who, char **json)
{
    static const struct db_stmt st = {
        "goodput_by_owner",
        "SELECT coalesce(jsonb_agg(jsonb_build_array(o.owner, o.useful, o.lost, o.wall) "
        "ORDER BY o.owner), '[]')::text "
        "FROM (SELECT j.owner, sum((g ->> 'useful_s')::float8) AS useful, "
        "             sum((g ->> 'lost_s')::float8) AS lost, sum((g ->> 'wall_s')::float8) AS wall "
        "        FROM jobs j, LATERAL ty_job_goodput(j) g "
        "       WHERE (j.finished_at IS NULL OR j.finished_at > now() - interval '1 day') "
        "         AND j.attempt > 0 AND ty_project_visible(j.project, $1, $2::boolean) "
        "       GROUP BY j.owner) o",
        2, true};
    const char *p[] = {who->name, who->role == SRV_ROLE_ADMIN ? "t" : "f"};
    *json = NULL;
    int qs = db_exec_text(c, &st, p, json);
    return qs < 0 ? qs : 1;
}
