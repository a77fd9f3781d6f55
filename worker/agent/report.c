/* The report socket <data>/report.sock (docs/report-protocol.md): workers connect, say hello,
 * and send reports; each report's checkpoint directory is copied into the agent's data directory
 * (checkpoint.c; the copy blocks the event loop for now), the report is spooled durably naming
 * that copy, queued for the server as a `report` event, and only then acked to the worker.
 * Framing and validation come from the report protocol module (common/report_proto.c).
 *
 * The listening socket and every connection are adopted into the lws loop as raw file
 * descriptors, so all I/O stays non-blocking on the agent's single thread.
 *
 * Limits, so that one job cannot take the agent's descriptors from the others: a connection
 * must say a valid hello within --report-hello-timeout-s; processes of one uid hold at most
 * --report-max-conns-per-uid connections (more are closed as they come); and when accept fails
 * for want of descriptors (EMFILE/ENFILE) the listener pauses for a second, logged once per
 * episode, while every open connection goes on being served. */
#include "agent.h"

#include "log.h"
#include "util.h"
#include "report_proto.h"

#include <libwebsockets.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define REPORT_PROTOCOL "trainyard-report"
/* How long accepting pauses when the agent is out of descriptors. */
#define REPORT_ACCEPT_PAUSE_MS 1000

struct agent_report_conn {
    struct agent_report_conn *next;
    struct agent *a;
    struct lws *wsi;
    int fd;
    pid_t peer_pid; /* SO_PEERCRED of the connecting process; peer_uid -1: unknown */
    long long peer_uid;
    rproto_decoder dec;
    bool hello;
    char *job_id;
    int64_t attempt, rank;
    unsigned char *out;
    size_t out_len, out_off;
    bool close_after_write;
    bool held;     /* reading paused: the agent's event queue is full */
    bool reporter; /* it has sent a report (a heartbeat connection sends none) */
};

/* The listener's wsi carries this as its opaque data; connections carry their conn. */
static char listener_tag;

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Queues one frame (takes the reference of msg). */
static void conn_send(struct agent_report_conn *c, json_t *msg)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = msg ? rproto_encode(msg, &buf, &len) : TY_ENOMEM;
    json_decref(msg);
    if (rc != 0) {
        TY_ERROR("report", "cannot encode a reply: %s", ty_strerror(rc));
        c->close_after_write = true;
        lws_callback_on_writable(c->wsi);
        return;
    }
    if (c->out_off > 0 && c->out_off == c->out_len) {
        c->out_len = c->out_off = 0;
    }
    unsigned char *n = realloc(c->out, c->out_len + len);
    if (!n) {
        free(buf);
        c->close_after_write = true;
    } else {
        c->out = n;
        memcpy(c->out + c->out_len, buf, len);
        c->out_len += len;
        free(buf);
    }
    lws_callback_on_writable(c->wsi);
}

/* Writes what is pending. 0, or -1 to close. */
static int conn_flush(struct agent_report_conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                lws_callback_on_writable(c->wsi);
                return 0;
            }
            TY_DEBUG("report", "write to a worker failed: %s", strerror(errno));
            return -1;
        }
        c->out_off += (size_t)n;
    }
    c->out_len = c->out_off = 0;
    return c->close_after_write ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Messages                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Why connection c may not speak for worker w (a message for the log and the peer), or NULL
 * when it may: the peer must run under w's uid (SO_PEERCRED; the agent's own uid when w has
 * none) and know w's secret (TRAINYARD_REPORT_SECRET, compared in constant time). */
static const char *peer_refusal(const struct agent_report_conn *c, const struct agent_worker *w,
                                const char *secret)
{
    long long want = w->uid != AGENT_NO_UID ? (long long)w->uid : (long long)geteuid();
    if (c->peer_uid != want && c->peer_uid != 0)
        return "the connecting process does not run as that worker";
    size_t n = strlen(w->secret);
    if (!secret || strlen(secret) != n)
        return "wrong or missing report secret";
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(secret[i] ^ w->secret[i]);
    return diff ? "wrong or missing report secret" : NULL;
}

