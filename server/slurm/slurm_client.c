/* slurmrestd over HTTP through libcurl (slurm_rest.h). */
#include "slurm_rest.h"

#include <curl/curl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SLURM_TIMEOUT_MS 2000L
#define SLURM_TOKEN_MAX 8192

struct slurm_client {
    CURL *curl;
    char *socket_path; /* unix: */
    char *base;        /* http://host:port, or http://localhost for a unix socket */
    char *token_file;
    char version[16];
    /* The token as last read, and the file's identity then (re-read when it changes). */
    char *token;
    char user[128];
    int64_t token_exp; /* its "exp" claim; 0: none */
    struct stat token_st;
};

struct buf {
    char *data;
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct buf *b = arg;
    size_t add = size * n;
    if (b->len + add > (16u << 20))
        return 0;
    char *d = realloc(b->data, b->len + add + 1);
    if (d == NULL)
        return 0;
    memcpy(d + b->len, p, add);
    b->data = d;
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

struct slurm_client *slurm_client_new(const char *url, const char *token_file, char *err,
                                      size_t errlen)
{
    struct slurm_client *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (strncmp(url, "unix:", 5) == 0 && url[5] == '/') {
        c->socket_path = strdup(url + 5);
        c->base = strdup("http://localhost");
    } else if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
        c->base = strdup(url);
        size_t n = c->base ? strlen(c->base) : 0;
        while (n > 0 && c->base[n - 1] == '/')
            c->base[--n] = '\0';
    } else {
        snprintf(err, errlen,
                 "--slurm %s: expected unix:/path/to/slurmrestd.sock or http://host:port", url);
        free(c);
        return NULL;
    }
    if (token_file && !(c->token_file = strdup(token_file))) {
        slurm_client_free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->curl = curl_easy_init();
    if (c->base == NULL || c->curl == NULL || (strncmp(url, "unix:", 5) == 0 && !c->socket_path)) {
        slurm_client_free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return c;
}

void slurm_client_free(struct slurm_client *c)
{
    if (c == NULL)
        return;
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->socket_path);
    free(c->base);
    free(c->token_file);
    free(c->token);
    free(c);
}

const char *slurm_client_version(const struct slurm_client *c)
{
    return c->version;
}

/* (Re-)reads the token file when it changed since the last read. 0, or -1 with err. */
static int token_refresh(struct slurm_client *c, char *err, size_t errlen)
{
    if (c->token_file == NULL)
        return 0;
    struct stat st;
    if (stat(c->token_file, &st) != 0) {
        snprintf(err, errlen, "cannot read --slurm-token-file %s", c->token_file);
        return -1;
    }
    if (c->token && st.st_ino == c->token_st.st_ino && st.st_size == c->token_st.st_size &&
        st.st_mtim.tv_sec == c->token_st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == c->token_st.st_mtim.tv_nsec)
        return 0;
    FILE *f = fopen(c->token_file, "r");
    char line[SLURM_TOKEN_MAX];
    if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
        if (f)
            fclose(f);
        snprintf(err, errlen, "cannot read --slurm-token-file %s", c->token_file);
        return -1;
    }
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    const char *tok = strncmp(line, "SLURM_JWT=", 10) == 0 ? line + 10 : line;
    char *copy = strdup(tok);
    if (copy == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    free(c->token);
    c->token = copy;
    c->token_st = st;
    if (slurm_jwt_claims(c->token, c->user, sizeof(c->user), &c->token_exp) != 0)
        c->user[0] = '\0';
    return 0;
}

/* -1 with err when the token's own expiry has passed: Slurm would refuse it, and its answer
 * would not say why (slurmctld's refusal reaches slurmrestd as "Unspecified error"). */
static int token_expired(const struct slurm_client *c, char *err, size_t errlen)
{
    time_t now = time(NULL);
    if (c->token == NULL || c->token_exp <= 0 || c->token_exp > (int64_t)now)
        return 0;
    time_t exp = (time_t)c->token_exp;
    struct tm tm;
    char when[32] = "";
    if (gmtime_r(&exp, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(err, errlen, "the token of --slurm-token-file %s expired at %s", c->token_file, when);
    return -1;
}

/* An error of slurmrestd's (HTTP 5xx) while a token is in use: slurmctld down and slurmctld
 * refusing the token look the same in Slurm 22.05's answers, so err names both. */
static int token_hint(const struct slurm_client *c, int rc, long http, char *err, size_t errlen)
{
    size_t used = strlen(err);
    if (rc == SLURM_UNAVAILABLE && c->token && http >= 500 && used + 1 < errlen)
        snprintf(err + used, errlen - used,
                 " (slurmctld down, or refusing the token of --slurm-token-file for user %s)",
                 c->user[0] ? c->user : "?");
    return rc;
}

/* One request: method, path below /slurm/<version>/, optional JSON body. Fills *http and *out
 * (malloc'd, may be NULL). Returns 0, or -1 with err when slurmrestd could not be reached. */
static int request(struct slurm_client *c, const char *method, const char *version,
                   const char *path, const char *body, long *http, char **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    *http = 0;
    if (token_refresh(c, err, errlen) != 0 || token_expired(c, err, errlen) != 0)
        return -1;
    char url[1024];
    snprintf(url, sizeof(url), "%s/slurm/%s/%s", c->base, version, path);
    CURL *h = c->curl;
    curl_easy_reset(h);
    struct buf b = {NULL, 0};
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    char line[SLURM_TOKEN_MAX + 64];
    if (c->token) {
        snprintf(line, sizeof(line), "X-SLURM-USER-TOKEN: %s", c->token);
        hdr = curl_slist_append(hdr, line);
        if (c->user[0]) {
            snprintf(line, sizeof(line), "X-SLURM-USER-NAME: %s", c->user);
            hdr = curl_slist_append(hdr, line);
        }
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (c->socket_path)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket_path);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, SLURM_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK) {
        free(b.data);
        snprintf(err, errlen, "slurmrestd unreachable at %s%s: %s",
                 c->socket_path ? "unix:" : c->base, c->socket_path ? c->socket_path : "",
                 curl_easy_strerror(rc));
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, http);
    *out = b.data;
    return 0;
}

/* Finds the newest API version slurmrestd answers (a ping). SLURM_OK or SLURM_UNAVAILABLE. */
static int negotiate(struct slurm_client *c, char *err, size_t errlen)
{
    if (c->version[0])
        return SLURM_OK;
    static const char *const versions[] = {"v0.0.38", "v0.0.37", "v0.0.36"};
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        long http;
        char *body;
        if (request(c, "GET", versions[i], "ping", NULL, &http, &body, err, errlen) != 0)
            return SLURM_UNAVAILABLE;
        if (http == 200) {
            free(body);
            snprintf(c->version, sizeof(c->version), "%s", versions[i]);
            return SLURM_OK;
        }
        if (http != 404) {
            slurm_answer_error(http, body, err, errlen);
            free(body);
            return token_hint(c, SLURM_UNAVAILABLE, http, err, errlen);
        }
        free(body);
    }
    snprintf(err, errlen, "slurmrestd answers none of the API versions %s", SLURM_API_VERSIONS);
    return SLURM_UNAVAILABLE;
}

/* A call after the version is known; a 404 forgets the version (slurmrestd was replaced). */
static int call(struct slurm_client *c, const char *method, const char *path, const char *body,
                long *http, char **out, char *err, size_t errlen)
{
    *out = NULL;
    *http = 0;
    int rc = negotiate(c, err, errlen);
    if (rc != SLURM_OK)
        return rc;
    if (request(c, method, c->version, path, body, http, out, err, errlen) != 0)
        return SLURM_UNAVAILABLE;
    if (*http == 404 && (*out == NULL || strstr(*out, "\"errors\"") == NULL))
        c->version[0] = '\0';
    return SLURM_OK;
}

int slurm_client_submit(struct slurm_client *c, const struct slurm_alloc *a, int64_t *job_id,
                        char *err, size_t errlen)
{
    *job_id = -1;
    char *req = slurm_submit_body(a);
    if (req == NULL) {
        snprintf(err, errlen, "out of memory");
        return SLURM_UNAVAILABLE;
    }
    long http;
    char *out;
    int rc = call(c, "POST", "job/submit", req, &http, &out, err, errlen);
    free(req);
    if (rc == SLURM_OK)
        rc = token_hint(c, slurm_parse_submit(http, out, job_id, err, errlen), http, err, errlen);
    free(out);
    return rc;
}

int slurm_client_job(struct slurm_client *c, int64_t job_id, struct slurm_job_info *info, char *err,
                     size_t errlen)
{
    memset(info, 0, sizeof(*info));
    char path[64];
    snprintf(path, sizeof(path), "job/%lld", (long long)job_id);
    long http;
    char *out;
    int rc = call(c, "GET", path, NULL, &http, &out, err, errlen);
    if (rc == SLURM_OK)
        rc =
            token_hint(c, slurm_parse_job(http, out, job_id, info, err, errlen), http, err, errlen);
    free(out);
    return rc;
}

int slurm_client_cancel(struct slurm_client *c, int64_t job_id, char *err, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof(path), "job/%lld", (long long)job_id);
    long http;
    char *out;
    int rc = call(c, "DELETE", path, NULL, &http, &out, err, errlen);
    if (rc == SLURM_OK && http != 200) {
        struct slurm_job_info info;
        char why[256];
        /* Gone already (ended past MinJobAge), or already finished: nothing to cancel. */
        if (http == 401 || http == 403) {
            slurm_answer_error(http, out, err, errlen);
            rc = SLURM_UNAVAILABLE;
        } else if (slurm_parse_job(http, out, job_id, &info, why, sizeof(why)) == SLURM_REJECTED &&
                   strstr(why, "no longer knows")) {
            rc = SLURM_OK;
        } else if (http >= 500) { /* slurmctld's fault, or the token's: the next look retries */
            slurm_answer_error(http, out, err, errlen);
            rc = token_hint(c, SLURM_UNAVAILABLE, http, err, errlen);
        } else {
            slurm_answer_error(http, out, err, errlen);
            rc = SLURM_REJECTED;
        }
    }
    free(out);
    return rc;
}
