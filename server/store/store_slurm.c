/* Jobs placed through Slurm (--slurm, migration 0038): the statements behind control_slurm.c.
 * The SQL functions are store/sql/ty_slurm_event.sql and ty_slurm_fail.sql. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_slurm_jobs(struct db_conn *c, struct store_slurm_job **out, size_t *n)
{
    /* Live jobs, and finished ones still holding an allocation (to cancel). `used`: an attempt
     * already ran in the job's allocation (a new attempt needs a new one); `ended_s`: how long
     * ago that attempt finished; `over_s`: how long ago the job left it (its first event of
     * restarting, stopping or a final status, at or before the attempt's end); `agents`: the
     * allocation's agents still connected (their node ids are slurm-<Slurm job id>-<node>,
     * control_slurm.c). */
    static const struct db_stmt st = {
        "slurm_jobs",
        "SELECT j.id, j.status, j.attempt, coalesce(j.slurm_job_id, -1) AS slurm_job_id, "
        "  EXISTS (SELECT 1 FROM attempts a WHERE a.job_id = j.id "
        "          AND a.slurm_job_id = j.slurm_job_id) AS used, "
        "  coalesce((SELECT extract(epoch FROM now() - max(a.finished_at)) FROM attempts a "
        "            WHERE a.job_id = j.id AND a.slurm_job_id = j.slurm_job_id), -1)::float8 "
        "    AS ended_s, "
        "  coalesce((SELECT extract(epoch FROM now() - min(e.at)) FROM attempts a "
        "            JOIN job_events e ON e.job_id = a.job_id AND e.attempt = a.attempt "
        "            WHERE a.job_id = j.id AND a.slurm_job_id = j.slurm_job_id "
        "              AND e.status IN ('RESTARTING', 'STOPPING', 'SUCCEEDED', 'FAILED', "
        "                               'STOPPED')), -1)::float8 AS over_s, "
        "  (SELECT count(*) FROM nodes n WHERE j.slurm_job_id IS NOT NULL "
        "     AND n.id LIKE 'slurm-' || j.slurm_job_id || '-%' AND n.status = 'ALIVE' "
        "     AND n.disconnected_at IS NULL)::int AS agents, j.spec::text AS spec "
        "FROM jobs j WHERE j.status IN ('PENDING', 'STARTING', 'RUNNING', 'RESTARTING', "
        "  'STOPPING') OR j.slurm_job_id IS NOT NULL ORDER BY j.id",
        0, true};
    *out = NULL;
    *n = 0;
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    if (qs <= 0)
        return qs;
    struct store_slurm_job *r = calloc((size_t)qs, sizeof(*r));
    int ok = r != NULL;
    for (int i = 0; ok && i < qs; i++) {
        const char *status = NULL, *spec = NULL;
        ok = db_col_int64(res, i, "id", &r[i].job) == 0 &&
             db_col_text(res, i, "status", &status) == 0 &&
             db_col_int(res, i, "attempt", &r[i].attempt) == 0 &&
             db_col_int64(res, i, "slurm_job_id", &r[i].slurm_job_id) == 0 &&
             db_col_bool(res, i, "used", &r[i].used) == 0 &&
             db_col_double(res, i, "ended_s", &r[i].ended_s) == 0 &&
             db_col_double(res, i, "over_s", &r[i].over_s) == 0 &&
             db_col_int(res, i, "agents", &r[i].agents) == 0 &&
             db_col_text(res, i, "spec", &spec) == 0;
        if (ok) {
            snprintf(r[i].status, sizeof(r[i].status), "%s", status);
            ok = (r[i].spec_json = strdup(spec)) != NULL;
        }
    }
    PQclear(res);
    if (!ok) {
        store_slurm_jobs_free(r, (size_t)qs);
        return DB_HARD_ERROR;
    }
    *out = r;
    *n = (size_t)qs;
    return qs;
}

void store_slurm_jobs_free(struct store_slurm_job *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++)
        free(r[i].spec_json);
    free(r);
}

int store_slurm_set(struct db_conn *c, int64_t job, int64_t slurm_job_id)
{
    static const struct db_stmt st = {
        "slurm_set", "UPDATE jobs SET slurm_job_id = $2::bigint WHERE id = $1::bigint", 2, false};
    char j[32], s[32];
    STORE_NUM(j, job);
    STORE_NUM(s, slurm_job_id);
    const char *p[] = {j, slurm_job_id > 0 ? s : NULL};
    return db_exec(c, &st, p, NULL);
}

int store_slurm_attempt(struct db_conn *c, int64_t job, int attempt)
{
    static const struct db_stmt st = {
        "slurm_attempt",
        "UPDATE attempts a SET slurm_job_id = j.slurm_job_id FROM jobs j "
        "WHERE j.id = $1::bigint AND a.job_id = j.id AND a.attempt = $2::int",
        2, false};
    char j[32], a[32];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    const char *p[] = {j, a};
    return db_exec(c, &st, p, NULL);
}

int store_slurm_event(struct db_conn *c, int64_t job, const char *message)
{
    static const struct db_stmt st = {"slurm_event", "SELECT ty_slurm_event($1::bigint, $2)", 2,
                                      false};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j, message};
    char *v = NULL;
    int qs = db_exec_text(c, &st, p, &v);
    int done = qs > 0 && v && v[0] == 't';
    free(v);
    return qs < 0 ? qs : done;
}

int store_slurm_fail(struct db_conn *c, int64_t job, const char *message)
{
    static const struct db_stmt st = {"slurm_fail", "SELECT ty_slurm_fail($1::bigint, $2)", 2,
                                      false};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j, message};
    char *v = NULL;
    int qs = db_exec_text(c, &st, p, &v);
    free(v);
    return qs;
}
