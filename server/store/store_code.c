/* Code packages in the artifact store (migrations/0018_code_packages.sql): a job's packed
 * working directory (or a checkpoint directory to resume from), stored once under its SHA-256,
 * who uploaded it and who may fetch it. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_code_get(struct db_conn *c, const char *sha256, struct store_code *out)
{
    static const struct db_stmt st = {
        "code_get", "SELECT location, size_bytes FROM code_packages WHERE sha256 = $1", 1, true};
    memset(out, 0, sizeof(*out));
    const char *p[] = {sha256};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    snprintf(out->location, sizeof(out->location), "%s", PQgetvalue(res, 0, 0));
    out->size = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    return 1;
}

int store_code_insert(struct db_conn *c, const char *sha256, int64_t size, const char *location,
                      const char *who)
{
    static const struct db_stmt st = {
        "code_insert",
        "INSERT INTO code_packages (sha256, size_bytes, location, uploaded_by) "
        "VALUES ($1, $2::bigint, $3, $4) ON CONFLICT (sha256) DO NOTHING",
        4, false};
    static const struct db_stmt own = {
        "code_own",
        "INSERT INTO code_package_owners (sha256, owner) VALUES ($1, $2) "
        "ON CONFLICT (sha256, owner) DO NOTHING",
        2, false};
    char sz[32];
    STORE_NUM(sz, size);
    const char *p[] = {sha256, sz, location, who};
    int qs = db_exec(c, &st, p, NULL);
    if (qs < 0)
        return qs;
    const char *po[] = {sha256, who};
    return db_exec(c, &own, po, NULL);
}

int store_code_owned(struct db_conn *c, const char *sha256, const char *who, bool *owned)
{
    static const struct db_stmt st = {
        "code_owned",
        "SELECT EXISTS (SELECT 1 FROM code_package_owners WHERE sha256 = $1 AND owner = $2)", 2,
        true};
    const char *p[] = {sha256, who};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs < 0 ? qs : DB_HARD_ERROR;
    *owned = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return 1;
}

int store_code_node_may_fetch(struct db_conn *c, const char *sha256, const char *node, bool *may)
{
    static const struct db_stmt st = {
        "code_node_may_fetch",
        "SELECT EXISTS (SELECT 1 FROM workers w JOIN jobs j ON j.id = w.job_id "
        "                WHERE w.node_id = $2 AND (j.spec->>'code_package' = $1 OR "
        "                                          j.spec->>'resume_from_package' = $1))",
        2, true};
    const char *p[] = {sha256, node};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs < 0 ? qs : DB_HARD_ERROR;
    *may = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return 1;
}
