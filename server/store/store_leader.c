/* The leadership connection (store_leader.h): a libpq session outside the pool, so that the
 * advisory lock lives exactly as long as it. */
#include "store_leader.h"

#include "log.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct store_leader {
    PGconn *pg;
};

/* Runs `sql`. Returns DB_ONE_RESULT with *first = the first character of its one value ('t',
 * 'f', ...), DB_NO_RESULTS for a command without that one value, or DB_SOFT_ERROR (logged). */
static int command(struct store_leader *sl, const char *sql, char *first)
{
    PGresult *res = PQexec(sl->pg, sql);
    ExecStatusType st = PQresultStatus(res);
    int qs = DB_SOFT_ERROR;
    if (st == PGRES_TUPLES_OK && PQntuples(res) == 1 && PQnfields(res) == 1) {
        *first = PQgetvalue(res, 0, 0)[0];
        qs = DB_ONE_RESULT;
    } else if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        qs = DB_NO_RESULTS;
    } else {
        TY_WARN("leader", "%s: %s", sql, PQerrorMessage(sl->pg));
    }
    PQclear(res);
    return qs;
}

struct store_leader *store_leader_open(const char *conninfo, const char *const *channels, size_t n,
                                       bool *listen_failed, char *err, size_t errlen)
{
    *listen_failed = false;
    struct store_leader *sl = calloc(1, sizeof(*sl));
    if (sl == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* Values in the connection string win (it comes last). */
    const char *const keys[] = {"connect_timeout",
                                "keepalives_idle",
                                "keepalives_interval",
                                "keepalives_count",
                                "tcp_user_timeout",
                                "dbname",
                                NULL};
    const char *const values[] = {"5", "5", "2", "3", "10000", conninfo, NULL};
    sl->pg = PQconnectdbParams(keys, values, 1);
    if (PQstatus(sl->pg) != CONNECTION_OK) {
        snprintf(err, errlen, "%s", PQerrorMessage(sl->pg));
        store_leader_close(sl);
        return NULL;
    }
    /* The database's side (ignored on a unix socket; not fatal on an old PostgreSQL). */
    static const char *const sets[] = {
        "SET tcp_keepalives_idle = 5", "SET tcp_keepalives_interval = 2",
        "SET tcp_keepalives_count = 3", "SET tcp_user_timeout = 10000"};
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
        PQclear(PQexec(sl->pg, sets[i]));
    for (size_t i = 0; i < n; i++) {
        char *quoted = PQescapeIdentifier(sl->pg, channels[i], strlen(channels[i]));
        char sql[256];
        snprintf(sql, sizeof(sql), "LISTEN %s", quoted ? quoted : "");
        char first;
        int qs = quoted ? command(sl, sql, &first) : DB_SOFT_ERROR;
        PQfreemem(quoted);
        if (qs < 0) {
            snprintf(err, errlen, "LISTEN %s failed", channels[i]);
            *listen_failed = true;
            store_leader_close(sl);
            return NULL;
        }
    }
    return sl;
}

int store_leader_try_lock(struct store_leader *sl, int64_t key)
{
    char sql[96], first = 0;
    snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)", (long long)key);
    int qs = command(sl, sql, &first);
    return qs < 0 ? qs : first == 't';
}

int store_leader_ping(struct store_leader *sl)
{
    char first;
    int qs = command(sl, "SELECT 1", &first);
    return qs < 0 ? qs : 0;
}

/* Hands the notifications libpq has buffered to fn; returns how many. */
static int deliver(struct store_leader *sl, store_leader_notify_fn fn, void *arg)
{
    int count = 0;
    PGnotify *n;
    while ((n = PQnotifies(sl->pg)) != NULL) {
        fn(arg, n->relname, n->extra ? n->extra : "");
        PQfreemem(n);
        count++;
    }
    return count;
}

int store_leader_wait(struct store_leader *sl, int wake_fd, int timeout_ms,
                      store_leader_notify_fn fn, void *arg)
{
    int count = deliver(sl, fn, arg); /* those that arrived during the last command */
    struct pollfd p[2] = {{.fd = PQsocket(sl->pg), .events = POLLIN},
                          {.fd = wake_fd, .events = POLLIN}};
    int rc = poll(p, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (rc < 0 && errno != EINTR) {
        TY_WARN("leader", "poll: %s", strerror(errno));
        return count;
    }
    if (rc > 0 && (p[0].revents & POLLIN) != 0 && PQconsumeInput(sl->pg) == 0) {
        TY_WARN("leader", "the leadership connection broke: %s", PQerrorMessage(sl->pg));
        return DB_SOFT_ERROR;
    }
    return count + deliver(sl, fn, arg);
}

void store_leader_close(struct store_leader *sl)
{
    if (sl == NULL)
        return;
    PQfinish(sl->pg);
    free(sl);
}
