/*
 * stream_proto.c - /stream messages, URL, resume bookkeeping and backoff; no I/O.
 */
#include "stream_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    enum stream_msg_type type;
} msg_types[] = {
    {"welcome", STREAM_MSG_WELCOME}, {"subscribed", STREAM_MSG_SUBSCRIBED},
    {"event", STREAM_MSG_EVENT},     {"error", STREAM_MSG_ERROR},
    {"closing", STREAM_MSG_CLOSING}, {"events", STREAM_MSG_EVENTS},
};

static const char *opt_string(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An integer field, or dflt when it is absent or null; -1 into *bad when it is something else. */
static long long opt_int(const json_t *obj, const char *key, long long dflt, bool *bad)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return dflt;
    if (!json_is_integer(v)) {
        *bad = true;
        return dflt;
    }
    return json_integer_value(v);
}

enum stream_msg_type stream_msg_parse(const json_t *msg, struct stream_msg *out)
{
    memset(out, 0, sizeof *out);
    out->rank = -1;
    out->type = STREAM_MSG_BAD;
    const char *type = opt_string(msg, "type");
    if (!json_is_object(msg) || !type)
        return out->type;
    out->type = STREAM_MSG_OTHER;
    for (size_t i = 0; i < sizeof msg_types / sizeof msg_types[0]; i++)
        if (strcmp(type, msg_types[i].name) == 0)
            out->type = msg_types[i].type;

    bool bad = false;
    out->job = opt_int(msg, "job", 0, &bad);
    switch (out->type) {
    case STREAM_MSG_SUBSCRIBED:
        out->seq = opt_int(msg, "head", 0, &bad);
        break;
    case STREAM_MSG_EVENT:
        out->kind = opt_string(msg, "kind");
        if (!json_is_integer(json_object_get(msg, "seq")) || !out->kind)
            bad = true;
        out->seq = opt_int(msg, "seq", 0, &bad);
        out->attempt = opt_int(msg, "attempt", 0, &bad);
        out->rank = opt_int(msg, "rank", -1, &bad);
        out->at = json_object_get(msg, "at");
        out->data = json_object_get(msg, "data");
        break;
    case STREAM_MSG_ERROR:
        out->text = opt_string(msg, "code");
        out->detail = opt_string(msg, "detail");
        break;
    case STREAM_MSG_CLOSING:
        out->text = opt_string(msg, "reason");
        break;
    case STREAM_MSG_EVENTS:
        out->data = json_object_get(msg, "events");
        bad = !json_is_array(out->data);
        break;
    default:
        break;
    }
    if (bad)
        out->type = STREAM_MSG_BAD;
    return out->type;
}

bool stream_error_is_transient(const char *code)
{
    return code && (strcmp(code, "unavailable") == 0 || strcmp(code, "too_many_clients") == 0);
}

/* Dumps obj compactly and drops the reference; exits like xmalloc when out of memory. */
static char *dump_steal(json_t *obj)
{
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!text) {
        fputs("error: out of memory\n", stderr);
        exit(70);
    }
    return text;
}

char *stream_auth_message(const char *token)
{
    return dump_steal(json_pack("{s:s, s:s}", "type", "auth", "token", token ? token : ""));
}

char *stream_subscribe_message(long long job, long long after)
{
    return dump_steal(json_pack("{s:s, s:I, s:I, s:b}", "type", "subscribe", "job", job, "after",
                                after, "batch", 1));
}

int stream_url_from_version(const char *server_base, const json_t *version, char *out,
                            size_t outlen, char *err, size_t errlen)
{
    const json_t *stream = json_object_get(version, "stream");
    const json_t *port = json_object_get(stream, "port");
    const char *path = opt_string(stream, "path");
    const char *proto = opt_string(stream, "protocol");
    if (!json_is_object(stream)) {
        snprintf(err, errlen,
                 "the server at %s offers no live stream (GET /api/v1/version has no \"stream\")",
                 server_base);
        return -1;
    }
    if (!json_is_integer(port) || json_integer_value(port) < 1 ||
        json_integer_value(port) > 65535 || !path || path[0] != '/') {
        snprintf(err, errlen, "the server's \"stream\" in GET /api/v1/version is malformed");
        return -1;
    }
    if (proto && strcmp(proto, STREAM_PROTOCOL) != 0) {
        snprintf(err, errlen, "the server streams '%s'; this client speaks %s", proto,
                 STREAM_PROTOCOL);
        return -1;
    }
    bool tls = strncasecmp(server_base, "https://", 8) == 0;
    if (!tls && strncasecmp(server_base, "http://", 7) != 0) {
        snprintf(err, errlen, "%s is not an http:// or https:// server URL", server_base);
        return -1;
    }
    const char *host = server_base + (tls ? 8 : 7);
    size_t hlen;
    if (host[0] == '[') {
        const char *close = strchr(host, ']');
        hlen = close ? (size_t)(close - host) + 1 : strlen(host);
    } else {
        hlen = strcspn(host, ":/?#");
    }
    int n = snprintf(out, outlen, "%s://%.*s:%lld%s", tls ? "wss" : "ws", (int)hlen, host,
                     (long long)json_integer_value(port), path);
    if (n < 0 || (size_t)n >= outlen) {
        snprintf(err, errlen, "stream URL too long");
        return -1;
    }
    return 0;
}

void stream_cursor_init(struct stream_cursor *c, long long job)
{
    c->job = job;
    c->last_seq = 0;
    c->head = -1;
}

bool stream_cursor_take(struct stream_cursor *c, long long job, long long seq)
{
    if (job != c->job || seq <= c->last_seq)
        return false;
    c->last_seq = seq;
    return true;
}

void stream_cursor_subscribed(struct stream_cursor *c, long long head)
{
    c->head = head;
}

bool stream_cursor_caught_up(const struct stream_cursor *c)
{
    return c->head >= 0 && c->last_seq >= c->head;
}

long stream_backoff_next(long prev_ms)
{
    if (prev_ms <= 0)
        return STREAM_BACKOFF_FIRST_MS;
    return prev_ms >= STREAM_BACKOFF_MAX_MS / 2 ? STREAM_BACKOFF_MAX_MS : prev_ms * 2;
}
