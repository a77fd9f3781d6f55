/*
 * report_proto.c — report protocol framing, blocking frame I/O, message builders and validators
 * (report_proto.h). No globals; depends on jansson and POSIX only (no libtrainyard file).
 */
#include "report_proto.h"

#include "util.h"
#include "util_json.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ERRF(...)                                                                                  \
    do {                                                                                           \
        if (err && errlen)                                                                         \
            snprintf(err, errlen, __VA_ARGS__);                                                    \
    } while (0)

/* ===================================== framing ===================================== */

int rproto_encode(const json_t *msg, char **out, size_t *outlen)
{
    if (!json_is_object(msg) || !out || !outlen)
        return TY_EINVAL;
    size_t n = json_dumpb(msg, NULL, 0, JSON_COMPACT);
    if (n == 0)
        return TY_EINVAL;
    if (n > RPROTO_MAX_FRAME)
        return TY_ERANGE;
    char *buf = malloc(RPROTO_HEADER_LEN + n);
    if (!buf)
        return TY_ENOMEM;
    if (json_dumpb(msg, buf + RPROTO_HEADER_LEN, n, JSON_COMPACT) != n) {
        free(buf);
        return TY_EIO;
    }
    buf[0] = (char)((n >> 24) & 0xff);
    buf[1] = (char)((n >> 16) & 0xff);
    buf[2] = (char)((n >> 8) & 0xff);
    buf[3] = (char)(n & 0xff);
    *out = buf;
    *outlen = RPROTO_HEADER_LEN + n;
    return 0;
}

int rproto_decode(const void *buf, size_t len, json_t **msg, size_t *consumed, char *err,
                  size_t errlen)
{
    const unsigned char *p = buf;
    if (len < RPROTO_HEADER_LEN)
        return 0;
    uint32_t n = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    if (n == 0 || n > RPROTO_MAX_FRAME) {
        ERRF("frame length %u outside 1..%d", (unsigned)n, RPROTO_MAX_FRAME);
        return TY_ERANGE;
    }
    if (len - RPROTO_HEADER_LEN < n)
        return 0;
    json_error_t jerr;
    json_t *j = json_loadb((const char *)p + RPROTO_HEADER_LEN, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        ERRF("bad JSON in frame: %s", jerr.text);
        return TY_EPROTO;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        ERRF("frame payload is not a JSON object");
        return TY_EPROTO;
    }
    *msg = j;
    if (consumed)
        *consumed = RPROTO_HEADER_LEN + n;
    return 1;
}

void rproto_decoder_init(rproto_decoder *d)
{
    memset(d, 0, sizeof *d);
}

void rproto_decoder_free(rproto_decoder *d)
{
    free(d->buf);
    memset(d, 0, sizeof *d);
}

int rproto_decoder_feed(rproto_decoder *d, const void *data, size_t n)
{
    if (n == 0)
        return 0;
    if (d->len + n > 2 * (size_t)(RPROTO_MAX_FRAME + RPROTO_HEADER_LEN))
        return TY_ERANGE;
    if (d->len + n > d->cap) {
        size_t cap = d->cap ? d->cap : 4096;
        while (cap < d->len + n)
            cap *= 2;
        unsigned char *nb = realloc(d->buf, cap);
        if (!nb)
            return TY_ENOMEM;
        d->buf = nb;
        d->cap = cap;
    }
    memcpy(d->buf + d->len, data, n);
    d->len += n;
    return 0;
}

int rproto_decoder_next(rproto_decoder *d, json_t **msg, char *err, size_t errlen)
{
    size_t used = 0;
    int rc = rproto_decode(d->buf, d->len, msg, &used, err, errlen);
    if (rc == 1) {
        memmove(d->buf, d->buf + used, d->len - used);
        d->len -= used;
    }
    return rc;
}

/* ================================ blocking frame I/O ================================ */

/* Wait for events on fd until deadline (-1: forever). 1 ready, TY_ETIMEDOUT, TY_EIO. */
static int wire_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        int tmo = -1;
        if (deadline >= 0) {
            int64_t left = deadline - util_mono_ms();
            if (left <= 0)
                return TY_ETIMEDOUT;
            tmo = left > 1000000000 ? 1000000000 : (int)left;
        }
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, tmo);
        if (n > 0)
            return 1;
        if (n == 0)
            continue; /* loop re-checks the deadline */
        if (errno != EINTR)
            return TY_EIO;
    }
}

/* Write n bytes; sockets get MSG_NOSIGNAL, other fds fall back to write(). */
static int wire_write_all(int fd, const char *p, size_t n, int64_t deadline)
{
    bool sock = true;
    while (n > 0) {
        ssize_t w = sock ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : write(fd, p, n);
        if (w < 0 && sock && errno == ENOTSOCK) {
            sock = false;
            continue;
        }
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wire_wait(fd, POLLOUT, deadline);
            if (rc < 0)
                return rc;
            continue;
        }
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN))
            return TY_EPEER;
        return TY_EIO;
    }
    return 0;
}

