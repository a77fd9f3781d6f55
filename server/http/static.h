/* Serving the web dashboard's built files (docs/dashboard.md). */
#ifndef SRV_STATIC_H
#define SRV_STATIC_H

#include <microhttpd.h>

struct srv_request;

/* Whether `url` (decoded path) belongs to the dashboard rather than to the REST API: everything
 * but /api/... and /metrics, whose unknown paths keep their problem+json 404. */
int srv_static_claims(const char *url);
/* Whether `path` may name a file under the web directory: it starts with '/', its segments are
 * non-empty, made of [A-Za-z0-9._-] only and never start with '.' (so no "..", no hidden file,
 * no encoded trick survives the decoding libmicrohttpd did first). */
int srv_static_path_ok(const char *path);
/* The directory to serve: `configured` (--web-dir) when set, else the first of
 * <exe dir>/../web/dist (a build tree) and <exe dir>/../share/trainyard/web (an install) that holds
 * index.html, else NULL. The caller frees the result. */
char *srv_static_find_dir(const char *configured, const char *exe_path);
/* Answers GET/HEAD for a dashboard path: the file with its content type, Cache-Control (a year,
 * immutable, for content-hashed /assets/; no-cache for the rest, index.html included),
 * Content-Security-Policy and X-Content-Type-Options; a problem+json 404 for anything else. */
enum MHD_Result srv_static_serve(struct srv_request *req);

#endif
