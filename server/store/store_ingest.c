/* Typed ingest of an agent's periodic messages: the parsed `progress`, `usage` and `gpus` rows
 * (common/agent_proto.h) become the parameters of one statement each, so that control/ hands
 * over what the protocol parsed and never rebuilds JSON. The SQL functions take their rows as one
 * jsonb array (store/sql/ty_progress_ingest.sql, ty_usage_ingest.sql,
 * ty_gpus_ingest.sql): that array is built here. */
#include "store.h"

#include "agent_proto.h"
#include "db_query.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Runs `st` with (node_id, rows) and reads its integer result into *n. Takes the reference of
 * rows (NULL: out of memory). Returns the query status (a row count or an error). */
static int ingest_rows(struct db_conn *c, const struct db_stmt *st, const char *node_id,
                       json_t *rows, int *n)
{
    char *text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
    json_decref(rows);
    if (text == NULL)
        return DB_HARD_ERROR;
    const char *p[] = {node_id, text};
    char *v = NULL;
    int qs = db_exec_text(c, st, p, &v);
    free(text);
    *n = v ? (int)strtol(v, NULL, 10) : 0;
    free(v);
    return qs;
}

/* n >= 0 as an integer, n < 0 as null (new reference). */
static json_t *int_or_null(int64_t n)
{
    return n < 0 ? json_null() : json_integer((json_int_t)n);
}

int store_progress_ingest(struct db_conn *c, const char *node_id,
                          const struct aproto_progress *rows, size_t n)
{
    static const struct db_stmt st = {"progress_ingest", "SELECT ty_progress_ingest($1, $2::jsonb)",
                                      2, false};
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const struct aproto_progress *p = &rows[i];
        int64_t job;
        if (util_parse_int64(p->job_id, 1, INT64_MAX, &job) != 0)
            continue; /* not a job of this server */
        json_t *row = json_pack(
            "{s:I, s:I, s:I, s:s?, s:I, s:b, s:I, s:I, s:I}", "job_id", (json_int_t)job, "attempt",
            (json_int_t)p->attempt, "rank", (json_int_t)p->rank, "op", p->op, "coll_seq",
            (json_int_t)p->coll_seq, "in_collective", p->in_collective, "report_seq",
            (json_int_t)p->report_seq, "heartbeat_age_ms", (json_int_t)p->heartbeat_age_ms,
            "progress_age_ms", (json_int_t)p->progress_age_ms);
        if (row == NULL || json_array_append_new(arr, row) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    int stored = 0;
    int qs = ingest_rows(c, &st, node_id, arr, &stored);
    return qs <= 0 ? qs : stored;
}

int store_usage_ingest(struct db_conn *c, const char *node_id, const struct aproto_usage *rows,
                       size_t n)
{
    static const struct db_stmt st = {"usage_ingest", "SELECT ty_usage_ingest($1, $2::jsonb)", 2,
                                      false};
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const struct aproto_usage *u = &rows[i];
        int64_t job;
        if (util_parse_int64(u->job_id, 1, INT64_MAX, &job) != 0)
            continue; /* not a job of this server */
        json_t *row =
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:b}", "job_id", (json_int_t)job, "attempt",
                      (json_int_t)u->attempt, "rank", (json_int_t)u->rank, "cpu_usec",
                      (json_int_t)u->cpu_usec, "memory_bytes", (json_int_t)u->memory_bytes,
                      "memory_peak_bytes", (json_int_t)u->memory_peak_bytes, "final", u->final);
        if (row == NULL || json_array_append_new(arr, row) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    int stored = 0;
    int qs = ingest_rows(c, &st, node_id, arr, &stored);
    return qs <= 0 ? qs : stored;
}

int store_gpus_ingest(struct db_conn *c, const char *node_id, const struct aproto_gpu_row *rows,
                      size_t n)
{
    static const struct db_stmt st = {"gpus_ingest", "SELECT ty_gpus_ingest($1, $2::jsonb)", 2,
                                      false};
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const struct aproto_gpu_row *g = &rows[i];
        /* -1 (NVML did not say) is stored as null */
        json_t *row = json_pack(
            "{s:I, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:b}", "index", (json_int_t)g->index, "uuid",
            g->uuid, "name", g->name, "memory_mb", (json_int_t)g->memory_mb, "memory_used_mb",
            (json_int_t)g->memory_used_mb, "utilization_pct", int_or_null(g->utilization_pct),
            "temperature_c", int_or_null(g->temperature_c), "power_mw", int_or_null(g->power_mw),
            "lost", g->lost);
        /* the critical Xid that made it unhealthy (migration 0028 names it in the event) */
        if (row && g->xid > 0 && json_object_set_new(row, "xid", json_integer(g->xid)) != 0) {
            json_decref(row);
            row = NULL;
        }
        if (row == NULL || json_array_append_new(arr, row) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    int lost = 0;
    int qs = ingest_rows(c, &st, node_id, arr, &lost);
    return qs < 0 ? qs : qs == 0 ? 0 : lost;
}
