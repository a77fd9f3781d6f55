/* Job queries: submit, get, list, stop, delete. The job's JSON shape is defined once, in SQL
 * (ty_job_json, migrations/0001_init.sql), so the rows go to the client without re-encoding. */
#include "store.h"

#include "auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const terminal_statuses = "('SUCCEEDED', 'FAILED', 'STOPPED')";

int store_job_insert(struct db_conn *c, const char *owner, const json_t *spec, int64_t *id_out,
                     char **json_out)
{
    static const struct db_stmt st = {
        "job_insert",
        "WITH j AS (INSERT INTO jobs (name, owner, status, status_message, priority, spec) "
        "           VALUES ($1, $2, 'PENDING', 'waiting to be scheduled', $3::int, $4::jsonb) "
        "           RETURNING *), "
        "     e AS (INSERT INTO job_events (job_id, attempt, status, message) "
        "           SELECT id, 0, 'PENDING', 'submitted by ' || owner FROM j) "
        "SELECT id, ty_job_json(j.*::jobs)::text FROM j",
        4, false};
    char *spec_text = json_dumps(spec, JSON_COMPACT);
    if (spec_text == NULL)
        return DB_HARD_ERROR;
    char prio[32];
    STORE_NUM(prio, json_integer_value(json_object_get(spec, "priority")));
    const char *params[] = {json_string_value(json_object_get(spec, "name")), owner, prio,
                            spec_text};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, params, &res);
    free(spec_text);
    if (qs <= 0)
        return qs;
    *id_out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    *json_out = strdup(PQgetvalue(res, 0, 1));
    PQclear(res);
    return qs;
}

int store_job_get(struct db_conn *c, int64_t id, char **json_out)
{
    static const struct db_stmt st = {
        "job_get", "SELECT ty_job_json(j)::text FROM jobs j WHERE id = $1", 1, true};
    char ids[32];
    STORE_NUM(ids, id);
    const char *params[] = {ids};
    return db_exec_text(c, &st, params, json_out);
}

int store_job_list(struct db_conn *c, const char *statuses, int64_t before_id, int limit,
                   char **json_out, int64_t *min_id_out)
{
    static const struct db_stmt st = {
        "job_list",
        "SELECT coalesce(jsonb_agg(ty_job_json(j) ORDER BY j.id DESC), '[]')::text, "
        "       coalesce(min(j.id), 0), count(*) "
        "FROM (SELECT * FROM jobs WHERE ($1::text[] IS NULL OR status = ANY($1::text[])) "
        "        AND ($2::bigint = 0 OR id < $2::bigint) ORDER BY id DESC LIMIT $3::int) j",
        3, true};
    char before[32], lim[32];
    STORE_NUM(before, before_id);
    STORE_NUM(lim, limit);
    const char *params[] = {statuses, before, lim};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, params, &res);
    if (qs <= 0)
        return qs;
    *json_out = strdup(PQgetvalue(res, 0, 0));
    *min_id_out = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    int n = (int)strtol(PQgetvalue(res, 0, 2), NULL, 10);
    PQclear(res);
    return n;
}

/* ---- stop ---- */

struct stop_ctx {
    int64_t id;
    const struct srv_identity *who;
    enum store_stop_outcome outcome;
    char *json;
};

