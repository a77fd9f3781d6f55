/* Node credentials (migrations/0011_security.sql): what a register must prove for a node id. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_node_auth(struct db_conn *c, const char *id, char **hash_out, bool *alive)
{
    static const struct db_stmt st = {
        "node_auth", "SELECT credential_hash, status = 'ALIVE' FROM nodes WHERE id = $1", 1, true};
    const char *p[] = {id};
    PGresult *res = NULL;
    *hash_out = NULL;
    *alive = false;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    if (!PQgetisnull(res, 0, 0) && !(*hash_out = strdup(PQgetvalue(res, 0, 0))))
        qs = DB_HARD_ERROR;
    *alive = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    return qs;
}

int store_node_set_credential(struct db_conn *c, const char *id, const char *hash)
{
    static const struct db_stmt st = {
        "node_set_credential", "UPDATE nodes SET credential_hash = $2 WHERE id = $1", 2, false};
    const char *p[] = {id, hash};
    return db_exec(c, &st, p, NULL);
}

int store_node_forgets_take(struct db_conn *c, const char *id, int64_t **jobs, size_t *n)
{
    static const struct db_stmt st = {
        "node_forgets_take", "DELETE FROM node_forgets WHERE node_id = $1 RETURNING job_id", 1,
        false};
    const char *p[] = {id};
    PGresult *res = NULL;
    *jobs = NULL;
    *n = 0;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    *jobs = calloc((size_t)qs, sizeof(**jobs));
    if (*jobs == NULL) {
        PQclear(res);
        return DB_HARD_ERROR;
    }
    for (int i = 0; i < qs; i++)
        (*jobs)[i] = strtoll(PQgetvalue(res, i, 0), NULL, 10);
    *n = (size_t)qs;
    PQclear(res);
    return qs;
}
