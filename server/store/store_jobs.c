/* Job queries: submit, get, list, owner, stop, delete. The job's JSON shape is defined once, in
 * SQL (store/sql/ty_job_json.sql), so the rows go to the client without re-encoding. Status
 * changes go through the state machine in SQL (store/sql/ty_job_submit.sql, ty_job_request.sql,
 * job_transitions.sql, docs/lifecycle.md); who may ask for them is decided by the handlers, not
 * here. */
#include "store.h"

#include "db_query.h"
#include "job_status.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_jobs_insert(struct db_conn *c, struct store_job_new *const *jobs, size_t n)
{
    /* One statement for the lot: a durable commit, a round trip and the transaction's locks
     * shared by every job in it (docs/decisions.md, "Submissions: SQL functions …"). */
    static const struct db_stmt st = {
        "jobs_insert",
        "SELECT j.id, ty_job_json(j)::text FROM ty_jobs_submit($1::jsonb) j ORDER BY j.id", 1,
        false};
    json_t *rows = json_array();
    for (size_t i = 0; rows && i < n; i++) {
        const json_t *spec = jobs[i]->spec;
        if (json_array_append_new(
                rows,
                json_pack("[s?, s, I, O]", json_string_value(json_object_get(spec, "name")),
                          jobs[i]->owner, json_integer_value(json_object_get(spec, "priority")),
                          (json_t *)spec)) != 0) {
            json_decref(rows);
            rows = NULL;
        }
    }
    char *text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
    json_decref(rows);
    if (text == NULL)
        return DB_HARD_ERROR;
    const char *params[] = {text};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, params, &res);
    free(text);
    if (qs <= 0)
        return qs < 0 ? qs : DB_HARD_ERROR;
    if ((size_t)qs != n) {
        PQclear(res);
        TY_BUG("store", "%zu jobs submitted, %d rows back", n, qs);
        return DB_HARD_ERROR;
    }
    for (size_t i = 0; i < n; i++) {
        jobs[i]->id = strtoll(PQgetvalue(res, (int)i, 0), NULL, 10);
        jobs[i]->json = strdup(PQgetvalue(res, (int)i, 1));
    }
    PQclear(res);
    return qs;
}

int store_job_insert_once(struct db_conn *c, const char *owner, const json_t *spec, const char *key,
                          int64_t *id_out, char **json_out, enum store_once_outcome *outcome)
{
    static const struct db_stmt st = {
        "job_insert_once",
        "SELECT (r.job).id, ty_job_json(r.job)::text, r.created, r.same_spec "
        "FROM ty_job_submit_once($1, $2, $3::int, $4::jsonb, $5) r",
        5, false};
    char *spec_text = json_dumps(spec, JSON_COMPACT);
    if (spec_text == NULL)
        return DB_HARD_ERROR;
    char prio[32];
    STORE_NUM(prio, json_integer_value(json_object_get(spec, "priority")));
    const char *params[] = {json_string_value(json_object_get(spec, "name")), owner, prio,
                            spec_text, key};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, params, &res);
    free(spec_text);
    if (qs <= 0)
        return qs;
    *id_out = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    *json_out = strdup(PQgetvalue(res, 0, 1));
    *outcome = strcmp(PQgetvalue(res, 0, 2), "t") == 0   ? STORE_ONCE_CREATED
               : strcmp(PQgetvalue(res, 0, 3), "t") == 0 ? STORE_ONCE_REPLAYED
                                                         : STORE_ONCE_CONFLICT;
    PQclear(res);
    return *json_out ? qs : DB_HARD_ERROR;
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

int store_job_set_labels(struct db_conn *c, int64_t id, const char *tags, const char *notes,
                         char **json_out)
{
    static const struct db_stmt st = {
        "job_set_labels",
        "UPDATE jobs j SET tags = CASE WHEN $2::jsonb IS NULL THEN j.tags ELSE "
        "  ARRAY(SELECT DISTINCT x FROM jsonb_array_elements_text($2::jsonb) x ORDER BY x) END, "
        "  notes = coalesce($3::text, j.notes) "
        "WHERE id = $1::bigint RETURNING ty_job_json(j)::text",
        3, true};
    char ids[32];
    STORE_NUM(ids, id);
    const char *params[] = {ids, tags, notes};
    return db_exec_text(c, &st, params, json_out);
}

