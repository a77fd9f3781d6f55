/* Cluster queries: nodes, scheduler snapshot, placements, worker events. The lifecycle itself is
 * in SQL functions (store/sql/, the state machine of job_transitions.sql, docs/lifecycle.md) so
 * each event is one atomic statement. */
#include "store.h"

#include "agent_proto.h"
#include "db_query.h"
#include "job_status.h"
#include "log.h"
#include "util.h"

#include <jansson.h>
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
    for (int i = 0; *ids && i < qs; i++)
        (*ids)[(*n)++] = strdup(PQgetvalue(res, i, 0));
    PQclear(res);
    return qs;
}

#define NODE_JSON                                                                                  \
    "jsonb_build_object('id', n.id, 'hostname', n.hostname, 'address', n.address, "                \
    "'status', n.status, 'draining', n.draining, 'resources', n.resources, "                       \
    "'gpu_type', n.gpu_type, 'gpus', n.gpus, 'labels', n.labels, 'agent_version', "                \
    "n.agent_version, "                                                                            \
    "'registered_at', ty_ts(n.registered_at), 'last_heartbeat_at', ty_ts(n.last_heartbeat_at), "   \
    "'running_workers', (SELECT count(*) FROM workers w WHERE w.node_id = n.id "                   \
    "                    AND w.status IN ('PLACED', 'RUNNING')))"

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
        "  port_lo = $8::int, port_hi = $9::int, last_heartbeat_at = now()",
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

int store_node_set_draining(struct db_conn *c, const char *id, bool draining, char **json_out)
{
    static const struct db_stmt st = {"node_drain",
                                      "UPDATE nodes n SET draining = $2::boolean WHERE n.id = $1 "
                                      "RETURNING " NODE_JSON "::text",
                                      2, false};
    static const struct db_stmt st_preempt = {"node_drain_preempt",
                                              "SELECT count(*) FROM ty_node_drain($1)", 1, false};
    const char *p[] = {id, draining ? "true" : "false"};
    if (draining) { /* ty_node_drain sets the flag itself */
        int qs = db_exec(c, &st_preempt, p, NULL);
        return qs < 0 ? qs : store_node_get(c, id, json_out);
    }
    return db_exec_text(c, &st, p, json_out);
}

