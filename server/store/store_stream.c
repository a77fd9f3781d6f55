/* Stream tables and their notifications (store_stream.h). */
#include "store_stream.h"

#include "db_query.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void store_stream_rows_free(struct store_stream_rows *rows)
{
    free(rows->rows);
    if (rows->storage)
        PQclear(rows->storage);
    memset(rows, 0, sizeof(*rows));
}

/* Fills out from res (taken over): columns seq, kind, attempt, rank, at, body[, snapshot,
 * restricted]. */
static void rows_from_result(PGresult *res, struct store_stream_rows *out, bool with_snapshot)
{
    int n = PQntuples(res);
    out->storage = res;
    out->rows = calloc((size_t)n, sizeof(*out->rows));
    if (out->rows == NULL)
        return;
    out->n = (size_t)n;
    for (int i = 0; i < n; i++) {
        struct store_stream_row *r = &out->rows[i];
        r->seq = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        r->kind = PQgetvalue(res, i, 1);
        r->has_attempt = !PQgetisnull(res, i, 2);
        r->attempt = r->has_attempt ? (int)strtol(PQgetvalue(res, i, 2), NULL, 10) : 0;
        r->has_rank = !PQgetisnull(res, i, 3);
        r->rank = r->has_rank ? (int)strtol(PQgetvalue(res, i, 3), NULL, 10) : 0;
        r->at = PQgetvalue(res, i, 4);
        r->body = PQgetvalue(res, i, 5);
        r->body_len = (size_t)PQgetlength(res, i, 5);
    }
    if (with_snapshot && n > 0)
        out->snapshot = PQgetvalue(res, 0, 6);
    for (int i = 0; with_snapshot && i < n; i++)
        out->rows[i].restricted = strcmp(PQgetvalue(res, i, 7), "t") == 0;
}

/* Runs a read and fills out. */
static int read_rows(struct db_conn *c, const struct db_stmt *st, const char *const *params,
                     struct store_stream_rows *out, bool with_snapshot)
{
    memset(out, 0, sizeof(*out));
    PGresult *res = NULL;
    int qs = db_exec(c, st, params, &res);
    if (qs <= 0)
        return qs;
    rows_from_result(res, out, with_snapshot);
    if (out->rows == NULL) {
        store_stream_rows_free(out);
        return DB_SOFT_ERROR;
    }
    return qs;
}

/* A `report` row stores no values since ty_report_ingest_batch stopped copying them (issue 27):
 * they are read from its reports row here, so that subscribers see the same body as before. */
int store_job_stream_read(struct db_conn *c, int64_t job, int64_t after, int64_t upto, int limit,
                          struct store_stream_rows *out)
{
    static const struct db_stmt st = {
        "job_stream_read",
        "SELECT s.seq, s.kind, s.attempt, s.rank, ty_ts(s.at), "
        "       CASE WHEN s.kind = 'report' AND NOT s.body ? 'metrics' "
        "            THEN coalesce((SELECT s.body || jsonb_build_object('metrics', r.metrics) "
        "                             FROM reports r WHERE r.job_id = s.job_id "
        "                              AND r.attempt = s.attempt AND r.rank = s.rank "
        "                              AND r.seq = (s.body->>'k')::bigint), s.body) "
        "            ELSE s.body END::text "
        "FROM job_stream s "
        "WHERE s.job_id = $1 AND s.seq > $2 AND ($3::bigint < 0 OR s.seq <= $3::bigint) "
        "ORDER BY s.seq LIMIT $4::int",
        4, true};
    char j[24], a[24], u[24], l[16];
    STORE_NUM(j, job);
    STORE_NUM(a, after);
    STORE_NUM(u, upto);
    STORE_NUM(l, limit);
    const char *params[] = {j, a, u, l};
    return read_rows(c, &st, params, out, false);
}

int store_cluster_stream_read(struct db_conn *c, int64_t after, int64_t upto, int limit,
                              struct store_stream_rows *out)
{
    /* The snapshot is the statement's own (pg_current_snapshot: the active one), so the caller
     * knows which transactions could still fill a hole among these rows. */
    static const struct db_stmt st = {
        "cluster_stream_read",
        "SELECT s.seq, s.kind, NULL::int, NULL::int, ty_ts(s.at), s.body::text, "
        "       pg_current_snapshot()::text, "
        "       NOT coalesce((SELECT ty_project_visible(j.project, NULL, false) FROM jobs j "
        "                      WHERE j.id = s.job_id), true) "
        "FROM cluster_stream s "
        "WHERE s.seq > $1 AND ($2::bigint < 0 OR s.seq <= $2::bigint) ORDER BY s.seq "
        "LIMIT $3::int",
        3, true};
    char a[24], u[24], l[16];
    STORE_NUM(a, after);
    STORE_NUM(u, upto);
    STORE_NUM(l, limit);
    const char *params[] = {a, u, l};
    return read_rows(c, &st, params, out, true);
}

