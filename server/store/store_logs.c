/* Worker logs: appending agents' log chunks in batches (store/sql/ty_log_append_batch.sql)
 * and reading a job's lines back for GET /api/v1/jobs/{id}/logs. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct append_txn {
    const char *rows;
    int64_t cap;
    struct store_log_outcome *out;
};

static int append_body(struct db_conn *c, void *arg)
{
    static const struct db_stmt st = {
        "log_append_batch",
        "SELECT lines, bytes, dropped FROM ty_log_append_batch($1::jsonb, $2::bigint)", 2, false};
    struct append_txn *t = arg;
    char cap[32];
    STORE_NUM(cap, t->cap);
    const char *p[] = {t->rows, cap};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0) {
        PQclear(res);
        return qs;
    }
    t->out->lines = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    t->out->bytes = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    t->out->dropped = strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    PQclear(res);
    return qs;
}

int store_logs_append(struct db_conn *c, const char *rows_json, int64_t cap,
                      struct store_log_outcome *out)
{
    memset(out, 0, sizeof(*out));
    struct append_txn t = {rows_json, cap, out};
    return db_run_txn(c, append_body, &t);
}

int store_logs_read(struct db_conn *c, int64_t job, const struct store_logs_query *q,
                    struct store_log_line **lines, size_t *n, char *sqlstate)
{
    static const struct db_stmt job_st = {
        "logs_job_attempt", "SELECT attempt FROM jobs WHERE id = $1::bigint", 1, true};
    /* Lines of the attempt, oldest first; with a tail, the newest `tail` (read backwards). */
    static const struct db_stmt lines_st = {
        "logs_lines",
        "SELECT rank, attempt, offs, line, ty_ts(at), stream FROM ("
        "  SELECT s.rank, s.attempt, s.log_offset AS offs, l.line, s.seq, l.i, s.at, s.stream "
        "  FROM job_stream s, jsonb_array_elements_text(s.body->'lines') WITH ORDINALITY "
        "       AS l(line, i) "
        "  WHERE s.job_id = $1::bigint AND s.kind = 'log' AND s.attempt = $2::int "
        "    AND ($3::int[] IS NULL OR s.rank = ANY($3::int[])) "
        "    AND s.log_offset >= $4::bigint "
        "    AND ($5::text IS NULL OR l.line ~ $5::text) "
        "    AND ($7::text IS NULL OR s.stream = $7::text) "
        "  ORDER BY s.seq DESC, l.i DESC LIMIT $6::bigint) t "
        "ORDER BY seq, i",
        7, true};
    *lines = NULL;
    *n = 0;
    sqlstate[0] = '\0';
    char jobs[32], attempt[32], offset[32], limit[32];
    STORE_NUM(jobs, job);
    const char *jp[] = {jobs};
    char *att = NULL;
    int qs = db_exec_text(c, &job_st, jp, &att);
    if (qs <= 0)
        return qs;
    int64_t a = q->attempt > 0 ? q->attempt : (att ? strtoll(att, NULL, 10) : 0);
    free(att);
    STORE_NUM(attempt, a);
    STORE_NUM(offset, q->offset);
    STORE_NUM(limit, q->tail > 0 ? q->tail : INT64_MAX);
    const char *p[] = {jobs, attempt, q->ranks, offset, q->grep, limit, q->stream};
    PGresult *res = NULL;
    qs = db_exec(c, &lines_st, p, &res);
    if (qs < 0) {
        snprintf(sqlstate, 6, "%s", db_last_sqlstate(c));
        return qs;
    }
    size_t rows = (size_t)qs;
    if (rows > 0) {
        *lines = calloc(rows, sizeof(**lines));
        if (!*lines) {
            PQclear(res);
            return DB_HARD_ERROR;
        }
    }
    for (size_t i = 0; i < rows; i++) {
        struct store_log_line *l = &(*lines)[i];
        l->rank = strtoll(PQgetvalue(res, (int)i, 0), NULL, 10);
        l->attempt = strtoll(PQgetvalue(res, (int)i, 1), NULL, 10);
        l->offset = strtoll(PQgetvalue(res, (int)i, 2), NULL, 10);
        snprintf(l->stream, sizeof(l->stream), "%s", PQgetvalue(res, (int)i, 5));
        l->line = strdup(PQgetvalue(res, (int)i, 3));
        l->at = strdup(PQgetvalue(res, (int)i, 4));
        if (!l->line || !l->at) {
            *n = i + 1; /* line i's half too */
            PQclear(res);
            return DB_HARD_ERROR;
        }
    }
    *n = rows;
    PQclear(res);
    return 1; /* the job exists */
}

void store_log_lines_free(struct store_log_line *lines, size_t n)
{
    for (size_t i = 0; lines && i < n; i++) {
        free(lines[i].line);
        free(lines[i].at);
    }
    free(lines);
}
