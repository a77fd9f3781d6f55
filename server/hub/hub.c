/* libwebsockets server thread and the locked queues between it and the control thread. */
#include "hub.h"

#include "agent_proto.h"
#include "log.h"

#include <libwebsockets.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HUB_MAX_MESSAGE AGENT_PROTO_MAX_MESSAGE

struct out_msg {
    struct out_msg *next;
    size_t len;
    unsigned char buf[]; /* LWS_PRE bytes of headroom, then the message */
};

struct conn {
    struct conn *next;
    uint64_t id;
    struct lws *wsi;
    struct out_msg *head, *tail; /* guarded by hub->lock */
    bool want_write;             /* guarded by hub->lock */
    bool close_after;            /* guarded by hub->lock */
    char *in;                    /* lws thread only: fragments of the message being received */
    size_t inlen;
};

struct queued_event {
    struct queued_event *next;
    struct hub_event ev;
};

struct hub {
    struct lws_context *ctx;
    pthread_t thread;
    volatile int stopping;
    pthread_mutex_t lock;
    struct conn *conns;
    uint64_t next_id;
    struct queued_event *ev_head, *ev_tail;
    void (*wake)(void *);
    void *wake_arg;
};

static void push_event(struct hub *hub, enum hub_event_kind kind, uint64_t conn, char *text,
                       size_t len, const char *peer)
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
    pthread_mutex_lock(&hub->lock);
    if (hub->ev_tail)
        hub->ev_tail->next = q;
    else
        hub->ev_head = q;
    hub->ev_tail = q;
    pthread_mutex_unlock(&hub->lock);
    if (hub->wake)
        hub->wake(hub->wake_arg);
}

static void free_out(struct conn *c)
{
    while (c->head) {
        struct out_msg *m = c->head;
        c->head = m->next;
        free(m);
    }
    c->tail = NULL;
}

/* ------------------------------------------------------------------ lws callback */

static int on_agent(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct hub *hub = lws_context_user(lws_get_context(wsi));
    struct conn *c = user;
    switch (reason) {
    case LWS_CALLBACK_ESTABLISHED: {
        memset(c, 0, sizeof(*c));
        c->wsi = wsi;
        char peer[64] = "";
        lws_get_peer_simple(wsi, peer, sizeof(peer));
        pthread_mutex_lock(&hub->lock);
        c->id = ++hub->next_id;
        c->next = hub->conns;
        hub->conns = c;
        pthread_mutex_unlock(&hub->lock);
        push_event(hub, HUB_CONNECTED, c->id, NULL, 0, peer);
        break;
    }
    case LWS_CALLBACK_RECEIVE: {
        if (c->inlen + len > HUB_MAX_MESSAGE) {
            TY_BAD_PEER("hub", "connection %llu sent a message over %u bytes; closing",
                        (unsigned long long)c->id, HUB_MAX_MESSAGE);
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
            push_event(hub, HUB_MESSAGE, c->id, c->in, c->inlen, NULL);
            c->in = NULL;
            c->inlen = 0;
        }
        break;
    }
    case LWS_CALLBACK_SERVER_WRITEABLE: {
        pthread_mutex_lock(&hub->lock);
        struct out_msg *m = c->head;
        if (m) {
            c->head = m->next;
            if (c->head == NULL)
                c->tail = NULL;
        }
        bool more = c->head != NULL;
        bool close_now = !more && c->close_after;
        pthread_mutex_unlock(&hub->lock);
        if (m) {
            int n = lws_write(wsi, m->buf + LWS_PRE, m->len, LWS_WRITE_TEXT);
            free(m);
            if (n < 0)
                return -1;
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
        free_out(c);
        pthread_mutex_unlock(&hub->lock);
        free(c->in);
        c->in = NULL;
        push_event(hub, HUB_CLOSED, c->id, NULL, 0, NULL);
        break;
    }
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED: {
        /* Another thread queued messages: ask for WRITEABLE on those connections. */
        pthread_mutex_lock(&hub->lock);
        for (struct conn *k = hub->conns; k; k = k->next) {
            if (k->want_write) {
                k->want_write = false;
                lws_callback_on_writable(k->wsi);
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

static const struct lws_protocols protocols[] = {
    {AGENT_PROTO_SUBPROTOCOL, on_agent, sizeof(struct conn), 65536, 0, NULL, 0},
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

struct hub *hub_start(const char *host, int port, void (*wake)(void *), void *wake_arg)
{
    struct hub *hub = calloc(1, sizeof(*hub));
    if (hub == NULL)
        return NULL;
    pthread_mutex_init(&hub->lock, NULL);
    hub->wake = wake;
    hub->wake_arg = wake_arg;
    lws_set_log_level(LLL_ERR | LLL_WARN, lws_to_log);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof(info));
    info.port = port;
    info.iface = host;
    info.protocols = protocols;
    info.user = hub;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6 | LWS_SERVER_OPTION_VALIDATE_UTF8;
    info.ka_time = 0;
    hub->ctx = lws_create_context(&info);
    if (hub->ctx == NULL) {
        TY_ERROR("hub", "cannot listen for websockets on %s:%d (port in use?)", host, port);
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
    TY_INFO("hub", "websockets on ws://%s:%d (agents: subprotocol %s)", host, port,
            AGENT_PROTO_SUBPROTOCOL);
    return hub;
}

void hub_stop(struct hub *hub)
{
    if (hub == NULL)
        return;
    hub->stopping = 1;
    lws_cancel_service(hub->ctx);
    pthread_join(hub->thread, NULL);
    hub->wake = NULL;
    lws_context_destroy(hub->ctx); /* runs CLOSED for every connection */
    struct hub_event ev;
    while (hub_next_event(hub, &ev))
        free(ev.text);
    pthread_mutex_destroy(&hub->lock);
    free(hub);
}

bool hub_next_event(struct hub *hub, struct hub_event *ev)
{
    pthread_mutex_lock(&hub->lock);
    struct queued_event *q = hub->ev_head;
    if (q) {
        hub->ev_head = q->next;
        if (hub->ev_head == NULL)
            hub->ev_tail = NULL;
    }
    pthread_mutex_unlock(&hub->lock);
    if (q == NULL)
        return false;
    *ev = q->ev;
    free(q);
    return true;
}

static struct conn *find_conn(struct hub *hub, uint64_t id)
{
    for (struct conn *c = hub->conns; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

int hub_send(struct hub *hub, uint64_t conn, const char *text, size_t len)
{
    struct out_msg *m = malloc(sizeof(*m) + LWS_PRE + len);
    if (m == NULL)
        return -1;
    m->next = NULL;
    m->len = len;
    memcpy(m->buf + LWS_PRE, text, len);
    pthread_mutex_lock(&hub->lock);
    struct conn *c = find_conn(hub, conn);
    if (c == NULL) {
        pthread_mutex_unlock(&hub->lock);
        free(m);
        return -1;
    }
    if (c->tail)
        c->tail->next = m;
    else
        c->head = m;
    c->tail = m;
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
