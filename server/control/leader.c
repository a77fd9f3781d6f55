/* The leadership thread: see leader.h. */
#include "leader.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEADER_TRY_MS 100    /* a follower tries the lock this often */
#define LEADER_CHECK_MS 1000 /* the leader checks its connection this often */
#define LEADER_RECONNECT_MS 1000

struct leader {
    char *conninfo;
    struct leader_hooks hooks;
    pthread_t thread;
    PGconn *pg;
    atomic_bool leading;
    atomic_bool stopping;
};

static void set_leading(struct leader *l, bool leading)
{
    if (atomic_load(&l->leading) == leading)
        return;
    atomic_store(&l->leading, leading);
    if (leading)
        TY_INFO("leader", "this server is now the leader (scheduling, timeouts, node loss)");
    else
        TY_WARN("leader", "this server lost the leadership: its connection to the database broke");
    l->hooks.changed(l->hooks.arg);
}

/* Runs a command on the leadership connection. Returns its one value's first character ('t',
 * 'f', ...), '-' for a command without rows, or 0 when it failed (the connection is then closed:
 * a broken session has lost the lock anyway). */
static char run(struct leader *l, const char *sql)
{
    PGresult *res = PQexec(l->pg, sql);
    ExecStatusType st = PQresultStatus(res);
    char out = 0;
    if (st == PGRES_TUPLES_OK && PQntuples(res) == 1 && PQnfields(res) == 1)
        out = PQgetvalue(res, 0, 0)[0];
    else if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        out = '-';
    else
        TY_WARN("leader", "%s: %s", sql, PQerrorMessage(l->pg));
    PQclear(res);
    if (out == 0) {
        PQfinish(l->pg);
        l->pg = NULL;
        set_leading(l, false);
    }
    return out;
}

/* Connects and LISTENs. Returns 0, or -1 (logged once per outage by the caller's flag). */
static int connect_and_listen(struct leader *l, bool *warned)
{
    /* A leader whose host vanishes (no FIN) must lose the lock in seconds, not at the kernel's
     * TCP timeout: keepalives both ways. Values in the connection string win (it comes last). */
    const char *const keys[] = {"connect_timeout",
                                "keepalives_idle",
                                "keepalives_interval",
                                "keepalives_count",
                                "tcp_user_timeout",
                                "dbname",
                                NULL};
    const char *const values[] = {"5", "5", "2", "3", "10000", l->conninfo, NULL};
    l->pg = PQconnectdbParams(keys, values, 1);
    if (PQstatus(l->pg) != CONNECTION_OK) {
        if (!*warned)
            TY_WARN("leader", "cannot connect to the database: %s; retrying",
                    PQerrorMessage(l->pg));
        *warned = true;
        PQfinish(l->pg);
        l->pg = NULL;
        return -1;
    }
    *warned = false;
    /* The database's side (ignored on a unix socket; not fatal on an old PostgreSQL). */
    static const char *const sets[] = {
        "SET tcp_keepalives_idle = 5", "SET tcp_keepalives_interval = 2",
        "SET tcp_keepalives_count = 3", "SET tcp_user_timeout = 10000"};
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
        PQclear(PQexec(l->pg, sets[i]));
    if (run(l, "LISTEN " LEADER_CHANNEL_LAUNCH) == 0 ||
        run(l, "LISTEN " LEADER_CHANNEL_KICK) == 0 || run(l, "LISTEN " LEADER_CHANNEL_FORGET) == 0)
        return -1;
    l->hooks.listening(l->hooks.arg);
    return 0;
}

static void deliver_notifications(struct leader *l)
{
    PGnotify *n;
    while (l->pg && (n = PQnotifies(l->pg)) != NULL) {
        l->hooks.notified(l->hooks.arg, n->relname, n->extra ? n->extra : "");
        PQfreemem(n);
    }
}

/* Waits up to `ms` for notifications and delivers them; a broken connection is closed. */
static void wait_notifications(struct leader *l, int ms)
{
    struct pollfd p = {.fd = PQsocket(l->pg), .events = POLLIN};
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno != EINTR) {
        TY_WARN("leader", "poll: %s", strerror(errno));
        return;
    }
    if (rc > 0 && PQconsumeInput(l->pg) == 0) {
        TY_WARN("leader", "the leadership connection broke: %s", PQerrorMessage(l->pg));
        PQfinish(l->pg);
        l->pg = NULL;
        set_leading(l, false);
        return;
    }
    deliver_notifications(l);
}

/* Tries the lock once (connecting first if needed): 0 when the command ran, -1 when the
 * connection is down. */
static int try_lock(struct leader *l)
{
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)", (long long)LEADER_LOCK_KEY);
    char r = run(l, sql);
    if (r == 't')
        set_leading(l, true);
    return r ? 0 : -1;
}

static void *leader_thread(void *arg)
{
    struct leader *l = arg;
    bool warned = false;
    double last_try = (double)util_mono_ms(), last_check = (double)util_mono_ms();
    while (!atomic_load(&l->stopping)) {
        if (l->pg == NULL && connect_and_listen(l, &warned) != 0) {
            usleep(LEADER_RECONNECT_MS * 1000);
            continue;
        }
        double t = (double)util_mono_ms();
        char r = 0;
        if (!atomic_load(&l->leading) && t - last_try >= LEADER_TRY_MS) {
            last_try = t;
            r = try_lock(l) == 0 ? '-' : 0;
        } else if (atomic_load(&l->leading) && t - last_check >= LEADER_CHECK_MS) {
            last_check = t;
            r = run(l, "SELECT 1");
        } else {
            r = '-';
        }
        if (r == 0 || l->pg == NULL)
            continue;
        deliver_notifications(l); /* those that arrived during the command */
        /* Until the next try or check is due (a notification ends the wait early). */
        double due =
            atomic_load(&l->leading) ? last_check + LEADER_CHECK_MS : last_try + LEADER_TRY_MS;
        double left = due - (double)util_mono_ms();
        wait_notifications(l, left < 1 ? 1 : left > LEADER_CHECK_MS ? LEADER_CHECK_MS : (int)left);
    }
    if (l->pg)
        PQfinish(l->pg); /* the lock goes with the session */
    l->pg = NULL;
    return NULL;
}

struct leader *leader_start(const char *conninfo, const struct leader_hooks *hooks)
{
    struct leader *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->hooks = *hooks;
    l->conninfo = strdup(conninfo);
    atomic_init(&l->leading, false);
    atomic_init(&l->stopping, false);
    /* A first try before the thread: a server alone on its database leads from its start. */
    bool warned = false;
    if (l->conninfo != NULL && connect_and_listen(l, &warned) == 0)
        try_lock(l);
    if (l->conninfo == NULL || pthread_create(&l->thread, NULL, leader_thread, l) != 0) {
        TY_ERROR("leader", "cannot start the leadership thread");
        if (l->pg)
            PQfinish(l->pg);
        free(l->conninfo);
        free(l);
        return NULL;
    }
    return l;
}

bool leader_is_leader(const struct leader *l)
{
    return l != NULL && atomic_load(&l->leading);
}

void leader_stop(struct leader *l)
{
    if (l == NULL)
        return;
    atomic_store(&l->stopping, true);
    pthread_join(l->thread, NULL);
    free(l->conninfo);
    free(l);
}
