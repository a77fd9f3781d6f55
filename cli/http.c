/*
 * http.c - libcurl wrapper: timeouts, auth header, body and header capture, and downloads
 * written to a file as they arrive.
 */
#include "http.h"

#include "strbuf.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifndef TY_VERSION
#define TY_VERSION "0.0.0"
#endif

struct http_client {
    CURL *curl;
    char *base;
    char *auth_header;  /* "Authorization: Bearer ..." or NULL */
    char *extra_header; /* http_client_set_header, or NULL */
    char *ca_file;      /* http_client_set_ca_file, or NULL: libcurl's default CAs */
    long connect_timeout_s;
    long request_timeout_s;
};

/* Per-request capture state handed to the callbacks. */
struct capture {
    struct strbuf body;
    char *content_type;
    char *location;
    bool too_large;
    /* http_download only: a 2xx body goes to fd instead of body. */
    CURL *curl;
    int fd;             /* -1: capture everything in body */
    long long from;     /* the Range asked for */
    long long *written; /* bytes of the resource now in fd */
    bool started;       /* the first 2xx bytes have been seen */
    bool write_failed;
};

struct http_client *http_client_create(const char *base_url, const char *token,
                                       long connect_timeout_s, long request_timeout_s, char *err,
                                       size_t errlen)
{
    CURL *curl = curl_easy_init();
    if (!curl) {
        snprintf(err, errlen, "cannot initialise libcurl");
        return NULL;
    }
    struct http_client *c = xmalloc(sizeof *c);
    c->curl = curl;
    c->base = xstrdup(base_url);
    c->auth_header = NULL;
    c->extra_header = NULL;
    c->ca_file = NULL;
    if (token) {
        struct strbuf sb = STRBUF_INIT;
        sb_printf(&sb, "Authorization: Bearer %s", token);
        c->auth_header = sb_steal(&sb);
    }
    c->connect_timeout_s = connect_timeout_s;
    c->request_timeout_s = request_timeout_s;
    return c;
}

void http_client_free(struct http_client *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->curl);
    free(c->base);
    free(c->extra_header);
    free(c->ca_file);
    if (c->auth_header) {
        /* The header holds a secret: wipe it before handing the memory back. */
        explicit_bzero(c->auth_header, strlen(c->auth_header));
        free(c->auth_header);
    }
    free(c);
}

const char *http_client_base(const struct http_client *c)
{
    return c->base;
}

/* Writes a 2xx body chunk to cap->fd (a 200 to a ranged request starts the file over). */
static size_t body_to_fd(struct capture *cap, const char *data, size_t n)
{
    if (!cap->started) {
        long status = 0;
        curl_easy_getinfo(cap->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status != 206 && (lseek(cap->fd, 0, SEEK_SET) != 0 || ftruncate(cap->fd, 0) != 0)) {
            cap->write_failed = true;
            return 0;
        }
        if (status != 206)
            *cap->written = 0;
        cap->started = true;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = write(cap->fd, data + off, n - off);
        if (w <= 0) {
            cap->write_failed = true;
            return 0;
        }
        off += (size_t)w;
        *cap->written += w;
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct capture *cap = userdata;
    size_t n = size * nmemb;
    if (cap->fd >= 0) {
        long status = 0;
        curl_easy_getinfo(cap->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300)
            return body_to_fd(cap, data, n);
    }
    if (n > HTTP_MAX_BODY - cap->body.len) {
        cap->too_large = true;
        return 0; /* makes libcurl fail the transfer with CURLE_WRITE_ERROR */
    }
    sb_append(&cap->body, data, n);
    return n;
}

/* Copies the value of header line `line` (len bytes) if its name is `name`; else NULL. */
static char *header_value(const char *line, size_t len, const char *name)
{
    size_t nlen = strlen(name);
    if (len <= nlen || line[nlen] != ':' || strncasecmp(line, name, nlen) != 0)
        return NULL;
    const char *v = line + nlen + 1;
    const char *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    char *out = xmalloc((size_t)(end - v) + 1);
    memcpy(out, v, (size_t)(end - v));
    out[end - v] = '\0';
    return out;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct capture *cap = userdata;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        /* A new response starts (after "100 Continue"): forget headers of the previous one. */
        free(cap->content_type);
        free(cap->location);
        cap->content_type = cap->location = NULL;
        return n;
    }
    char *v;
    if ((v = header_value(data, n, "Content-Type"))) {
        free(cap->content_type);
        cap->content_type = v;
    } else if ((v = header_value(data, n, "Location"))) {
        free(cap->location);
        cap->location = v;
    }
    return n;
}