/* The tag filter also says tags <> '{}': jobs_tags_idx holds only tagged jobs (migration 0051). */
int store_job_list(struct db_conn *c, const struct store_job_filter *f, int64_t before_id,
                   int limit, char **json_out, int64_t *min_id_out)
{
    static const struct db_stmt st = {
        "job_list",
        "SELECT coalesce(jsonb_agg(ty_job_json(j) ORDER BY j.id DESC), '[]')::text, "
        "       coalesce(min(j.id), 0), count(*) "
        "FROM (SELECT * FROM jobs WHERE ($1::text[] IS NULL OR status = ANY($1::text[])) "
        "        AND ($2::bigint = 0 OR id < $2::bigint) "
        "        AND ($4::text IS NULL OR owner = $4::text) "
        "        AND ($5::text IS NULL OR strpos(lower(name), lower($5::text)) > 0) "
        "        AND ($6::text IS NULL OR project = $6::text) "
        "        AND ty_project_visible(project, $7::text, $8::boolean) "
        "        AND ($9::text IS NULL OR (tags @> ARRAY[$9::text] AND tags <> '{}')) "
        "      ORDER BY id DESC LIMIT $3::int) j",
        9, true};
    char before[32], lim[32];
    STORE_NUM(before, before_id);
    STORE_NUM(lim, limit);
    const char *params[] = {
        f->statuses, before,     lim,          f->owner,
        f->name,     f->project, f->who->name, f->who->role == SRV_ROLE_ADMIN ? "t" : "f",
        f->tag};
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

/* ---- owner, stop, delete ---- */

int store_job_owner(struct db_conn *c, int64_t id, char **owner_out)
{
    static const struct db_stmt st = {"job_owner", "SELECT owner FROM jobs WHERE id = $1", 1, true};
    char ids[32];
    STORE_NUM(ids, id);
    const char *p[] = {ids};
    return db_exec_text(c, &st, p, owner_out);
}

int store_job_project(struct db_conn *c, int64_t id, char **project_out)
{
    static const struct db_stmt st = {"job_project", "SELECT project FROM jobs WHERE id = $1", 1,
                                      true};
    char ids[32];
    STORE_NUM(ids, id);
    const char *p[] = {ids};
    return db_exec_text(c, &st, p, project_out);
}

/* One user request (stop, delete) through ty_job_request, recorded with `message`. *found: the
 * job exists; *allowed: its status allowed the event, which was then applied. `from` (the status
 * before) and `to` (after; "" after delete) are filled when found and allowed respectively,
 * truncated to their size. Returns a db_qs. */
static int job_request(struct db_conn *c, const struct db_stmt *st, int64_t id, const char *message,
                       bool *found, bool *allowed, char from[16], char to[16])
{
    char ids[32];
    STORE_NUM(ids, id);
    const char *p[] = {ids, message};
    PGresult *res = NULL;
    *found = *allowed = false;
    from[0] = to[0] = '\0';
    int qs = db_exec(c, st, p, &res);
    if (qs <= 0)
        return qs;
    *found = !PQgetisnull(res, 0, 0);
    *allowed = *found && strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    if (*found)
        snprintf(from, 16, "%s", PQgetvalue(res, 0, 0));
    if (*allowed)
        snprintf(to, 16, "%s", PQgetvalue(res, 0, 2));
    PQclear(res);
    return qs;
}

int store_job_stop(struct db_conn *c, int64_t id, const char *requested_by,
                   enum store_stop_outcome *outcome, char **json_out)
{
    static const struct db_stmt st = {
        "job_stop", "SELECT o_from, o_allowed, o_to FROM ty_job_request($1::bigint, 'stop', $2)", 2,
        false};
    char msg[200], from[16], to[16];
    snprintf(msg, sizeof(msg), "stopped by %s", requested_by);
    bool found, allowed;
    *outcome = STORE_STOP_NOT_FOUND;
    int qs = job_request(c, &st, id, msg, &found, &allowed, from, to);
    if (qs < 0 || !found)
        return qs;
    enum job_status after;
    if (!allowed)
        *outcome = STORE_STOP_ALREADY_FINISHED;
    else if (job_status_from_string(to, &after) == 0 && after == JOB_STATUS_STOPPED)
        *outcome = STORE_STOP_STOPPED;
    else
        *outcome = STORE_STOP_STOPPING;
    return store_job_get(c, id, json_out);
}

int store_job_delete(struct db_conn *c, int64_t id, enum store_delete_outcome *outcome,
                     char **status_out)
{
    static const struct db_stmt st = {
        "job_delete",
        "SELECT o_from, o_allowed, o_to FROM ty_job_request($1::bigint, 'delete', $2)", 2, false};
    char from[16], to[16];
    bool found, allowed;
    *outcome = STORE_DELETE_NOT_FOUND;
    int qs = job_request(c, &st, id, NULL, &found, &allowed, from, to);
    if (qs < 0)
        return qs;
    if (found)
        *outcome = allowed ? STORE_DELETE_DELETED : STORE_DELETE_NOT_FINISHED;
    if (status_out)
        *status_out = strdup(from);
    return qs;
}
