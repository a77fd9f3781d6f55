/* The /stream protocol's messages (stream_proto.h). */
#include "stream_proto.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char **code, const char *c, char *detail, size_t detail_len, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

static int fail(const char **code, const char *c, char *detail, size_t detail_len, const char *fmt,
                ...)
{
    *code = c;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, detail_len, fmt, ap);
    va_end(ap);
    return -1;
}

/* A job id: a positive integer, or its decimal string (the agent protocol's form). */
static bool job_id_of(json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return *out > 0;
    }
    if (!json_is_string(v))
        return false;
    const char *s = json_string_value(v);
    char *end = NULL;
    if (*s < '1' || *s > '9')
        return false;
    long long n = strtoll(s, &end, 10);
    if (*end != '\0' || n <= 0)
        return false;
    *out = (int64_t)n;
    return true;
}

/* The target of subscribe/unsubscribe: exactly one of "job" and "cluster": true. */
static int parse_target(json_t *msg, struct stream_req *req, const char **code, char *detail,
                        size_t detail_len)
{
    json_t *job = json_object_get(msg, "job");
    json_t *cluster = json_object_get(msg, "cluster");
    if (cluster && !json_is_boolean(cluster))
        return fail(code, STREAM_E_BAD_REQUEST, detail, detail_len,
                    "'cluster' must be true or false");
    req->cluster = json_is_true(cluster);
    if (req->cluster && job)
        return fail(code, STREAM_E_BAD_REQUEST, detail, detail_len,
                    "give either 'job' or 'cluster', not both");
    if (req->cluster)
        return 0;
    if (job == NULL)
        return fail(code, STREAM_E_BAD_REQUEST, detail, detail_len,
                    "'job' (a job id) or 'cluster': true is required");
    if (!job_id_of(job, &req->job))
        return fail(code, STREAM_E_BAD_REQUEST, detail, detail_len,
                    "'job' must be a positive job id");
    return 0;
}

int stream_req_parse(const char *text, size_t len, struct stream_req *req, const char **code,
                     char *detail, size_t detail_len)
{
    memset(req, 0, sizeof(*req));
    json_error_t err;
    json_t *msg = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (msg == NULL)
        return fail(code, STREAM_E_BAD_JSON, detail, detail_len, "not JSON: %s", err.text);
    int rc = 0;
    const char *type = json_string_value(json_object_get(msg, "type"));
    if (!json_is_object(msg)) {
        rc = fail(code, STREAM_E_BAD_JSON, detail, detail_len, "a message is a JSON object");
    } else if (type == NULL) {
        rc = fail(code, STREAM_E_BAD_REQUEST, detail, detail_len, "'type' (a string) is missing");
    } else if (strcmp(type, "auth") == 0) {
        req->type = STREAM_REQ_AUTH;
        const char *token = json_string_value(json_object_get(msg, "token"));
        if (token == NULL || *token == '\0')
            rc = fail(code, STREAM_E_BAD_REQUEST, detail, detail_len,
                      "'token' (a string) is missing");
        else if (strlen(token) >= sizeof(req->token))
            rc = fail(code, STREAM_E_BAD_REQUEST, detail, detail_len, "'token' is too long");
        else
            snprintf(req->token, sizeof(req->token), "%s", token);
    } else if (strcmp(type, "subscribe") == 0 || strcmp(type, "unsubscribe") == 0) {
        req->type = type[0] == 's' ? STREAM_REQ_SUBSCRIBE : STREAM_REQ_UNSUBSCRIBE;
        rc = parse_target(msg, req, code, detail, detail_len);
        json_t *after = json_object_get(msg, "after");
        if (rc == 0 && req->type == STREAM_REQ_SUBSCRIBE && after && !json_is_null(after)) {
            if (!json_is_integer(after) || json_integer_value(after) < 0)
                rc = fail(code, STREAM_E_BAD_REQUEST, detail, detail_len,
                          "'after' must be a sequence number (an integer >= 0)");
            else
                req->after = (int64_t)json_integer_value(after);
        }
        json_t *batch = json_object_get(msg, "batch");
        if (rc == 0 && req->type == STREAM_REQ_SUBSCRIBE && batch && !json_is_null(batch)) {
            if (!json_is_boolean(batch))
                rc = fail(code, STREAM_E_BAD_REQUEST, detail, detail_len,
                          "'batch' must be true or false");
            else
                req->batch = json_is_true(batch);
        }
    } else {
        rc = fail(code, STREAM_E_UNKNOWN_TYPE, detail, detail_len,
                  "unknown message type '%.64s' (auth, subscribe, unsubscribe)", type);
    }
    json_decref(msg);
    return rc;
}

