/* Quotas (migrations/0030_quotas.sql): the limits of a user or a project, and what it holds
 * against them. Every query takes the subject kind as its parameter: one path for both. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_name(enum store_quota_kind kind)
{
    return kind == STORE_QUOTA_PROJECT ? "project" : "user";
}

int store_artifact_quota(struct db_conn *c, enum store_quota_kind kind, const char *subject,
                         int64_t dflt, int64_t *used, int64_t *limit, bool *own)
{
    static const struct db_stmt st = {
        "artifact_quota",
        "SELECT CASE WHEN $3 = 'project' THEN ty_project_artifact_bytes_used($1) "
        "            ELSE ty_artifact_bytes_used($1) END AS used, "
        "       COALESCE(q.artifact_bytes, $2::bigint) AS lim, "
        "       q.artifact_bytes IS NOT NULL AS own "
        "FROM (SELECT 1) one LEFT JOIN quotas q ON q.subject_kind = $3 AND q.subject = $1",
        3, true};
    char d[32];
    STORE_NUM(d, dflt);
    const char *p[] = {subject, d, kind_name(kind)};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs < 0 ? qs : DB_HARD_ERROR;
    bool mine = false;
    int bad = db_col_int64(res, 0, "used", used) | db_col_int64(res, 0, "lim", limit) |
              db_col_bool(res, 0, "own", &mine);
    if (own)
        *own = mine;
    PQclear(res);
    return bad ? DB_HARD_ERROR : 1;
}

int store_quota_set(struct db_conn *c, enum store_quota_kind kind, const char *subject,
                    const struct store_quota_change *q)
{
    static const struct db_stmt st = {
        "quota_set",
        "INSERT INTO quotas (subject_kind, subject, artifact_bytes, cpus, gpus) "
        "VALUES ($8, $1, $2::bigint, $3::integer, $4::integer) "
        "ON CONFLICT (subject_kind, subject) DO UPDATE SET "
        "  artifact_bytes = CASE WHEN $5::boolean THEN EXCLUDED.artifact_bytes "
        "                        ELSE quotas.artifact_bytes END, "
        "  cpus = CASE WHEN $6::boolean THEN EXCLUDED.cpus ELSE quotas.cpus END, "
        "  gpus = CASE WHEN $7::boolean THEN EXCLUDED.gpus ELSE quotas.gpus END, "
        "  updated_at = now()",
        8, false};
    char b[32], cp[32], g[32];
    STORE_NUM(b, q->artifact_bytes);
    STORE_NUM(cp, q->cpus);
    STORE_NUM(g, q->gpus);
    const char *p[] = {subject,
                       q->set_artifact_bytes && q->artifact_bytes >= 0 ? b : NULL,
                       q->set_cpus && q->cpus >= 0 ? cp : NULL,
                       q->set_gpus && q->gpus >= 0 ? g : NULL,
                       q->set_artifact_bytes ? "true" : "false",
                       q->set_cpus ? "true" : "false",
                       q->set_gpus ? "true" : "false",
                       kind_name(kind)};
    return db_exec(c, &st, p, NULL);
}

int store_quota_running(struct db_conn *c, enum store_quota_kind kind, const char *subject,
                        int64_t *cpu_milli, int64_t *gpus, int64_t *own_cpus, int64_t *own_gpus)
{
    static const struct db_stmt st = {
        "quota_running",
        "SELECT COALESCE(sum(round(COALESCE((w.resources->>'CPU')::numeric, 0) * 1000)), "
        "0)::bigint "
        "         AS cpu_milli, "
        "       COALESCE(sum(cardinality(w.gpus)), 0)::bigint AS gpus, "
        "       COALESCE((SELECT q.cpus FROM quotas q "
        "                 WHERE q.subject_kind = $2 AND q.subject = $1), -1)::bigint AS "
        "own_cpus, "
        "       COALESCE((SELECT q.gpus FROM quotas q "
        "                 WHERE q.subject_kind = $2 AND q.subject = $1), -1)::bigint AS "
        "own_gpus "
        "FROM workers w JOIN jobs j ON j.id = w.job_id "
        "WHERE (CASE WHEN $2 = 'project' THEN j.project ELSE j.owner END) = $1 "
        "  AND w.status IN ('PLACED', 'RUNNING')",
        2, true};
    const char *p[] = {subject, kind_name(kind)};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs < 0 ? qs : DB_HARD_ERROR;
    int bad = db_col_int64(res, 0, "cpu_milli", cpu_milli) | db_col_int64(res, 0, "gpus", gpus) |
              db_col_int64(res, 0, "own_cpus", own_cpus) |
              db_col_int64(res, 0, "own_gpus", own_gpus);
    PQclear(res);
    return bad ? DB_HARD_ERROR : 1;
}

int store_quota_rows(struct db_conn *c, enum store_quota_kind kind, struct store_quota_row **out,
                     size_t *n)
{
    static const struct db_stmt st = {
        "quota_rows",
        "SELECT subject, cpus, gpus FROM quotas "
        "WHERE subject_kind = $1 AND (cpus IS NOT NULL OR gpus IS NOT NULL) ORDER BY subject",
        1, true};
    *out = NULL;
    *n = 0;
    const char *p[] = {kind_name(kind)};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    struct store_quota_row *q = calloc((size_t)qs, sizeof(*q));
    int bad = q == NULL;
    for (int r = 0; !bad && r < qs; r++) {
        const char *subject;
        q[r].cpus = q[r].gpus = -1;
        bad = db_col_text(res, r, "subject", &subject) != 0 ||
              (q[r].subject = strdup(subject)) == NULL ||
              (!db_col_is_null(res, r, "cpus") && db_col_int64(res, r, "cpus", &q[r].cpus) != 0) ||
              (!db_col_is_null(res, r, "gpus") && db_col_int64(res, r, "gpus", &q[r].gpus) != 0);
        *n = (size_t)r + 1;
    }
    PQclear(res);
    *out = q;
    if (bad) {
        store_quota_rows_free(q, *n);
        *out = NULL;
        *n = 0;
        return DB_HARD_ERROR;
    }
    return qs;
}

void store_quota_rows_free(struct store_quota_row *q, size_t n)
{
    for (size_t i = 0; q && i < n; i++)
        free(q[i].subject);
    free(q);
}
