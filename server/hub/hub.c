/* libwebsockets server thread and the locked queues between it and the control and stream
 * threads. See hub.h. */
#include "hub.h"

#include "agent_proto.h"
#include "log.h"

#include <libwebsockets.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define HUB_MAX_MESSAGE APROTO_MAX_MESSAGE
#define HUB_BATCH_MAX 256           /* messages in one write to a subscriber, at most */
#define HUB_BATCH_BYTES (64 * 1024) /* bytes in one write to a subscriber (beyond one message) */

enum hub_kind { HUB_AGENT = 0, HUB_STREAM = 1 };

struct hub_msg {
    atomic_int refs;
    size_t len;
    unsigned char buf[]; /* LWS_PRE bytes of headroom, then the message */
};

/* A queued message; `batch`: an event of a subscription that asked for batched delivery. */
struct ring_entry {
    struct hub_msg *m;
    bool batch;
};

struct conn {
    struct conn *next;
    uint64_t id;
    struct lws *wsi;
    enum hub_kind kind;
    /* Messages waiting to be written, a ring; guarded by hub->lock like the flags below. */
    struct ring_entry *ring;
    size_t cap, head, len;
    size_t watch_mark;
    bool watching;
    bool want_write;
    bool close_after;
    bool timeout_set;  /* lws thread only: the close grace is running */
    bool authed;       /* guarded by hub->lock: hub_authenticated() was called */
    bool deadline_off; /* lws thread only: the pre-authentication deadline was lifted */
    bool rx_paused;    /* lws thread only: reading stopped while its consumer's queue is full */
    bool kill;         /* guarded by hub->lock: close now (its output queue overflowed) */
    bool killing;      /* lws thread only: the close was asked for */
    bool shut;         /* lws thread only: its last message is out and its sending side shut */
    char peer[64];
    char host[256]; /* the handshake's Host header ("" when none); set once, before it is listed */
    char *in;       /* lws thread only: fragments of the message being received */
    size_t inlen;
};

struct queued_event {
    struct queued_event *next;
    struct hub_event ev;
};

/* One consumer of events: the control thread (agents) or the stream thread (subscribers). */
struct sink {
    struct queued_event *head, *tail;
    size_t n;    /* events queued */
    bool paused; /* some connection stopped reading because of this queue */
    bool resume; /* the queue went down: the paused connections may read again */
    void (*wake)(void *);
    void *wake_arg;
};

struct hub {
    struct lws_context *ctx;
    pthread_t thread;
    volatile int stopping;
    pthread_mutex_t lock;
    struct conn *conns;
    uint64_t next_id;
    struct sink sinks[2]; /* by enum hub_kind; guarded by lock */
    bool stream_on;       /* guarded by lock: subscribers are accepted */
    size_t stream_queue_max;
    lws_retry_bo_t idle_policy; /* silent peers: pinged, then closed (hub_start) */
    struct hub_limits limits;   /* guarded by lock */
    unsigned char *scratch;     /* lws thread only: batched frames being written (write_some) */
    size_t scratch_cap;
};

/* ------------------------------------------------------------------ messages */

struct hub_msg *hub_msg_new(const char *text, size_t len)
{
    struct hub_msg *m = malloc(sizeof(*m) + LWS_PRE + len);
    if (m == NULL)
        return NULL;
    atomic_init(&m->refs, 1);
    m->len = len;
    memcpy(m->buf + LWS_PRE, text, len);
    return m;
}

struct hub_msg *hub_msg_steal(char *text)
{
    if (text == NULL)
        return NULL;
    struct hub_msg *m = hub_msg_new(text, strlen(text));
    free(text);
    return m;
}

void hub_msg_unref(struct hub_msg *m)
{
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
        free(m);
}