/* Read exactly n bytes. TY_EPEER on EOF. */
static int wire_read_all(int fd, char *p, size_t n, int64_t deadline)
{
    while (n > 0) {
        int rc = wire_wait(fd, POLLIN, deadline);
        if (rc < 0)
            return rc;
        ssize_t r = read(fd, p, n);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return TY_EPEER;
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            continue;
        if (errno == ECONNRESET)
            return TY_EPEER;
        return TY_EIO;
    }
    return 0;
}

int rproto_write(int fd, const json_t *msg, int timeout_ms)
{
    char *frame;
    size_t len;
    int rc = rproto_encode(msg, &frame, &len);
    if (rc < 0)
        return rc;
    int64_t deadline = timeout_ms < 0 ? -1 : util_mono_ms() + timeout_ms;
    rc = wire_write_all(fd, frame, len, deadline);
    free(frame);
    return rc;
}

int rproto_read(int fd, json_t **msg, int timeout_ms, char *err, size_t errlen)
{
    int64_t deadline = timeout_ms < 0 ? -1 : util_mono_ms() + timeout_ms;
    unsigned char hdr[RPROTO_HEADER_LEN];
    int rc = wire_read_all(fd, (char *)hdr, sizeof hdr, deadline);
    if (rc < 0)
        return rc;
    uint32_t n =
        ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) | ((uint32_t)hdr[2] << 8) | hdr[3];
    if (n == 0 || n > RPROTO_MAX_FRAME) {
        ERRF("frame length %u outside 1..%d", (unsigned)n, RPROTO_MAX_FRAME);
        return TY_ERANGE;
    }
    char *buf = malloc(RPROTO_HEADER_LEN + (size_t)n);
    if (!buf)
        return TY_ENOMEM;
    memcpy(buf, hdr, sizeof hdr);
    rc = wire_read_all(fd, buf + RPROTO_HEADER_LEN, n, deadline);
    if (rc == 0) {
        rc = rproto_decode(buf, RPROTO_HEADER_LEN + (size_t)n, msg, NULL, err, errlen);
        rc = rc == 1 ? 0 : (rc == 0 ? TY_EPROTO : rc);
    }
    free(buf);
    return rc;
}

/* ===================================== messages ===================================== */

rproto_type rproto_type_of(const json_t *msg)
{
    const char *t = json_string_value(json_object_get(msg, "type"));
    if (!t)
        return RPROTO_UNKNOWN;
    if (strcmp(t, "hello") == 0)
        return RPROTO_HELLO;
    if (strcmp(t, "report") == 0)
        return RPROTO_REPORT;
    if (strcmp(t, "ack") == 0)
        return RPROTO_ACK;
    if (strcmp(t, "error") == 0)
        return RPROTO_ERROR;
    if (strcmp(t, "progress") == 0)
        return RPROTO_PROGRESS;
    return RPROTO_UNKNOWN;
}

json_t *rproto_hello_new(const char *job_id, int attempt, int rank, long pid, const char *secret)
{
    if (!job_id || !*job_id || attempt < 0 || rank < 0 || pid <= 0)
        return NULL;
    return json_pack("{s:s, s:s, s:i, s:i, s:I, s:s*}", "type", "hello", "job_id", job_id,
                     "attempt", attempt, "rank", rank, "pid", (json_int_t)pid, "secret", secret);
}

json_t *rproto_report_new(int64_t seq, const json_t *metrics, bool has_step, int64_t step,
                          const char *checkpoint_dir)
{
    if (seq < 1 || !json_is_object(metrics) || (has_step && step < 0) ||
        (checkpoint_dir && checkpoint_dir[0] != '/'))
        return NULL;
    json_t *m = json_object();
    json_t *msg = json_pack("{s:s, s:I}", "type", "report", "seq", (json_int_t)seq);
    if (!m || !msg)
        goto fail;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)metrics, k, v)
    {
        if (strcmp(k, "step") != 0 && json_object_set(m, k, v) < 0)
            goto fail;
    }
    if (json_object_set_new(msg, "metrics", m) < 0) {
        m = NULL;
        goto fail;
    }
    m = NULL;
    if (has_step && json_object_set_new(msg, "step", json_integer(step)) < 0)
        goto fail;
    if (checkpoint_dir &&
        json_object_set_new(msg, "checkpoint_dir", json_string(checkpoint_dir)) < 0)
        goto fail;
    return msg;
fail:
    json_decref(m);
    json_decref(msg);
    return NULL;
}

json_t *rproto_ack_new(int64_t seq)
{
    if (seq < 1)
        return NULL;
    return json_pack("{s:s, s:I}", "type", "ack", "seq", (json_int_t)seq);
}

json_t *rproto_error_new(int64_t seq, const char *message)
{
    if (seq < 0 || !message)
        return NULL;
    return json_pack("{s:s, s:I, s:s}", "type", "error", "seq", (json_int_t)seq, "message",
                     message);
}

