/* The stream thread's loop: its database connection (LISTEN), the hub's subscriber events, and
 * the order of work in each turn. See stream.h. */
#include "stream_internal.h"

#include "db.h"
#include "log.h"
#include "server.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define STREAM_RECONNECT_S 1.0
#define STREAM_BACKOFF_S 0.5
#define STREAM_IDLE_MS 1000
#define STREAM_GOODBYE_WAIT_MS 1000
#define STREAM_PEER_NOTIFY_S 0.005 /* at most one NOTIFY to the other servers this often */

void stream__db_failed(struct stream *st)
{
    st->backoff_until = util_mono_s() + STREAM_BACKOFF_S;
}

/* Called by the lws thread when it queued a subscriber event, and by stream_stop. */
static void wake(void *arg)
{
    struct stream *st = arg;
    uint64_t one = 1;
    while (write(st->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

/* Streams may have grown (a write committed here, or another server said so): the cluster
 * topic is read again, and the job topics whose jobs have rows after their cursors (one
 * query for all; when it fails, every one). */
static void streams_grew(struct stream *st)
{
    st->cluster.dirty = true;
    size_t n = 0;
    for (struct stream_topic *t = st->topics; t; t = t->next)
        n += !t->dirty;
    if (n == 0)
        return;
    int64_t *jobs = malloc(n * sizeof(*jobs));
    int64_t *cursors = malloc(n * sizeof(*cursors));
    bool *grown = malloc(n * sizeof(*grown));
    int qs = DB_SOFT_ERROR;
    if (jobs && cursors && grown) {
        size_t i = 0;
        for (struct stream_topic *t = st->topics; t; t = t->next)
            if (!t->dirty) {
                jobs[i] = t->job;
                cursors[i++] = t->cursor;
            }
        qs = store_job_streams_grown(st->db, jobs, cursors, n, grown);
    }
    size_t i = 0;
    for (struct stream_topic *t = st->topics; t; t = t->next)
        if (!t->dirty)
            t->dirty = qs < 0 || grown[i++];
    free(jobs);
    free(cursors);
    free(grown);
}

/* Reconnects (at most every STREAM_RECONNECT_S) and listens again; whatever was notified
 * meanwhile is unknown, so every topic is read again. Returns true when connected. */
static bool ensure_connected(struct stream *st)
{
    if (store_stream_connected(st->db))
        return true;
    double now = util_mono_s();
    if (now < st->next_connect)
        return false;
    st->next_connect = now + STREAM_RECONNECT_S;
    if (db_ensure(st->db) != 0 || store_stream_listen(st->db) < 0)
        return false;
    TY_INFO("stream", "listening for stream notifications again");
    for (struct stream_topic *t = st->topics; t; t = t->next)
        t->dirty = true;
    st->cluster.dirty = true;
    return true;
}

/* Takes the notifications received so far. Returns true when there were any. */
static bool take_notifications(struct stream *st)
{
    int n = store_stream_notifications(st->db);
    if (n < 0)
        TY_WARN("stream", "lost the database connection; reconnecting");
    if (n > 0)
        streams_grew(st);
    return n > 0;
}

/* Writes committed through this server's pool since the last look: its own topics are read
 * again at once, and the other servers get one NOTIFY (no notification is sent inside the
 * writing transactions: PostgreSQL serialises the commits of notifying transactions), at most
 * every STREAM_PEER_NOTIFY_S. Returns the milliseconds until a NOTIFY is due, or -1. */
static int take_local_writes(struct stream *st, bool connected)
{
    if (db_writes_take(st->srv->db)) {
        st->peers_pending = true;
        if (connected)
            streams_grew(st);
    }
    if (!st->peers_pending || !connected)
        return -1;
    double now = util_mono_s();
    if (now < st->next_peer_notify)
        return (int)((st->next_peer_notify - now) * 1000) + 1;
    st->next_peer_notify = now + STREAM_PEER_NOTIFY_S;
    if (store_stream_notify_peers(st->db) >= 0)
        st->peers_pending = false;
    return -1;
}

static void say_goodbye(struct stream *st)
{
    for (struct stream_client *cl = st->clients; cl; cl = cl->next)
        if (cl->counted)
            stream__drop(st, cl, "shutdown");
    hub_flush(st->hub);
}

static void *stream_thread(void *arg)
{
    struct stream *st = arg;
    while (!atomic_load(&st->stopping)) {
        bool connected = ensure_connected(st);
        if (connected)
            take_notifications(st);
        int peer_due_ms = take_local_writes(st, connected);
        struct hub_event ev;
        while (hub_next_stream_event(st->hub, &ev))
            stream__on_event(st, &ev);
        bool busy = false;
        if (store_stream_connected(st->db)) {
            busy = stream__fan_out(st);
            stream__cluster_wait(st);
            busy = stream__catch_up(st) || busy;
            /* Notifications that arrived while the queries ran are in the connection's buffer,
             * where poll() cannot see them. */
            busy = take_notifications(st) || busy;
        }
        if (st->flush) {
            st->flush = false;
            hub_flush(st->hub);
        }
        int timeout = STREAM_IDLE_MS;
        if (st->cluster.wait_snapshot)
            timeout = 20;
        if (!store_stream_connected(st->db) || util_mono_s() < st->backoff_until)
            timeout = 100;
        if (peer_due_ms >= 0 && peer_due_ms < timeout)
            timeout = peer_due_ms;
        if (busy)
            timeout = 0;
        struct pollfd pfd[3] = {{.fd = st->wake_fd, .events = POLLIN},
                                {.fd = db_writes_fd(st->srv->db), .events = POLLIN},
                                {.fd = store_stream_socket(st->db), .events = POLLIN}};
        if (poll(pfd, pfd[2].fd >= 0 ? 3 : 2, timeout) > 0 && (pfd[0].revents & POLLIN)) {
            uint64_t count;
            if (read(st->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
                TY_WARN("stream", "reading the wake-up counter: %s", strerror(errno));
        }
    }
    say_goodbye(st);
    return NULL;
}

struct stream *stream_start(struct srv *srv, struct hub *hub)
{
    struct stream *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return NULL;
    st->srv = srv;
    st->hub = hub;
    st->queue_max = (size_t)srv->cfg.stream_queue_max;
    st->max_clients = (size_t)srv->cfg.max_stream_clients;
    st->cluster.ready = false;
    st->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->wake_fd < 0) {
        TY_ERROR("stream", "eventfd: %s", strerror(errno));
        free(st);
        return NULL;
    }
    st->db = db_acquire(srv->db);
    if (st->db == NULL || store_stream_listen(st->db) < 0) {
        TY_ERROR("stream", "cannot listen for stream notifications");
        goto fail;
    }
    hub_stream_attach(hub, wake, st, st->queue_max);
    if (pthread_create(&st->thread, NULL, stream_thread, st) != 0) {
        hub_stream_detach(hub);
        goto fail;
    }
    return st;
fail:
    db_release(srv->db, st->db);
    close(st->wake_fd);
    free(st);
    return NULL;
}

void stream_stop(struct stream *st)
{
    if (st == NULL)
        return;
    atomic_store(&st->stopping, true);
    wake(st);
    pthread_join(st->thread, NULL);
    /* A moment for the `closing` messages to go out (a subscriber that does not read is not
     * waited for long). */
    for (int i = 0; i < STREAM_GOODBYE_WAIT_MS / 10 && !hub_stream_idle(st->hub); i++)
        usleep(10000);
    hub_stream_detach(st->hub);
    struct hub_event ev;
    while (hub_next_stream_event(st->hub, &ev))
        free(ev.text);
    stream__free_clients(st);
    stream__free_topics(st);
    if (store_stream_connected(st->db))
        store_stream_unlisten(st->db);
    db_release(st->srv->db, st->db);
    close(st->wake_fd);
    free(st);
}
