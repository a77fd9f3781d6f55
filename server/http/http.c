/* libmicrohttpd glue: request state, body limits, routing to the handlers of routes.c. */
#include "http.h"

#include "auth.h"
#include "db.h"
#include "heads.h"
#include "log.h"
#include "query.h"
#include "server.h"
#include "static.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds a 503 (database unavailable, pool exhausted) asks the client to wait. */
#define SRV_RETRY_AFTER_S "1"

/* ------------------------------------------------------------------ replies */

enum MHD_Result srv_reply_steal(struct srv_request *req, unsigned status, const char *ctype,
                                char *body, size_t len, const char *location)
{
    struct MHD_Response *r =
        body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    if (ctype)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (location)
        MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"trainyard\"");
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, SRV_RETRY_AFTER_S);
    enum MHD_Result ret = MHD_queue_response(req->conn, status, r);
    MHD_destroy_response(r);
    req->status = status;
    return ret;
}

enum MHD_Result srv_reply_data(struct srv_request *req, unsigned status, const char *ctype,
                               const char *body, size_t len)
{
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return MHD_NO;
    memcpy(copy, body, len);
    copy[len] = '\0';
    return srv_reply_steal(req, status, ctype, copy, len, NULL);
}

enum MHD_Result srv_reply_json(struct srv_request *req, unsigned status, json_t *json)
{
    char *text = json ? json_dumps(json, JSON_COMPACT) : NULL;
    json_decref(json);
    if (text == NULL)
        return MHD_NO;
    return srv_reply_steal(req, status, "application/json", text, strlen(text), NULL);
}

enum MHD_Result srv_reply_wrapped(struct srv_request *req, const char *key, char *json_text)
{
    size_t len = strlen(json_text) + strlen(key) + 8;
    char *body = malloc(len);
    if (body == NULL) {
        free(json_text);
        return MHD_NO;
    }
    int n = snprintf(body, len, "{\"%s\":%s}", key, json_text);
    free(json_text);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", body, (size_t)n, NULL);
}

enum MHD_Result srv_reply_empty(struct srv_request *req, unsigned status)
{
    return srv_reply_steal(req, status, NULL, NULL, 0, NULL);
}

static enum MHD_Result reply_problem_v(struct srv_request *req, enum srv_problem p, json_t *errors,
                                       const char *allow, const char *fmt, va_list ap)
{
    char detail[1024];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    srv_query_text_scrub(detail); /* it may echo what the client sent */
    char *instance = strdup(req->url);
    if (instance == NULL)
        return MHD_NO;
    srv_query_text_scrub(instance);
    char type[128];
    snprintf(type, sizeof(type), "urn:trainyard:problem:%s", srv_problem_slug(p));
    json_t *body = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "type", type, "title",
                             srv_problem_title(p), "status", (int)srv_problem_status(p), "detail",
                             detail, "code", srv_problem_slug(p), "instance", instance);
    free(instance);
    if (errors)
        json_object_set_new(body, "errors", errors);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (text == NULL)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json");
    if (srv_problem_status(p) == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"trainyard\"");
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (srv_problem_status(p) == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, SRV_RETRY_AFTER_S);
    enum MHD_Result ret = MHD_queue_response(req->conn, srv_problem_status(p), r);
    MHD_destroy_response(r);
    req->status = srv_problem_status(p);
    return ret;
}

enum MHD_Result srv_reply_problem(struct srv_request *req, enum srv_problem p, json_t *errors,
                                  const char *detail_fmt, ...)
{
    va_list ap;
    va_start(ap, detail_fmt);
    enum MHD_Result r = reply_problem_v(req, p, errors, NULL, detail_fmt, ap);
    va_end(ap);
    return r;
}

enum MHD_Result srv_reply_db_error(struct srv_request *req, int qs)
{
    if (qs == DB_SOFT_ERROR)
        return srv_reply_problem(req, SRV_P_DATABASE_UNAVAILABLE, NULL,
                                 "the database is unavailable; retry shortly");
    return srv_reply_problem(req, SRV_P_INTERNAL, NULL, "database error; see the server log");
}

