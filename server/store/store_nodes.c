/* Nodes: registration, loss, the node list, draining, and the workers live on a node. A node's
 * loss and its drain are SQL functions (ty_node_lost, ty_node_drain in the state machine,
 * docs/lifecycle.md), so each is one atomic statement. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int id_column(struct db_conn *c, const struct db_stmt *st, char ***ids, size_t *n)
{
    PGresult *res = NULL;
    int qs = db_exec(c, st, NULL, &res);
    *ids = NULL;
    *n = 0;
    if (qs <= 0)
        return qs;
    *ids = calloc((size_t)qs, sizeof(char *));
    for (int i = 0; *ids && i < qs; i++) {
        const char *id;
        if (db_col_text(res, i, "id", &id) != 0 || ((*ids)[*n] = strdup(id)) == NULL) {
            qs = DB_HARD_ERROR;
            break;
        }
        (*n)++;
    }
    PQclear(res);
    if (*ids == NULL || qs < 0) {
        for (size_t i = 0; *ids && i < *n; i++)
            free((*ids)[i]);
        free(*ids);
        *ids = NULL;
        *n = 0;
        return DB_HARD_ERROR;
    }
    return qs;
}

/* A node as the API shows it. `allocated` is what its live workers hold, counted as the
 * scheduler's snapshot counts it (control_snapshot.c: each live worker's resources "CPU" and
 * "memory_mb", and the GPUs it was given). */
#define NODE_JSON                                                                                  \
    "jsonb_build_object('id', n.id, 'hostname', n.hostname, 'address', n.address, "                \
    "'status', n.status, 'draining', n.draining, 'resources', n.resources, "                       \
    "'gpu_type', n.gpu_type, 'gpus', n.gpus, 'disk', n.disk, 'labels', n.labels, "                 \
    "'agent_version', "                                                                            \
    "n.agent_version, "                                                                            \
    "'conditions', n.conditions, "                                                                 \
    "'registered_at', ty_ts(n.registered_at), 'last_heartbeat_at', ty_ts(n.last_heartbeat_at), "   \
    "'running_workers', (SELECT count(*) FROM workers w WHERE w.node_id = n.id "                   \
    "                    AND w.status IN ('PLACED', 'RUNNING')), "                                 \
    "'allocated', (SELECT jsonb_build_object("                                                     \
    "    'cpu', coalesce(sum((w.resources->>'CPU')::numeric), 0), "                                \
    "    'memory_mb', coalesce(sum((w.resources->>'memory_mb')::numeric), 0)::bigint, "            \
    "    'gpu', coalesce(sum(cardinality(w.gpus)), 0)) "                                           \
    "  FROM workers w WHERE w.node_id = n.id AND w.status IN ('PLACED', 'RUNNING')))"

int store_nodes_alive(struct db_conn *c, char ***ids, size_t *n)
{
    static const struct db_stmt st = {"nodes_alive", "SELECT id FROM nodes WHERE status = 'ALIVE'",
                                      0, true};
    return id_column(c, &st, ids, n);
}

int store_node_register(struct db_conn *c, const char *id, const char *hostname,
                        const char *address, const char *resources_json, const char *gpu_type,
                        const char *labels_json, const char *version, int port_lo, int port_hi)
{
    static const struct db_stmt st = {
        "node_register",
        "INSERT INTO nodes (id, hostname, address, status, resources, gpu_type, labels, "
        "                   agent_version, port_lo, port_hi) "
        "VALUES ($1, $2, $3, 'ALIVE', $4::jsonb, $5, $6::jsonb, $7, $8::int, $9::int) "
        "ON CONFLICT (id) DO UPDATE SET hostname = $2, address = $3, status = 'ALIVE', "
        "  resources = $4::jsonb, gpu_type = $5, labels = $6::jsonb, agent_version = $7, "
        "  port_lo = $8::int, port_hi = $9::int, last_heartbeat_at = now(), "
        "  disconnected_at = NULL",
        9, false};
    char lo[16], hi[16];
    STORE_NUM(lo, port_lo);
    STORE_NUM(hi, port_hi);
    const char *p[] = {id,      hostname, address, resources_json, gpu_type, labels_json,
                       version, lo,       hi};
    return db_exec(c, &st, p, NULL);
}

int store_node_lost(struct db_conn *c, const char *id)
{
    static const struct db_stmt st = {"node_lost", "SELECT * FROM ty_node_lost($1)", 1, false};
    const char *p[] = {id};
    return db_exec(c, &st, p, NULL);
}

int store_node_disconnected(struct db_conn *c, const char *id)
{
    static const struct db_stmt st = {
        "node_disconnected", "UPDATE nodes SET disconnected_at = now() WHERE id = $1", 1, false};
    const char *p[] = {id};
    return db_exec(c, &st, p, NULL);
}

int store_node_disk(struct db_conn *c, const char *id, const char *disk_json)
{
    static const struct db_stmt st = {"node_disk",
                                      "UPDATE nodes SET disk = $2::jsonb WHERE id = $1", 2, false};
    const char *p[] = {id, disk_json};
    return db_exec(c, &st, p, NULL);
}

int store_node_list(struct db_conn *c, char **json_out)
{
    static const struct db_stmt st = {"node_list",
                                      "SELECT coalesce(jsonb_agg(" NODE_JSON
                                      " ORDER BY n.id), '[]')::text "
                                      "FROM nodes n",
                                      0, true};
    return db_exec_text(c, &st, NULL, json_out);
}

