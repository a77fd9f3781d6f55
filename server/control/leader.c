/* The leadership thread: see leader.h. */
#include "leader.h"

#include "log.h"
#include "store_leader.h"
#include "util.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define LEADER_TRY_MS 100    /* a follower tries the lock this often */
#define LEADER_CHECK_MS 1000 /* the leader checks its connection this often */
#define LEADER_RECONNECT_MS 1000

struct leader {
    char *conninfo;
    struct leader_hooks hooks;
    pthread_t thread;
    struct store_leader *conn; /* NULL while disconnected */
    atomic_bool leading;
    atomic_bool stopping;
    int wake_fd; /* an eventfd leader_stop writes, so that a wait ends at once */
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

/* A command failed: the session is gone, and the lock with it. */
static void disconnect(struct leader *l)
{
    store_leader_close(l->conn);
    l->conn = NULL;
    set_leading(l, false);
}

/* Connects and LISTENs. Returns 0, or -1 (a failed connection is logged once per outage, by the
 * caller's flag). */
static int connect_and_listen(struct leader *l, bool *warned)
{
    static const char *const channels[] = {LEADER_CHANNEL_LAUNCH, LEADER_CHANNEL_KICK,
                                           LEADER_CHANNEL_FORGET};
    char err[512];
    bool listen_failed = false;
    l->conn = store_leader_open(l->conninfo, channels, sizeof(channels) / sizeof(channels[0]),
                                &listen_failed, err, sizeof(err));
    if (l->conn == NULL) {
        if (listen_failed) {
            *warned = false;
            set_leading(l, false);
        } else if (!*warned) {
            TY_WARN("leader", "cannot connect to the database: %s; retrying", err);
            *warned = true;
        }
        return -1;
    }
    *warned = false;
    l->hooks.listening(l->hooks.arg);
    return 0;
}

static void notified(void *arg, const char *channel, const char *payload)
{
    struct leader *l = arg;
    l->hooks.notified(l->hooks.arg, channel, payload);
}

/* Tries the lock once: 0 when the command ran, -1 when the connection broke (then closed). */
static int try_lock(struct leader *l)
{
    int qs = store_leader_try_lock(l->conn, LEADER_LOCK_KEY);
    if (qs < 0) {
        disconnect(l);
        return -1;
    }
    if (qs == 1)
        set_leading(l, true);
    return 0;
}

static void *leader_thread(void *arg)
{
    struct leader *l = arg;
    bool warned = false;
    double last_try = (double)util_mono_ms(), last_check = (double)util_mono_ms();
    while (!atomic_load(&l->stopping)) {
        if (l->conn == NULL && connect_and_listen(l, &warned) != 0) {
            poll(&(struct pollfd){.fd = l->wake_fd, .events = POLLIN}, 1, LEADER_RECONNECT_MS);
            continue;
        }
        double t = (double)util_mono_ms();
        if (!atomic_load(&l->leading) && t - last_try >= LEADER_TRY_MS) {
            last_try = t;
            if (try_lock(l) != 0)
                continue;
        } else if (atomic_load(&l->leading) && t - last_check >= LEADER_CHECK_MS) {
            last_check = t;
            if (store_leader_ping(l->conn) < 0) {
                disconnect(l);
                continue;
            }
        }
        /* Until the next try or check is due (a notification ends the wait early). */
        double due =
            atomic_load(&l->leading) ? last_check + LEADER_CHECK_MS : last_try + LEADER_TRY_MS;
        double left = due - (double)util_mono_ms();
        int ms = left < 1 ? 1 : left > LEADER_CHECK_MS ? LEADER_CHECK_MS : (int)left;
        if (store_leader_wait(l->conn, l->wake_fd, ms, notified, l) < 0)
            disconnect(l);
    }
    store_leader_close(l->conn); /* the lock goes with the session */
    l->conn = NULL;
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
    l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    /* A first try before the thread: a server alone on its database leads from its start. */
    bool warned = false;
    if (l->conninfo != NULL && connect_and_listen(l, &warned) == 0)
        try_lock(l);
    if (l->conninfo == NULL || l->wake_fd < 0 ||
        pthread_create(&l->thread, NULL, leader_thread, l) != 0) {
        TY_ERROR("leader", "cannot start the leadership thread");
        store_leader_close(l->conn);
        if (l->wake_fd >= 0)
            close(l->wake_fd);
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
    uint64_t one = 1;
    if (write(l->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        TY_WARN("leader", "cannot wake the leadership thread: it stops within %d ms",
                LEADER_CHECK_MS);
    pthread_join(l->thread, NULL);
    close(l->wake_fd);
    free(l->conninfo);
    free(l);
}