static void msg_ref(struct hub_msg *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

/* Appends m (reference taken over) to c's ring. Under hub->lock. Returns 0 or -1 (OOM). */
static int ring_push(struct conn *c, struct hub_msg *m, bool batch)
{
    if (c->len == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct ring_entry *ring = malloc(cap * sizeof(*ring));
        if (ring == NULL)
            return -1;
        for (size_t i = 0; i < c->len; i++)
            ring[i] = c->ring[(c->head + i) % c->cap];
        free(c->ring);
        c->ring = ring;
        c->cap = cap;
        c->head = 0;
    }
    c->ring[(c->head + c->len) % c->cap] = (struct ring_entry){m, batch};
    c->len++;
    return 0;
}

/* Takes the oldest queued message of c (NULL when none). Under hub->lock. */
static struct ring_entry ring_pop(struct conn *c)
{
    if (c->len == 0)
        return (struct ring_entry){NULL, false};
    struct ring_entry e = c->ring[c->head];
    c->head = (c->head + 1) % c->cap;
    c->len--;
    return e;
}

static void ring_free(struct conn *c)
{
    struct hub_msg *m;
    while ((m = ring_pop(c).m) != NULL)
        hub_msg_unref(m);
    free(c->ring);
    c->ring = NULL;
    c->cap = c->head = c->len = 0;
}

/* ------------------------------------------------------------------ events */

static void push_event(struct hub *hub, enum hub_kind to, enum hub_event_kind kind, uint64_t conn,
                       char *text, size_t len, const char *peer)
{
    struct queued_event *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        free(text);
        return;
    }
    q->ev.kind = kind;
    q->ev.conn = conn;
    q->ev.text = text;
    q->ev.len = len;
    if (peer)
        snprintf(q->ev.peer, sizeof(q->ev.peer), "%s", peer);
    struct sink *s = &hub->sinks[to];
    pthread_mutex_lock(&hub->lock);
    if (s->tail)
        s->tail->next = q;
    else
        s->head = q;
    s->tail = q;
    s->n++;
    /* Under the lock, so that a consumer that detached (and freed wake_arg) is never called. */
    if (s->wake)
        s->wake(s->wake_arg);
    pthread_mutex_unlock(&hub->lock);
}

static bool next_event(struct hub *hub, enum hub_kind from, struct hub_event *ev)
{
    struct sink *s = &hub->sinks[from];
    pthread_mutex_lock(&hub->lock);
    struct queued_event *q = s->head;
    bool wake_lws = false;
    if (q) {
        s->head = q->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->n--;
        if (s->paused && !s->resume && s->n <= hub->limits.in_queue_max / 2)
            s->resume = wake_lws = true;
    }
    pthread_mutex_unlock(&hub->lock);
    if (wake_lws)
        lws_cancel_service(hub->ctx);
    if (q == NULL)
        return false;
    *ev = q->ev;
    free(q);
    return true;
}

bool hub_next_event(struct hub *hub, struct hub_event *ev)
{
    return next_event(hub, HUB_AGENT, ev);
}

bool hub_next_stream_event(struct hub *hub, struct hub_event *ev)
{
    return next_event(hub, HUB_STREAM, ev);
}

/* ------------------------------------------------------------------ lws callback */

/* Whether a handshake for `kind` may go on: subscribers only on HUB_STREAM_PATH and only while
 * the stream thread is attached; agents anywhere else. */
static bool accept_handshake(struct hub *hub, struct lws *wsi, enum hub_kind kind)
{
    char uri[256] = "";
    if (lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI) < 0)
        uri[0] = '\0';
    uri[strcspn(uri, "?")] = '\0';
    bool stream_path = strcmp(uri, HUB_STREAM_PATH) == 0;
    if (kind == HUB_AGENT)
        return !stream_path;
    pthread_mutex_lock(&hub->lock);
    bool on = hub->stream_on;
    pthread_mutex_unlock(&hub->lock);
    return stream_path && on;
}

/* Whether one more connection from wsi's address fits the limits: connections in all, and
 * unauthenticated ones from that address. */
static bool within_limits(struct hub *hub, struct lws *wsi)
{
    char peer[64] = "";
    lws_get_peer_simple(wsi, peer, sizeof(peer));
    pthread_mutex_lock(&hub->lock);
    int total = 0, same = 0;
    for (struct conn *k = hub->conns; k; k = k->next) {
        total++;
        if (!k->authed && strcmp(k->peer, peer) == 0)
            same++;
    }
    bool ok = total < hub->limits.max_conns && same < hub->limits.max_preauth_per_ip;
    pthread_mutex_unlock(&hub->lock);
    if (!ok)
        TY_BAD_PEER("hub", "refused a connection from %s: %d open, %d unauthenticated from it",
                    peer, total, same);
    return ok;
}

