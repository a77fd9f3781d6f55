/* Database access: a pool of libpq connections, statements prepared lazily per connection, and a
 * transaction runner with retries. Only the store_*.c files and the migrator use this; handlers
 * call store functions.
 *
 * Query status (Taler's GNUNET_DB_QueryStatus): a negative value is an error, DB_HARD_ERROR
 * (give up: bad SQL, constraint violation) or DB_SOFT_ERROR (retry the transaction: serialization
 * failure, deadlock, lost connection); zero or more is the number of rows. */
#ifndef SRV_DB_H
#define SRV_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

enum db_qs {
    DB_HARD_ERROR = -2,
    DB_SOFT_ERROR = -1,
    DB_NO_RESULTS = 0,
    DB_ONE_RESULT = 1,
};

/* A statement: prepared under `name` on first use on each connection (and again after a
 * reconnect). Declare them `static const` next to the store function that uses them. */
struct db_stmt {
    const char *name;
    const char *sql;
    int nparams;
    bool readonly; /* false: a run that returns or changes rows bumps the data generation */
};

struct db;
struct db_conn;

/* Creates a pool of at most `size` connections to `conninfo` (connected lazily). NULL on OOM. */
struct db *db_create(const char *conninfo, int size);
/* Closes every connection. All connections must have been released. */
void db_destroy(struct db *db);

/* Takes a connection from the pool, waiting while all are in use; (re)connects it if needed.
 * Returns NULL when the database cannot be reached. Give it back with db_release(). */
struct db_conn *db_acquire(struct db *db);
void db_release(struct db *db, struct db_conn *c);

/* Work done with a pooled connection (db_with_conn): returns a db_qs. */
typedef int (*db_conn_fn)(struct db_conn *c, void *arg);
/* Takes a connection from the pool, runs fn(c, arg) and gives the connection back: what request
 * handlers do for each store call. Returns fn's result, or DB_SOFT_ERROR without running fn when
 * the database cannot be reached. */
int db_with_conn(struct db *db, db_conn_fn fn, void *arg);
/* For a connection held for long (the control thread's): reconnects it if the server closed it.
 * Returns 0, or -1 when the database cannot be reached. */
int db_ensure(struct db_conn *c);
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

/* The data generation: bumped after every committed write made through this pool, so caches
 * (cache.h) can tell that what they hold may be stale. */
uint64_t db_generation(struct db *db);

/* SQLSTATE of the last failed db_exec on this connection ("" if none), e.g. "23505". */
const char *db_last_sqlstate(const struct db_conn *c);

/* Body of a transaction: returns a db_qs; a negative value rolls back. */
typedef int (*db_txn_fn)(struct db_conn *c, void *arg);

/* Runs fn inside BEGIN/COMMIT on `c`, retrying the whole body up to 3 times on soft errors
 * (reconnecting when the connection broke). Returns fn's final status, or an error. */
int db_run_txn(struct db_conn *c, db_txn_fn fn, void *arg);

#endif
