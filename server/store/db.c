/* The connection pool (db.h) and the statement helpers (db_query.h). */
#include "db_query.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define DB_MAX_PREPARED 128
#define DB_TXN_RETRIES 3

struct db_conn {
    struct db *db;
    PGconn *pg;
    bool in_use;
    const struct db_stmt *prepared[DB_MAX_PREPARED];
    int nprepared;
    char sqlstate[6];
    bool tokens_written; /* in this transaction: bump the token generation after its COMMIT */
};

struct db {
    char *conninfo;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int size;
    struct db_conn *conns;
    uint64_t generation;       /* atomic */
    uint64_t token_generation; /* atomic */
    int writes_fd;             /* eventfd: signalled after a committed write (db_writes_fd) */
    bool writes_pending;       /* atomic: a write committed since the last db_writes_take */
    uint64_t waits;            /* atomic: db_acquire calls that found every connection in use */
    uint64_t wait_us;          /* atomic: microseconds they waited, in all */
    uint64_t timeouts;         /* atomic: db_acquire calls that gave up waiting */
    int acquire_timeout_ms;    /* 0: wait for ever */
    int connect_timeout_s;     /* 0: libpq's default (none) */

    int64_t connect_error_logged; /* atomic: CLOCK_MONOTONIC second of the last logged failure;
                                   * DB_CONNECT_ERRORS_QUIET: none is logged any more */
};

#define DB_CONNECT_ERROR_EVERY_S 5 /* while the database is down, one failure line this often */
#define DB_CONNECT_ERRORS_QUIET INT64_MAX

struct db *db_create(const char *conninfo, int size)
{
    struct db *db = calloc(1, sizeof(*db));
    if (db == NULL)
        return NULL;
    db->conninfo = strdup(conninfo);
    db->conns = calloc((size_t)size, sizeof(*db->conns));
    if (db->conninfo == NULL || db->conns == NULL) {
        free(db->conninfo);
        free(db->conns);
        free(db);
        return NULL;
    }
    db->writes_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (db->writes_fd < 0) {
        free(db->conninfo);
        free(db->conns);
        free(db);
        return NULL;
    }
    db->size = size;
    for (int i = 0; i < size; i++)
        db->conns[i].db = db;
    pthread_mutex_init(&db->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&db->freed, &attr);
    pthread_condattr_destroy(&attr);
    return db;
}

void db_set_timeouts(struct db *db, int acquire_timeout_ms, int connect_timeout_s)
{
    db->acquire_timeout_ms = acquire_timeout_ms;
    db->connect_timeout_s = connect_timeout_s;
}

void db_quiet_connect_errors(struct db *db)
{
    __atomic_store_n(&db->connect_error_logged, DB_CONNECT_ERRORS_QUIET, __ATOMIC_RELAXED);
}

const char *db_conninfo(const struct db *db)
{
    return db->conninfo;
}

void db_destroy(struct db *db)
{
    if (db == NULL)
        return;
    for (int i = 0; i < db->size; i++) {
        if (db->conns[i].in_use)
            TY_BUG("db", "connection %d still in use at shutdown", i);
        if (db->conns[i].pg)
            PQfinish(db->conns[i].pg);
    }
    pthread_mutex_destroy(&db->lock);
    pthread_cond_destroy(&db->freed);
    close(db->writes_fd);
    free(db->conns);
    free(db->conninfo);
    free(db);
}

static void notice_to_log(void *arg, const char *message)
{
    (void)arg;
    TY_DEBUG("db", "%s", message);
}