static void on_hello(struct agent_report_conn *c, const json_t *m)
{
    struct rproto_hello h;
    char err[256];
    if (c->hello) {
        conn_send(c, rproto_error_new(0, "hello sent twice"));
        return;
    }
    if (rproto_parse_hello(m, &h, err, sizeof(err)) != 0) {
        TY_BAD_PEER("report", "bad hello: %s", err);
        conn_send(c, rproto_error_new(0, err));
        c->close_after_write = true;
        return;
    }
    struct agent_worker *w = agent__worker_find(c->a, h.job_id, h.attempt, h.rank);
    if (!w || w->status != AGENT_WORKER_RUNNING) {
        char msg[512];
        snprintf(msg, sizeof(msg), "job %s attempt %d rank %d is not a worker of this agent",
                 h.job_id, h.attempt, h.rank);
        TY_BAD_PEER("report", "%s", msg);
        conn_send(c, rproto_error_new(0, msg));
        c->close_after_write = true;
        return;
    }
    const char *why = peer_refusal(c, w, h.secret);
    if (why) {
        char msg[512];
        snprintf(msg, sizeof(msg), "hello for job %s attempt %d rank %d refused: %s", h.job_id,
                 h.attempt, h.rank, why);
        TY_BAD_PEER("report", "%s (pid %ld, uid %lld)", msg, (long)c->peer_pid, c->peer_uid);
        conn_send(c, rproto_error_new(0, msg));
        c->close_after_write = true;
        return;
    }
    c->job_id = strdup(h.job_id);
    if (!c->job_id) {
        c->close_after_write = true;
        lws_callback_on_writable(c->wsi);
        return;
    }
    c->hello = true;
    lws_set_timeout(c->wsi, NO_PENDING_TIMEOUT, 0);
    c->attempt = h.attempt;
    c->rank = h.rank;
    TY_DEBUG("report", "worker %s/%d/%d (pid %ld) connected", h.job_id, h.attempt, h.rank, h.pid);
}

static void on_report(struct agent_report_conn *c, const json_t *m)
{
    struct rproto_report r;
    char err[256];
    json_t *seqv = json_object_get(m, "seq");
    int64_t seq =
        json_is_integer(seqv) && json_integer_value(seqv) > 0 ? json_integer_value(seqv) : 0;
    if (!c->hello) {
        conn_send(c, rproto_error_new(seq, "hello first"));
        c->close_after_write = true;
        return;
    }
    if (rproto_parse_report(m, &r, err, sizeof(err)) != 0) {
        TY_BAD_PEER("report", "report refused: %s", err);
        conn_send(c, rproto_error_new(seq, err));
        return;
    }
    char when[40];
    aproto_format_time(agent_wall_ms(), when, sizeof(when));
    /* Take the checkpoint directory over (checkpoint.c) before anything is spooled or acked; the
     * report then names the agent-owned directory. A resent report already spooled was taken. */
    char *owned = NULL;
    int64_t bytes = -1;
    if (r.checkpoint_dir) {
        char cerr[512];
        owned = agent_checkpoint_path(c->a->data_dir, c->job_id, c->attempt, r.seq);
        if (!owned) {
            conn_send(c, rproto_error_new(r.seq, "the agent could not take the checkpoint"));
            return;
        }
        bool taken = agent__spool_has(c->a, c->job_id, c->attempt, c->rank, r.seq);
        struct agent_worker *w = agent__worker_find(c->a, c->job_id, c->attempt, c->rank);
        long long owner = w && w->uid != AGENT_NO_UID ? (long long)w->uid : -1;
        if (!taken && agent_checkpoint_check_src(r.checkpoint_dir, cerr, sizeof(cerr)) == 0)
            taken = agent_checkpoint_merge_as(r.checkpoint_dir, owned, c->rank, owner, &bytes, cerr,
                                              sizeof(cerr)) == 0;
        if (!taken) {
            TY_WARN("report", "worker %s/%lld/%lld report %lld: %s", c->job_id,
                    (long long)c->attempt, (long long)c->rank, (long long)r.seq, cerr);
            conn_send(c, rproto_error_new(r.seq, cerr));
            free(owned);
            return;
        }
    }
    json_t *body = aproto_report_body(c->job_id, c->attempt, c->rank, r.seq, r.metrics,
                                      r.has_step ? r.step : -1, when, owned);
    free(owned);
    if (body && bytes >= 0 &&
        json_object_set_new(body, "checkpoint_bytes", json_integer(bytes)) != 0) {
        json_decref(body);
        body = NULL;
    }
    bool dup = false;
    char *path = body ? agent__spool_write(c->a, body, &dup) : NULL;
    if (!path) {
        json_decref(body);
        conn_send(c, rproto_error_new(r.seq, "the agent could not store the report"));
        return;
    }
    if (dup) {
        TY_DEBUG("report", "duplicate report %s/%lld/%lld seq %lld acked again", c->job_id,
                 (long long)c->attempt, (long long)c->rank, (long long)r.seq);
        free(path);
    } else {
        int64_t ev = agent__next_seq(c->a);
        agent__event_push(c->a, AGENT_EV_REPORT, aproto_msg_report(ev, body), ev, path);
        agent__uploader_note_report(c->a, c->job_id, c->attempt, r.seq);
    }
    json_decref(body);
    conn_send(c, rproto_ack_new(r.seq));
}

