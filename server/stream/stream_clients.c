/* Subscribers' connections: authentication, requests, and dropping the slow ones. */
#include "stream_internal.h"

#include "auth.h"
#include "log.h"
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct stream_client *client_by_conn(struct stream *st, uint64_t conn)
{
    for (struct stream_client *c = st->clients; c; c = c->next)
        if (c->conn == conn)
            return c;
    return NULL;
}

void stream__send(struct stream *st, struct stream_client *cl, char *text)
{
    struct hub_msg *m = hub_msg_steal(text);
    if (m == NULL) {
        TY_ERROR("stream", "out of memory building a message for connection %llu",
                 (unsigned long long)cl->conn);
        return;
    }
    int queued = hub_stream_send(st->hub, cl->conn, &m, 1, false, NULL);
    hub_msg_unref(m);
    st->flush = true;
    if (queued == 0)
        stream__drop(st, cl, "slow_consumer");
}

/* Queues `text` (taken over) as the client's last message and forgets its subscriptions. */
static void send_last(struct stream *st, struct stream_client *cl, char *text)
{
    while (cl->nsubs > 0)
        stream__sub_remove(st, cl->subs[cl->nsubs - 1]);
    struct hub_msg *m = hub_msg_steal(text);
    if (m) {
        hub_stream_send_last(st->hub, cl->conn, m);
        hub_msg_unref(m);
    }
    cl->closing = true;
    st->flush = true;
}

void stream__drop(struct stream *st, struct stream_client *cl, const char *reason)
{
    if (cl->closing)
        return;
    struct stream_resume resume[STREAM_MAX_SUBS];
    for (size_t i = 0; i < cl->nsubs; i++) {
        resume[i].job = cl->subs[i]->topic->job;
        resume[i].seq = cl->subs[i]->sent;
    }
    char *text = stream_msg_closing(reason, resume, cl->nsubs);
    if (strcmp(reason, "slow_consumer") == 0) {
        SRV_COUNT(&st->srv->telemetry, stream_dropped, 1);
        TY_INFO("stream", "connection %llu fell behind (%zu messages queued): closing it",
                (unsigned long long)cl->conn, st->queue_max);
    }
    send_last(st, cl, text);
}

/* Refuses a request; a fatal error also closes the connection. */
static void refuse(struct stream *st, struct stream_client *cl, const char *code,
                   const char *detail, bool fatal)
{
    char *text = stream_msg_error(code, detail);
    if (fatal)
        send_last(st, cl, text);
    else
        stream__send(st, cl, text);
}

static void on_auth(struct stream *st, struct stream_client *cl, const struct stream_req *req)
{
    struct srv_identity who;
    memset(&who, 0, sizeof(who));
    if (st->srv->cfg.auth_mode == SRV_AUTH_NONE) {
        who.role = SRV_ROLE_ADMIN;
    } else {
        int qs = srv_auth_token(st->srv, st->db, req->token, &who);
        if (qs < 0) {
            stream__db_failed(st);
            refuse(st, cl, STREAM_E_UNAVAILABLE,
                   "cannot check the token: the database is unavailable", true);
            return;
        }
        if (qs == 0 || who.role < SRV_ROLE_VIEWER) {
            refuse(st, cl, STREAM_E_BAD_TOKEN, "the API token is unknown or revoked", true);
            return;
        }
    }
    cl->authed = true;
    cl->who = who;
    hub_authenticated(st->hub, cl->conn);
    stream__send(st, cl, stream_msg_welcome(srv_role_name(who.role)));
}

static void on_message(struct stream *st, struct stream_client *cl, const char *text, size_t len)
{
    struct stream_req req;
    const char *code = NULL;
    char detail[256];
    int rc = stream_req_parse(text, len, &req, &code, detail, sizeof(detail));
    if (!cl->authed && (rc != 0 || req.type != STREAM_REQ_AUTH)) {
        refuse(st, cl, STREAM_E_NOT_AUTHENTICATED,
               rc != 0 ? detail : "send {\"type\": \"auth\", \"token\": ...} first", true);
        return;
    }
    if (rc != 0) {
        refuse(st, cl, code, detail, false);
        return;
    }
    switch (req.type) {
    case STREAM_REQ_AUTH:
        on_auth(st, cl, &req);
        break;
    case STREAM_REQ_SUBSCRIBE:
        stream__subscribe(st, cl, req.cluster ? 0 : req.job, req.after, req.batch);
        break;
    case STREAM_REQ_UNSUBSCRIBE:
        stream__unsubscribe(st, cl, req.cluster ? 0 : req.job);
        break;
    }
}

static void on_connected(struct stream *st, uint64_t conn)
{
    struct stream_client *cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return; /* the connection stays silent; its HUB_CLOSED finds no client */
    cl->conn = conn;
    cl->next = st->clients;
    st->clients = cl;
    if (st->nclients >= st->max_clients) {
        char detail[96];
        snprintf(detail, sizeof(detail), "the server already has %zu stream connections",
                 st->max_clients);
        refuse(st, cl, STREAM_E_TOO_MANY_CLIENTS, detail, true);
        return;
    }
    cl->counted = true;
    st->nclients++;
    SRV_COUNT(&st->srv->telemetry, stream_subscribers, 1);
    cl->authed = st->srv->cfg.auth_mode == SRV_AUTH_NONE;
    if (cl->authed) {
        cl->who.role = SRV_ROLE_ADMIN;
        hub_authenticated(st->hub, cl->conn);
    }
}

static void on_closed(struct stream *st, uint64_t conn)
{
    for (struct stream_client **p = &st->clients; *p; p = &(*p)->next) {
        struct stream_client *cl = *p;
        if (cl->conn != conn)
            continue;
        *p = cl->next;
        while (cl->nsubs > 0)
            stream__sub_remove(st, cl->subs[cl->nsubs - 1]);
        if (cl->counted) {
            st->nclients--;
            SRV_COUNT(&st->srv->telemetry, stream_subscribers, -1);
        }
        free(cl);
        return;
    }
}

void stream__on_event(struct stream *st, struct hub_event *ev)
{
    struct stream_client *cl = ev->kind == HUB_CONNECTED ? NULL : client_by_conn(st, ev->conn);
    switch (ev->kind) {
    case HUB_CONNECTED:
        on_connected(st, ev->conn);
        break;
    case HUB_MESSAGE:
        if (cl && !cl->closing)
            on_message(st, cl, ev->text, ev->len);
        break;
    case HUB_DRAINED:
        if (cl)
            cl->waiting_drain = false;
        break;
    case HUB_CLOSED:
        on_closed(st, ev->conn);
        break;
    }
    free(ev->text);
}

void stream__free_clients(struct stream *st)
{
    while (st->clients) {
        struct stream_client *cl = st->clients;
        st->clients = cl->next;
        while (cl->nsubs > 0)
            stream__sub_remove(st, cl->subs[cl->nsubs - 1]);
        if (cl->counted)
            SRV_COUNT(&st->srv->telemetry, stream_subscribers, -1);
        free(cl);
    }
    st->nclients = 0;
}