/* The bytes of a server websocket frame (header and payload) for a payload of len. */
static size_t frame_size(size_t len)
{
    return len + (len < 126 ? 2 : len < 65536 ? 4 : 10);
}

/* Writes a FIN text frame header for a payload of len at out; returns its size. */
static size_t frame_header(unsigned char *out, size_t len)
{
    out[0] = 0x81;
    if (len < 126) {
        out[1] = (unsigned char)len;
        return 2;
    }
    if (len < 65536) {
        out[1] = 126;
        out[2] = (unsigned char)(len >> 8);
        out[3] = (unsigned char)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
    return 10;
}

#define HUB_EVENTS_HEAD "{\"type\":\"events\",\"events\":["
#define HUB_EVENTS_TAIL "]}"
#define HUB_EVENTS_EXTRA 48 /* bytes a batched frame may take beyond its messages' own frames */

/* Frames e[0..n) at out: each message as one text frame, except that a run of two or more
 * `batch` entries becomes one frame {"type":"events","events":[m1,m2,...]} (docs/streams.md).
 * out has room for the sum of frame_size() plus HUB_EVENTS_EXTRA per `batch` entry. Returns the
 * bytes. */
static size_t frame_entries(unsigned char *out, const struct ring_entry *e, size_t n)
{
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (e[i].batch && j < n && e[j].batch)
            j++;
        if (j - i == 1) {
            at += frame_header(out + at, e[i].m->len);
            memcpy(out + at, e[i].m->buf + LWS_PRE, e[i].m->len);
            at += e[i].m->len;
            i = j;
            continue;
        }
        size_t plen = strlen(HUB_EVENTS_HEAD) + strlen(HUB_EVENTS_TAIL) + (j - i - 1);
        for (size_t k = i; k < j; k++)
            plen += e[k].m->len;
        at += frame_header(out + at, plen);
        memcpy(out + at, HUB_EVENTS_HEAD, strlen(HUB_EVENTS_HEAD));
        at += strlen(HUB_EVENTS_HEAD);
        for (size_t k = i; k < j; k++) {
            if (k > i)
                out[at++] = ',';
            memcpy(out + at, e[k].m->buf + LWS_PRE, e[k].m->len);
            at += e[k].m->len;
        }
        memcpy(out + at, HUB_EVENTS_TAIL, strlen(HUB_EVENTS_TAIL));
        at += strlen(HUB_EVENTS_TAIL);
        i = j;
    }
    return at;
}

/* Writes what c has queued, from its WRITEABLE callback: one message, or for a subscriber as
 * many as fit in HUB_BATCH_BYTES, framed here (frame_entries: batched events of subscriptions
 * that asked for it share one frame) and handed to lws in one raw write (one send() instead of
 * one per message and one poll round each: a subscriber of a busy job gets thousands a second).
 * lws buffers what the socket does not take and calls WRITEABLE again only once that is out.
 * *more: messages remain; *close_now: the connection is to be closed now. Returns 0, or -1 when
 * the write failed. */