/* Back-pressure: while the events waiting for the server's ack fill --max-queued-bytes (the
 * server away or slow), a connection that carries reports is not read, so its report() waits for
 * its ack instead of the agent's memory and spool growing without bound. A heartbeat connection
 * (progress frames only: nothing queued) is never held. Returns whether c is held. */
static bool hold_while_full(struct agent_report_conn *c)
{
    struct agent *a = c->a;
    if (!c->reporter || a->queued_bytes < a->cfg->max_queued_bytes)
        return false;
    if (!a->reports_held)
        TY_WARN("report",
                "%lld bytes of events wait for the server (--max-queued-bytes %lld): workers' "
                "reports wait until it acks some",
                (long long)a->queued_bytes, (long long)a->cfg->max_queued_bytes);
    a->reports_held = true;
    if (!c->held) {
        c->held = true;
        lws_rx_flow_control(c->wsi, 0);
    }
    return true;
}

void agent__report_queue_drained(struct agent *a)
{
    if (!a->reports_held || a->queued_bytes > a->cfg->max_queued_bytes / 4 * 3)
        return;
    a->reports_held = false;
    TY_INFO("report", "the server caught up (%lld bytes waiting): reading reports again",
            (long long)a->queued_bytes);
    for (struct agent_report_conn *c = a->report_conns; c; c = c->next) {
        if (c->held) {
            c->held = false;
            lws_rx_flow_control(c->wsi, 1);
        }
    }
}

/* A heartbeat (`progress` frame): kept on the worker; no reply. A malformed one closes the
 * connection (the worker reconnects at its next heartbeat). */
static void on_progress(struct agent_report_conn *c, const json_t *m)
{
    struct rproto_progress p;
    char err[256];
    if (!c->hello) {
        conn_send(c, rproto_error_new(0, "hello first"));
        c->close_after_write = true;
        return;
    }
    if (rproto_parse_progress(m, &p, err, sizeof(err)) != 0) {
        TY_BAD_PEER("report", "progress refused: %s", err);
        conn_send(c, rproto_error_new(0, err));
        c->close_after_write = true;
        return;
    }
    struct agent_worker *w = agent__worker_find(c->a, c->job_id, c->attempt, c->rank);
    if (w && w->status == AGENT_WORKER_RUNNING)
        agent__progress_note(w, &p);
}