static int stop_body(struct db_conn *c, void *arg)
{
    static const struct db_stmt lock = {
        "job_stop_lock", "SELECT status, owner FROM jobs WHERE id = $1 FOR UPDATE", 1, true};
    static const struct db_stmt to_stopped = {
        "job_stop_pending",
        "WITH u AS (UPDATE jobs SET status = 'STOPPED', status_message = $2, "
        "           finished_at = now() WHERE id = $1 RETURNING *), "
        "     e AS (INSERT INTO job_events (job_id, attempt, status, message) "
        "           SELECT id, attempt, 'STOPPED', $2 FROM u) "
        "SELECT ty_job_json(u.*::jobs)::text FROM u",
        2, false};
    static const struct db_stmt to_stopping = {
        "job_stop_running",
        "WITH u AS (UPDATE jobs SET status = 'STOPPING', status_message = $2 "
        "           WHERE id = $1 AND status <> 'STOPPING' RETURNING *), "
        "     e AS (INSERT INTO job_events (job_id, attempt, status, message) "
        "           SELECT id, attempt, 'STOPPING', $2 FROM u) "
        "SELECT 1",
        2, false};
    struct stop_ctx *sc = arg;
    char ids[32];
    STORE_NUM(ids, sc->id);
    const char *p1[] = {ids};
    PGresult *res = NULL;
    int qs = db_exec(c, &lock, p1, &res);
    if (qs <= 0) {
        sc->outcome = STORE_STOP_NOT_FOUND;
        return qs;
    }
    char status[16];
    snprintf(status, sizeof(status), "%s", PQgetvalue(res, 0, 0));
    bool allowed = srv_auth_may_modify(sc->who, PQgetvalue(res, 0, 1));
    PQclear(res);
    if (!allowed) {
        sc->outcome = STORE_STOP_FORBIDDEN;
        return 0;
    }
    if (strcmp(status, "SUCCEEDED") == 0 || strcmp(status, "FAILED") == 0 ||
        strcmp(status, "STOPPED") == 0) {
        sc->outcome = STORE_STOP_ALREADY_FINISHED;
        return 0;
    }
    char msg[200];
    snprintf(msg, sizeof(msg), "stopped by %s", sc->who->name);
    const char *p2[] = {ids, msg};
    if (strcmp(status, "PENDING") == 0) {
        sc->outcome = STORE_STOP_STOPPED;
        return db_exec(c, &to_stopped, p2, NULL);
    }
    sc->outcome = STORE_STOP_STOPPING;
    return db_exec(c, &to_stopping, p2, NULL);
}

int store_job_stop(struct db_conn *c, int64_t id, const struct srv_identity *who,
                   enum store_stop_outcome *outcome, char **json_out)
{
    struct stop_ctx sc = {.id = id, .who = who};
    int qs = db_run_txn(c, stop_body, &sc);
    *outcome = sc.outcome;
    if (qs < 0)
        return qs;
    if (sc.outcome == STORE_STOP_STOPPED || sc.outcome == STORE_STOP_STOPPING ||
        sc.outcome == STORE_STOP_ALREADY_FINISHED)
        return store_job_get(c, id, json_out);
    return qs;
}

/* ---- delete ---- */

struct delete_ctx {
    int64_t id;
    const struct srv_identity *who;
    enum store_delete_outcome outcome;
    char status[16];
};

static int delete_body(struct db_conn *c, void *arg)
{
    static const struct db_stmt lock = {
        "job_delete_lock", "SELECT status, owner FROM jobs WHERE id = $1 FOR UPDATE", 1, true};
    static const struct db_stmt del = {"job_delete", "DELETE FROM jobs WHERE id = $1", 1, false};
    struct delete_ctx *dc = arg;
    char ids[32];
    STORE_NUM(ids, dc->id);
    const char *p[] = {ids};
    PGresult *res = NULL;
    int qs = db_exec(c, &lock, p, &res);
    if (qs <= 0) {
        dc->outcome = STORE_DELETE_NOT_FOUND;
        return qs;
    }
    snprintf(dc->status, sizeof(dc->status), "%s", PQgetvalue(res, 0, 0));
    bool allowed = srv_auth_may_modify(dc->who, PQgetvalue(res, 0, 1));
    PQclear(res);
    if (!allowed) {
        dc->outcome = STORE_DELETE_FORBIDDEN;
        return 0;
    }
    if (strstr(terminal_statuses, dc->status) == NULL) {
        dc->outcome = STORE_DELETE_NOT_FINISHED;
        return 0;
    }
    dc->outcome = STORE_DELETE_DELETED;
    return db_exec(c, &del, p, NULL);
}

int store_job_delete(struct db_conn *c, int64_t id, const struct srv_identity *who,
                     enum store_delete_outcome *outcome, char **status_out)
{
    struct delete_ctx dc = {.id = id, .who = who};
    int qs = db_run_txn(c, delete_body, &dc);
    *outcome = dc.outcome;
    if (qs >= 0 && status_out)
        *status_out = strdup(dc.status);
    return qs;
}
