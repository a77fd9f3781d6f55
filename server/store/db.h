/* Database access: a pool of connections and a transaction runner with retries. Handlers and the
 * control loop take a connection from here and call store functions (store.h) with it; running
 * statements (db_query.h, where libpq shows) is for the store_*.c files and the migrator only.
 *
 * Query status (Taler's GNUNET_DB_QueryStatus): a negative value is an error, DB_HARD_ERROR
 * (give up: bad SQL, constraint violation) or DB_SOFT_ERROR (retry the transaction: serialization
 * failure, deadlock, lost connection); zero or more is the number of rows. */
#ifndef SRV_DB_H
#define SRV_DB_H

#include <stdbool.h>
#include <stdint.h>

enum db_qs {
    DB_HARD_ERROR = -2,
    DB_SOFT_ERROR = -1,
    DB_NO_RESULTS = 0,
    DB_ONE_RESULT = 1,
};

struct db;
struct db_conn;

/* Creates a pool of at most `size` connections to `conninfo` (connected lazily). NULL on OOM. */
struct db *db_create(const char *conninfo, int size);
/* Bounds the waits: db_acquire gives up (NULL) after `acquire_timeout_ms` with every
 * connection in use, and a new connection gives up after `connect_timeout_s`; 0 for either
 * means no bound. Call before the pool is shared. */
void db_set_timeouts(struct db *db, int acquire_timeout_ms, int connect_timeout_s);
/* The database is gone for good (the embedded PostgreSQL could not be restarted) and the caller
 * logs why next: the pool's connection failures go to the debug log from now on, so that the
 * line that says why the server exits stays its last error. Any thread. */
void db_quiet_connect_errors(struct db *db);
/* The connection string the pool was made with (for a connection of one's own, store_leader.c). */
const char *db_conninfo(const struct db *db);
/* Closes every connection. All connections must have been released. */
void db_destroy(struct db *db);

/* Takes a connection from the pool, waiting while all are in use (at most the acquire timeout,
 * db_set_timeouts); (re)connects it if needed. Returns NULL when none came free in time or the
 * database cannot be reached. Give it back with db_release(). */
struct db_conn *db_acquire(struct db *db);
/* db_acquire without the wait: NULL at once when every connection is in use. */
struct db_conn *db_try_acquire(struct db *db);
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

/* The data generation: bumped after every committed write made through this pool, so caches
 * (cache.h) can tell that what they hold may be stale. */
uint64_t db_generation(struct db *db);
/* The token generation: bumped after every committed write to API tokens made through this pool
 * (db_tokens_changed, db_query.h), so the token cache (server/http/auth.c) outlives
 * the writes to jobs that bump the data generation. */
uint64_t db_token_generation(struct db *db);

/* Committed writes, for the one thread that follows them (the stream thread, stream.c): after
 * every write committed through this pool (a non-readonly statement outside a transaction, a
 * db_run_txn's COMMIT), the eventfd db_writes_fd becomes readable until db_writes_take, which
 * says whether a write committed since its previous call. A write committing during or after
 * db_writes_take signals the eventfd again. */
int db_writes_fd(struct db *db);
bool db_writes_take(struct db *db);

/* Pool contention, for GET /metrics: how many db_acquire calls had to wait for a free
 * connection, and for how many microseconds in all (both only grow). */
void db_pool_waits(struct db *db, uint64_t *waits, uint64_t *wait_us);
/* How many db_acquire calls gave up waiting (the acquire timeout); only grows. */
uint64_t db_pool_timeouts(struct db *db);

/* Body of a transaction: returns a db_qs; a negative value rolls back. */
typedef int (*db_txn_fn)(struct db_conn *c, void *arg);

/* Runs fn inside BEGIN/COMMIT on `c`, retrying the whole body up to 3 times on soft errors
 * (reconnecting when the connection broke). Returns fn's final status, or an error. */
int db_run_txn(struct db_conn *c, db_txn_fn fn, void *arg);

#endif