static int write_some(struct hub *hub, struct conn *c, struct lws *wsi, bool *more, bool *close_now)
{
    struct ring_entry batch[HUB_BATCH_MAX];
    size_t n = 0, bytes = 0;
    pthread_mutex_lock(&hub->lock);
    while (c->len > 0 && n < (c->kind == HUB_STREAM ? HUB_BATCH_MAX : 1)) {
        struct ring_entry *e = &c->ring[c->head];
        size_t size = frame_size(e->m->len) + (e->batch ? HUB_EVENTS_EXTRA : 0);
        if (n > 0 && bytes + size > HUB_BATCH_BYTES)
            break;
        batch[n++] = ring_pop(c);
        bytes += size;
    }
    *more = c->len > 0;
    *close_now = !*more && c->close_after;
    bool drained = c->watching && c->len <= c->watch_mark;
    if (drained)
        c->watching = false;
    pthread_mutex_unlock(&hub->lock);
    if (drained)
        push_event(hub, c->kind, HUB_DRAINED, c->id, NULL, 0, NULL);
    int rc = 0;
    if (n == 1) {
        if (lws_write(wsi, batch[0].m->buf + LWS_PRE, batch[0].m->len, LWS_WRITE_TEXT) < 0)
            rc = -1;
    } else if (n > 1) {
        if (hub->scratch_cap < LWS_PRE + bytes) {
            unsigned char *grown = realloc(hub->scratch, LWS_PRE + bytes);
            if (grown == NULL) {
                rc = -1;
            } else {
                hub->scratch = grown;
                hub->scratch_cap = LWS_PRE + bytes;
            }
        }
        if (rc == 0) {
            size_t len = frame_entries(hub->scratch + LWS_PRE, batch, n);
            if (lws_write(wsi, hub->scratch + LWS_PRE, len, LWS_WRITE_RAW) < 0)
                rc = -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        hub_msg_unref(batch[i].m);
    return rc;
}

static bool authenticated(struct hub *hub, struct conn *c)
{
    pthread_mutex_lock(&hub->lock);
    bool authed = c->authed;
    pthread_mutex_unlock(&hub->lock);
    return authed;
}

/* An authenticated subscriber's last message (`closing`, naming where to resume) is written:
 * shut the sending side once lws has handed all of it to the kernel, and keep the socket until
 * the peer closes or HUB_CLOSE_GRACE_S passes. Closing the socket at once would orphan it with
 * the message still unsent to a client that is not reading (a slow consumer is closed for
 * exactly that), and the kernel gives up on an orphan whose peer's window stays shut for about
 * a minute of probes, then answers the peer's next packet with a reset, which loses the
 * message. A connection refused before it authenticated is closed at once: it holds nothing. */
static void shut_after_last(struct conn *c, struct lws *wsi)
{
    if (c->shut)
        return;
    if (lws_partial_buffered(wsi)) {
        lws_callback_on_writable(wsi);
        return;
    }
    c->shut = true;
    shutdown(lws_get_socket_fd(wsi), SHUT_WR);
}

static int on_conn(struct lws *wsi, enum hub_kind kind, enum lws_callback_reasons reason,
                   void *user, void *in, size_t len)
{
    struct hub *hub = lws_context_user(lws_get_context(wsi));
    struct conn *c = user;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        if (!accept_handshake(hub, wsi, kind)) {
            TY_DEBUG("hub", "refused a %s handshake", kind == HUB_AGENT ? "agent" : "stream");
            return -1;
        }
        if (!within_limits(hub, wsi))
            return -1;
        break;
    case LWS_CALLBACK_ESTABLISHED: {
        memset(c, 0, sizeof(*c));
        c->wsi = wsi;
        c->kind = kind;
        lws_get_peer_simple(wsi, c->peer, sizeof(c->peer));
        if (lws_hdr_copy(wsi, c->host, sizeof(c->host), WSI_TOKEN_HOST) < 0)
            c->host[0] = '\0';
        pthread_mutex_lock(&hub->lock);
        c->id = ++hub->next_id;
        c->next = hub->conns;
        hub->conns = c;
        int deadline = hub->limits.auth_timeout_s;
        pthread_mutex_unlock(&hub->lock);
        /* Closed unless it authenticates in time (hub_authenticated lifts it). */
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, deadline);
        push_event(hub, kind, HUB_CONNECTED, c->id, NULL, 0, c->peer);
        break;
    }
    case LWS_CALLBACK_RECEIVE: {
        size_t max = kind == HUB_AGENT ? HUB_MAX_MESSAGE : HUB_STREAM_MAX_IN;
        pthread_mutex_lock(&hub->lock);
        if (!c->authed && hub->limits.preauth_max_bytes < max)
            max = hub->limits.preauth_max_bytes;
        pthread_mutex_unlock(&hub->lock);
        if (c->inlen + len > max) {
            TY_BAD_PEER("hub", "connection %llu sent a message over %zu bytes; closing",
                        (unsigned long long)c->id, max);
            return -1;
        }
        char *grown = realloc(c->in, c->inlen + len + 1);
        if (grown == NULL)
            return -1;
        memcpy(grown + c->inlen, in, len);
        c->in = grown;
        c->inlen += len;
        c->in[c->inlen] = '\0';
        if (lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0) {
            push_event(hub, kind, HUB_MESSAGE, c->id, c->in, c->inlen, NULL);
            c->in = NULL;
            c->inlen = 0;
            /* Backpressure: a consumer that falls behind stops the reading, not the memory. */
            pthread_mutex_lock(&hub->lock);
            struct sink *s = &hub->sinks[kind];
            if (s->n >= hub->limits.in_queue_max) {
                s->paused = true;
                c->rx_paused = true;
                lws_rx_flow_control(wsi, 0);
            }
            pthread_mutex_unlock(&hub->lock);
        }
        break;
    }
    case LWS_CALLBACK_SERVER_WRITEABLE: {
        bool more = false, close_now = false;
        if (write_some(hub, c, wsi, &more, &close_now) < 0)
            return -1;
        if (close_now && kind == HUB_STREAM && authenticated(hub, c)) {
            shut_after_last(c, wsi);
            break;
        }
        if (close_now) {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_POLICY_VIOLATION, NULL, 0);
            return -1;
        }
        if (more)
            lws_callback_on_writable(wsi);
        break;
    }
    case LWS_CALLBACK_CLOSED: {
        pthread_mutex_lock(&hub->lock);
        for (struct conn **p = &hub->conns; *p; p = &(*p)->next) {
            if (*p == c) {
                *p = c->next;
                break;
            }
        }
        ring_free(c);
        pthread_mutex_unlock(&hub->lock);
        free(c->in);
        c->in = NULL;
        push_event(hub, kind, HUB_CLOSED, c->id, NULL, 0, NULL);
        break;
    }
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED: {
        /* Another thread queued messages: ask for WRITEABLE on those connections. A subscriber
         * being closed gets a deadline, so one that never reads cannot hold its queue for ever. */
        pthread_mutex_lock(&hub->lock);
        bool resume[2];
        for (int i = 0; i < 2; i++) {
            resume[i] = hub->sinks[i].resume;
            if (resume[i])
                hub->sinks[i].paused = hub->sinks[i].resume = false;
        }
        for (struct conn *k = hub->conns; k; k = k->next) {
            if (k->rx_paused && resume[k->kind]) {
                k->rx_paused = false;
                lws_rx_flow_control(k->wsi, 1);
            }
            if (k->kill && !k->killing) {
                k->killing = true;
                lws_set_timeout(k->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
            }
            if (k->want_write) {
                k->want_write = false;
                lws_callback_on_writable(k->wsi);
            }
            if (k->authed && !k->deadline_off && !k->timeout_set) {
                k->deadline_off = true;
                lws_set_timeout(k->wsi, NO_PENDING_TIMEOUT, 0);
            }
            if (k->close_after && k->kind == HUB_STREAM && !k->timeout_set) {
                k->timeout_set = true;
                lws_set_timeout(k->wsi, PENDING_TIMEOUT_USER_OK, HUB_CLOSE_GRACE_S);
            }
        }
        pthread_mutex_unlock(&hub->lock);
        break;
    }
    default:
        break;
    }
    return 0;
}