enum MHD_Result srv_reply_field_problem(struct srv_request *req, enum srv_problem p,
                                        const char *field, const char *detail)
{
    json_t *errors = json_pack("[{s:s, s:s}]", "field", field, "detail", detail);
    return srv_reply_problem(req, p, errors, "%s: %s", field, detail);
}

static enum MHD_Result reply_method_not_allowed(struct srv_request *req, const char *allow, ...)
{
    va_list ap;
    va_start(ap, allow);
    enum MHD_Result r = reply_problem_v(req, SRV_P_METHOD_NOT_ALLOWED, NULL, allow,
                                        "%s is not allowed on %s; allowed: %s", ap);
    va_end(ap);
    return r;
}

/* ------------------------------------------------------------------ request helpers */

const char *srv_query(struct srv_request *req, const char *key)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

int srv_query_int(struct srv_request *req, const char *key, int64_t min, int64_t max,
                  const char *must, int64_t *out, enum MHD_Result *result)
{
    const char *v = srv_query(req, key);
    if (v == NULL || util_parse_int64(v, min, max, out) == 0)
        return 0;
    *result = srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, key, must);
    return -1;
}

json_t *srv_body_json(struct srv_request *req, enum MHD_Result *result)
{
    const char *ctype =
        MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t n = strlen("application/json");
    if (ctype == NULL || strncasecmp(ctype, "application/json", n) != 0 ||
        (ctype[n] != '\0' && ctype[n] != ';' && ctype[n] != ' ')) {
        *result = srv_reply_problem(req, SRV_P_UNSUPPORTED_MEDIA_TYPE, NULL,
                                    "the body must be sent as Content-Type: application/json "
                                    "(got %s)",
                                    ctype ? ctype : "no Content-Type");
        return NULL;
    }
    json_error_t err;
    json_t *j = json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &err);
    if (j == NULL) {
        *result = srv_reply_problem(req, SRV_P_INVALID_JSON, NULL, "line %d, column %d: %s",
                                    err.line, err.column, err.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        *result =
            srv_reply_problem(req, SRV_P_INVALID_BODY, NULL, "the body must be a JSON object");
        return NULL;
    }
    return j;
}

int srv_arg_id(struct srv_request *req, int i, int64_t *out)
{
    const char *s = req->args[i];
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
        return -1;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0' || v <= 0)
        return -1;
    *out = v;
    return 0;
}

enum MHD_Result srv_reply_bad_job_id(struct srv_request *req)
{
    return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL,
                             "'%s' is not a job id (job ids are positive integers)", req->args[0]);
}

/* ------------------------------------------------------------------ routing */

/* Matches `path` against `pattern`, storing captures (pointers into `scratch`, which is a
 * writable copy of path) in args. Returns 1 on a match. */
static int route_match(const char *pattern, char *scratch, const char **args)
{
    const char *p = pattern;
    char *s = scratch;
    int nargs = 0;
    while (*p && *s) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            char *slash = strchr(s, '/');
            if (slash == s)
                return 0; /* empty segment */
            if (nargs < SRV_MAX_PATH_ARGS)
                args[nargs++] = s;
            p = close + 1;
            if (slash == NULL) {
                s += strlen(s);
            } else {
                if (*p != '/')
                    return 0;
                *slash = '\0';
                s = slash + 1;
                p++;
            }
            continue;
        }
        if (*p != *s)
            return 0;
        p++;
        s++;
    }
    return *p == '\0' && *s == '\0';
}