/* Reads what is there and handles every complete frame. 0, or -1 to close. */
static int conn_read(struct agent_report_conn *c)
{
    if (hold_while_full(c))
        return 0;
    char buf[65536];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n == 0)
            return -1; /* the worker closed */
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return -1;
        }
        if (rproto_decoder_feed(&c->dec, buf, (size_t)n) < 0)
            return -1;
        if ((size_t)n < sizeof(buf))
            break;
    }
    json_t *m;
    char err[256];
    int rc;
    while (!c->close_after_write &&
           (rc = rproto_decoder_next(&c->dec, &m, err, sizeof(err))) == 1) {
        switch (rproto_type_of(m)) {
        case RPROTO_HELLO:
            on_hello(c, m);
            break;
        case RPROTO_REPORT:
            c->reporter = true;
            on_report(c, m);
            break;
        case RPROTO_PROGRESS:
            on_progress(c, m);
            break;
        default:
            conn_send(c, rproto_error_new(0, "unknown message type"));
            break;
        }
        json_decref(m);
    }
    if (!c->close_after_write && rc < 0) {
        TY_BAD_PEER("report", "protocol error on the report socket: %s", err);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Connections                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void conn_free(struct agent_report_conn *c)
{
    struct agent_report_conn **pp = &c->a->report_conns;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp)
        *pp = c->next;
    rproto_decoder_free(&c->dec);
    free(c->job_id);
    free(c->out);
    free(c);
}

/* Out of descriptors: accepting pauses (the listener is not polled) for a while, so that the
 * agent neither spins on a listener it cannot accept from nor stops serving what is open. */
static void pause_accepting(struct agent *a, struct lws *lwsi, int err)
{
    if (a->report_accept_resume_ms == 0)
        TY_WARN("report",
                "cannot accept on the report socket: %s; pausing new connections for %d ms at a "
                "time until descriptors are free (logged once)",
                strerror(err), REPORT_ACCEPT_PAUSE_MS);
    a->report_accept_resume_ms = util_mono_ms() + REPORT_ACCEPT_PAUSE_MS;
    lws_rx_flow_control(lwsi, 0);
}

void agent__report_poll(struct agent *a)
{
    if (a->report_accept_resume_ms <= 0 || util_mono_ms() < a->report_accept_resume_ms ||
        a->report_listen_wsi == NULL)
        return;
    a->report_accept_resume_ms = -1; /* accepting again; a success ends the episode */
    lws_rx_flow_control(a->report_listen_wsi, 1);
}

/* Whether processes of `uid` hold the most connections they may; logs a refusal at most once a
 * second. */
static bool over_uid_cap(struct agent *a, long long uid, pid_t pid)
{
    int64_t n = 0;
    for (const struct agent_report_conn *c = a->report_conns; c; c = c->next)
        n += c->peer_uid == uid;
    if (n < a->cfg->report_max_conns_per_uid)
        return false;
    int64_t now = util_mono_ms();
    if (now - a->report_refused_logged_ms >= 1000) {
        a->report_refused_logged_ms = now;
        TY_BAD_PEER("report",
                    "uid %lld holds %lld report connections (--report-max-conns-per-uid): "
                    "closing more (pid %ld)",
                    uid, (long long)n, (long)pid);
    }
    return true;
}