static int on_agent(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    return on_conn(wsi, HUB_AGENT, reason, user, in, len);
}

static int on_stream(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                     size_t len)
{
    /* EVENT_WAIT_CANCELLED reaches every protocol: the agents' callback handles it for all. */
    if (reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED)
        return 0;
    return on_conn(wsi, HUB_STREAM, reason, user, in, len);
}

/* The first protocol is the default for a handshake that names none: agents. */
static const struct lws_protocols protocols[] = {
    {APROTO_SUBPROTOCOL, on_agent, sizeof(struct conn), 65536, HUB_AGENT, NULL, 0},
    {HUB_STREAM_SUBPROTOCOL, on_stream, sizeof(struct conn), 4096, HUB_STREAM, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void lws_to_log(int level, const char *line)
{
    size_t n = strlen(line);
    if (level & LLL_ERR)
        TY_WARN("lws", "%.*s", (int)(n && line[n - 1] == '\n' ? n - 1 : n), line);
    else
        TY_DEBUG("lws", "%.*s", (int)(n && line[n - 1] == '\n' ? n - 1 : n), line);
}

static void *hub_thread(void *arg)
{
    struct hub *hub = arg;
    while (!hub->stopping)
        if (lws_service(hub->ctx, 0) < 0)
            break;
    return NULL;
}

struct hub *hub_start(const char *host, int port, const char *tls_cert, const char *tls_key,
                      int ping_s, void (*wake)(void *), void *wake_arg)
{
    struct hub *hub = calloc(1, sizeof(*hub));
    if (hub == NULL)
        return NULL;
    pthread_mutex_init(&hub->lock, NULL);
    hub->limits = (struct hub_limits){.preauth_max_bytes = 65536,
                                      .max_conns = 2000,
                                      .max_preauth_per_ip = 32,
                                      .auth_timeout_s = 10,
                                      .in_queue_max = 100000,
                                      .out_queue_max = 100000};
    hub->sinks[HUB_AGENT].wake = wake;
    hub->sinks[HUB_AGENT].wake_arg = wake_arg;
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_to_log);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof(info));
    info.port = port;
    info.iface = host;
    info.protocols = protocols;
    info.user = hub;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6 | LWS_SERVER_OPTION_VALIDATE_UTF8;
    info.ka_time = 0;
    if (tls_cert) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = tls_cert;
        info.ssl_private_key_filepath = tls_key;
    }
    hub->idle_policy.secs_since_valid_ping = (uint16_t)ping_s;
    hub->idle_policy.secs_since_valid_hangup = (uint16_t)(3 * ping_s);
    info.retry_and_idle_policy = &hub->idle_policy;
    hub->ctx = lws_create_context(&info);
    if (hub->ctx == NULL) {
        TY_ERROR("hub",
                 "cannot listen for websockets on %s:%d (port in use, or a bad TLS "
                 "certificate/key?)",
                 host, port);
        pthread_mutex_destroy(&hub->lock);
        free(hub);
        return NULL;
    }
    if (pthread_create(&hub->thread, NULL, hub_thread, hub) != 0) {
        lws_context_destroy(hub->ctx);
        pthread_mutex_destroy(&hub->lock);
        free(hub);
        return NULL;
    }
    TY_INFO("hub", "websockets on %s://%s:%d (agents: subprotocol %s; streams: %s, %s)",
            tls_cert ? "wss" : "ws", host, port, APROTO_SUBPROTOCOL, HUB_STREAM_PATH,
            HUB_STREAM_SUBPROTOCOL);
    return hub;
}

