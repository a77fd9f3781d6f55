/* What a scheduling pass reads: every node, every live worker and the queue (store_sched_rows),
 * in three statements whose results the rows point into. */
#include "store.h"

#include "db_query.h"
#include "node_status.h"

#include <stdlib.h>
#include <string.h>

/* The PGresults a struct store_sched_rows points into. */
struct sched_storage {
    PGresult *nodes, *workers, *pending;
};

static int node_row(const PGresult *res, int r, struct store_sched_node *n)
{
    const char *status;
    if (db_col_text(res, r, "id", &n->id) != 0 ||
        db_col_text(res, r, "address", &n->address) != 0 ||
        db_col_text(res, r, "status", &status) != 0 ||
        db_col_bool(res, r, "draining", &n->draining) != 0 ||
        db_col_bool(res, r, "disk_pressure", &n->disk_pressure) != 0 ||
        db_col_bool(res, r, "disconnected", &n->disconnected) != 0 ||
        db_col_text(res, r, "resources", &n->resources_json) != 0 ||
        db_col_text_opt(res, r, "gpu_type", &n->gpu_type) != 0)
        return -1;
    n->alive = strcmp(status, node_status_name(NODE_STATUS_ALIVE)) == 0;
    return 0;
}

static int worker_row(const PGresult *res, int r, struct store_sched_worker *w)
{
    return db_col_int64(res, r, "job_id", &w->job) != 0 ||
                   db_col_text(res, r, "node_id", &w->node_id) != 0 ||
                   db_col_text(res, r, "resources", &w->resources_json) != 0 ||
                   db_col_text(res, r, "gpus", &w->gpus_json) != 0 ||
                   db_col_int64(res, r, "end_epoch", &w->end_epoch) != 0 ||
                   db_col_text(res, r, "owner", &w->owner) != 0 ||
                   db_col_text(res, r, "project", &w->project) != 0
               ? -1
               : 0;
}

static int pending_row(const PGresult *res, int r, struct store_sched_pending *p)
{
    return db_col_int64(res, r, "id", &p->id) != 0 ||
                   db_col_int(res, r, "priority", &p->priority) != 0 ||
                   db_col_int64(res, r, "created", &p->created_epoch) != 0 ||
                   db_col_text(res, r, "owner", &p->owner) != 0 ||
                   db_col_text(res, r, "project", &p->project) != 0 ||
                   db_col_int(res, r, "grow_from", &p->grow_from) != 0 ||
                   db_col_int(res, r, "resize_interval", &p->resize_interval_s) != 0
               ? -1
               : 0;
}

/* Fills rows from the three results; strings point into them. Returns 0, or -1 (out of memory,
 * or a value that does not read: logged). */
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
    for (size_t i = 0; i < nn; i++)
        if (node_row(st->nodes, (int)i, &rows->nodes[i]) != 0)
            return -1;
    for (size_t i = 0; i < nw; i++)
        if (worker_row(st->workers, (int)i, &rows->workers[i]) != 0)
            return -1;
    for (size_t i = 0; i < np; i++)
        if (pending_row(st->pending, (int)i, &rows->pending[i]) != 0)
            return -1;
    rows->nnodes = nn;
    rows->nworkers = nw;
    rows->npending = np;
    return 0;
}

int store_sched_snapshot(struct db_conn *c, struct store_sched_rows *out)
{
    static const struct db_stmt st_nodes = {
        "sched_nodes",
        "SELECT id, address, status, draining, resources::text AS resources, gpu_type, "
        "       coalesce((disk->>'pressure')::boolean, false) AS disk_pressure, "
        "       disconnected_at IS NOT NULL AS disconnected FROM nodes "
        "ORDER BY id",
        0, true};
    static const struct db_stmt st_running = {
        "sched_running",
        "SELECT w.job_id, w.node_id, w.resources::text AS resources, "
        "       to_jsonb(w.gpus)::text AS gpus, "
        "       CASE WHEN j.spec->>'timeout_s' IS NULL THEN -1 "
        "            ELSE (extract(epoch FROM a.created_at) + "
        "(j.spec->>'timeout_s')::float8)::bigint "
        "       END AS end_epoch, j.owner, j.project "
        "FROM workers w JOIN attempts a USING (job_id, attempt) JOIN jobs j ON j.id = w.job_id "
        "WHERE w.status IN ('PLACED', 'RUNNING') ORDER BY w.job_id, w.node_id",
        0, true};
    static const struct db_stmt st_pending = {
        "sched_pending",
        "SELECT id, priority, created, owner, project, grow_from, resize_interval FROM ("
        " SELECT id, priority, extract(epoch FROM created_at)::bigint AS created, owner, project, "
        "        0 AS grow_from, 0 AS resize_interval "
        "   FROM jobs WHERE status = 'PENDING' "
        " UNION ALL "
        " SELECT id, priority, extract(epoch FROM created_at)::bigint, owner, project, 0, 0 "
        "   FROM jobs j WHERE j.status = 'RESTARTING' AND NOT EXISTS "
        "   (SELECT 1 FROM workers w WHERE w.job_id = j.id AND w.attempt = j.attempt "
        "       AND w.status IN ('PLACED', 'RUNNING')) "
        " UNION ALL "
        " SELECT -j.id, -2147483648, extract(epoch FROM now())::bigint, j.owner, j.project, "
        "        a.world_size, "
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
