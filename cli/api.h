/*
 * api.h - one call to the REST API with the CLI's error policy: unreachable server -> message
 * naming the URL and exit 3; 4xx/5xx -> the server's problem text and exit 1; a reply that should
 * be JSON but is not -> status and first bytes, exit 1.
 */
#ifndef TY_CLI_API_H
#define TY_CLI_API_H

#include "cli.h"
#include "http.h"
#include "strbuf.h"

#include <jansson.h>
#include <stdbool.h>

/*
 * Sends METHOD path (path built with api_path). On a 2xx reply returns CLI_EXIT_OK with *resp
 * filled (free it with http_response_free); otherwise prints the error and returns the exit code,
 * with *resp empty. When quiet_unreachable is set, an unreachable server is not reported, only
 * returned as CLI_EXIT_UNREACHABLE with the explanation in err (for retry loops).
 */
int api_send(struct cli_ctx *ctx, const char *method, const char *path, const char *body,
             size_t body_len, bool quiet_unreachable, struct http_response *resp, char *err,
             size_t errlen);

/*
 * Like api_send, then parses the reply as JSON into *out (the caller json_decref's it). A reply
 * with no JSON where one is expected is reported and gives CLI_EXIT_FAILED; a 204 with no body
 * leaves *out NULL. out may be NULL when no body is wanted (204 replies).
 */
/* How often api_json_idempotent sends a submission whose reply was lost. */
#define API_SUBMIT_TRIES 3

/*
 * POSTs body to path like api_json, with a random Idempotency-Key header; when no reply comes
 * back (the connection was lost, the server restarted) it sends the same request with the same
 * key again, up to API_SUBMIT_TRIES times a second apart, so the server creates the job once.
 */
int api_json_idempotent(struct cli_ctx *ctx, const char *path, const char *body, size_t body_len,
                        json_t **out);

/*
 * GETs `path` and finds the array `key` in the reply object. Returns CLI_EXIT_OK with *reply
 * (the caller json_decref's it) and *list borrowed from it; otherwise an exit code, with the
 * problem printed and nothing to free.
 */
int api_get_list(struct cli_ctx *ctx, const char *path, const char *key, json_t **reply,
                 const json_t **list);

int api_json(struct cli_ctx *ctx, const char *method, const char *path, const char *body,
             size_t body_len, json_t **out);

/*
 * Appends to `path` the text of one path segment or query value, percent-encoded.
 */
void api_path_escaped(struct cli_ctx *ctx, struct strbuf *path, const char *text);

/*
 * Appends "?name=value" or "&name=value" (value escaped) when value is non-NULL.
 */
void api_query(struct cli_ctx *ctx, struct strbuf *path, const char *name, const char *value);

/*
 * Prints what `cmd` returned in json output mode (pretty), used by all commands that show the
 * server's JSON unchanged.
 */
void api_print_json(const json_t *v);

#endif