/* Makes sure c->pg is a live connection, opening or resetting it. Returns 0 or -1. */
static int conn_ensure(struct db *db, struct db_conn *c)
{
    /* An idle connection (no query in flight, no LISTEN) has nothing to read unless the server
     * is closing it ("terminating connection", a restart), so readable means: reconnect now
     * rather than fail the next query. */
    if (c->pg && PQstatus(c->pg) == CONNECTION_OK) {
        struct pollfd pfd = {.fd = PQsocket(c->pg), .events = POLLIN};
        if (poll(&pfd, 1, 0) == 0)
            return 0;
    }
    if (c->pg) {
        TY_WARN("db", "connection lost, reconnecting");
        PQfinish(c->pg);
        c->pg = NULL;
    }
    c->nprepared = 0;
    /* connect_timeout comes first so that a value in the connection string itself wins: libpq
     * expands the dbname entry into its parameters and the last one given is used. */
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", db->connect_timeout_s);
    /* JIT off: PostgreSQL compiles a plan whose estimate passes jit_above_cost, and it guesses
     * 100 rows for every set-returning function; compiling took most of a chart's read (a
     * million-point series: seconds of LLVM for a query that runs in a fraction of one). An
     * `options` in the connection string replaces this one. */
    const char *const keys[] = {"connect_timeout", "options", "dbname", NULL};
    const char *const values[] = {db->connect_timeout_s > 0 ? timeout : NULL, "-c jit=off",
                                  db->conninfo, NULL};
    c->pg = PQconnectdbParams(keys, values, 1);
    if (PQstatus(c->pg) != CONNECTION_OK) {
        /* Every thread fails while the database is down (restarting, in crash recovery): one
         * line every few seconds says so, the rest go to the debug log. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t last = __atomic_load_n(&db->connect_error_logged, __ATOMIC_RELAXED);
        if (last != DB_CONNECT_ERRORS_QUIET &&
            (last == 0 || now.tv_sec - last >= DB_CONNECT_ERROR_EVERY_S) &&
            __atomic_compare_exchange_n(&db->connect_error_logged, &last, (int64_t)now.tv_sec,
                                        false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            TY_ERROR("db", "cannot connect to the database: %s", PQerrorMessage(c->pg));
        else
            TY_DEBUG("db", "cannot connect to the database: %s", PQerrorMessage(c->pg));
        PQfinish(c->pg);
        c->pg = NULL;
        return -1;
    }
    PQsetNoticeProcessor(c->pg, notice_to_log, NULL);
    return 0;
}

/* db_acquire, waiting for a free connection when `wait`. */
static struct db_conn *acquire(struct db *db, bool wait)
{
    pthread_mutex_lock(&db->lock);
    struct db_conn *c = NULL;
    struct timespec t0 = {0, 0};
    for (;;) {
        /* Prefer a connection that is already open. */
        for (int i = 0; i < db->size && c == NULL; i++)
            if (!db->conns[i].in_use && db->conns[i].pg)
                c = &db->conns[i];
        for (int i = 0; i < db->size && c == NULL; i++)
            if (!db->conns[i].in_use)
                c = &db->conns[i];
        if (c || !wait)
            break;
        if (t0.tv_sec == 0 && t0.tv_nsec == 0)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (db->acquire_timeout_ms <= 0) {
            pthread_cond_wait(&db->freed, &db->lock);
            continue;
        }
        struct timespec deadline = util_timespec_add_ms(t0, db->acquire_timeout_ms);
        if (pthread_cond_timedwait(&db->freed, &db->lock, &deadline) == ETIMEDOUT)
            break;
    }
    if (c == NULL && !wait) {
        pthread_mutex_unlock(&db->lock);
        return NULL;
    }
    if (c == NULL) {
        pthread_mutex_unlock(&db->lock);
        __atomic_add_fetch(&db->timeouts, 1, __ATOMIC_RELAXED);
        TY_WARN("db", "no free database connection within %d ms", db->acquire_timeout_ms);
        return NULL;
    }
    c->in_use = true;
    pthread_mutex_unlock(&db->lock);
    if (t0.tv_sec != 0 || t0.tv_nsec != 0) {
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int64_t us = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
        __atomic_add_fetch(&db->waits, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&db->wait_us, (uint64_t)(us > 0 ? us : 0), __ATOMIC_RELAXED);
    }
    if (conn_ensure(db, c) != 0) {
        db_release(db, c);
        return NULL;
    }
    return c;
}

struct db_conn *db_acquire(struct db *db)
{
    return acquire(db, true);
}

struct db_conn *db_try_acquire(struct db *db)
{
    return acquire(db, false);
}

void db_release(struct db *db, struct db_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&db->lock);
    c->in_use = false;
    pthread_cond_signal(&db->freed);
    pthread_mutex_unlock(&db->lock);
}

int db_with_conn(struct db *db, db_conn_fn fn, void *arg)
{
    struct db_conn *c = db_acquire(db);
    if (c == NULL)
        return DB_SOFT_ERROR;
    int qs = fn(c, arg);
    db_release(db, c);
    return qs;
}

int db_ensure(struct db_conn *c)
{
    return conn_ensure(c->db, c);
}

PGconn *db_pg(struct db_conn *c)
{
    return c->pg;
}

const char *db_last_sqlstate(const struct db_conn *c)
{
    return c->sqlstate;
}

/* Classifies a failed result: soft when retrying the transaction can succeed. */
static int classify_failure(struct db_conn *c, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    snprintf(c->sqlstate, sizeof(c->sqlstate), "%s", state ? state : "");
    if (PQstatus(c->pg) != CONNECTION_OK)
        return DB_SOFT_ERROR;
    if (state && (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0))
        return DB_SOFT_ERROR;
    /* Class 08: connection exceptions; 57P01..03: server shutting down or restarting. */
    if (state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P0", 4) == 0))
        return DB_SOFT_ERROR;
    return DB_HARD_ERROR;
}

static int ensure_prepared(struct db_conn *c, const struct db_stmt *stmt)
{
    for (int i = 0; i < c->nprepared; i++)
        if (c->prepared[i] == stmt)
            return 0;
    PGresult *res = PQprepare(c->pg, stmt->name, stmt->sql, stmt->nparams, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        int qs = classify_failure(c, res);
        if (qs == DB_HARD_ERROR)
            TY_BUG("db", "preparing %s: %s", stmt->name, PQresultErrorMessage(res));
        PQclear(res);
        return qs;
    }
    PQclear(res);
    if (c->nprepared < DB_MAX_PREPARED)
        c->prepared[c->nprepared++] = stmt;
    else
        TY_BUG("db", "more than %d statements; raise DB_MAX_PREPARED", DB_MAX_PREPARED);
    return 0;
}

static int finish_result(struct db_conn *c, PGresult *res, PGresult **out, const char *what)
{
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        int qs = classify_failure(c, res);
        if (qs == DB_HARD_ERROR)
            TY_WARN("db", "%s failed: %s", what, PQresultErrorMessage(res));
        else
            TY_DEBUG("db", "%s: retryable failure: %s", what, PQresultErrorMessage(res));
        PQclear(res);
        return qs;
    }
    c->sqlstate[0] = '\0';
    int rows;
    if (st == PGRES_TUPLES_OK) {
        rows = PQntuples(res);
    } else {
        const char *n = PQcmdTuples(res);
        rows = n && *n ? (int)strtol(n, NULL, 10) : 0;
    }
    /* A result is handed over only when it has rows, so `if (qs <= 0) return qs;` leaks
     * nothing. */
    if (out && rows > 0 && st == PGRES_TUPLES_OK)
        *out = res;
    else
        PQclear(res);
    return rows;
}

uint64_t db_generation(struct db *db)
{
    return __atomic_load_n(&db->generation, __ATOMIC_ACQUIRE);
}

static void bump_generation(struct db *db)
{
    __atomic_add_fetch(&db->generation, 1, __ATOMIC_RELEASE);
}

uint64_t db_token_generation(struct db *db)
{
    return __atomic_load_n(&db->token_generation, __ATOMIC_ACQUIRE);
}

static void bump_token_generation(struct db *db)
{
    __atomic_add_fetch(&db->token_generation, 1, __ATOMIC_RELEASE);
}

/* A write committed: one eventfd signal until the reader takes it (db_writes_take). */
static void signal_write(struct db *db)
{
    if (__atomic_exchange_n(&db->writes_pending, true, __ATOMIC_ACQ_REL))
        return;
    uint64_t one = 1;
    while (write(db->writes_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

int db_writes_fd(struct db *db)
{
    return db->writes_fd;
}

bool db_writes_take(struct db *db)
{
    /* Drained first: a write signalled after the exchange below wakes the next poll. */
    uint64_t count;
    while (read(db->writes_fd, &count, sizeof(count)) < 0 && errno == EINTR)
        ;
    return __atomic_exchange_n(&db->writes_pending, false, __ATOMIC_ACQ_REL);
}

/* What db_exec and db_collect make of a statement's result r. */
static int finish_stmt(struct db_conn *c, const struct db_stmt *stmt, PGresult *r, PGresult **res)
{
    int qs = finish_result(c, r, res, stmt->name);
    if (qs > 0 && !stmt->readonly)
        bump_generation(c->db);
    /* Outside a transaction the statement has committed; inside one, db_run_txn signals. */
    if (qs >= 0 && !stmt->readonly && PQtransactionStatus(c->pg) == PQTRANS_IDLE)
        signal_write(c->db);
    return qs;
}

int db_exec_params(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
                   const int *lengths, const int *formats, PGresult **res)
{
    int qs = ensure_prepared(c, stmt);
    if (qs < 0)
        return qs;
    return finish_stmt(
        c, stmt, PQexecPrepared(c->pg, stmt->name, stmt->nparams, params, lengths, formats, 0),
        res);
}

int db_exec(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
            PGresult **res)
{
    return db_exec_params(c, stmt, params, NULL, NULL, res);
}

int db_send_params(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
                   const int *lengths, const int *formats)
{
    int qs = ensure_prepared(c, stmt);
    if (qs < 0)
        return qs;
    if (PQsendQueryPrepared(c->pg, stmt->name, stmt->nparams, params, lengths, formats, 0) == 1)
        return 0;
    TY_DEBUG("db", "%s not sent: %s", stmt->name, PQerrorMessage(c->pg));
    return classify_failure(c, NULL);
}

int db_send(struct db_conn *c, const struct db_stmt *stmt, const char *const *params)
{
    return db_send_params(c, stmt, params, NULL, NULL);
}

int db_collect(struct db_conn *c, const struct db_stmt *stmt, PGresult **res)
{
    PGresult *r = PQgetResult(c->pg), *extra;
    while ((extra = PQgetResult(c->pg)) != NULL) /* one statement: none, but never left behind */
        PQclear(extra);
    if (r == NULL)
        r = PQmakeEmptyPGresult(c->pg, PGRES_FATAL_ERROR);
    return finish_stmt(c, stmt, r, res);
}

bool db_sent_done(struct db_conn *c)
{
    return PQconsumeInput(c->pg) == 0 || PQisBusy(c->pg) == 0;
}

int db_socket(struct db_conn *c)
{
    return c->pg ? PQsocket(c->pg) : -1;
}

int db_exec_text(struct db_conn *c, const struct db_stmt *stmt, const char *const *params,
                 char **out)
{
    PGresult *res = NULL;
    int qs = db_exec(c, stmt, params, &res);
    if (qs <= 0)
        return qs;
    *out = PQgetisnull(res, 0, 0) ? NULL : strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return qs;
}

void db_tokens_changed(struct db_conn *c)
{
    bump_token_generation(c->db);
    if (PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        c->tokens_written = true;
}

int db_exec_simple(struct db_conn *c, const char *sql)
{
    return finish_result(c, PQexec(c->pg, sql), NULL, "simple query");
}

int db_run_txn(struct db_conn *c, db_txn_fn fn, void *arg)
{
    int qs = DB_SOFT_ERROR;
    for (int attempt = 0; attempt < DB_TXN_RETRIES; attempt++) {
        if (attempt > 0) {
            usleep(1000u << attempt);
            if (conn_ensure(c->db, c) != 0)
                return DB_SOFT_ERROR;
        }
        qs = db_exec_simple(c, "BEGIN");
        if (qs < 0)
            continue;
        c->tokens_written = false;
        qs = fn(c, arg);
        if (qs < 0) {
            if (PQstatus(c->pg) == CONNECTION_OK)
                db_exec_simple(c, "ROLLBACK");
            if (qs == DB_HARD_ERROR)
                return qs;
            continue;
        }
        int cq = db_exec_simple(c, "COMMIT");
        if (cq >= 0) {
            /* Again after the commit: a reader that raced the body must not cache old rows. */
            bump_generation(c->db);
            if (c->tokens_written)
                bump_token_generation(c->db);
            signal_write(c->db);
            return qs;
        }
        qs = cq;
        if (qs == DB_HARD_ERROR)
            return qs;
    }
    return qs;
}

void db_pool_waits(struct db *db, uint64_t *waits, uint64_t *wait_us)
{
    *waits = __atomic_load_n(&db->waits, __ATOMIC_RELAXED);
    *wait_us = __atomic_load_n(&db->wait_us, __ATOMIC_RELAXED);
}

uint64_t db_pool_timeouts(struct db *db)
{
    return __atomic_load_n(&db->timeouts, __ATOMIC_RELAXED);
}
