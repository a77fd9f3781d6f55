/*
 * http.h - a thin wrapper over one libcurl easy handle (so consecutive requests reuse the
 * connection). Knows nothing about the API's JSON; api.c does.
 */
#ifndef TY_CLI_HTTP_H
#define TY_CLI_HTTP_H

#include <stddef.h>

struct http_client;

struct http_response {
    long status;        /* HTTP status code */
    char *body;         /* NUL-terminated (the body itself may hold NULs); owned */
    size_t len;         /* body length in bytes */
    char *content_type; /* Content-Type header value or NULL; owned */
    char *location;     /* Location header value or NULL; owned */
};

/* Room enough for any message http_request puts in err. */
#define HTTP_ERROR_MAX 512

/* Largest body accepted; a larger one fails the request. */
#define HTTP_MAX_BODY ((size_t)256 << 20)

/*
 * Creates a client for base_url (no trailing '/'). token may be NULL (no Authorization header).
 * Timeouts apply to every request. Returns NULL (with err filled) if libcurl cannot start.
 * Free with http_client_free.
 */
struct http_client *http_client_create(const char *base_url, const char *token,
                                       long connect_timeout_s, long request_timeout_s, char *err,
                                       size_t errlen);

void http_client_free(struct http_client *c);

/* The base URL the client was created with. */
const char *http_client_base(const struct http_client *c);

/*
 * Sends METHOD base_url+path (path starts with '/', query string already escaped). body may be
 * NULL; when given it is sent with Content-Type: application/json. Returns 0 when any HTTP reply
 * came back (out filled, whatever the status; free it with http_response_free), or -1 when none
 * did (connection refused, timeout, TLS, ...), with libcurl's explanation in err and out empty.
 */
int http_request(struct http_client *c, const char *method, const char *path, const char *body,
                 size_t body_len, struct http_response *out, char *err, size_t errlen);

/*
 * GETs base_url+path into the file fd: a 2xx body is written to fd as it arrives (not held in
 * memory, so not bound by HTTP_MAX_BODY), starting at byte *written of the resource (a Range
 * request when *written > 0; a server that answers 200 instead makes the file start over).
 * *written counts the resource's bytes in fd, including after a cut, so that calling again
 * resumes. There is no overall time limit; a transfer that stalls for the request timeout is cut.
 * Returns as http_request does; for a 2xx out->body is empty, for another status it holds the
 * error body.
 */
int http_download(struct http_client *c, const char *path, int fd, long long *written,
                  struct http_response *out, char *err, size_t errlen);

/* Sends `header` ("Name: value", copied) with every later request; NULL stops. 0, or -1 when out
 * of memory. */
int http_client_set_header(struct http_client *c, const char *header);

/* https://: verify the server against the PEM CA file `path` (copied) instead of the system's
 * CAs; NULL: the system's. 0, or -1 when out of memory. */
int http_client_set_ca_file(struct http_client *c, const char *path);

/* Frees what r owns and zeroes it. */
void http_response_free(struct http_response *r);

/* Percent-encodes s for a path segment or query value. Returns malloc'ed text; free() it. */
char *http_escape(struct http_client *c, const char *s);

#endif
