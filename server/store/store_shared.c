/* Checkpoints on shared storage (run_config.storage_path, server/artifacts/shared.h). */
#include "store.h"

#include "db_query.h"

#include <stdlib.h>
#include <string.h>

int store_job_storage_path(struct db_conn *c, int64_t job, char **out)
{
    static const struct db_stmt st = {
        "job_storage_path",
        "SELECT spec #>> '{run_config,storage_path}' FROM jobs WHERE id = $1::bigint", 1, true};
    *out = NULL;
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    if (!PQgetisnull(res, 0, 0) && (*out = strdup(PQgetvalue(res, 0, 0))) == NULL)
        qs = DB_HARD_ERROR;
    PQclear(res);
    return qs;
}
