/* Node credentials (migrations/0011_security.sql): what a register must prove for a node id. */
#include "store.h"

#include "db_query.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_node_auth(struct db_conn *c, const char *id, char **hash_out, bool *alive)
{
    static const struct db_stmt st = {
        "node_auth", "SELECT credential_hash, status = 'ALIVE' AS alive FROM nodes WHERE id = $1",
        1, true};
    const char *p[] = {id};
    PGresult *res = NULL;
    *hash_out = NULL;
    *alive = false;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    const char *hash;
    if (db_col_text_opt(res, 0, "credential_hash", &hash) != 0 ||
        db_col_bool(res, 0, "alive", alive) != 0 || (hash && !(*hash_out = strdup(hash))))
        qs = DB_HARD_ERROR;
    PQclear(res);
    if (qs < 0) {
        free(*hash_out);
        *hash_out = NULL;
        *alive = false;
    }
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
        if (db_col_int64(res, i, "job_id", &(*jobs)[i]) != 0) {
            PQclear(res);
            free(*jobs);
            *jobs = NULL;
            return DB_HARD_ERROR;
        }
    *n = (size_t)qs;
    PQclear(res);
    return qs;
}

int store_node_ckpt_deletes_take(struct db_conn *c, const char *const *node_ids, size_t n_ids,
                                 struct store_ckpt_delete **rows, size_t *n)
{
    static const struct db_stmt st = {
        "node_ckpt_deletes_take",
        "DELETE FROM node_checkpoint_deletes WHERE node_id IN "
        "(SELECT jsonb_array_elements_text($1::jsonb)) RETURNING node_id, job_id, attempt, idx",
        1, false};
    *rows = NULL;
    *n = 0;
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < n_ids; i++)
        json_array_append_new(ids, json_string(node_ids[i]));
    char *text = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
    json_decref(ids);
    if (text == NULL)
        return DB_HARD_ERROR;
    const char *p[] = {text};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    free(text);
    if (qs <= 0)
        return qs;
    *rows = calloc((size_t)qs, sizeof(**rows));
    if (*rows == NULL) {
        PQclear(res);
        return DB_HARD_ERROR;
    }
    for (int i = 0; i < qs; i++) {
        struct store_ckpt_delete *r = &(*rows)[i];
        const char *node;
        *n = (size_t)i + 1;
        if (db_col_text(res, i, "node_id", &node) != 0 || (r->node_id = strdup(node)) == NULL ||
            db_col_int64(res, i, "job_id", &r->job) != 0 ||
            db_col_int64(res, i, "attempt", &r->attempt) != 0 ||
            db_col_int64(res, i, "idx", &r->index) != 0) {
            store_ckpt_deletes_free(*rows, *n);
            *rows = NULL;
            *n = 0;
            PQclear(res);
            return DB_HARD_ERROR;
        }
    }
    PQclear(res);
    return qs;
}

void store_ckpt_deletes_free(struct store_ckpt_delete *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(rows[i].node_id);
    free(rows);
}