/* Dumps and frees obj (NULL stays NULL). */
static char *dump(json_t *obj)
{
    if (obj == NULL)
        return NULL;
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return text;
}

char *stream_msg_welcome(const char *role)
{
    return dump(json_pack("{s:s, s:s}", "type", "welcome", "role", role));
}

char *stream_msg_subscribed(int64_t job, int64_t head)
{
    if (job == 0)
        return dump(json_pack("{s:s, s:b, s:I}", "type", "subscribed", "cluster", 1, "head",
                              (json_int_t)head));
    return dump(json_pack("{s:s, s:I, s:I}", "type", "subscribed", "job", (json_int_t)job, "head",
                          (json_int_t)head));
}

char *stream_msg_error(const char *code, const char *detail)
{
    return dump(json_pack("{s:s, s:s, s:s}", "type", "error", "code", code, "detail", detail));
}

char *stream_msg_closing(const char *reason, const struct stream_resume *resume, size_t n)
{
    json_t *jobs = json_object();
    json_t *r = json_pack("{s:o}", "job", jobs);
    json_t *msg = json_pack("{s:s, s:s, s:o}", "type", "closing", "reason", reason, "resume", r);
    if (jobs == NULL || r == NULL || msg == NULL) {
        json_decref(msg);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (resume[i].job == 0) {
            json_object_set_new(r, "cluster", json_integer((json_int_t)resume[i].seq));
        } else {
            char key[24];
            snprintf(key, sizeof(key), "%lld", (long long)resume[i].job);
            json_object_set_new(jobs, key, json_integer((json_int_t)resume[i].seq));
        }
    }
    return dump(msg);
}

/* Copies a database-made string into a JSON string literal at out; anything that would need
 * escaping (never the case for kinds and ty_ts times) becomes '?'. Returns the bytes written. */
static size_t put_plain(char *out, const char *s)
{
    size_t n = 0;
    out[n++] = '"';
    for (; *s; s++)
        out[n++] = (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) ? '?' : *s;
    out[n++] = '"';
    return n;
}

char *stream_msg_event(int64_t job, const struct store_stream_row *row)
{
    size_t cap = 160 + 2 * (strlen(row->kind) + strlen(row->at)) + row->body_len;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    size_t n;
    if (job == 0) {
        n = (size_t)snprintf(
            out, cap,
            "{\"type\":\"event\",\"cluster\":true,\"seq\":%lld,\"kind\":", (long long)row->seq);
    } else {
        n = (size_t)snprintf(out, cap, "{\"type\":\"event\",\"job\":%lld,\"seq\":%lld,\"kind\":",
                             (long long)job, (long long)row->seq);
    }
    n += put_plain(out + n, row->kind);
    if (job != 0) {
        char a[16] = "null", r[16] = "null";
        if (row->has_attempt)
            snprintf(a, sizeof(a), "%d", row->attempt);
        if (row->has_rank)
            snprintf(r, sizeof(r), "%d", row->rank);
        n += (size_t)snprintf(out + n, cap - n, ",\"attempt\":%s,\"rank\":%s", a, r);
    }
    memcpy(out + n, ",\"at\":", 6);
    n += 6;
    n += put_plain(out + n, row->at);
    memcpy(out + n, ",\"data\":", 8);
    n += 8;
    memcpy(out + n, row->body, row->body_len);
    n += row->body_len;
    out[n++] = '}';
    out[n] = '\0';
    return out;
}

size_t stream_deliverable(int64_t cursor, int64_t settled, const int64_t *seqs, size_t n)
{
    size_t k = 0;
    int64_t last = cursor;
    while (k < n && (seqs[k] == last + 1 || seqs[k] <= settled)) {
        last = seqs[k];
        k++;
    }
    return k;
}
