/* Launch and stop orders: what the control thread sends the agents for an attempt (launch.h)
 * and the nodes a stop goes to. */
#include "store.h"

#include "db_query.h"
#include "log.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies "1,3" (array_to_string of workers.gpus; "" for none) into w->gpus. Returns 0, or -1
 * (out of memory, or text that is not such a list: logged). */
static int launch_gpus(const char *text, struct srv_launch_worker *w)
{
    size_t n = *text ? 1 : 0;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    w->gpus = n ? calloc(n, sizeof(int)) : NULL;
    if (n && w->gpus == NULL)
        return -1;
    for (const char *p = text; w->n_gpus < n;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || v > INT_MAX || (*end != ',' && *end != '\0')) {
            TY_BUG("store", "workers.gpus reads '%s', not a list of GPU indices", text);
            return -1;
        }
        w->gpus[w->n_gpus++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* A malloc'd copy of the text of column `name` in row `row` (NULL: ""), or NULL (logged, or out of
 * memory). */
static char *dup_col(const PGresult *res, int row, const char *name)
{
    const char *v;
    return db_col_text_opt(res, row, name, &v) == 0 ? strdup(v ? v : "") : NULL;
}

/* The attempt's fields (the first row) and rank_addresses (JSON text, one per rank). */
static int launch_attempt(PGresult *res, struct srv_launch_rows *out)
{
    const char *addresses;
    if (db_col_int64(res, 0, "master_port", &out->master_port) != 0 ||
        db_col_int64(res, 0, "world_size", &out->world_size) != 0 ||
        db_col_int64(res, 0, "num_nodes", &out->num_nodes) != 0 ||
        db_col_text(res, 0, "rank_addresses", &addresses) != 0)
        return -1;
    out->resume_from = 0;
    if (!db_col_is_null(res, 0, "resumed_from") &&
        db_col_int64(res, 0, "resumed_from", &out->resume_from) != 0)
        return -1;
    out->spec_json = dup_col(res, 0, "spec");
    out->master_addr = dup_col(res, 0, "master_addr");
    out->rendezvous_secret = dup_col(res, 0, "rendezvous_secret");
    json_t *addrs = json_loads(addresses, 0, NULL);
    if (out->spec_json == NULL || out->master_addr == NULL || out->rendezvous_secret == NULL ||
        !json_is_array(addrs) || (int64_t)json_array_size(addrs) != out->world_size) {
        json_decref(addrs);
        return -1;
    }
    out->rank_addresses = calloc(json_array_size(addrs) + 1, sizeof(char *));
    for (size_t i = 0; out->rank_addresses && i < json_array_size(addrs); i++)
        if ((out->rank_addresses[i] = strdup(json_string_value(json_array_get(addrs, i)) ?: "")) ==
            NULL) {
            json_decref(addrs);
            return -1;
        }
    json_decref(addrs);
    return out->rank_addresses ? 0 : -1;
}

/* One PLACED worker of the launch rows. */
static int launch_worker(const PGresult *res, int row, struct srv_launch_worker *w)
{
    const char *gpus;
    if (db_col_int64(res, row, "node_rank", &w->node_rank) != 0 ||
        db_col_int64(res, row, "rank", &w->rank) != 0 ||
        db_col_int64(res, row, "local_rank", &w->local_rank) != 0 ||
        db_col_int64(res, row, "local_world_size", &w->local_world_size) != 0 ||
        db_col_text(res, row, "gpus", &gpus) != 0)
        return -1;
    w->node_id = dup_col(res, row, "node_id");
    return w->node_id == NULL ? -1 : launch_gpus(gpus, w);
}

int store_launch_rows(struct db_conn *c, int64_t job, int attempt, const char *node_id,
                      struct srv_launch_rows *out)
{
    static const struct db_stmt st = {
        "launch_rows",
        "WITH aw AS (SELECT x.node_id, x.rank, n.address FROM workers x "
        "             JOIN nodes n ON n.id = x.node_id "
        "             WHERE x.job_id = $1::bigint AND x.attempt = $2::int) "
        "SELECT j.spec::text AS spec, a.master_addr, a.master_port, a.world_size, "
        "       (SELECT count(DISTINCT node_id) FROM aw) AS num_nodes, "
        "       (SELECT jsonb_agg(address ORDER BY rank) FROM aw)::text AS rank_addresses, "
        "       w.node_id, w.node_rank, w.rank, w.local_rank, "
        "       array_to_string(w.gpus, ',') AS gpus, "
        "       (SELECT count(*) FROM aw WHERE aw.node_id = w.node_id) AS local_world_size, "
        "       a.rendezvous_secret, a.resumed_from "
        "FROM workers w JOIN attempts a USING (job_id, attempt) JOIN jobs j ON j.id = w.job_id "
        "WHERE w.job_id = $1::bigint AND w.attempt = $2::int AND w.status = 'PLACED' "
        "  AND ($3::text IS NULL OR w.node_id = $3) "
        "ORDER BY w.node_rank, w.local_rank",
        3, true};
    char j[32], a[16];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    const char *p[] = {j, a, node_id};
    PGresult *res = NULL;
    memset(out, 0, sizeof(*out));
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    int rc = launch_attempt(res, out);
    out->workers = rc == 0 ? calloc((size_t)qs, sizeof(*out->workers)) : NULL;
    for (int i = 0; out->workers && i < qs; i++) {
        if (launch_worker(res, i, &out->workers[out->n_workers++]) != 0)
            rc = -1;
    }
    PQclear(res);
    if (rc != 0 || out->workers == NULL) {
        srv_launch_rows_free(out);
        return DB_HARD_ERROR;
    }
    return qs;
}

int store_stop_targets(struct db_conn *c, int64_t job, struct store_stop_target **out, size_t *n)
{
    static const struct db_stmt st = {
        "stop_targets",
        "SELECT DISTINCT w.node_id, w.attempt, "
        "       CASE WHEN a.end_reason IS NULL OR a.end_reason->>'event' IN ('preempted', "
        "'resize') "
        "            THEN coalesce((j.spec #>> "
        "'{run_config,failure_config,preemption_grace_s}')::int, 0) ELSE 0 END AS notice_s "
        "FROM workers w JOIN jobs j ON j.id = w.job_id "
        "JOIN attempts a ON a.job_id = w.job_id AND a.attempt = w.attempt "
        "WHERE w.job_id = $1::bigint AND w.attempt = j.attempt "
        "  AND w.status IN ('PLACED', 'RUNNING')",
        1, true};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    PGresult *res = NULL;
    *out = NULL;
    *n = 0;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    struct store_stop_target *targets = calloc((size_t)qs, sizeof(*targets));
    for (int i = 0; targets && i < qs; i++) {
        if (db_col_int(res, i, "attempt", &targets[i].attempt) != 0 ||
            db_col_int(res, i, "notice_s", &targets[i].notice_s) != 0 ||
            (targets[i].node_id = dup_col(res, i, "node_id")) == NULL) {
            store_stop_targets_free(targets, (size_t)i);
            targets = NULL;
        }
    }
    PQclear(res);
    if (targets == NULL)
        return DB_HARD_ERROR;
    *out = targets;
    *n = (size_t)qs;
    return qs;
}

void store_stop_targets_free(struct store_stop_target *targets, size_t n)
{
    for (size_t i = 0; targets && i < n; i++)
        free(targets[i].node_id);
    free(targets);
}