static void accept_all(struct agent *a, struct lws *lwsi)
{
    for (;;) {
        int fd = accept4(a->report_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_accepting(a, lwsi, errno);
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                TY_WARN("report", "accept: %s", strerror(errno));
            return;
        }
        if (a->report_accept_resume_ms < 0) {
            TY_INFO("report", "accepting on the report socket again");
            a->report_accept_resume_ms = 0;
        }
        struct ucred cred;
        socklen_t clen = sizeof(cred);
        long long peer_uid = -1;
        pid_t peer_pid = 0;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
            peer_pid = cred.pid;
            peer_uid = (long long)cred.uid;
        }
        if (over_uid_cap(a, peer_uid, peer_pid)) {
            close(fd);
            continue;
        }
        struct agent_report_conn *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->a = a;
        c->fd = fd;
        c->peer_pid = peer_pid;
        c->peer_uid = peer_uid;
        rproto_decoder_init(&c->dec);
        lws_adopt_desc_t ad;
        memset(&ad, 0, sizeof(ad));
        ad.vh = lws_get_vhost(lwsi);
        ad.type = LWS_ADOPT_RAW_FILE_DESC;
        ad.fd.filefd = fd;
        ad.vh_prot_name = REPORT_PROTOCOL;
        ad.opaque = c;
        c->next = a->report_conns;
        a->report_conns = c;
        c->wsi = lws_adopt_descriptor_vhost_via_info(&ad);
        if (!c->wsi) { /* lws closed fd */
            TY_WARN("report", "cannot adopt a report connection");
            conn_free(c);
            continue;
        }
        /* lws closes it (LWS_CALLBACK_RAW_CLOSE_FILE) unless on_hello clears this first. */
        lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, (int)a->cfg->report_hello_timeout_s);
    }
}

int agent__report_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                           size_t len)
{
    (void)user;
    (void)in;
    (void)len;
    void *op = lws_get_opaque_user_data(wsi);
    struct agent *a = lws_context_user(lws_get_context(wsi));
    struct agent_report_conn *c = op == &listener_tag ? NULL : op;
    switch (reason) {
    case LWS_CALLBACK_RAW_RX_FILE:
        if (op == &listener_tag) {
            accept_all(a, wsi);
            return 0;
        }
        return c ? conn_read(c) : -1;
    case LWS_CALLBACK_RAW_WRITEABLE_FILE:
        return c ? conn_flush(c) : 0;
    case LWS_CALLBACK_RAW_CLOSE_FILE:
        if (op == &listener_tag) {
            a->report_listen_fd = -1;
            a->report_listen_wsi = NULL;
        } else if (c) {
            lws_set_opaque_user_data(wsi, NULL);
            conn_free(c);
        }
        return 0;
    default:
        return 0;
    }
}

int agent__report_listen(struct agent *a)
{
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    if (strlen(a->report_socket) >= sizeof(sun.sun_path)) {
        TY_ERROR("report", "%s is too long for a unix socket path (use a shorter --data-dir)",
                 a->report_socket);
        return -1;
    }
    memcpy(sun.sun_path, a->report_socket, strlen(a->report_socket) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        TY_ERROR("report", "socket: %s", strerror(errno));
        return -1;
    }
    unlink(a->report_socket); /* left over by an earlier agent */
    /* Anyone local may connect (workers run under other uids); hello proves who it is. */
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 || chmod(a->report_socket, 0666) != 0 ||
        listen(fd, 128) != 0) {
        TY_ERROR("report", "cannot listen on %s: %s", a->report_socket, strerror(errno));
        close(fd);
        return -1;
    }
    a->report_listen_fd = fd;
    lws_adopt_desc_t ad;
    memset(&ad, 0, sizeof(ad));
    ad.vh = lws_get_vhost_by_name(a->ctx, "default");
    ad.type = LWS_ADOPT_RAW_FILE_DESC;
    ad.fd.filefd = fd;
    ad.vh_prot_name = REPORT_PROTOCOL;
    ad.opaque = &listener_tag;
    if (!ad.vh || !(a->report_listen_wsi = lws_adopt_descriptor_vhost_via_info(&ad))) {
        TY_ERROR("report", "cannot add the report socket to the event loop");
        a->report_listen_fd = -1;
        unlink(a->report_socket);
        return -1;
    }
    TY_INFO("report", "report socket %s", a->report_socket);
    return 0;
}

void agent__report_close_all(struct agent *a)
{
    if (a->report_socket)
        unlink(a->report_socket);
}
