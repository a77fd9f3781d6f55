/* Launch and stop orders: what the control thread sends the agents for an attempt (launch.h)
 * and the nodes a stop goes to. */
#include "store.h"

#include "db_query.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies "1,3" (array_to_string of workers.gpus; NULL or "" for none) into w->gpus. */
static int launch_gpus(const char *text, struct srv_launch_worker *w)
{
    size_t n = *text ? 1 : 0;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    w->gpus = n ? calloc(n, sizeof(int)) : NULL;
    if (n && w->gpus == NULL)
        return -1;
    for (const char *p = text; w->n_gpus < n; p++) {
        char *end;
        w->gpus[w->n_gpus++] = (int)strtol(p, &end, 10);
        p = end;
    }
    return 0;
}

/* The attempt's fields (the first row) and rank_addresses (JSON text, one per rank). */
static int launch_attempt(PGresult *res, struct srv_launch_rows *out)
{
    out->spec_json = strdup(PQgetvalue(res, 0, 0));
    out->master_addr = strdup(PQgetvalue(res, 0, 1));
    out->master_port = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    out->world_size = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
    out->num_nodes = strtoll(PQgetvalue(res, 0, 4), NULL, 10);
    out->rendezvous_secret = strdup(PQgetvalue(res, 0, 12));
    out->resume_from = PQgetisnull(res, 0, 13) ? 0 : strtoll(PQgetvalue(res, 0, 13), NULL, 10);
    json_t *addrs = json_loads(PQgetvalue(res, 0, 5), 0, NULL);
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

int store_launch_rows(struct db_conn *c, int64_t job, int attempt, const char *node_id,
                      struct srv_launch_rows *out)
{
    static const struct db_stmt st = {
        "launch_rows",
        "WITH aw AS (SELECT x.node_id, x.rank, n.address FROM workers x "
        "             JOIN nodes n ON n.id = x.node_id "
        "             WHERE x.job_id = $1::bigint AND x.attempt = $2::int) "
        "SELECT j.spec::text, a.master_addr, a.master_port, a.world_size, "
        "       (SELECT count(DISTINCT node_id) FROM aw), "
        "       (SELECT jsonb_agg(address ORDER BY rank) FROM aw)::text, "
        "       w.node_id, w.node_rank, w.rank, w.local_rank, array_to_string(w.gpus, ','), "
        "       (SELECT count(*) FROM aw WHERE aw.node_id = w.node_id), a.rendezvous_secret, "
        "       a.resumed_from "
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
        struct srv_launch_worker *w = &out->workers[out->n_workers++];
        w->node_id = strdup(PQgetvalue(res, i, 6));
        w->node_rank = strtoll(PQgetvalue(res, i, 7), NULL, 10);
        w->rank = strtoll(PQgetvalue(res, i, 8), NULL, 10);
        w->local_rank = strtoll(PQgetvalue(res, i, 9), NULL, 10);
        w->local_world_size = strtoll(PQgetvalue(res, i, 11), NULL, 10);
        if (w->node_id == NULL || launch_gpus(PQgetvalue(res, i, 10), w) != 0)
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
        "'{run_config,failure_config,preemption_grace_s}')::int, 0) ELSE 0 END "
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
        targets[i].attempt = (int)strtol(PQgetvalue(res, i, 1), NULL, 10);
        targets[i].notice_s = (int)strtol(PQgetvalue(res, i, 2), NULL, 10);
        targets[i].node_id = strdup(PQgetvalue(res, i, 0));
        if (targets[i].node_id == NULL) {
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
