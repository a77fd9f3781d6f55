/* Queries for several servers on one database (docs/high-availability.md): node heartbeats kept
 * in the database, so that the leader sees the nodes connected to the other servers, and the
 * notifications between servers. */
#include "store.h"

#include "db_query.h"

#include <stdlib.h>
#include <string.h>

int store_nodes_heard(struct db_conn *c, const char *heard_json, char ***alive, size_t *n)
{
    static const struct db_stmt st = {
        "nodes_heard",
        "UPDATE nodes n SET last_heartbeat_at = GREATEST(n.last_heartbeat_at, "
        "    now() - make_interval(secs => h.age)) "
        "FROM jsonb_to_recordset($1::jsonb) AS h(id text, age float8) "
        "WHERE n.id = h.id AND n.status = 'ALIVE' RETURNING n.id",
        1, false};
    const char *p[] = {heard_json};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    *alive = NULL;
    *n = 0;
    if (qs <= 0)
        return qs;
    *alive = calloc((size_t)qs, sizeof(char *));
    for (int i = 0; *alive && i < qs; i++) {
        const char *id;
        if (db_col_text(res, i, "id", &id) == 0 && ((*alive)[*n] = strdup(id)) != NULL)
            (*n)++;
    }
    PQclear(res);
    return *alive ? qs : DB_HARD_ERROR;
}

int store_nodes_silent(struct db_conn *c, int64_t timeout_s, char ***ids, size_t *n)
{
    static const struct db_stmt st = {
        "nodes_silent",
        "SELECT id FROM nodes WHERE status = 'ALIVE' "
        "AND last_heartbeat_at < now() - make_interval(secs => $1::float8)",
        1, true};
    char t[32];
    STORE_NUM(t, timeout_s);
    const char *p[] = {t};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    *ids = NULL;
    *n = 0;
    if (qs <= 0)
        return qs;
    *ids = calloc((size_t)qs, sizeof(char *));
    for (int i = 0; *ids && i < qs; i++) {
        const char *id;
        if (db_col_text(res, i, "id", &id) == 0 && ((*ids)[*n] = strdup(id)) != NULL)
            (*n)++;
    }
    PQclear(res);
    return *ids ? qs : DB_HARD_ERROR;
}

int store_node_lost_if_silent(struct db_conn *c, const char *id, int64_t timeout_s)
{
    static const struct db_stmt st = {
        "node_lost_if_silent",
        "SELECT ty_node_lost(n.id) FROM nodes n WHERE n.id = $1 AND n.status = 'ALIVE' "
        "AND n.last_heartbeat_at < now() - make_interval(secs => $2::float8)",
        2, false};
    char t[32];
    STORE_NUM(t, timeout_s);
    const char *p[] = {id, t};
    return db_exec(c, &st, p, NULL);
}

int store_notify(struct db_conn *c, const char *channel, const char *payload)
{
    static const struct db_stmt st = {"notify", "SELECT pg_notify($1, $2)", 2, false};
    const char *p[] = {channel, payload};
    return db_exec(c, &st, p, NULL);
}