/* One request; cap says where the body goes (cap->fd) and which Range to ask for. */
static int perform(struct http_client *c, const char *method, const char *path, const char *body,
                   size_t body_len, struct capture *sink, struct http_response *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof *out);
    CURL *h = c->curl;
    struct capture cap = *sink;
    cap.curl = h;
    struct curl_slist *headers = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    struct strbuf url = STRBUF_INIT;
    sb_printf(&url, "%s%s", c->base, path);

    /* Reset per request (the connection cache survives), so no option leaks between methods. */
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, sb_str(&url));
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->connect_timeout_s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->request_timeout_s);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "trainyard-cli/" TY_VERSION);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &cap);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &cap);
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (cap.fd >= 0) {
        /* A download may take long: no overall limit, but give up when it stalls. */
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 0L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->request_timeout_s);
        if (cap.from > 0)
            curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)cap.from);
    }

    headers = curl_slist_append(headers, "Accept: application/json, application/problem+json, */*");
    headers = curl_slist_append(headers, "Expect:");
    if (c->auth_header)
        headers = curl_slist_append(headers, c->auth_header);
    if (c->extra_header)
        headers = curl_slist_append(headers, c->extra_header);
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
        }
        if (body)
            headers = curl_slist_append(headers, "Content-Type: application/json");
        if (strcmp(method, "POST") != 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

    CURLcode rc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL); /* errbuf dies with this frame */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(headers);
    sb_free(&url);
    if (rc != CURLE_OK) {
        if (cap.too_large)
            snprintf(err, errlen, "response body larger than %zu MiB", HTTP_MAX_BODY >> 20);
        else if (cap.write_failed)
            snprintf(err, errlen, "cannot write the download: %s", strerror(errno));
        else if (errbuf[0])
            snprintf(err, errlen, "%s (%s)", curl_easy_strerror(rc), errbuf);
        else
            snprintf(err, errlen, "%s", curl_easy_strerror(rc));
        sb_free(&cap.body);
        free(cap.content_type);
        free(cap.location);
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    out->len = cap.body.len;
    out->body = sb_steal(&cap.body);
    out->content_type = cap.content_type;
    out->location = cap.location;
    return 0;
}

int http_request(struct http_client *c, const char *method, const char *path, const char *body,
                 size_t body_len, struct http_response *out, char *err, size_t errlen)
{
    struct capture sink = {STRBUF_INIT, NULL, NULL, false, NULL, -1, 0, NULL, false, false};
    return perform(c, method, path, body, body_len, &sink, out, err, errlen);
}

int http_download(struct http_client *c, const char *path, int fd, long long *written,
                  struct http_response *out, char *err, size_t errlen)
{
    struct capture sink = {STRBUF_INIT, NULL,     NULL,    false, NULL,
                           fd,          *written, written, false, false};
    return perform(c, "GET", path, NULL, 0, &sink, out, err, errlen);
}

int http_client_set_header(struct http_client *c, const char *header)
{
    char *copy = header ? strdup(header) : NULL;
    if (header && !copy)
        return -1;
    free(c->extra_header);
    c->extra_header = copy;
    return 0;
}

int http_client_set_ca_file(struct http_client *c, const char *path)
{
    char *copy = path ? strdup(path) : NULL;
    if (path && !copy)
        return -1;
    free(c->ca_file);
    c->ca_file = copy;
    return 0;
}

void http_response_free(struct http_response *r)
{
    free(r->body);
    free(r->content_type);
    free(r->location);
    memset(r, 0, sizeof *r);
}

char *http_escape(struct http_client *c, const char *s)
{
    char *e = curl_easy_escape(c->curl, s, 0);
    if (!e) {
        fputs("error: out of memory\n", stderr);
        exit(70);
    }
    char *out = xstrdup(e);
    curl_free(e);
    return out;
}