void hub_stop(struct hub *hub)
{
    if (hub == NULL)
        return;
    hub->stopping = 1;
    lws_cancel_service(hub->ctx);
    pthread_join(hub->thread, NULL);
    pthread_mutex_lock(&hub->lock);
    for (int k = 0; k < 2; k++)
        hub->sinks[k].wake = NULL;
    pthread_mutex_unlock(&hub->lock);
    lws_context_destroy(hub->ctx); /* runs CLOSED for every connection */
    struct hub_event ev;
    while (hub_next_event(hub, &ev))
        free(ev.text);
    while (hub_next_stream_event(hub, &ev))
        free(ev.text);
    pthread_mutex_destroy(&hub->lock);
    free(hub->scratch);
    free(hub);
}

/* ------------------------------------------------------------------ sending */

static struct conn *find_conn(struct hub *hub, uint64_t id)
{
    for (struct conn *c = hub->conns; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

int hub_send(struct hub *hub, uint64_t conn, const char *text, size_t len)
{
    struct hub_msg *m = hub_msg_new(text, len);
    if (m == NULL)
        return -1;
    pthread_mutex_lock(&hub->lock);
    struct conn *c = find_conn(hub, conn);
    if (c != NULL && c->len >= hub->limits.out_queue_max && !c->kill) {
        TY_BAD_PEER("hub", "connection %llu does not read (%zu messages waiting); closing",
                    (unsigned long long)conn, c->len);
        c->kill = true;
        c->want_write = true;
    }
    if (c == NULL || c->kill || ring_push(c, m, false) != 0) {
        bool wake_lws = c != NULL && c->kill;
        pthread_mutex_unlock(&hub->lock);
        hub_msg_unref(m);
        if (wake_lws)
            lws_cancel_service(hub->ctx);
        return -1;
    }
    c->want_write = true;
    pthread_mutex_unlock(&hub->lock);
    lws_cancel_service(hub->ctx);
    return 0;
}

void hub_close(struct hub *hub, uint64_t conn)
{
    pthread_mutex_lock(&hub->lock);
    struct conn *c = find_conn(hub, conn);
    if (c) {
        c->close_after = true;
        c->want_write = true;
    }
    pthread_mutex_unlock(&hub->lock);
    lws_cancel_service(hub->ctx);
}

void hub_set_limits(struct hub *hub, const struct hub_limits *limits)
{
    pthread_mutex_lock(&hub->lock);
    hub->limits = *limits;
    pthread_mutex_unlock(&hub->lock);
}

void hub_authenticated(struct hub *hub, uint64_t conn)
{
    pthread_mutex_lock(&hub->lock);
    for (struct conn *k = hub->conns; k; k = k->next) {
        if (k->id == conn) {
            k->authed = true;
            break;
        }
    }
    pthread_mutex_unlock(&hub->lock);
    lws_cancel_service(hub->ctx);
}

int hub_conn_host(struct hub *hub, uint64_t conn, char *out, size_t n)
{
    int rc = -1;
    out[0] = '\0';
    pthread_mutex_lock(&hub->lock);
    for (struct conn *k = hub->conns; k; k = k->next) {
        if (k->id == conn) {
            snprintf(out, n, "%s", k->host);
            rc = out[0] ? 0 : -1;
            break;
        }
    }
    pthread_mutex_unlock(&hub->lock);
    return rc;
}

void hub_stream_attach(struct hub *hub, void (*wake)(void *), void *wake_arg, size_t queue_max)
{
    pthread_mutex_lock(&hub->lock);
    hub->sinks[HUB_STREAM].wake = wake;
    hub->sinks[HUB_STREAM].wake_arg = wake_arg;
    hub->stream_queue_max = queue_max;
    hub->stream_on = true;
    pthread_mutex_unlock(&hub->lock);
}

void hub_stream_detach(struct hub *hub)
{
    pthread_mutex_lock(&hub->lock);
    hub->stream_on = false;
    hub->sinks[HUB_STREAM].wake = NULL;
    for (struct conn *c = hub->conns; c; c = c->next) {
        if (c->kind == HUB_STREAM) {
            c->close_after = true;
            c->want_write = true;
        }
    }
    pthread_mutex_unlock(&hub->lock);
    lws_cancel_service(hub->ctx);
}

int hub_stream_send(struct hub *hub, uint64_t conn, struct hub_msg *const *msgs, size_t n,
                    bool batch, size_t *depth)
{
    int queued = 0;
    pthread_mutex_lock(&hub->lock);
    struct conn *c = find_conn(hub, conn);
    if (c == NULL || c->kind != HUB_STREAM || c->close_after) {
        pthread_mutex_unlock(&hub->lock);
        return -1;
    }
    for (size_t i = 0; i < n && c->len < hub->stream_queue_max; i++) {
        if (ring_push(c, msgs[i], batch) != 0)
            break;
        msg_ref(msgs[i]);
        queued++;
    }
    if (queued > 0)
        c->want_write = true;
    if (depth)
        *depth = c->len;
    pthread_mutex_unlock(&hub->lock);
    return queued;
}

int hub_stream_send_last(struct hub *hub, uint64_t conn, struct hub_msg *msg)
{
    pthread_mutex_lock(&hub->lock);
    struct conn *c = find_conn(hub, conn);
    if (c == NULL || c->kind != HUB_STREAM) {
        pthread_mutex_unlock(&hub->lock);
        return -1;
    }
    if (!c->close_after && ring_push(c, msg, false) == 0)
        msg_ref(msg);
    c->close_after = true;
    c->want_write = true;
    pthread_mutex_unlock(&hub->lock);
    return 0;
}

void hub_stream_watch(struct hub *hub, uint64_t conn, size_t mark)
{
    bool now = false;
    pthread_mutex_lock(&hub->lock);
    struct conn *c = find_conn(hub, conn);
    if (c && c->kind == HUB_STREAM) {
        now = c->len <= mark;
        c->watching = !now;
        c->watch_mark = mark;
    }
    pthread_mutex_unlock(&hub->lock);
    if (now)
        push_event(hub, HUB_STREAM, HUB_DRAINED, conn, NULL, 0, NULL);
}

bool hub_stream_idle(struct hub *hub)
{
    bool idle = true;
    pthread_mutex_lock(&hub->lock);
    for (struct conn *c = hub->conns; c && idle; c = c->next)
        idle = c->kind != HUB_STREAM || c->len == 0;
    pthread_mutex_unlock(&hub->lock);
    return idle;
}

void hub_flush(struct hub *hub)
{
    lws_cancel_service(hub->ctx);
}
