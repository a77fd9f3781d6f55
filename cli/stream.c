/*
 * stream.c - the follow loop over /stream: connect, auth, subscribe after the last seq handed on,
 * hand on new rows, reconnect with backoff when the connection drops.
 */
#include "stream.h"

#include "api.h"
#include "ws_client.h"
#include "ws_frame.h"
#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A quiet connection is pinged after this long, and given up (then resumed) after the next. */
#define STREAM_PING_AFTER_MS 20000
#define STREAM_DEAD_AFTER_MS 30000
/* After the handler asked to drain: stop once nothing came for QUIET, or DRAIN_MAX at most. */
#define STREAM_DRAIN_QUIET_MS 1000
#define STREAM_DRAIN_MAX_MS 5000

static void sleep_ms(long long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/*
 * Finds the ws:// URL: --stream-url, else GET /api/v1/version's "stream". Returns 0, or the
 * outcome to give up with (reported on stderr).
 */
static int resolve_url(struct cli_ctx *ctx, char *url, size_t len, enum stream_outcome *why)
{
    char err[512];
    if (ctx->cfg.stream_url) {
        struct ws_url parsed;
        if (ws_url_parse(ctx->cfg.stream_url, &parsed, err, sizeof err) != 0) {
            fprintf(stderr, "error: --stream-url / TRAINYARD_STREAM_URL: %s\n", err);
            *why = STREAM_BAD_URL;
            return -1;
        }
        snprintf(url, len, "%s", ctx->cfg.stream_url);
        return 0;
    }
    json_t *version = NULL;
    int rc = api_json(ctx, "GET", "/api/v1/version", NULL, 0, &version);
    if (rc != CLI_EXIT_OK) {
        *why = rc == CLI_EXIT_UNREACHABLE ? STREAM_UNREACHABLE : STREAM_REFUSED;
        return -1;
    }
    rc = stream_url_from_version(http_client_base(ctx->http), version, url, len, err, sizeof err);
    json_decref(version);
    if (rc != 0) {
        fprintf(stderr, "error: %s\n", err);
        *why = STREAM_REFUSED;
        return -1;
    }
    return 0;
}

/* State of one follow across its connections. */
struct follow {
    struct cli_ctx *ctx;
    const struct stream_follow_opts *o;
    const char *url;
    struct stream_cursor cursor;
    long long lost_since; /* when the server was last found out of reach; -1 while connected */
    long backoff_ms;
    bool draining;
    long long drain_quiet_at, drain_end_at;
    bool warned_bad;
};

enum session_end { SESSION_DONE, SESSION_TIMED_OUT, SESSION_REFUSED, SESSION_DROPPED };

static long long wait_budget(const struct follow *f, long long now)
{
    long long w = STREAM_PING_AFTER_MS / 2;
    if (f->o->deadline && f->o->deadline - now < w)
        w = f->o->deadline - now;
    if (f->draining) {
        long long until = f->drain_quiet_at < f->drain_end_at ? f->drain_quiet_at : f->drain_end_at;
        if (until - now < w)
            w = until - now;
    }
    return w > 0 ? w : 0;
}

/* Hands one parsed event to the handler. Returns true when the follow is over. */
static bool on_event(struct follow *f, const struct stream_msg *m, const json_t *raw)
{
    if (!stream_cursor_take(&f->cursor, m->job, m->seq))
        return false;
    long long now = util_mono_ms();
    enum stream_verdict v = f->o->on_event(f->o->ud, m, raw);
    fflush(stdout);
    if (v == STREAM_STOP)
        return true;
    if (v == STREAM_DRAIN && !f->draining) {
        f->draining = true;
        f->drain_end_at = now + STREAM_DRAIN_MAX_MS;
    }
    if (f->draining)
        f->drain_quiet_at = now + STREAM_DRAIN_QUIET_MS;
    return f->o->until_head && stream_cursor_caught_up(&f->cursor);
}

/* Reads one server message. Returns -1 to go on, or how the session ends. */
static int on_message(struct follow *f, const char *text, size_t len)
{
    json_error_t jerr;
    json_t *raw = json_loadb(text, len, 0, &jerr);
    struct stream_msg m;
    int end = -1;
    switch (stream_msg_parse(raw, &m)) {
    case STREAM_MSG_SUBSCRIBED:
        if (m.job == f->cursor.job) {
            stream_cursor_subscribed(&f->cursor, m.seq);
            f->lost_since = -1;
            f->backoff_ms = 0;
            if (f->o->until_head && stream_cursor_caught_up(&f->cursor))
                end = SESSION_DONE;
        }
        break;
    case STREAM_MSG_EVENT:
        if (on_event(f, &m, raw))
            end = SESSION_DONE;
        break;
    case STREAM_MSG_EVENTS:
        for (size_t i = 0; i < json_array_size(m.data) && end < 0; i++) {
            const json_t *one = json_array_get(m.data, i);
            struct stream_msg e;
            if (stream_msg_parse(one, &e) == STREAM_MSG_EVENT && on_event(f, &e, one))
                end = SESSION_DONE;
        }
        break;
    case STREAM_MSG_ERROR:
        if (stream_error_is_transient(m.text)) {
            fprintf(stderr, "warning: the stream server cannot serve now (%s%s%s); retrying\n",
                    m.text, m.detail ? ": " : "", m.detail ? m.detail : "");
            end = SESSION_DROPPED;
            break;
        }
        fprintf(stderr, "error: the stream server refused: %s%s%s\n", m.text ? m.text : "error",
                m.detail ? ": " : "", m.detail ? m.detail : "");
        end = SESSION_REFUSED;
        break;
    case STREAM_MSG_CLOSING:
        fprintf(stderr,
                "warning: the stream server closed this connection (%s); resuming after "
                "seq %lld\n",
                m.text ? m.text : "no reason given", f->cursor.last_seq);
        end = SESSION_DROPPED;
        break;
    case STREAM_MSG_BAD:
        if (!f->warned_bad)
            fprintf(stderr, "warning: ignoring a malformed stream message: %.200s\n", text);
        f->warned_bad = true;
        break;
    default:
        break;
    }
    json_decref(raw);
    return end;
}

/* One connection: subscribe, read until it ends. The connection is closed on return. */
static enum session_end session(struct follow *f, struct ws_conn *c)
{
    char err[512];
    char *sub = stream_subscribe_message(f->o->job, f->cursor.last_seq);
    int rc = 0;
    if (f->ctx->cfg.token) {
        char *auth = stream_auth_message(f->ctx->cfg.token);
        rc = ws_conn_send_text(c, auth, strlen(auth), err, sizeof err);
        free(auth);
    }
    if (rc == 0)
        rc = ws_conn_send_text(c, sub, strlen(sub), err, sizeof err);
    free(sub);
    f->cursor.head = -1;
    bool pinged = false;
    enum session_end end = SESSION_DROPPED;
    while (rc == 0) {
        long long now = util_mono_ms();
        if (f->draining && (now >= f->drain_quiet_at || now >= f->drain_end_at)) {
            end = SESSION_DONE;
            break;
        }
        if (f->o->deadline && now >= f->o->deadline) {
            end = SESSION_TIMED_OUT;
            break;
        }
        const char *text;
        size_t len;
        enum ws_recv_result r =
            ws_conn_recv(c, (long)wait_budget(f, now), &text, &len, err, sizeof err);
        if (r == WS_RECV_MESSAGE) {
            pinged = false;
            int e = on_message(f, text, len);
            if (e >= 0) {
                end = (enum session_end)e;
                break;
            }
        } else if (r == WS_RECV_CLOSED) {
            if (f->draining)
                end = SESSION_DONE;
            else
                fprintf(stderr, "warning: %s; resuming after seq %lld\n", err, f->cursor.last_seq);
            break;
        } else if (ws_conn_idle_ms(c) >= STREAM_DEAD_AFTER_MS) {
            fprintf(stderr, "warning: the stream went silent; reconnecting after seq %lld\n",
                    f->cursor.last_seq);
            break;
        } else if (!pinged && ws_conn_idle_ms(c) >= STREAM_PING_AFTER_MS) {
            pinged = true;
            rc = ws_conn_ping(c);
        }
    }
    ws_conn_close(c, WS_CLOSE_NORMAL);
    return end;
}

enum stream_outcome stream_follow(struct cli_ctx *ctx, const struct stream_follow_opts *o)
{
    char url[1024], err[512];
    enum stream_outcome out = STREAM_REFUSED;
    if (resolve_url(ctx, url, sizeof url, &out) != 0)
        return out;
    struct follow f = {.ctx = ctx, .o = o, .url = url, .lost_since = -1};
    stream_cursor_init(&f.cursor, o->job);
    long long reconnect_ms = ctx->cfg.reconnect_s * 1000LL;

    for (;;) {
        long long now = util_mono_ms();
        if (o->deadline && now >= o->deadline)
            return STREAM_TIMED_OUT;
        long long connect_ms = ctx->cfg.connect_timeout_s * 1000LL;
        if (o->deadline && o->deadline - now < connect_ms)
            connect_ms = o->deadline - now;
        int refused = 0;
        struct ws_conn *c = ws_conn_open(url, STREAM_PROTOCOL, ctx->cfg.ca_file, (long)connect_ms,
                                         &refused, err, sizeof err);
        bool connected = c != NULL;
        if (connected) {
            switch (session(&f, c)) {
            case SESSION_DONE:
                return STREAM_DONE;
            case SESSION_TIMED_OUT:
                return STREAM_TIMED_OUT;
            case SESSION_REFUSED:
                return STREAM_REFUSED;
            case SESSION_DROPPED:
                break;
            }
            if (f.lost_since < 0)
                f.lost_since = util_mono_ms();
        } else if (refused) {
            fprintf(stderr, "error: %s (%s)\n", err, url);
            return STREAM_REFUSED;
        } else if (f.lost_since < 0) {
            f.lost_since = now;
            fprintf(stderr, "warning: cannot reach the stream at %s (%s); retrying\n", url, err);
        }
        now = util_mono_ms();
        if (f.lost_since >= 0 && now - f.lost_since >= reconnect_ms) {
            fprintf(stderr, "error: cannot reach the stream at %s for %lld s: %s\n", url,
                    reconnect_ms / 1000, connected ? "connections keep dropping" : err);
            return STREAM_UNREACHABLE;
        }
        f.backoff_ms = stream_backoff_next(f.backoff_ms);
        long long pause = f.backoff_ms;
        if (o->deadline && o->deadline - now < pause)
            pause = o->deadline - now;
        sleep_ms(pause);
    }
}
