/* API token queries. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_token_lookup(struct db_conn *c, const char *hash, struct srv_identity *who)
{
    static const struct db_stmt st = {
        "token_lookup",
        "SELECT id, name, role FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL", 1,
        true};
    const char *params[] = {hash};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, params, &res);
    if (qs <= 0)
        return qs;
    const char *name, *role;
    if (db_col_int64(res, 0, "id", &who->token_id) != 0 ||
        db_col_text(res, 0, "name", &name) != 0 || db_col_text(res, 0, "role", &role) != 0) {
        PQclear(res);
        return DB_HARD_ERROR;
    }
    snprintf(who->name, sizeof(who->name), "%s", name);
    if (srv_role_from_string(role, &who->role) != 0)
        who->role = SRV_ROLE_NONE;
    PQclear(res);
    return qs;
}

int store_token_insert(struct db_conn *c, const char *name, const char *role, const char *hash,
                       char **json_out)
{
    static const struct db_stmt st = {
        "token_insert",
        "INSERT INTO api_tokens (name, role, token_hash) VALUES ($1, $2, $3) "
        "RETURNING jsonb_build_object('id', id, 'name', name, 'role', role, "
        "'created_at', ty_ts(created_at))::text",
        3, false};
    const char *params[] = {name, role, hash};
    int qs = db_exec_text(c, &st, params, json_out);
    if (qs > 0)
        db_tokens_changed(c);
    return qs;
}

int store_token_name_taken(struct db_conn *c, const char *name)
{
    static const struct db_stmt st = {
        "token_name_taken", "SELECT 1 FROM api_tokens WHERE name = $1 AND revoked_at IS NULL", 1,
        true};
    const char *params[] = {name};
    return db_exec(c, &st, params, NULL);
}

int store_token_list(struct db_conn *c, char **json_out)
{
    static const struct db_stmt st = {
        "token_list",
        "SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'name', name, 'role', role, "
        "'created_at', ty_ts(created_at)) ORDER BY id), '[]')::text "
        "FROM api_tokens WHERE revoked_at IS NULL",
        0, true};
    return db_exec_text(c, &st, NULL, json_out);
}

int store_token_revoke(struct db_conn *c, int64_t id)
{
    static const struct db_stmt st = {
        "token_revoke",
        "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", 1, false};
    char ids[32];
    snprintf(ids, sizeof(ids), "%lld", (long long)id);
    const char *params[] = {ids};
    int qs = db_exec(c, &st, params, NULL);
    if (qs > 0)
        db_tokens_changed(c);
    return qs;
}

int store_token_count_admins(struct db_conn *c, int64_t *count)
{
    static const struct db_stmt st = {
        "token_count_admins",
        "SELECT count(*) AS admins FROM api_tokens WHERE role = 'admin' AND revoked_at IS NULL", 0,
        true};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    if (qs <= 0)
        return qs;
    if (db_col_int64(res, 0, "admins", count) != 0)
        qs = DB_HARD_ERROR;
    PQclear(res);
    return qs;
}

/* The advisory lock key of the first start; no other lock of ours uses it. */
#define STORE_BOOTSTRAP_LOCK "7468797901"

int store_bootstrap_lock(struct db_conn *c)
{
    return db_exec_simple(c, "SELECT pg_advisory_lock(" STORE_BOOTSTRAP_LOCK ")");
}

int store_bootstrap_unlock(struct db_conn *c)
{
    return db_exec_simple(c, "SELECT pg_advisory_unlock(" STORE_BOOTSTRAP_LOCK ")");
}