int store_node_get(struct db_conn *c, const char *id, char **json_out)
{
    static const struct db_stmt st = {
        "node_get", "SELECT " NODE_JSON "::text FROM nodes n WHERE n.id = $1", 1, true};
    const char *p[] = {id};
    return db_exec_text(c, &st, p, json_out);
}

int store_node_set_draining(struct db_conn *c, const char *id, bool draining, bool preempt,
                            char **json_out, char **preempted_out)
{
    static const struct db_stmt st = {"node_drain",
                                      "UPDATE nodes n SET draining = $2::boolean WHERE n.id = $1 "
                                      "RETURNING " NODE_JSON "::text",
                                      2, false};
    static const struct db_stmt st_preempt = {
        "node_drain_preempt",
        "SELECT coalesce(json_agg(j ORDER BY j), '[]')::text FROM ty_node_drain($1) j", 1, false};
    const char *p[] = {id, draining ? "true" : "false"};
    if (draining && preempt) { /* ty_node_drain sets the flag itself */
        int qs = db_exec_text(c, &st_preempt, p, preempted_out);
        return qs < 0 ? qs : store_node_get(c, id, json_out);
    }
    return db_exec_text(c, &st, p, json_out);
}

int store_node_condition_set(struct db_conn *c, const char *id, const char *type,
                             const char *message)
{
    /* "since" is kept while the condition stays: it says when it began. */
    static const struct db_stmt st = {
        "node_condition_set",
        "UPDATE nodes n SET conditions = "
        "  (SELECT coalesce(jsonb_agg(e), '[]') FROM jsonb_array_elements(n.conditions) e "
        "    WHERE e->>'type' <> $2) || jsonb_build_array(jsonb_build_object("
        "  'type', $2::text, 'message', $3::text, 'since', coalesce((SELECT e->>'since' "
        "     FROM jsonb_array_elements(n.conditions) e WHERE e->>'type' = $2 LIMIT 1), "
        "     ty_ts(now())))) "
        "WHERE n.id = $1",
        3, false};
    static const struct db_stmt st_clear = {
        "node_condition_clear",
        "UPDATE nodes n SET conditions = "
        "  (SELECT coalesce(jsonb_agg(e), '[]') FROM jsonb_array_elements(n.conditions) e "
        "    WHERE e->>'type' <> $2) "
        "WHERE n.id = $1 "
        "  AND n.conditions @> jsonb_build_array(jsonb_build_object('type', $2::text))",
        2, false};
    const char *p[] = {id, type, message};
    return db_exec(c, message ? &st : &st_clear, p, NULL);
}

int store_node_job_event(struct db_conn *c, const char *node_id, int64_t job, int64_t attempt,
                         const char *message)
{
    /* Only for a job with a worker on that node, once per message. */
    static const struct db_stmt st = {
        "node_job_event",
        "INSERT INTO job_events (job_id, attempt, status, message) "
        "SELECT j.id, $3::int, j.status, $4 FROM jobs j "
        " WHERE j.id = $2::bigint "
        "   AND EXISTS (SELECT 1 FROM workers w WHERE w.job_id = j.id AND w.node_id = $1) "
        "   AND NOT EXISTS (SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.message = $4)",
        4, false};
    char j[32], a[32];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    const char *p[] = {node_id, j, a, message};
    return db_exec(c, &st, p, NULL);
}

int store_server_heard(struct db_conn *c, const char *url, bool leader)
{
    static const struct db_stmt st = {
        "server_heard",
        "INSERT INTO servers (url, leader, heard_at) VALUES ($1, $2::boolean, now()) "
        "ON CONFLICT (url) DO UPDATE SET leader = $2::boolean, heard_at = now()",
        2, false};
    const char *p[] = {url, leader ? "true" : "false"};
    return db_exec(c, &st, p, NULL);
}

int store_server_urls(struct db_conn *c, char ***urls, size_t *n)
{
    static const struct db_stmt st = {
        "server_urls",
        "SELECT url AS id FROM servers WHERE heard_at > now() - interval '15 seconds' "
        "ORDER BY leader DESC, heard_at DESC LIMIT 15",
        0, true};
    return id_column(c, &st, urls, n);
}

int store_node_live_workers(struct db_conn *c, const char *id, struct store_live_worker **out,
                            size_t *n)
{
    static const struct db_stmt st = {
        "node_live_workers",
        "SELECT job_id, attempt, rank, status = 'PLACED' AS placed FROM workers "
        "WHERE node_id = $1 AND status IN ('PLACED', 'RUNNING') ORDER BY job_id, attempt, rank",
        1, true};
    const char *p[] = {id};
    PGresult *res = NULL;
    *out = NULL;
    *n = 0;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    *out = calloc((size_t)qs, sizeof(**out));
    if (*out == NULL) {
        PQclear(res);
        return DB_HARD_ERROR;
    }
    for (int i = 0; i < qs; i++) {
        struct store_live_worker *w = &(*out)[i];
        if (db_col_int64(res, i, "job_id", &w->job) != 0 ||
            db_col_int(res, i, "attempt", &w->attempt) != 0 ||
            db_col_int(res, i, "rank", &w->rank) != 0 ||
            db_col_bool(res, i, "placed", &w->placed) != 0) {
            PQclear(res);
            free(*out);
            *out = NULL;
            return DB_HARD_ERROR;
        }
    }
    *n = (size_t)qs;
    PQclear(res);
    return qs;
}
