/* Running statements on a pooled connection (db.h): for the store_*.c files and the migrator
 * only, so that SQL and libpq stay inside the store. */
#ifndef SRV_DB_QUERY_H
#define SRV_DB_QUERY_H

#include "db.h"

#include <libpq-fe.h>
#include <stdbool.h>

/* A statement: prepared under `name` on first use on each connection (and again after a
 * reconnect). Declare them `static const` next to the store function that uses them. */
struct db_stmt {
    const char *name;
    const char *sql;
    int nparams;
    bool readonly; /* false: a run that returns or changes rows bumps the data generation */
};

/* The connection's libpq handle. */
PGconn *db_pg(struct db_conn *c);

/* Runs `stmt` with text `params` (NULL entries are SQL NULL). On success returns the row count
 * (for commands: rows affected) and, when `res` is non-NULL, stores the result there (caller
 * PQclear()s it; only when there is at least one row). On error returns DB_SOFT_ERROR or
 * DB_HARD_ERROR and stores nothing. */
int db_exec(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
            PGresult **res);
/* db_exec for a one-column query: *out receives a malloc'd copy of the first row's value (NULL
 * for SQL NULL). Same return convention; *out is untouched unless a row came back. */
int db_exec_text(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
                 char **out);
/* Runs a parameterless command (BEGIN, COMMIT, migration files). Same return convention. */
int db_exec_simple(struct db_conn *c, const char *sql);

/* SQLSTATE of the last failed db_exec on this connection ("" if none), e.g. "23505". */
const char *db_last_sqlstate(const struct db_conn *c);

#endif