/* Finds the route for method+url. Returns it, or NULL with *allow filled (405) or empty (404). */
static const struct srv_route *route_find(struct srv_request *req, char *allow, size_t allowlen)
{
    size_t urllen = strlen(req->url);
    allow[0] = '\0';
    /* Ignore one trailing slash, except on "/". */
    char *scratch = malloc(urllen + 1);
    if (scratch == NULL)
        return NULL;
    const struct srv_route *found = NULL;
    for (const struct srv_route *r = srv_routes; r->method && !found; r++) {
        memcpy(scratch, req->url, urllen + 1);
        if (urllen > 1 && scratch[urllen - 1] == '/')
            scratch[urllen - 1] = '\0';
        const char *args[SRV_MAX_PATH_ARGS] = {0};
        if (!route_match(r->pattern, scratch, args))
            continue;
        if (strcmp(r->method, req->method) == 0 ||
            (strcmp(req->method, "HEAD") == 0 && strcmp(r->method, "GET") == 0)) {
            found = r;
            req->path_copy = scratch;
            memcpy(req->args, args, sizeof(args));
            return found;
        }
        size_t used = strlen(allow);
        if (strstr(allow, r->method) == NULL)
            snprintf(allow + used, allowlen - used, "%s%s", used ? ", " : "", r->method);
    }
    free(scratch);
    return NULL;
}

/* A body buffer of `size` bytes (freed with free()): page-aligned from 64 KiB on, so that the
 * artifact store can write upload chunks from it with O_DIRECT. NULL when out of memory. */
static char *body_alloc(size_t size)
{
    void *p = NULL;
    if (size < 65536)
        return malloc(size);
    return posix_memalign(&p, 4096, size) == 0 ? p : NULL;
}

/* The largest body this request may carry: the chunks of uploads (checkpoint parts, code
 * packages) may be larger than other requests' bodies. */
static int64_t body_limit(const struct srv *srv, const char *method, const char *url)
{
    bool chunk =
        strcmp(method, "PUT") == 0 && (strncmp(url, "/api/v1/agent/checkpoints/", 26) == 0 ||
                                       strncmp(url, "/api/v1/code/", 13) == 0);
    int64_t lim = srv->cfg.max_body_bytes;
    return chunk && srv->cfg.max_upload_chunk_bytes > lim ? srv->cfg.max_upload_chunk_bytes : lim;
}

/* The first query parameter that is not text (srv_query_text_valid), found by text_check. */
struct bad_param {
    const char *key; /* NULL: none; "" when the name itself is not text */
};

static enum MHD_Result find_bad_param(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    struct bad_param *b = cls;
    if (!srv_query_text_valid(key, key_size)) {
        b->key = "";
        return MHD_NO;
    }
    if (value != NULL && !srv_query_text_valid(value, value_size)) {
        b->key = key;
        return MHD_NO;
    }
    return MHD_YES;
}

/* Every query parameter and path segment reaches handlers (and PostgreSQL) as text: UTF-8
 * without NUL bytes, checked here once for every route. 0, or -1 after queuing a 400 naming the
 * parameter (*res). */
static int text_check(struct srv_request *req, enum MHD_Result *res)
{
    struct bad_param b = {NULL};
    MHD_get_connection_values_n(req->conn, MHD_GET_ARGUMENT_KIND, find_bad_param, &b);
    if (b.key != NULL) {
        *res = b.key[0] ? srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, b.key,
                                                  "not valid UTF-8 text (or holds a NUL byte)")
                        : srv_reply_problem(req, SRV_P_INVALID_PARAMETER, NULL,
                                            "a query parameter's name is not valid UTF-8 text");
        return -1;
    }
    for (int i = 0; i < SRV_MAX_PATH_ARGS && req->args[i]; i++)
        if (!srv_query_text_valid(req->args[i], strlen(req->args[i]))) {
            *res = srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "path",
                                           "a segment of the path is not valid UTF-8 text");
            return -1;
        }
    return 0;
}

static enum MHD_Result dispatch(struct srv_request *req)
{
    char allow[128];
    if (req->route == NULL) /* else routed at the headers, for its body stream */
        req->route = route_find(req, allow, sizeof(allow));
    if (req->route == NULL) {
        if (allow[0] == '\0' && srv_static_claims(req->url))
            return srv_static_serve(req);
        if (allow[0] == '\0')
            return srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no route for %s %s", req->method,
                                     req->url);
        return reply_method_not_allowed(req, allow, req->method, req->url, allow);
    }
    if (req->body_too_large)
        return srv_reply_problem(req, SRV_P_BODY_TOO_LARGE, NULL,
                                 "request bodies are limited to %lld bytes",
                                 (long long)body_limit(req->srv, req->method, req->url));
    enum MHD_Result denied;
    if (!req->authed && srv_auth_check(req, &denied) != 0)
        return denied;
    if (text_check(req, &denied) != 0)
        return denied;
    return req->route->handler(req);
}

