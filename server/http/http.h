/* The HTTP layer: libmicrohttpd daemon, per-request state, routing, body handling, replies.
 * Handlers (h_*.c, one endpoint per file) get a parsed request and answer with one srv_reply_*
 * call; this layer owns the request state and frees it in MHD's completion callback. */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include "identity.h"
#include "problem.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srv;

#define SRV_MAX_PATH_ARGS 4

struct srv_request {
    struct srv *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *url;
    const struct srv_route *route;
    const char *args[SRV_MAX_PATH_ARGS]; /* path captures, e.g. {id} */
    char *path_copy;                     /* storage for args */
    char *body;                          /* NUL-terminated request body */
    size_t body_len;
    size_t body_cap; /* bytes allocated for body (at least body_len + 1) */
    bool body_too_large;
    bool authed; /* the route's min_role was checked at the headers (srv_auth_check) */
    const struct srv_body_stream *body_stream; /* the route's, when its body is streamed */
    void *stream;        /* body_stream's state, NULL when the body is buffered */
    bool stream_stopped; /* its piece callback refused: the rest of the body is drained */
    struct srv_identity who;
    double started;  /* monotonic seconds when the request arrived */
    unsigned status; /* the status of the reply queued, 0 before one */
};

typedef enum MHD_Result (*srv_handler)(struct srv_request *req);

/* A route that takes its body piece by piece as it arrives instead of in one buffer (large
 * uploads: the work on each piece overlaps the transfer of the rest, and no chunk-sized
 * allocation is made). */
struct srv_body_stream {
    /* Called once the headers are in, before any of the body; it authenticates the caller
     * itself (the route's min_role is SRV_ROLE_NONE). 0: it takes the body (req->stream set;
     * each piece goes to `piece`, then the route's handler runs and answers); 1: it refused the
     * caller and queued the reply (*answered: its MHD result), so the body is never read; -1:
     * the body is buffered as for any route and the handler answers, its errors included. */
    int (*begin)(struct srv_request *req, enum MHD_Result *answered);
    /* The next piece of the body. -1 refuses the rest (drained, not passed on); the handler
     * still runs and answers. */
    int (*piece)(struct srv_request *req, const char *data, size_t len);
    /* Frees req->stream when the request goes: answered, refused (413) or cut mid-body. */
    void (*release)(struct srv_request *req);
};

struct srv_route {
    const char *method;
    const char *pattern; /* "/api/v1/jobs/{id}": {name} matches one path segment */
    srv_handler handler;
    enum srv_role min_role; /* SRV_ROLE_NONE: no token needed */
};

/* The routing table (routes.c), ended by a {NULL} entry. */
extern const struct srv_route srv_routes[];

/* The routes whose bodies are streamed, by handler (routes.c), ended by a {NULL} entry; every
 * other route's body is buffered (req->body). */
struct srv_streamed_route {
    srv_handler handler;
    const struct srv_body_stream *body;
};
extern const struct srv_streamed_route srv_streamed_routes[];

/* Starts the daemon on cfg.http_host:http_port. Returns 0 or -1 (logged). */
int srv_http_start(struct srv *srv);
/* Stops accepting, lets in-flight requests finish, joins the threads. */
void srv_http_stop(struct srv *srv);

/* ---- replies: each returns what the handler should return ---- */

/* Sends `json` (a reference is stolen) with status and application/json. */
enum MHD_Result srv_reply_json(struct srv_request *req, unsigned status, json_t *json);
/* Sends `len` bytes of `body` (copied) with the given content type. */
enum MHD_Result srv_reply_data(struct srv_request *req, unsigned status, const char *ctype,
                               const char *body, size_t len);
/* Sends `body` (malloc'd, ownership taken) with the given content type. */
enum MHD_Result srv_reply_steal(struct srv_request *req, unsigned status, const char *ctype,
                                char *body, size_t len, const char *location);
enum MHD_Result srv_reply_empty(struct srv_request *req, unsigned status);
/* Sends 200 with the body {"<key>": <json_text>}; `json_text` (malloc'd JSON) is freed. */
enum MHD_Result srv_reply_wrapped(struct srv_request *req, const char *key, char *json_text);
/* Sends a problem+json reply. `errors` (stolen, may be NULL) is an array of {field, detail}. */
enum MHD_Result srv_reply_problem(struct srv_request *req, enum srv_problem p, json_t *errors,
                                  const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The reply for a failed store call, given its db_qs (db.h): 503 database-unavailable for
 * DB_SOFT_ERROR (retry shortly), else 500 internal. */
enum MHD_Result srv_reply_db_error(struct srv_request *req, int qs);
/* Problem naming one field. */
enum MHD_Result srv_reply_field_problem(struct srv_request *req, enum srv_problem p,
                                        const char *field, const char *detail);

/* ---- request helpers ---- */

/* Query-string value or NULL. */
const char *srv_query(struct srv_request *req, const char *key);
/* Query parameter `key` as an integer from min to max into *out, left as it is when absent.
 * Returns 0, or -1 after a 400 naming the parameter, saying it `must` ... (its MHD result in
 * *result). SRV_MUST_ATTEMPT and SRV_MUST_MAX_POINTS are the words of the common ones. */
int srv_query_int(struct srv_request *req, const char *key, int64_t min, int64_t max,
                  const char *must, int64_t *out, enum MHD_Result *result);
#define SRV_MUST_ATTEMPT "must be an attempt number, 1 or more"
#define SRV_MAX_POINTS 10000
#define SRV_MUST_MAX_POINTS "must be an integer from 1 to 10000"
/* Parses the body as a JSON object. On failure replies (400/415) and returns NULL, storing the
 * MHD result in *result. */
json_t *srv_body_json(struct srv_request *req, enum MHD_Result *result);
/* Parses path argument `i` as a positive int64. Returns 0 or -1. */
int srv_arg_id(struct srv_request *req, int i, int64_t *out);
/* The 404 for a job path whose {id} (argument 0) srv_arg_id refused. */
enum MHD_Result srv_reply_bad_job_id(struct srv_request *req);

#endif
