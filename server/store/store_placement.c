/* Placements: the specs a pass places, committing a placement (ty_place, which also tells the
 * other servers, LEADER_CHANNEL_LAUNCH), why a job still waits, and growing an elastic job. */
#include "store.h"

#include "db_query.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        "job_specs", "SELECT id, spec::text AS spec FROM jobs WHERE id = ANY($1::bigint[])", 1,
        true};
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
        const char *spec;
        if (db_col_int64(res, i, "id", &specs[i].id) != 0 ||
            db_col_text(res, i, "spec", &spec) != 0 ||
            (specs[i].spec_json = strdup(spec)) == NULL) {
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
    int64_t n;
    if (util_parse_int64(out, 1, INT32_MAX, &n) != 0) {
        TY_BUG("store", "job %lld: ty_place returned attempt '%s'", (long long)job, out);
        free(out);
        return DB_HARD_ERROR;
    }
    *attempt = (int)n;
    free(out);
    return 1;
}

int store_jobs_set_waiting_messages(struct db_conn *c, const json_t *messages)
{
    static const struct db_stmt st = {"jobs_waiting_messages",
                                      "SELECT ty_jobs_set_waiting($1::jsonb)", 1, false};
    if (json_array_size(messages) == 0)
        return 0;
    char *text = json_dumps(messages, JSON_COMPACT);
    if (text == NULL)
        return DB_HARD_ERROR;
    const char *p[] = {text};
    int qs = db_exec(c, &st, p, NULL);
    free(text);
    return qs;
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