int store_job_stream_head(struct db_conn *c, int64_t job, int64_t *head)
{
    static const struct db_stmt st = {"job_stream_head",
                                      "SELECT stream_seq FROM jobs WHERE id = $1", 1, true};
    char j[24];
    STORE_NUM(j, job);
    const char *params[] = {j};
    char *text = NULL;
    int qs = db_exec_text(c, &st, params, &text);
    if (qs > 0)
        *head = text ? strtoll(text, NULL, 10) : 0;
    free(text);
    return qs;
}

int store_cluster_stream_head(struct db_conn *c, int64_t *head, char **snapshot)
{
    static const struct db_stmt st = {
        "cluster_stream_head",
        "SELECT coalesce(max(seq), 0), pg_current_snapshot()::text FROM cluster_stream", 0, true};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    if (qs <= 0)
        return qs;
    *head = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    *snapshot = strdup(PQgetvalue(res, 0, 1));
    PQclear(res);
    return *snapshot ? qs : DB_SOFT_ERROR;
}

int store_snapshot_running(struct db_conn *c, const char *snapshot, int64_t *running)
{
    static const struct db_stmt st = {"snapshot_running",
                                      "SELECT count(*) FROM pg_snapshot_xip($1::pg_snapshot) AS x "
                                      "WHERE pg_xact_status(x) = 'in progress'",
                                      1, true};
    const char *params[] = {snapshot};
    char *text = NULL;
    int qs = db_exec_text(c, &st, params, &text);
    if (qs > 0)
        *running = text ? strtoll(text, NULL, 10) : 0;
    free(text);
    return qs;
}

int store_job_streams_grown(struct db_conn *c, const int64_t *jobs, const int64_t *cursors,
                            size_t n, bool *grown)
{
    static const struct db_stmt st = {
        "job_streams_grown",
        "SELECT t.i FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS t(job, cursor, i) "
        "JOIN jobs j ON j.id = t.job WHERE j.stream_seq > t.cursor",
        2, true};
    memset(grown, 0, n * sizeof(*grown));
    if (n == 0)
        return 0;
    /* "{" + n * (20 digits + sign + comma) + "}" */
    size_t cap = 2 + n * 22;
    char *a = malloc(cap), *b = malloc(cap);
    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return DB_SOFT_ERROR;
    }
    size_t la = 0, lb = 0;
    for (size_t i = 0; i < n; i++) {
        la += (size_t)snprintf(a + la, cap - la, "%s%lld", i ? "," : "{", (long long)jobs[i]);
        lb += (size_t)snprintf(b + lb, cap - lb, "%s%lld", i ? "," : "{", (long long)cursors[i]);
    }
    snprintf(a + la, cap - la, "}");
    snprintf(b + lb, cap - lb, "}");
    const char *params[] = {a, b};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, params, &res);
    free(a);
    free(b);
    for (int r = 0; qs > 0 && r < PQntuples(res); r++) {
        int64_t i = 0;
        if (db_col_int64(res, r, "i", &i) == 0 && i >= 1 && (size_t)i <= n)
            grown[i - 1] = true;
    }
    if (res)
        PQclear(res);
    return qs;
}

int store_stream_listen(struct db_conn *c)
{
    return db_exec_simple(c, "LISTEN ty_stream");
}

int store_stream_unlisten(struct db_conn *c)
{
    return db_exec_simple(c, "UNLISTEN *");
}

int store_stream_notify_peers(struct db_conn *c)
{
    /* The notification holds no data: its commit need not wait for the WAL flush. */
    return db_exec_simple(c, "SELECT set_config('synchronous_commit', 'off', true), "
                             "pg_notify('ty_stream', '')");
}

int store_stream_socket(struct db_conn *c)
{
    PGconn *pg = db_pg(c);
    return pg && PQstatus(pg) == CONNECTION_OK ? PQsocket(pg) : -1;
}

bool store_stream_connected(struct db_conn *c)
{
    PGconn *pg = db_pg(c);
    return pg && PQstatus(pg) == CONNECTION_OK;
}

int store_stream_notifications(struct db_conn *c)
{
    PGconn *pg = db_pg(c);
    if (pg == NULL || PQstatus(pg) != CONNECTION_OK || PQconsumeInput(pg) == 0)
        return DB_SOFT_ERROR;
    int self = PQbackendPID(pg);
    int n = 0;
    PGnotify *note;
    while ((note = PQnotifies(pg)) != NULL) {
        if (note->be_pid != self && strcmp(note->relname, "ty_stream") == 0)
            n++;
        PQfreemem(note);
    }
    return n;
}
