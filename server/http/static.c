/* The web dashboard's files (web/, built by Vite): GET / and GET /assets/... from --web-dir.
 * No token is needed for these files: they hold no data; every figure the page shows comes from
 * the REST API and /stream, which check the token as usual. */
#include "static.h"

#include "http.h"
#include "log.h"
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The page loads its scripts, styles and fonts from this server only, and talks to the REST API
 * here and to /stream on the websocket port (another origin: hence ws: and wss:). */
#define SRV_WEB_CSP                                                                                \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "font-src 'self'; connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; "           \
    "frame-ancestors 'none'; form-action 'self'"

/* Vite names everything under assets/ by its content hash: cacheable for a year. */
#define SRV_WEB_HASHED_PREFIX "/assets/"

static const struct {
    const char *ext;
    const char *ctype;
} mime_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".woff2", "font/woff2"},
    {".txt", "text/plain; charset=utf-8"},
    {".map", "application/json"},
};

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot != NULL)
        for (size_t i = 0; i < sizeof(mime_types) / sizeof(mime_types[0]); i++)
            if (strcmp(dot, mime_types[i].ext) == 0)
                return mime_types[i].ctype;
    return "application/octet-stream";
}

int srv_static_path_ok(const char *path)
{
    if (path == NULL || path[0] != '/' || strlen(path) > 512)
        return 0;
    const char *seg = path + 1;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t n = end ? (size_t)(end - seg) : strlen(seg);
        if (n == 0 && end != NULL)
            return 0; /* "//" */
        if (seg[0] == '.')
            return 0; /* ".", "..", hidden files */
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)seg[i];
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '-' || c == '_';
            if (!ok)
                return 0;
        }
        if (end == NULL)
            return 1;
        seg = end + 1;
    }
}

int srv_static_claims(const char *url)
{
    return strncmp(url, "/api/", 5) != 0 && strcmp(url, "/api") != 0 &&
           strcmp(url, "/metrics") != 0;
}

char *srv_static_find_dir(const char *configured, const char *exe_path)
{
    if (configured != NULL && configured[0] != '\0')
        return strdup(configured);
    char exe[PATH_MAX];
    if (exe_path == NULL || realpath(exe_path, exe) == NULL)
        return NULL;
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0';
    /* <build>/server/trainyard-server → <build>/web/dist; <prefix>/bin →
     * <prefix>/share/trainyard/web */
    static const char *const rel[] = {"../web/dist", "../share/trainyard/web"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char cand[PATH_MAX + 32], index[PATH_MAX + 64];
        snprintf(cand, sizeof(cand), "%s/%s", exe, rel[i]);
        snprintf(index, sizeof(index), "%s/index.html", cand);
        if (access(index, R_OK) == 0) {
            char real[PATH_MAX];
            return strdup(realpath(cand, real) ? real : cand);
        }
    }
    return NULL;
}

/* Adds the headers every dashboard file carries; `hashed`: a content-hashed asset. */
static void add_headers(struct MHD_Response *r, const char *ctype, int hashed)
{
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL,
                            hashed ? "public, max-age=31536000, immutable" : "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy", SRV_WEB_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
}

enum MHD_Result srv_static_serve(struct srv_request *req)
{
    const char *dir = req->srv->web_dir;
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)
        return srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no route for %s %s", req->method,
                                 req->url);
    if (dir == NULL)
        return srv_reply_problem(req, SRV_P_NOT_FOUND, NULL,
                                 "the web dashboard is not built (npm and node were missing at "
                                 "build time) or --web-dir does not name it");
    const char *path = strcmp(req->url, "/") == 0 ? "/index.html" : req->url;
    if (!srv_static_path_ok(path))
        return srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no file %s", req->url);
    char full[PATH_MAX];
    if ((size_t)snprintf(full, sizeof(full), "%s%s", dir, path) >= sizeof(full))
        return srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no file %s", req->url);
    int fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no file %s", req->url);
    }
    /* The response owns fd from here (closed when it is destroyed, even on failure). */
    struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
    if (r == NULL) {
        close(fd);
        return MHD_NO;
    }
    add_headers(r, content_type(path),
                strncmp(path, SRV_WEB_HASHED_PREFIX, strlen(SRV_WEB_HASHED_PREFIX)) == 0);
    enum MHD_Result ret = MHD_queue_response(req->conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    req->status = MHD_HTTP_OK;
    return ret;
}