/* Integer field `key` of msg within [lo, hi] (required); TY_EPROTO naming the field otherwise. */
static int wire_int_field(const json_t *msg, const char *key, int64_t lo, int64_t hi, int64_t *out,
                          char *err, size_t errlen)
{
    return util_json_int(msg, key, false, lo, hi, out, err, errlen) < 0 ? TY_EPROTO : 0;
}

static int wire_expect_type(const json_t *msg, rproto_type t, const char *name, char *err,
                            size_t errlen)
{
    if (!json_is_object(msg) || rproto_type_of(msg) != t) {
        ERRF("field 'type' must be \"%s\"", name);
        return TY_EPROTO;
    }
    return 0;
}

int rproto_parse_hello(const json_t *msg, struct rproto_hello *out, char *err, size_t errlen)
{
    int rc = wire_expect_type(msg, RPROTO_HELLO, "hello", err, errlen);
    if (rc < 0)
        return rc;
    const char *job = json_string_value(json_object_get(msg, "job_id"));
    if (!job || !*job) {
        ERRF("field 'job_id' missing or not a non-empty string");
        return TY_EPROTO;
    }
    int64_t attempt, rank, pid;
    if ((rc = wire_int_field(msg, "attempt", 0, INT32_MAX, &attempt, err, errlen)) < 0 ||
        (rc = wire_int_field(msg, "rank", 0, INT32_MAX, &rank, err, errlen)) < 0 ||
        (rc = wire_int_field(msg, "pid", 1, INT64_MAX, &pid, err, errlen)) < 0)
        return rc;
    json_t *secret = json_object_get(msg, "secret");
    if (secret && !json_is_string(secret)) {
        ERRF("field 'secret' must be a string");
        return TY_EPROTO;
    }
    out->secret = secret ? json_string_value(secret) : NULL;
    out->job_id = job;
    out->attempt = (int)attempt;
    out->rank = (int)rank;
    out->pid = (long)pid;
    return 0;
}

int rproto_check_metrics(const json_t *metrics, char *err, size_t errlen)
{
    if (!json_is_object(metrics)) {
        ERRF("metrics must be a JSON object");
        return TY_EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)metrics, k, v)
    {
        if (!*k) {
            ERRF("metrics: empty key");
            return TY_EINVAL;
        }
        if (strcmp(k, "step") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0) {
                ERRF("metrics: 'step' must be a non-negative integer");
                return TY_EINVAL;
            }
        }
    }
    return 0;
}

int rproto_parse_report(const json_t *msg, struct rproto_report *out, char *err, size_t errlen)
{
    int rc = wire_expect_type(msg, RPROTO_REPORT, "report", err, errlen);
    if (rc < 0)
        return rc;
    int64_t seq;
    if ((rc = wire_int_field(msg, "seq", 1, INT64_MAX, &seq, err, errlen)) < 0)
        return rc;
    const json_t *m = json_object_get(msg, "metrics");
    if (rproto_check_metrics(m, NULL, 0) < 0 || json_object_get(m, "step")) {
        ERRF("field 'metrics' must be an object with non-empty keys (without 'step')");
        return TY_EPROTO;
    }
    out->has_step = false;
    out->step = 0;
    if (json_object_get(msg, "step")) {
        if ((rc = wire_int_field(msg, "step", 0, INT64_MAX, &out->step, err, errlen)) < 0)
            return rc;
        out->has_step = true;
    }
    out->checkpoint_dir = NULL;
    json_t *cd = json_object_get(msg, "checkpoint_dir");
    if (cd && !json_is_null(cd)) {
        const char *s = json_string_value(cd);
        if (!s || s[0] != '/') {
            ERRF("field 'checkpoint_dir' must be an absolute path");
            return TY_EPROTO;
        }
        out->checkpoint_dir = s;
    }
    out->seq = seq;
    out->metrics = m;
    return 0;
}

int rproto_parse_ack(const json_t *msg, int64_t *seq, char *err, size_t errlen)
{
    int rc = wire_expect_type(msg, RPROTO_ACK, "ack", err, errlen);
    if (rc < 0)
        return rc;
    return wire_int_field(msg, "seq", 1, INT64_MAX, seq, err, errlen);
}

int rproto_parse_error(const json_t *msg, int64_t *seq, const char **message, char *err,
                       size_t errlen)
{
    int rc = wire_expect_type(msg, RPROTO_ERROR, "error", err, errlen);
    if (rc < 0)
        return rc;
    if ((rc = wire_int_field(msg, "seq", 0, INT64_MAX, seq, err, errlen)) < 0)
        return rc;
    const char *m = json_string_value(json_object_get(msg, "message"));
    *message = m ? m : "";
    return 0;
}

void rproto_shm_prefix(const char *job_id, int64_t attempt, char *buf, size_t len)
{
    char job[21];
    size_t n = 0;
    for (const char *p = job_id ? job_id : ""; *p && n < sizeof job - 1; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_';
        job[n++] = ok ? ch : '_';
    }
    job[n] = '\0';
    snprintf(buf, len, "/trainyard-%s-%lld-", job, (long long)attempt);
}
