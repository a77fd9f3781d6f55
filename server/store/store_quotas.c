/* Quotas (migrations/0030_quotas.sql): what a user keeps in the artifact store against the limit
 * that applies to them. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>

int store_artifact_quota(struct db_conn *c, const char *user, int64_t dflt, int64_t *used,
                         int64_t *limit)
{
    static const struct db_stmt st = {
        "artifact_quota",
        "SELECT ty_artifact_bytes_used($1) AS used, "
        "       COALESCE((SELECT artifact_bytes FROM quotas "
        "                 WHERE subject_kind = 'user' AND subject = $1), $2::bigint) AS lim",
        2, true};
    char d[32];
    STORE_NUM(d, dflt);
    const char *p[] = {user, d};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs < 0 ? qs : DB_HARD_ERROR;
    int bad = db_col_int64(res, 0, "used", used) | db_col_int64(res, 0, "lim", limit);
    PQclear(res);
    return bad ? DB_HARD_ERROR : 1;
}

int store_quota_set_artifact(struct db_conn *c, const char *user, int64_t bytes)
{
    static const struct db_stmt st = {
        "quota_set_artifact",
        "INSERT INTO quotas (subject_kind, subject, artifact_bytes) VALUES ('user', $1, $2::bigint) "
        "ON CONFLICT (subject_kind, subject) DO UPDATE SET artifact_bytes = EXCLUDED.artifact_bytes, "
        "updated_at = now()",
        2, false};
    char b[32];
    STORE_NUM(b, bytes);
    const char *p[] = {user, bytes < 0 ? NULL : b};
    return db_exec(c, &st, p, NULL);
}