/* ------------------------------------------------------------------ MHD callbacks */

/* A request with a body, at its headers: everything but a route's admitted caller is answered
 * now, before a byte of the body is read or buffered, and libmicrohttpd then closes the
 * connection instead of reading the rest (no route: 404/405; the route's token missing, wrong or
 * of too small a role: 401/403; a streamed route's begin refusing the caller). An admitted body
 * over the route's limit is drained, not stored, so that the client reads the 413. Otherwise the
 * body is buffered in one allocation of its announced size, or streamed to the route's begin.
 * Returns MHD_YES, or the reply's result when one was queued. */
static enum MHD_Result admit_body(struct srv_request *req, long long announced)
{
    char allow[128];
    req->route = route_find(req, allow, sizeof(allow));
    if (req->route == NULL)
        return dispatch(req);
    enum MHD_Result answered;
    if (req->route->min_role != SRV_ROLE_NONE || req->srv->cfg.auth_mode == SRV_AUTH_NONE) {
        if (srv_auth_check(req, &answered) != 0)
            return answered;
        req->authed = true;
    }
    if (announced > body_limit(req->srv, req->method, req->url)) {
        req->body_too_large = true;
        return MHD_YES;
    }
    for (const struct srv_streamed_route *s = srv_streamed_routes; s->handler; s++)
        if (s->handler == req->route->handler) {
            req->body_stream = s->body;
            int rc = s->body->begin(req, &answered);
            if (rc == 1)
                return answered;
            if (rc == 0)
                return MHD_YES; /* streamed: no buffer */
        }
    if (announced > 0 && (req->body = body_alloc((size_t)announced + 1)) != NULL) {
        req->body[0] = '\0';
        req->body_cap = (size_t)announced + 1; /* one allocation, no growing copies */
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)version;
    struct srv *srv = cls;
    struct srv_request *req = *con_cls;
    if (req == NULL) {
        req = calloc(1, sizeof(*req));
        if (req == NULL)
            return MHD_NO;
        req->srv = srv;
        req->conn = conn;
        req->method = method;
        req->url = url;
        req->started = util_mono_s();
        *con_cls = req;
        srv_heads_arrived(conn);
        const char *clen =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *chunked =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        long long announced = clen ? strtoll(clen, NULL, 10) : 0;
        if (announced > 0 || chunked != NULL)
            return admit_body(req, announced);
        return MHD_YES;
    }
    if (*upload_size > 0 && req->stream != NULL) {
        req->body_len += *upload_size;
        if ((int64_t)req->body_len > body_limit(req->srv, req->method, req->url))
            req->body_too_large = true;
        else if (!req->stream_stopped && req->body_stream->piece(req, upload, *upload_size) != 0)
            req->stream_stopped = true;
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!req->body_too_large) {
            size_t want = req->body_len + *upload_size;
            if ((int64_t)want > body_limit(req->srv, req->method, req->url)) {
                req->body_too_large = true;
                UTIL_FREE(req->body);
                req->body_len = 0;
                req->body_cap = 0;
            } else {
                if (want + 1 > req->body_cap) {
                    char *grown = realloc(req->body, want + 1);
                    if (grown == NULL)
                        return MHD_NO;
                    req->body = grown;
                    req->body_cap = want + 1;
                }
                memcpy(req->body + req->body_len, upload, *upload_size);
                req->body[want] = '\0';
                req->body_len = want;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return dispatch(req);
}

/* Counts a finished request under its route (GET /metrics): its status class and how long it
 * took from its arrival to its completion. */
static void count_request(const struct srv_request *req)
{
    size_t i = SRV_TELEMETRY_MAX_ROUTES;
    if (req->route != NULL && (size_t)(req->route - srv_routes) < SRV_TELEMETRY_MAX_ROUTES)
        i = (size_t)(req->route - srv_routes);
    struct srv_route_stats *st = &req->srv->telemetry.http.routes[i];
    unsigned cls = req->status / 100;
    atomic_fetch_add_explicit(&st->by_class[cls >= 2 && cls <= 5 ? cls : 0], 1,
                              memory_order_relaxed);
    srv_histogram_observe(&st->latency, util_mono_s() - req->started);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    srv_heads_rearm(conn);
    struct srv_request *req = *con_cls;
    if (req == NULL)
        return;
    count_request(req);
    if (req->stream != NULL)
        req->body_stream->release(req);
    free(req->body);
    free(req->path_copy);
    free(req);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    if (n && msg[n - 1] == '\n')
        msg[n - 1] = '\0';
    TY_DEBUG("http", "%s", msg);
}

/* Reads --tls-cert and --tls-key into `cert` and `key` (PEM text, the caller frees both) and
 * fills `opts` (room for 3) with the MHD options serving them, ending with MHD_OPTION_END;
 * without TLS only the end. 0, or -1 with the problem logged (unreadable file). */
static int tls_options(const struct srv_config *cfg, struct MHD_OptionItem *opts, char **cert,
                       char **key)
{
    *cert = *key = NULL;
    size_t n = 0;
    if (cfg->tls_cert) {
        *cert = util_read_file(cfg->tls_cert, NULL);
        *key = util_read_file(cfg->tls_key, NULL);
        if (*cert == NULL || *key == NULL) {
            TY_ERROR("http", "cannot read --tls-cert %s or --tls-key %s: %s", cfg->tls_cert,
                     cfg->tls_key, strerror(errno));
            UTIL_FREE(*cert);
            UTIL_FREE(*key);
            return -1;
        }
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, *cert};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, *key};
    }
    opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return 0;
}