int store_node_live_workers(struct db_conn *c, const char *id, struct store_live_worker **out,
                            size_t *n)
{
    static const struct db_stmt st = {
        "node_live_workers",
        "SELECT job_id, attempt, rank, status = 'PLACED' FROM workers "
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
    for (int i = 0; i < qs; i++)
        (*out)[i] = (struct store_live_worker){
            .job = strtoll(PQgetvalue(res, i, 0), NULL, 10),
            .attempt = (int)strtol(PQgetvalue(res, i, 1), NULL, 10),
            .rank = (int)strtol(PQgetvalue(res, i, 2), NULL, 10),
            .placed = strcmp(PQgetvalue(res, i, 3), "t") == 0,
        };
    *n = (size_t)qs;
    PQclear(res);
    return qs;
}

/* Events are applied only when the worker is placed on the node that sends them. */
#define STORE_WORKER_ON_NODE(job, attempt, rank, node)                                             \
    "EXISTS (SELECT 1 FROM workers w WHERE w.job_id = " job " AND w.attempt = " attempt            \
    " AND w.rank = " rank " AND w.node_id = " node ")"

int store_worker_started(struct db_conn *c, const char *node, int64_t job, int attempt, int rank,
                         int64_t pid)
{
    static const struct db_stmt st = {
        "worker_started",
        "SELECT ty_worker_started($1::bigint, $2::int, $3::int, $4::int) WHERE " //
        STORE_WORKER_ON_NODE("$1::bigint", "$2::int", "$3::int", "$5"),
        5, false};
    char j[32], a[16], r[16], p[32];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    STORE_NUM(r, rank);
    STORE_NUM(p, pid);
    const char *params[] = {j, a, r, p, node};
    return db_exec(c, &st, params, NULL);
}

int store_workers_started(struct db_conn *c, const struct store_worker_start *w, size_t n)
{
    /* WITH ORDINALITY + ORDER BY: the calls run in the order of the events. */
    static const struct db_stmt st = {
        "workers_started",
        "SELECT ty_worker_started(e.job, e.attempt, e.rank, e.pid)"
        "  FROM unnest($1::bigint[], $2::int[], $3::int[], $4::int[], $5::text[]) WITH ORDINALITY"
        "       AS e(job, attempt, rank, pid, node, i)"
        " WHERE " STORE_WORKER_ON_NODE("e.job", "e.attempt", "e.rank", "e.node") //
        " ORDER BY e.i",
        5, false};
    if (n == 0)
        return 0;
    /* Five array literals {v0,v1,...}: job, attempt, rank, pid, node (node ids are
     * [A-Za-z0-9._-], agent_proto.c, so they need no quoting beyond the double quotes). */
    size_t cap = 3 + n * 21, ncap = 3 + n * (AGENT_PROTO_MAX_NODE_ID + 3);
    char *arrays[5] = {malloc(cap), malloc(cap), malloc(cap), malloc(cap), malloc(ncap)};
    int qs = DB_HARD_ERROR;
    if (arrays[0] && arrays[1] && arrays[2] && arrays[3] && arrays[4]) {
        size_t len[5] = {0, 0, 0, 0, 0};
        for (size_t i = 0; i < n; i++) {
            long long v[4] = {w[i].job, w[i].attempt, w[i].rank, w[i].pid};
            for (size_t k = 0; k < 4; k++)
                len[k] += (size_t)snprintf(arrays[k] + len[k], cap - len[k], "%c%lld",
                                           i ? ',' : '{', v[k]);
            len[4] += (size_t)snprintf(arrays[4] + len[4], ncap - len[4], "%c\"%s\"", i ? ',' : '{',
                                       w[i].node);
        }
        for (size_t k = 0; k < 4; k++)
            snprintf(arrays[k] + len[k], cap - len[k], "}");
        snprintf(arrays[4] + len[4], ncap - len[4], "}");
        const char *params[] = {arrays[0], arrays[1], arrays[2], arrays[3], arrays[4]};
        qs = db_exec(c, &st, params, NULL);
        if (qs >= 0)
            qs = (int)n;
    }
    for (size_t k = 0; k < 5; k++)
        free(arrays[k]);
    return qs;
}

int store_worker_exited(struct db_conn *c, const char *node, int64_t job, int attempt, int rank,
                        const int64_t *exit_code, const int64_t *signal, const char *error,
                        enum store_exit_outcome *outcome)
{
    static const struct db_stmt st = {
        "worker_exited",
        "SELECT ty_worker_exited($1::bigint, $2::int, $3::int, $4::int, $5::int, $6) WHERE " //
        STORE_WORKER_ON_NODE("$1::bigint", "$2::int", "$3::int", "$7"),
        7, false};
    char j[32], a[16], r[16], code[32], sig[32];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    STORE_NUM(r, rank);
    if (exit_code)
        STORE_NUM(code, *exit_code);
    if (signal)
        STORE_NUM(sig, *signal);
    const char *params[] = {j, a, r, exit_code ? code : NULL, signal ? sig : NULL, error, node};
    char *after = NULL; /* the job's status after the exit; NULL: nothing recorded */
    int qs = db_exec_text(c, &st, params, &after);
    enum job_status s = JOB_STATUS_COUNT;
    if (qs < 0)
        return qs;
    if (after && job_status_from_string(after, &s) != 0) {
        TY_ERROR("store", "worker exit of job %lld: unknown job status '%s'", (long long)job,
                 after);
        qs = DB_HARD_ERROR;
    }
    free(after);
    if (qs < 0)
        return qs;
    if (s == JOB_STATUS_COUNT)
        *outcome = STORE_EXIT_IGNORED;
    else if (job_status_is_terminal(s))
        *outcome = STORE_EXIT_SETTLED;
    else if (s == JOB_STATUS_STOPPING || s == JOB_STATUS_RESTARTING)
        *outcome = STORE_EXIT_STOP_OTHERS;
    else
        *outcome = STORE_EXIT_RECORDED;
    return qs;
}

/* Runs a parameterless statement whose one value is a count. Returns the count or an error. */
static int count_of(struct db_conn *c, const struct db_stmt *st)
{
    char *text = NULL;
    int qs = db_exec_text(c, st, NULL, &text);
    int64_t n = 0;
    if (qs > 0 && (text == NULL || util_parse_int64(text, 0, INT32_MAX, &n) != 0))
        qs = DB_HARD_ERROR;
    free(text);
    return qs < 0 ? qs : (int)n;
}

int store_jobs_timed_out(struct db_conn *c)
{
    static const struct db_stmt st = {"jobs_timed_out", "SELECT ty_jobs_timed_out()", 0, false};
    return count_of(c, &st);
}

int store_jobs_stopping(struct db_conn *c, int64_t **ids, size_t *n)
{
    static const struct db_stmt st = {
        "jobs_stopping", "SELECT id FROM jobs WHERE status IN ('STOPPING', 'RESTARTING')", 0, true};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    *ids = NULL;
    *n = 0;
    if (qs <= 0)
        return qs;
    *ids = calloc((size_t)qs, sizeof(int64_t));
    for (int i = 0; *ids && i < qs; i++)
        (*ids)[(*n)++] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    PQclear(res);
    return qs;
}

int store_jobs_settle_stopping(struct db_conn *c)
{
    static const struct db_stmt st = {"jobs_settle_stopping", "SELECT ty_jobs_settle_stopping()", 0,
                                      false};
    return count_of(c, &st);
}

/* The PGresults a struct store_sched_rows points into. */
struct sched_storage {
    PGresult *nodes, *workers, *pending;
};

static const char *value_or_null(const PGresult *res, int row, int col)
{
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

/* Fills rows from the three results; strings point into them. Returns 0 or -1 (out of memory). */
static int sched_rows_fill(struct store_sched_rows *rows, const struct sched_storage *st)
{
    size_t nn = st->nodes ? (size_t)PQntuples(st->nodes) : 0;
    size_t nw = st->workers ? (size_t)PQntuples(st->workers) : 0;
    size_t np = st->pending ? (size_t)PQntuples(st->pending) : 0;
    rows->nodes = nn ? calloc(nn, sizeof(*rows->nodes)) : NULL;
    rows->workers = nw ? calloc(nw, sizeof(*rows->workers)) : NULL;
    rows->pending = np ? calloc(np, sizeof(*rows->pending)) : NULL;
    if ((nn && !rows->nodes) || (nw && !rows->workers) || (np && !rows->pending))
        return -1;
    for (size_t i = 0; i < nn; i++) {
        int r = (int)i;
        rows->nodes[i] = (struct store_sched_node){
            .id = PQgetvalue(st->nodes, r, 0),
            .address = PQgetvalue(st->nodes, r, 1),
            .alive = strcmp(PQgetvalue(st->nodes, r, 2), "ALIVE") == 0,
            .draining = strcmp(PQgetvalue(st->nodes, r, 3), "t") == 0,
            .resources_json = PQgetvalue(st->nodes, r, 4),
            .gpu_type = value_or_null(st->nodes, r, 5),
        };
    }
    for (size_t i = 0; i < nw; i++) {
        int r = (int)i;
        rows->workers[i] = (struct store_sched_worker){
            .job = strtoll(PQgetvalue(st->workers, r, 0), NULL, 10),
            .node_id = PQgetvalue(st->workers, r, 1),
            .resources_json = PQgetvalue(st->workers, r, 2),
            .gpus_json = PQgetvalue(st->workers, r, 3),
            .end_epoch = strtoll(PQgetvalue(st->workers, r, 4), NULL, 10),
            .owner = PQgetvalue(st->workers, r, 5),
        };
    }
    for (size_t i = 0; i < np; i++) {
        int r = (int)i;
        rows->pending[i] = (struct store_sched_pending){
            .id = strtoll(PQgetvalue(st->pending, r, 0), NULL, 10),
            .priority = (int)strtol(PQgetvalue(st->pending, r, 1), NULL, 10),
            .created_epoch = strtoll(PQgetvalue(st->pending, r, 2), NULL, 10),
            .owner = PQgetvalue(st->pending, r, 3),
            .grow_from = (int)strtol(PQgetvalue(st->pending, r, 4), NULL, 10),
            .resize_interval_s = (int)strtol(PQgetvalue(st->pending, r, 5), NULL, 10),
        };
    }
    rows->nnodes = nn;
    rows->nworkers = nw;
    rows->npending = np;
    return 0;
}

int store_sched_snapshot(struct db_conn *c, struct store_sched_rows *out)
{
    static const struct db_stmt st_nodes = {
        "sched_nodes",
        "SELECT id, address, status, draining, resources::text, gpu_type FROM nodes ORDER BY id", 0,
        true};
    static const struct db_stmt st_running = {
        "sched_running",
        "SELECT w.job_id, w.node_id, w.resources::text, to_jsonb(w.gpus)::text, "
        "       CASE WHEN j.spec->>'timeout_s' IS NULL THEN -1 "
        "            ELSE (extract(epoch FROM a.created_at) + "
        "(j.spec->>'timeout_s')::float8)::bigint "
        "       END, j.owner "
        "FROM workers w JOIN attempts a USING (job_id, attempt) JOIN jobs j ON j.id = w.job_id "
        "WHERE w.status IN ('PLACED', 'RUNNING') ORDER BY w.job_id, w.node_id",
        0, true};
    static const struct db_stmt st_pending = {
        "sched_pending",
        "SELECT id, priority, created, owner, grow_from, resize_interval FROM ("
        " SELECT id, priority, extract(epoch FROM created_at)::bigint AS created, owner, "
        "        0 AS grow_from, 0 AS resize_interval "
        "   FROM jobs WHERE status = 'PENDING' "
        " UNION ALL "
        " SELECT id, priority, extract(epoch FROM created_at)::bigint, owner, 0, 0 "
        "   FROM jobs j WHERE j.status = 'RESTARTING' AND NOT EXISTS "
        "   (SELECT 1 FROM workers w WHERE w.job_id = j.id AND w.attempt = j.attempt "
        "       AND w.status IN ('PLACED', 'RUNNING')) "
        " UNION ALL "
        " SELECT -j.id, -2147483648, extract(epoch FROM now())::bigint, j.owner, a.world_size, "
        "        coalesce((j.spec #>> '{scaling_config,elastic_resize_interval_s}')::int, 60) "
        "   FROM jobs j JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempt "
        "  WHERE j.status = 'RUNNING' "
        "    AND jsonb_typeof(j.spec #> '{scaling_config,num_workers}') = 'object' "
        "    AND a.world_size < (j.spec #>> '{scaling_config,num_workers,max}')::int) q "
        "ORDER BY priority DESC, created, id",
        0, true};
    memset(out, 0, sizeof(*out));
    struct sched_storage *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return DB_HARD_ERROR;
    out->storage = st;
    int qs = db_exec(c, &st_nodes, NULL, &st->nodes);
    if (qs >= 0)
        qs = db_exec(c, &st_running, NULL, &st->workers);
    if (qs >= 0)
        qs = db_exec(c, &st_pending, NULL, &st->pending);
    if (qs >= 0 && sched_rows_fill(out, st) != 0)
        qs = DB_HARD_ERROR;
    return qs;
}

void store_sched_rows_free(struct store_sched_rows *rows)
{
    struct sched_storage *st = rows->storage;
    if (st) {
        PQclear(st->nodes);
        PQclear(st->workers);
        PQclear(st->pending);
        free(st);
    }
    free(rows->nodes);
    free(rows->workers);
    free(rows->pending);
    memset(rows, 0, sizeof(*rows));
}

/* "{1,2,3}": ids as a PostgreSQL array literal (malloc'd), or NULL when out of memory. */
static char *id_array_literal(const int64_t *ids, size_t n)
{
    size_t cap = 3 + n * 21;
    char *text = malloc(cap);
    if (text == NULL)
        return NULL;
    size_t len = 0;
    text[len++] = '{';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s%lld", i ? "," : "", (long long)ids[i]);
    snprintf(text + len, cap - len, "}");
    return text;
}

int store_job_specs(struct db_conn *c, const int64_t *ids, size_t n, struct store_job_spec **out,
                    size_t *nout)
{
    static const struct db_stmt st = {
        "job_specs", "SELECT id, spec::text FROM jobs WHERE id = ANY($1::bigint[])", 1, true};
    *out = NULL;
    *nout = 0;
    if (n == 0)
        return 0;
    char *array = id_array_literal(ids, n);
    if (array == NULL)
        return DB_HARD_ERROR;
    const char *p[] = {array};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    free(array);
    if (qs <= 0)
        return qs;
    struct store_job_spec *specs = calloc((size_t)qs, sizeof(*specs));
    for (int i = 0; specs && i < qs; i++) {
        specs[i].id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        specs[i].spec_json = strdup(PQgetvalue(res, i, 1));
        if (specs[i].spec_json == NULL) {
            store_job_specs_free(specs, (size_t)i);
            specs = NULL;
        }
    }
    PQclear(res);
    if (specs == NULL)
        return DB_HARD_ERROR;
    *out = specs;
    *nout = (size_t)qs;
    return qs;
}

void store_job_specs_free(struct store_job_spec *specs, size_t n)
{
    for (size_t i = 0; specs && i < n; i++)
        free(specs[i].spec_json);
    free(specs);
}

int store_place(struct db_conn *c, int64_t job, const char *workers_json, int nports, int *attempt,
                const char *origin)
{
    static const struct db_stmt st = {
        "place",
        "SELECT o_attempt, CASE WHEN o_attempt IS NOT NULL THEN pg_notify('trainyard_launch', "
        "    $1::bigint::text || ' ' || o_attempt::text || ' ' || $4::text) END "
        "FROM ty_place($1::bigint, $2::jsonb, $3::int)",
        4, false};
    char j[32], np[16];
    STORE_NUM(j, job);
    STORE_NUM(np, nports);
    const char *p[] = {j, workers_json, np, origin};
    char *out = NULL;
    int qs = db_exec_text(c, &st, p, &out);
    if (qs <= 0)
        return qs;
    if (out == NULL)
        return 0;
    *attempt = (int)strtol(out, NULL, 10);
    free(out);
    return 1;
}

int store_job_set_waiting_message(struct db_conn *c, int64_t job, const char *message)
{
    static const struct db_stmt st = {"job_waiting_message",
                                      "UPDATE jobs SET status_message = $2 WHERE id = $1::bigint "
                                      "AND status IN ('PENDING', 'RESTARTING') "
                                      "AND status_message IS DISTINCT FROM $2",
                                      2, false};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j, message};
    return db_exec(c, &st, p, NULL);
}

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

int store_job_workers(struct db_conn *c, int64_t job, char **json_out)
{
    static const struct db_stmt st = {
        "job_workers",
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN NULL ELSE "
        " coalesce(jsonb_agg(jsonb_build_object('attempt', w.attempt, 'rank', w.rank, "
        "  'local_rank', w.local_rank, 'node_rank', w.node_rank, 'node_id', w.node_id, "
        "  'gpus', to_jsonb(w.gpus), 'resources', w.resources, 'status', w.status, 'pid', w.pid, "
        "  'exit_code', w.exit_code, 'signal', w.signal, 'started_at', ty_ts(w.started_at), "
        "  'finished_at', ty_ts(w.finished_at), 'progress', CASE WHEN p.rank IS NOT NULL THEN "
        "  jsonb_build_object('op', p.op, 'coll_seq', p.coll_seq, 'in_collective', "
        "  p.in_collective, 'report_seq', p.report_seq, 'progress_at', ty_ts(p.progress_at), "
        "  'heartbeat_at', ty_ts(p.heartbeat_at)) END) ORDER BY w.attempt, w.rank), '[]') "
        "END::text "
        "FROM workers w LEFT JOIN worker_progress p ON p.job_id = w.job_id "
        " AND p.attempt = w.attempt AND p.rank = w.rank WHERE w.job_id = $1::bigint",
        1, true};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    return db_exec_text(c, &st, p, json_out);
}

int store_job_events(struct db_conn *c, int64_t job, char **json_out)
{
    static const struct db_stmt st = {
        "job_events",
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN NULL ELSE "
        " coalesce(jsonb_agg(jsonb_build_object('attempt', e.attempt, 'status', e.status, "
        "  'message', e.message, 'at', ty_ts(e.at)) ORDER BY e.id), '[]') END::text "
        "FROM job_events e WHERE e.job_id = $1::bigint",
        1, true};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    return db_exec_text(c, &st, p, json_out);
}

int store_job_attempts(struct db_conn *c, int64_t job, char **json_out)
{
    static const struct db_stmt st = {
        "job_attempts",
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN NULL ELSE "
        " coalesce(jsonb_agg(jsonb_build_object('attempt', a.attempt, 'status', a.status, "
        "  'world_size', a.world_size, 'master_addr', a.master_addr, "
        "  'master_port', a.master_port, 'error', a.error, 'created_at', ty_ts(a.created_at), "
        "  'finished_at', ty_ts(a.finished_at), 'resumed_from_checkpoint', a.resumed_from, "
        "  'end_reason', a.end_reason) ORDER BY a.attempt), '[]') END::text "
        "FROM attempts a WHERE a.job_id = $1::bigint",
        1, true};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    return db_exec_text(c, &st, p, json_out);
}

int store_job_resize(struct db_conn *c, int64_t job, const char *message)
{
    static const struct db_stmt st = {"job_resize", "SELECT ty_job_resize($1::bigint, $2)", 2,
                                      false};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j, message};
    return db_exec(c, &st, p, NULL);
}
