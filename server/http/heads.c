/* The request-head deadline (heads.h). */
#include "heads.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* One open connection: its socket and the time its current head must be in by (0: in). */
struct head_conn {
    struct head_conn *prev, *next;
    struct srv_heads *owner;
    int fd;
    double deadline;
    bool cut; /* shut down already */
};

struct srv_heads {
    pthread_mutex_t lock; /* guards the list and every entry's deadline */
    pthread_cond_t wake;
    pthread_t thread;
    bool stopping;
    double head_s, next_head_s;
    struct head_conn *conns;
};

/* The socket context of conn (srv_heads_notify's entry), NULL when it has none. */
static struct head_conn *conn_entry(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void srv_heads_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                      enum MHD_ConnectionNotificationCode code)
{
    struct srv_heads *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct head_conn *e = ci ? calloc(1, sizeof(*e)) : NULL;
        if (e == NULL)
            return; /* not watched: the idle timeout still holds it */
        e->owner = h;
        e->fd = ci->connect_fd;
        pthread_mutex_lock(&h->lock);
        e->deadline = util_mono_s() + h->head_s;
        e->next = h->conns;
        if (h->conns)
            h->conns->prev = e;
        h->conns = e;
        pthread_mutex_unlock(&h->lock);
        *socket_context = e;
        return;
    }
    struct head_conn *e = *socket_context;
    if (e == NULL)
        return;
    /* libmicrohttpd notifies before it closes the socket: under the lock the watcher cannot
     * shut down a descriptor number that a later connection already reuses. */
    pthread_mutex_lock(&h->lock);
    if (e->prev)
        e->prev->next = e->next;
    else
        h->conns = e->next;
    if (e->next)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&h->lock);
    free(e);
    *socket_context = NULL;
}

static void set_deadline(struct MHD_Connection *conn, bool arrived)
{
    struct head_conn *e = conn_entry(conn);
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->owner->lock);
    e->deadline = arrived ? 0 : util_mono_s() + e->owner->next_head_s;
    pthread_mutex_unlock(&e->owner->lock);
}

void srv_heads_arrived(struct MHD_Connection *conn)
{
    set_deadline(conn, true);
}

void srv_heads_rearm(struct MHD_Connection *conn)
{
    set_deadline(conn, false);
}

/* Shuts down every connection past its deadline; returns how many. Under the lock. */
static int cut_late(struct srv_heads *h)
{
    double now = util_mono_s();
    int n = 0;
    for (struct head_conn *e = h->conns; e; e = e->next) {
        if (e->cut || e->deadline == 0 || now < e->deadline)
            continue;
        e->cut = true;
        if (shutdown(e->fd, SHUT_RDWR) == 0)
            n++;
    }
    return n;
}

static void *watch(void *arg)
{
    struct srv_heads *h = arg;
    /* Checked four times per deadline (at most once a second), so a head gets at most a quarter
     * more time than its deadline. */
    double step = h->head_s / 4 < 1 ? h->head_s / 4 : 1;
    pthread_mutex_lock(&h->lock);
    while (!h->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long ns = (long long)ts.tv_nsec + (long long)(step * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        int rc = pthread_cond_timedwait(&h->wake, &h->lock, &ts);
        if (rc != 0 && rc != ETIMEDOUT)
            break;
        int n = h->stopping ? 0 : cut_late(h);
        if (n > 0)
            TY_INFO("http",
                    "closed %d connection%s whose request line and headers took over "
                    "%g s (--http-head-timeout-s)",
                    n, n == 1 ? "" : "s", h->head_s);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

struct srv_heads *srv_heads_start(double head_s, double idle_s)
{
    struct srv_heads *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->head_s = head_s;
    h->next_head_s = idle_s > head_s ? idle_s : head_s;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->wake, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&h->thread, NULL, watch, h);
    if (rc != 0) {
        TY_ERROR("http", "cannot start the request-head watcher: %s", strerror(rc));
        pthread_cond_destroy(&h->wake);
        pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
    }
    return h;
}

void srv_heads_stop(struct srv_heads *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->lock);
    h->stopping = true;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->lock);
    while (h->conns) { /* none once the daemon stopped; freed all the same */
        struct head_conn *e = h->conns;
        h->conns = e->next;
        free(e);
    }
    free(h);
}