int srv_http_start(struct srv *srv)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)srv->cfg.http_port);
    if (inet_pton(AF_INET, srv->cfg.http_host, &addr.sin_addr) != 1) {
        TY_ERROR("http", "--http-host '%s' is not an IPv4 address", srv->cfg.http_host);
        return -1;
    }
    struct MHD_OptionItem tls[3];
    char *cert, *key;
    if (tls_options(&srv->cfg, tls, &cert, &key) != 0)
        return -1;
    srv->heads =
        srv_heads_start((double)srv->cfg.http_head_timeout_s, (double)srv->cfg.http_idle_timeout_s);
    if (srv->heads == NULL) {
        free(cert);
        free(key);
        return -1;
    }
    unsigned flags =
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (cert)
        flags |= MHD_USE_TLS;
    srv->http = MHD_start_daemon(
        flags, (uint16_t)srv->cfg.http_port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR,
        &addr, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)srv->cfg.http_threads,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION,
        srv_heads_notify, srv->heads, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg.http_idle_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg.http_max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)srv->cfg.http_max_per_ip,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    /* GnuTLS copied the certificate and key while the daemon started. */
    free(cert);
    free(key);
    if (srv->http == NULL) {
        srv_heads_stop(srv->heads);
        srv->heads = NULL;
        TY_ERROR("http", "cannot listen on %s:%lld (port in use, or a bad TLS certificate/key?)",
                 srv->cfg.http_host, (long long)srv->cfg.http_port);
        return -1;
    }
    TY_INFO("http", "REST API on %s://%s:%lld/api/v1 (%lld threads)",
            srv->cfg.tls_cert ? "https" : "http", srv->cfg.http_host, (long long)srv->cfg.http_port,
            (long long)srv->cfg.http_threads);
    return 0;
}

void srv_http_stop(struct srv *srv)
{
    if (srv->http == NULL)
        return;
    /* No MHD_quiesce_daemon() first: with MHD_USE_EPOLL and worker threads it races with the
     * workers' own removal of the listening socket from their epoll sets, and libmicrohttpd
     * 0.9.75 then aborts ("Failed to remove listen FD from epoll set", seen in CI). Stopping
     * joins the workers; a handler that is running completes first. */
    MHD_stop_daemon(srv->http);
    srv->http = NULL;
    srv_heads_stop(srv->heads);
    srv->heads = NULL;
}
