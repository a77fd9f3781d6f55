/* Background upload of checkpoint parts to the server's artifact store (issue 11,
 * docs/artifacts.md). When every local rank of an attempt has made its k-th report, this node's
 * merged directory <data>/checkpoints/<job>/<attempt>/<k> is final: the lws thread queues it here
 * and goes on (report() never waits for an upload). One uploader thread streams it as a tar
 * made on the fly from the directory (tarstream.c: no tar file, each byte read once), asks the
 * server where to resume, sends chunks with their own CRC32C while it keeps the part's SHA-256
 * running, and completes the part with it; on any failure (server down or restarting,
 * connection cut) it retries with a growing delay, resuming at the server's offset (the stream
 * is reproducible; the resumed part's first bytes are re-read once for the hash). The thread
 * is joined on shutdown. The queue is durable: a marker file per part (queue_marker), so an agent
 * killed before a part was stored uploads it when it starts again, from the server's offset; one
 * killed between two local ranks' k-th reports finds their count beside the round's directory.
 * A job with run_config.storage_path is not uploaded: shared_one copies the part to that shared
 * directory instead (shared_store.c) and registers it; its marker holds the path and the owner.
 *
 * Where (issue 23): --api-url when given; else the REST base URLs the server named in
 * `registered` (the server the agent is connected to; an older server naming none: --server's
 * host on port 8080). A try that fails moves to the next of them. A failure is told to the server
 * within the poll interval as an `artifact_store` message naming the URL and the error (the job's
 * event, the node's artifact-store-unreachable condition); the next success clears it.
 */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The uploader thread's nice value (its helper threads inherit it). */
#define UPLOAD_NICE 10

/* send_part's results beside 0 (stored) and -1 (retry). */
#define UPLOAD_BROKEN (-2)
#define UPLOAD_REFUSED (-3)

/* Chunks of 16 MiB, the server's default --max-upload-chunk-bytes: each request has a fixed cost
 * (authentication, a round trip, the server's pipeline filling and draining), measured at about
 * 4 ms, so 8 MiB ones were 17% slower (docs/bench-checkpoints.md); the agent holds two while
 * it uploads. A server that refuses one as too large (413) gets 1 MiB ones. */
#define UPLOAD_CHUNK (16 * 1024 * 1024)
#define UPLOAD_CHUNK_SMALL (1024 * 1024)

/* libcurl's send buffer for a chunk (its default, 64 KiB, means 128 copies and sends per MiB). */
#define UPLOAD_SEND_BUFFER (1024L * 1024L)

struct upload_item {
    struct upload_item *next;
    char *job_id;
    int64_t attempt, k;
    char *storage_path; /* the job's run_config.storage_path: copied there, not uploaded */
    uid_t uid;          /* who the copy belongs to (the job's workers' uid), or AGENT_NO_UID */
    gid_t gid;
};

/* Reports counted per (job, attempt, k) until every local rank made its k-th (kept on disk too
 * for a round with a checkpoint: agent_checkpoint_count_save). */
struct upload_round {
    struct upload_round *next;
    char *job_id;
    int64_t attempt, k;
    int64_t reports;
};

struct agent_uploader {
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct upload_item *head, *tail;
    bool busy; /* guarded by mu: the uploader thread is working on an item taken from the queue */
    struct upload_round *rounds; /* lws thread only */
    /* Guarded by mu: where to upload and fetch, and what to tell the server about it. */
    char **urls; /* --api-url, or the server's api_urls; none: not known yet (wait) */
    size_t n_urls, cur_url;
    bool override;      /* --api-url: the server's URLs are ignored */
    char *fallback;     /* --server's host on port 8080, for a server that names none */
    bool failing;       /* a failure was told and no success since */
    char *last_failure; /* its message */
    char **notes;       /* artifact_store messages for the lws thread to send */
    size_t n_notes;
    char api_url[APROTO_MAX_URL + 1];   /* uploader thread: this try's base URL */
    char err[CURL_ERROR_SIZE + 64];     /* uploader thread: why the last call failed */
    char err_url[APROTO_MAX_URL + 500]; /* ... and the URL it went to */
    char *node_id, *data_dir;
    CURL *curl; /* the uploader thread's handle, reused so that its connection is kept alive */
    size_t chunk_len; /* UPLOAD_CHUNK, or UPLOAD_CHUNK_SMALL once the server refused one (413) */
    char *ca_file;    /* --ca-file, or NULL: the system's CAs */
    bool pinned;      /* --server-fingerprint: pin holds it */
    unsigned char pin[32]; /* SHA-256 of the server certificate's DER */
};

/* OpenSSL's verify callback with a pinned certificate: the chain's own checks are replaced by
 * comparing the server's certificate with the pin (as the websocket connection does, ws.c). */
static int pin_verify(int preverified, X509_STORE_CTX *store)
{
    (void)preverified;
    if (X509_STORE_CTX_get_error_depth(store) > 0)
        return 1;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    const unsigned char *pin = ssl ? SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)) : NULL;
    X509 *cert = X509_STORE_CTX_get_current_cert(store);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    return pin && cert && X509_digest(cert, EVP_sha256(), md, &mdlen) == 1 && mdlen == 32 &&
           memcmp(md, pin, 32) == 0;
}

/* libcurl's hook on a fresh TLS context: installs pin_verify for the pin in `pin`. */
static CURLcode pin_ctx(CURL *h, void *ssl_ctx, void *pin)
{
    (void)h;
    SSL_CTX_set_app_data((SSL_CTX *)ssl_ctx, pin);
    SSL_CTX_set_verify((SSL_CTX *)ssl_ctx, SSL_VERIFY_PEER, pin_verify);
    return CURLE_OK;
}

/* The agent's trust in the server for its REST calls, as for its websocket: --ca-file, or the
 * pinned certificate (then the CA and host name checks give way to the pin). */
static void tls_trust(CURL *h, struct agent_uploader *u)
{
    if (u->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, u->ca_file);
    if (u->pinned) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, pin_ctx);
        curl_easy_setopt(h, CURLOPT_SSL_CTX_DATA, (void *)u->pin);
    }
}

/* The headers that make a request this node's: its name and, once it has one, its credential
 * (read from the data directory at each call: the server may have issued a new one). */
static struct curl_slist *node_headers(const struct agent_uploader *u)
{
    char hdr[300];
    snprintf(hdr, sizeof(hdr), "X-Trainyard-Node: %s", u->node_id);
    struct curl_slist *hs = curl_slist_append(NULL, hdr);
    char *cred = agent__credential_load(u->data_dir);
    if (cred) {
        snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", cred);
        hs = curl_slist_append(hs, hdr);
        free(cred);
    }
    return hs;
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* The base URL to use now into out; false when none is known yet (not registered). */
static bool current_url(struct agent_uploader *u, char *out, size_t n)
{
    pthread_mutex_lock(&u->mu);
    bool have = u->n_urls > 0;
    if (have)
        snprintf(out, n, "%s", u->urls[u->cur_url % u->n_urls]);
    pthread_mutex_unlock(&u->mu);
    return have;
}

static void notes_push_locked(struct agent_uploader *u, char *text)
{
    char **grown = text ? realloc(u->notes, (u->n_notes + 1) * sizeof(*grown)) : NULL;
    if (grown == NULL) {
        free(text);
        return;
    }
    u->notes = grown;
    u->notes[u->n_notes++] = text;
}

/* A failed try at `url` (a full URL): told to the server as "WHAT URL failed: ERR
 * (retrying)" when it is new (not the failure told last) or for a job (its event); the next try
 * goes to the next base URL. */
static void note_failure(struct agent_uploader *u, const char *what, const char *url,
                         const char *err, const char *job_id, int64_t attempt, bool retrying)
{
    if (u == NULL)
        return;
    char msg[APROTO_MAX_STORE_MESSAGE];
    snprintf(msg, sizeof(msg), "%s %s failed: %s%s", what, url, err, retrying ? " (retrying)" : "");
    pthread_mutex_lock(&u->mu);
    bool news = !u->failing || !u->last_failure || strcmp(u->last_failure, msg) != 0;
    char base[APROTO_MAX_URL + 1] = "";
    if (u->n_urls > 0) {
        snprintf(base, sizeof(base), "%s", u->urls[u->cur_url % u->n_urls]);
        u->cur_url = (u->cur_url + 1) % u->n_urls;
    }
    if (news) {
        TY_WARN("upload", "%s", msg);
        u->failing = true;
        free(u->last_failure);
        u->last_failure = strdup(msg);
        struct aproto_store_status st = {.ok = false,
                                         .url = base,
                                         .message = msg,
                                         .job_id = job_id,
                                         .attempt = job_id ? attempt : -1};
        if (aproto_api_url_valid(base))
            notes_push_locked(u, aproto_msg_artifact_store(&st));
    }
    pthread_mutex_unlock(&u->mu);
}

/* A request that worked: clears the failure told before, if any. */
static void note_success(struct agent_uploader *u, const char *base)
{
    if (u == NULL)
        return;
    pthread_mutex_lock(&u->mu);
    if (u->failing && aproto_api_url_valid(base)) {
        if (u->last_failure)
            TY_INFO("upload", "the server's REST API answers again at %s", base);
        u->failing = false;
        UTIL_FREE(u->last_failure);
        struct aproto_store_status st = {.ok = true, .url = base, .attempt = -1};
        notes_push_locked(u, aproto_msg_artifact_store(&st));
    }
    pthread_mutex_unlock(&u->mu);
}

void agent__uploader_set_urls(struct agent *a, const char *const *urls, size_t n)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL || u->override)
        return;
    const char *const *use = n > 0 ? urls : (const char *const *)&u->fallback;
    size_t count = n > 0 ? n : 1;
    char **copy = calloc(count, sizeof(*copy));
    for (size_t i = 0; copy && i < count; i++)
        if ((copy[i] = strdup(use[i])) == NULL) {
            strv_free(copy, i);
            copy = NULL;
        }
    if (copy == NULL) {
        TY_ERROR("upload", "out of memory keeping the server's REST URLs");
        return;
    }
    pthread_mutex_lock(&u->mu);
    strv_free(u->urls, u->n_urls);
    u->urls = copy;
    u->n_urls = count;
    u->cur_url = 0;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    TY_INFO("upload", "checkpoints go to %s%s%s%s", copy[0], count > 1 ? " (then " : "",
            count > 1 ? copy[1] : "",
            count > 2   ? ", ...)"
            : count > 1 ? ")"
                        : "");
    if (n == 0)
        TY_INFO("upload", "the server names no REST URL: --server's host, port 8080");
}

void agent__uploader_poll(struct agent *a)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL || !a->registered)
        return;
    pthread_mutex_lock(&u->mu);
    char **notes = u->notes;
    size_t n = u->n_notes;
    u->notes = NULL;
    u->n_notes = 0;
    pthread_mutex_unlock(&u->mu);
    for (size_t i = 0; i < n; i++)
        agent__ws_send_ctl(a, notes[i]);
    free(notes);
}

void agent__uploader_fetch_failed(struct agent *a, const char *job_id, int64_t attempt)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL)
        return;
    pthread_mutex_lock(&u->mu);
    char base[APROTO_MAX_URL + 1] = "";
    if (u->n_urls > 0)
        snprintf(base, sizeof(base), "%s", u->urls[u->cur_url % u->n_urls]);
    struct aproto_store_status st = {
        .ok = false, .url = base, .message = u->last_failure, .job_id = job_id, .attempt = attempt};
    if (u->failing && u->last_failure && strncmp(u->last_failure, "fetch of ", 9) == 0 &&
        aproto_api_url_valid(base))
        notes_push_locked(u, aproto_msg_artifact_store(&st));
    pthread_mutex_unlock(&u->mu);
}

void agent__disk_full(struct agent *a, const char *job_id, int64_t attempt, const char *path,
                      const char *what)
{
    TY_ERROR("upload", "job %s attempt %lld: %s: cannot write %s: %s", job_id, (long long)attempt,
             what, path, strerror(ENOSPC));
    struct agent_uploader *u = a->uploader;
    if (u == NULL || job_id == NULL || aproto_job_id_valid(job_id) != 0 || attempt < 0)
        return;
    struct aproto_disk_full d = {.job_id = job_id, .attempt = attempt, .path = path, .what = what};
    pthread_mutex_lock(&u->mu);
    notes_push_locked(u, aproto_msg_disk_full(&d));
    pthread_mutex_unlock(&u->mu);
}

void agent__preempt_notice(struct agent *a, const char *reason)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL)
        return;
    pthread_mutex_lock(&u->mu);
    notes_push_locked(u, aproto_msg_preempt_notice(reason));
    pthread_mutex_unlock(&u->mu);
}

void agent__fetch_noted(struct agent *a, const char *url, const char *err)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL)
        return;
    if (err == NULL) {
        char base[APROTO_MAX_URL + 1];
        if (current_url(u, base, sizeof(base)))
            note_success(u, base);
    } else
        note_failure(u, "fetch of", url, err, NULL, -1, false);
}

CURL *agent__server_request(struct agent *a, const char *url_path, struct curl_slist **hs)
{
    struct agent_uploader *u = a->uploader;
    *hs = NULL;
    char base[APROTO_MAX_URL + 1];
    if (u == NULL || !current_url(u, base, sizeof(base)))
        return NULL;
    CURL *h = curl_easy_init();
    if (h == NULL)
        return NULL;
    char url[APROTO_MAX_URL + 1200];
    snprintf(url, sizeof(url), "%s%s", base, url_path);
    *hs = node_headers(u);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    tls_trust(h, u);
    return h;
}

static void item_free(struct upload_item *it)
{
    if (it == NULL)
        return;
    free(it->job_id);
    free(it->storage_path);
    free(it);
}

/* Sleeps ms unless stopped; true when stopped. */
static bool wait_or_stop(struct agent_uploader *u, int64_t ms)
{
    struct timespec ts = util_clock_in_ms(CLOCK_REALTIME, (long)ms);
    pthread_mutex_lock(&u->mu);
    while (!u->stop && pthread_cond_timedwait(&u->cv, &u->mu, &ts) == 0)
        ;
    bool stop = u->stop;
    pthread_mutex_unlock(&u->mu);
    return stop;
}

/* ---- hashing ---------------------------------------------------------------------------- */

int agent__sha256_file(const char *path, char hex[65], int64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char buf[1 << 16], md[32];
    unsigned mdlen = 0;
    int rc = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 ? 0 : -1;
    *size = 0;
    for (ssize_t r; rc == 0 && (r = read(fd, buf, sizeof(buf))) != 0;) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -1;
        else {
            EVP_DigestUpdate(ctx, buf, (size_t)r);
            *size += r;
        }
    }
    if (rc == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
        rc = -1;
    EVP_MD_CTX_free(ctx);
    close(fd);
    for (unsigned i = 0; rc == 0 && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return rc;
}

/* ---- HTTP ------------------------------------------------------------------------------- */

struct reply {
    char buf[4096];
    size_t len;
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
    struct reply *r = arg;
    size_t len = sz * n, room = sizeof(r->buf) - 1 - r->len;
    memcpy(r->buf + r->len, p, len < room ? len : room);
    r->len += len < room ? len : room;
    r->buf[r->len] = '\0';
    return len;
}

/* Aborts a transfer once the agent is stopping: a request to a server that stopped answering
 * would otherwise hold the agent's exit for up to CURLOPT_TIMEOUT. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct agent_uploader *u = arg;
    pthread_mutex_lock(&u->mu);
    bool stop = u->stop;
    pthread_mutex_unlock(&u->mu);
    return stop ? 1 : 0;
}

/* One request; *offset and state from the {"state","offset"} reply. Returns the HTTP status, or
 * -1 when the server could not be reached (or the agent is stopping). */
static long call(struct agent_uploader *u, const char *method, const char *url, const void *body,
                 size_t len, const char *ctype, const char *chunk_crc, int64_t *offset,
                 char state[16])
{
    if (u->curl == NULL)
        u->curl = curl_easy_init();
    else
        curl_easy_reset(u->curl);
    CURL *h = u->curl;
    if (h == NULL)
        return -1;
    char hdr_crc[100], hdr_ct[100];
    struct curl_slist *hs = node_headers(u);
    if (chunk_crc) {
        snprintf(hdr_crc, sizeof(hdr_crc), "X-Chunk-CRC32C: %s", chunk_crc);
        hs = curl_slist_append(hs, hdr_crc);
    }
    if (ctype) {
        snprintf(hdr_ct, sizeof(hdr_ct), "Content-Type: %s", ctype);
        hs = curl_slist_append(hs, hdr_ct);
    }
    hs = curl_slist_append(hs, "Expect:");
    struct reply r = {.len = 0};
    r.buf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, u);
    tls_trust(h, u);
    if (body) {
        curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, UPLOAD_SEND_BUFFER);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    long status = -1;
    char ebuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    if (status != 200 && status != 403 && status != 404) {
        snprintf(u->err_url, sizeof(u->err_url), "%s", url);
        if (cc != CURLE_OK)
            snprintf(u->err, sizeof(u->err), "%s", ebuf[0] ? ebuf : curl_easy_strerror(cc));
        else
            snprintf(u->err, sizeof(u->err), "HTTP %ld", status);
    }
    curl_slist_free_all(hs);
    json_t *j = status == 200 ? json_loads(r.buf, 0, NULL) : NULL;
    if (j) {
        *offset = json_integer_value(json_object_get(j, "offset"));
        snprintf(state, 16, "%s", json_string_value(json_object_get(j, "state")) ?: "");
        json_decref(j);
    }
    if (status != 200 && status > 0)
        TY_WARN("upload", "%s %s: HTTP %ld %.300s", method, url, status, r.buf);
    return status;
}

/* Brings ctx to the first `upto` bytes of the stream (from 0: a resumed upload's one re-read),
 * through buf (cap bytes). 0, or -1 when the directory cannot be read. */
static int hash_prefix(struct agent_tar *t, EVP_MD_CTX *ctx, char *buf, size_t cap, int64_t upto)
{
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        return -1;
    for (int64_t off = 0; off < upto;) {
        size_t want = upto - off < (int64_t)cap ? (size_t)(upto - off) : cap;
        ssize_t n = agent__tar_read(t, off, buf, want);
        if (n <= 0)
            return -1;
        EVP_DigestUpdate(ctx, buf, (size_t)n);
        off += n;
    }
    return 0;
}

/* One chunk of the stream, made ready (read, hashed) while the previous one is being sent. */
struct chunk {
    struct agent_tar *t;
    EVP_MD_CTX *part; /* the part's running SHA-256: this chunk is added to it */
    char *buf;
    size_t cap;
    int64_t off;
    ssize_t n;   /* bytes read, -1 on a failure */
    char crc[9]; /* its CRC32C, the X-Chunk-CRC32C header */
};

static void *chunk_make(void *arg)
{
    struct chunk *c = arg;
    c->n = agent__tar_read(c->t, c->off, c->buf, c->cap);
    if (c->n > 0) {
        snprintf(c->crc, sizeof(c->crc), "%08x", util_crc32c(0, c->buf, (size_t)c->n));
        EVP_DigestUpdate(c->part, c->buf, (size_t)c->n);
    }
    return NULL;
}

/* Streams part `t` (the round's directory as a tar) from the server's offset to completion:
 * each chunk read once from the files, checksummed (its own CRC32C and the part's running
 * SHA-256) by a helper thread while the previous chunk is on the wire, and PUT. 0 done; -1 retry
 * later (a failed chunk or a moved offset: the next try starts from the server's offset again);
 * UPLOAD_BROKEN: a file of the directory is missing or changed (agent__tar_error says which);
 * UPLOAD_REFUSED: the server refuses this node the part (403/404: the job is gone). */
static int send_part(struct agent_uploader *u, const struct upload_item *it, struct agent_tar *t)
{
    char base[APROTO_MAX_URL + 400], url[APROTO_MAX_URL + 500];
    snprintf(base, sizeof(base), "%s/api/v1/agent/checkpoints/%s/%lld/%lld/part", u->api_url,
             it->job_id, (long long)it->attempt, (long long)it->k);
    int64_t off = 0, size = agent__tar_size(t);
    char state[16] = "";
    long got = call(u, "GET", base, NULL, 0, NULL, NULL, &off, state);
    if (got == 403 || got == 404)
        return UPLOAD_REFUSED;
    if (got != 200)
        return -1;
    if (strcmp(state, "complete") == 0 || strcmp(state, "deleted") == 0)
        return 0;
    if (off > size)
        off = size; /* not this stream's bytes: completing fails, the server discards them */
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    struct chunk c[2] = {{.t = t, .part = ctx, .cap = u->chunk_len},
                         {.t = t, .part = ctx, .cap = u->chunk_len}};
    c[0].buf = malloc(u->chunk_len);
    c[1].buf = malloc(u->chunk_len);
    int rc = ctx && c[0].buf && c[1].buf ? 0 : -1;
    if (rc == 0)
        rc = hash_prefix(t, ctx, c[0].buf, u->chunk_len, off);
    int cur = 0;
    c[cur].off = off;
    if (rc == 0 && off < size)
        chunk_make(&c[cur]);
    while (rc == 0 && off < size) {
        struct chunk *now = &c[cur], *next = &c[1 - cur];
        if (now->n <= 0) {
            rc = -1;
            break;
        }
        pthread_t helper;
        next->off = off + now->n;
        bool helping = next->off < size && pthread_create(&helper, NULL, chunk_make, next) == 0;
        snprintf(url, sizeof(url), "%s?offset=%lld", base, (long long)off);
        int64_t acked = -1;
        long st = call(u, "PUT", url, now->buf, (size_t)now->n, "application/octet-stream",
                       now->crc, &acked, state);
        if (helping)
            pthread_join(helper, NULL);
        if (st == 413 && u->chunk_len > UPLOAD_CHUNK_SMALL)
            u->chunk_len = UPLOAD_CHUNK_SMALL; /* the next try uses small chunks */
        if (st != 200 || (strcmp(state, "uploading") == 0 && acked != off + now->n)) {
            rc = -1;
            break;
        }
        if (strcmp(state, "uploading") != 0)
            break;
        if (next->off < size && !helping)
            chunk_make(next);
        off = acked;
        cur = 1 - cur;
    }
    unsigned char md[32];
    unsigned mdlen = 0;
    char sha[65] = "";
    if (rc == 0 && strcmp(state, "uploading") == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1)
        for (unsigned i = 0; i < 32; i++)
            snprintf(sha + 2 * i, 3, "%02x", md[i]);
    EVP_MD_CTX_free(ctx);
    free(c[0].buf);
    free(c[1].buf);
    if (rc != 0 && agent__tar_error(t)[0]) {
        TY_WARN("upload", "checkpoint %s/%lld/%lld: %s", it->job_id, (long long)it->attempt,
                (long long)it->k, agent__tar_error(t));
        return UPLOAD_BROKEN;
    }
    if (rc != 0 || strcmp(state, "uploading") != 0)
        return rc;
    if (sha[0] == '\0')
        return -1;
    char body[200];
    snprintf(body, sizeof(body), "{\"sha256\":\"%s\",\"file_count\":%lld}", sha,
             (long long)agent__tar_files(t));
    snprintf(url, sizeof(url), "%s/complete", base);
    long st = call(u, "POST", url, body, strlen(body), "application/json", NULL, &off, state);
    return st == 200 ? 0 : -1;
}

/* Copies one part to the job's storage path and registers it there (shared_store.c), retrying
 * until done. True when done, false when stopped. */
static bool shared_one(struct agent_uploader *u, const struct upload_item *it, const char *dir)
{
    char dest[4096], url[APROTO_MAX_URL + 400], sha[65];
    snprintf(dest, sizeof(dest), "%s%sjob-%s/attempt-%lld/checkpoint-%lld/node-%s",
             it->storage_path, it->storage_path[strlen(it->storage_path) - 1] == '/' ? "" : "/",
             it->job_id, (long long)it->attempt, (long long)it->k, u->node_id);
    int64_t delay = 200, files = 0, off = 0;
    for (;;) {
        char body[200], state[16] = "";
        long st = 0;
        if (!current_url(u, u->api_url, sizeof(u->api_url))) {
            if (wait_or_stop(u, 200))
                return false;
            continue;
        }
        snprintf(url, sizeof(url), "%s/api/v1/agent/checkpoints/%s/%lld/%lld/shared", u->api_url,
                 it->job_id, (long long)it->attempt, (long long)it->k);
        if (agent__shared_put(dir, dest, it->uid, it->gid, sha, &files) == 0) {
            snprintf(body, sizeof(body), "{\"sha256\":\"%s\",\"file_count\":%lld}", sha,
                     (long long)files);
            st = call(u, "POST", url, body, strlen(body), "application/json", NULL, &off, state);
            if (st == 200) {
                note_success(u, u->api_url);
                TY_INFO("upload", "checkpoint %s/%lld/%lld stored in %s (%lld bytes)", it->job_id,
                        (long long)it->attempt, (long long)it->k, dest, (long long)off);
                return true;
            }
            TY_WARN("upload", "the server did not register %s (HTTP %ld)", dest, st);
            char what[100];
            snprintf(what, sizeof(what), "checkpoint %lld registration at", (long long)it->k);
            note_failure(u, what, u->err_url, u->err, it->job_id, it->attempt, true);
        }
        if (wait_or_stop(u, delay))
            return false;
        delay = delay * 2 > 10000 ? 10000 : delay * 2;
    }
}

/* Tells the server (POST .../part/failed) why this node's part cannot be uploaded, so that the
 * job's events say so. Best effort. */
static void report_broken(struct agent_uploader *u, const struct upload_item *it, const char *why)
{
    char url[APROTO_MAX_URL + 400];
    snprintf(url, sizeof(url), "%s/api/v1/agent/checkpoints/%s/%lld/%lld/part/failed", u->api_url,
             it->job_id, (long long)it->attempt, (long long)it->k);
    json_t *j = json_pack("{s:s}", "reason", why);
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    int64_t off = 0;
    char state[16];
    if (body)
        call(u, "POST", url, body, strlen(body), "application/json", NULL, &off, state);
    free(body);
}

/* Uploads one part, streamed from its directory, retrying with a growing delay until it is
 * stored. A part that cannot be (its directory gone or broken, the server refusing it) is
 * given up, the server told why. True when finished either way, false when stopped. */
static bool upload_one(struct agent_uploader *u, const struct upload_item *it)
{
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/checkpoints/%s/%lld/%lld", u->data_dir, it->job_id,
             (long long)it->attempt, (long long)it->k);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return true; /* no checkpoint in this round on this node, or deleted since */
    if (it->storage_path)
        return shared_one(u, it, dir);
    int64_t delay = 200, size = 0;
    int rc;
    for (;;) {
        if (!current_url(u, u->api_url, sizeof(u->api_url))) { /* not registered yet */
            if (wait_or_stop(u, 200))
                return false;
            continue;
        }
        u->err[0] = '\0';
        /* Laid out afresh on each try: the stream is a function of the directory. */
        struct agent_tar *t = agent__tar_open(dir);
        if (t == NULL) {
            TY_WARN("upload", "cannot read checkpoint directory %s", dir);
            rc = stat(dir, &sb) != 0 ? UPLOAD_REFUSED : -1;
        } else {
            rc = send_part(u, it, t);
            size = agent__tar_size(t);
            if (rc == UPLOAD_BROKEN)
                report_broken(u, it, agent__tar_error(t));
        }
        agent__tar_free(t);
        if (rc != -1)
            break;
        if (u->err[0]) {
            char what[100];
            snprintf(what, sizeof(what), "checkpoint %lld upload to", (long long)it->k);
            note_failure(u, what, u->err_url, u->err, it->job_id, it->attempt, true);
        }
        if (wait_or_stop(u, delay))
            return false;
        delay = delay * 2 > 10000 ? 10000 : delay * 2;
    }
    if (rc == 0)
        note_success(u, u->api_url);
    if (rc == 0)
        TY_INFO("upload", "checkpoint %s/%lld/%lld stored on the server (%lld bytes)", it->job_id,
                (long long)it->attempt, (long long)it->k, (long long)size);
    else
        TY_WARN("upload", "checkpoint %s/%lld/%lld given up: %s", it->job_id,
                (long long)it->attempt, (long long)it->k,
                rc == UPLOAD_BROKEN ? "its directory lost a file" : "the server refuses it");
    return true;
}

/* <data>/uploads/<job>-<attempt>-<k>.queued: the durable queue. A part's marker exists from the
 * round being final (note_report) until it is stored or given up, so a restarted agent finds the
 * parts its predecessor left unsent (queue_restore). */
static void queue_marker(const struct agent_uploader *u, const char *job_id, int64_t attempt,
                         int64_t k, char *out, size_t n)
{
    snprintf(out, n, "%s/uploads/%s-%lld-%lld.queued", u->data_dir, job_id, (long long)attempt,
             (long long)k);
}

/* Creates a part's marker. For a job with a storage path it holds "UID GID PATH\n" (the part's
 * owner and destination, which a restarted agent no longer knows); otherwise it is empty. */
static void marker_write(const char *marker, const struct agent_worker *w)
{
    int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        TY_WARN("upload", "cannot create %s: %s", marker, strerror(errno));
        return;
    }
    if (w && w->storage_path) {
        char line[4200];
        int n = snprintf(line, sizeof(line), "%lld %lld %s\n", (long long)(int64_t)w->uid,
                         (long long)(int64_t)w->gid, w->storage_path);
        if (n < 0 || (size_t)n >= sizeof(line) || write(fd, line, (size_t)n) != n)
            TY_WARN("upload", "cannot write %s", marker);
    }
    close(fd);
}

/* Reads a marker written by marker_write: *storage_path (malloc'd, or NULL for an upload), *uid
 * and *gid. */
static void marker_read(const char *marker, char **storage_path, uid_t *uid, gid_t *gid)
{
    *storage_path = NULL;
    *uid = AGENT_NO_UID;
    *gid = AGENT_NO_UID;
    FILE *fp = fopen(marker, "re");
    if (fp == NULL)
        return;
    long long u = 0, g = 0;
    char path[4100];
    if (fscanf(fp, "%lld %lld %4095[^\n]", &u, &g, path) == 3 && path[0] == '/') {
        *storage_path = strdup(path);
        *uid = (uid_t)u;
        *gid = (gid_t)g;
    }
    fclose(fp);
}

/* Appends (job, attempt, k) to the queue and wakes the uploader. */
static void queue_push(struct agent_uploader *u, const char *job_id, int64_t attempt, int64_t k,
                       const char *storage_path, uid_t uid, gid_t gid)
{
    struct upload_item *it = calloc(1, sizeof(*it));
    if (it == NULL || (it->job_id = strdup(job_id)) == NULL ||
        (storage_path && (it->storage_path = strdup(storage_path)) == NULL)) {
        item_free(it);
        return;
    }
    it->attempt = attempt;
    it->k = k;
    it->uid = uid;
    it->gid = gid;
    pthread_mutex_lock(&u->mu);
    if (u->tail)
        u->tail->next = it;
    else
        u->head = it;
    u->tail = it;
    pthread_cond_signal(&u->cv);
    pthread_mutex_unlock(&u->mu);
}

/* Queues the parts a previous agent on this data directory left unsent (their markers). */
static void queue_restore(struct agent_uploader *u, const char *uploads)
{
    DIR *d = opendir(uploads);
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char name[256];
        snprintf(name, sizeof(name), "%s", e->d_name);
        size_t len = strlen(name);
        if (len < 8 || strcmp(name + len - 7, ".queued") != 0)
            continue;
        name[len - 7] = '\0';
        char *dash_k = strrchr(name, '-');
        if (dash_k == NULL)
            continue;
        *dash_k = '\0';
        char *dash_a = strrchr(name, '-');
        int64_t attempt, k;
        if (dash_a == NULL || dash_a == name ||
            util_parse_int64(dash_a + 1, 1, INT32_MAX, &attempt) != 0 ||
            util_parse_int64(dash_k + 1, 0, INT32_MAX, &k) != 0)
            continue;
        *dash_a = '\0';
        char marker[1300], *storage_path;
        uid_t uid;
        gid_t gid;
        queue_marker(u, name, attempt, k, marker, sizeof(marker));
        marker_read(marker, &storage_path, &uid, &gid);
        TY_INFO("upload",
                "resuming the upload of checkpoint %s/%lld/%lld left by the previous agent", name,
                (long long)attempt, (long long)k);
        queue_push(u, name, attempt, k, storage_path, uid, gid);
        free(storage_path);
    }
    closedir(d);
}

static void *uploader_main(void *arg)
{
    struct agent_uploader *u = arg;
    /* Background work: below the agent's event loop (reports, heartbeats) for the CPU. Threads it
     * starts (the chunk hashing helper) inherit the nice value. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), UPLOAD_NICE) != 0)
        TY_DEBUG("upload", "cannot lower the uploader's priority: %s", strerror(errno));
    for (;;) {
        pthread_mutex_lock(&u->mu);
        while (!u->stop && u->head == NULL)
            pthread_cond_wait(&u->cv, &u->mu);
        struct upload_item *it = u->stop ? NULL : u->head;
        if (it) {
            u->head = it->next;
            if (u->head == NULL)
                u->tail = NULL;
        }
        u->busy = it != NULL;
        pthread_mutex_unlock(&u->mu);
        if (it == NULL)
            return NULL;
        char uploads[1100], marker[1300];
        snprintf(uploads, sizeof(uploads), "%s/uploads", u->data_dir);
        queue_marker(u, it->job_id, it->attempt, it->k, marker, sizeof(marker));
        util_fsync_dir(uploads); /* the lws thread created the marker: make it durable */
        if (upload_one(u, it))
            unlink(marker);
        item_free(it);
        pthread_mutex_lock(&u->mu);
        u->busy = false;
        pthread_mutex_unlock(&u->mu);
    }
}

/* ---- the lws thread's side -------------------------------------------------------------- */

int agent__uploader_start(struct agent *a)
{
    if (a->cfg->api_url && strcmp(a->cfg->api_url, "none") == 0)
        return 0;
    char uploads[1100];
    snprintf(uploads, sizeof(uploads), "%s/uploads", a->data_dir);
    struct agent_uploader *u = calloc(1, sizeof(*u));
    if (u == NULL || util_mkdir_p(uploads, 0700) != 0)
        goto fail;
    char url[600];
    snprintf(url, sizeof(url), "%s://%s:8080", a->cfg->url_tls ? "https" : "http",
             a->cfg->url_host);
    u->fallback = strdup(url);
    if (a->cfg->api_url) {
        u->override = true;
        u->urls = calloc(1, sizeof(*u->urls));
        if (u->urls && (u->urls[0] = strdup(a->cfg->api_url)) != NULL)
            u->n_urls = 1;
    }
    u->failing =
        true; /* unknown: a condition an earlier agent left is cleared by the first success */
    u->chunk_len = UPLOAD_CHUNK;
    u->node_id = strdup(a->node_id);
    u->data_dir = strdup(a->data_dir);
    u->ca_file = a->cfg->ca_file ? strdup(a->cfg->ca_file) : NULL;
    u->pinned = a->cfg->pinned;
    memcpy(u->pin, a->cfg->pin, sizeof(u->pin));
    if (!u->fallback || (u->override && u->n_urls == 0) || !u->node_id || !u->data_dir ||
        (a->cfg->ca_file && !u->ca_file))
        goto fail;
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    queue_restore(u, uploads);
    if (pthread_create(&u->thread, NULL, uploader_main, u) != 0)
        goto fail;
    u->started = true;
    a->uploader = u;
    return 0;
fail:
    if (u) {
        free(u->fallback);
        strv_free(u->urls, u->n_urls);
        free(u->node_id);
        free(u->data_dir);
        free(u->ca_file);
    }
    free(u);
    return -1;
}

void agent__uploader_note_report(struct agent *a, const char *job_id, int64_t attempt, int64_t k)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL)
        return;
    int64_t local = 0;
    const struct agent_worker *any = NULL;
    for (struct agent_worker *w = a->workers; w; w = w->next)
        if (strcmp(w->job_id, job_id) == 0 && w->attempt == attempt) {
            local++;
            any = w;
        }
    struct upload_round **pp = &u->rounds, *r;
    for (r = *pp; r; pp = &r->next, r = r->next)
        if (r->attempt == attempt && r->k == k && strcmp(r->job_id, job_id) == 0)
            break;
    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        if (r == NULL || (r->job_id = strdup(job_id)) == NULL) {
            free(r);
            return;
        }
        r->attempt = attempt;
        r->k = k;
        /* A previous agent may have counted some of the round's reports. */
        r->reports = local > 1 ? agent_checkpoint_count_load(a->data_dir, job_id, attempt, k) : 0;
        *pp = r;
    }
    if (++r->reports < local) {
        agent_checkpoint_count_save(a->data_dir, job_id, attempt, k, r->reports);
        return;
    }
    int64_t counted = r->reports;
    *pp = r->next;
    free(r->job_id);
    free(r);
    char marker[1300];
    queue_marker(u, job_id, attempt, k, marker, sizeof(marker));
    marker_write(marker, any);
    if (counted > 1)
        agent_checkpoint_count_save(a->data_dir, job_id, attempt, k, 0);
    queue_push(u, job_id, attempt, k, any ? any->storage_path : NULL, any ? any->uid : AGENT_NO_UID,
               any ? any->gid : AGENT_NO_UID);
}

size_t agent__uploads_pending(struct agent *a)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL)
        return 0;
    pthread_mutex_lock(&u->mu);
    size_t n = u->busy ? 1 : 0;
    for (const struct upload_item *it = u->head; it; it = it->next)
        n++;
    pthread_mutex_unlock(&u->mu);
    return n;
}

void agent__uploader_stop(struct agent *a)
{
    struct agent_uploader *u = a->uploader;
    if (u == NULL)
        return;
    pthread_mutex_lock(&u->mu);
    u->stop = true;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    if (u->started)
        pthread_join(u->thread, NULL);
    while (u->head) {
        struct upload_item *it = u->head;
        u->head = it->next;
        item_free(it);
    }
    while (u->rounds) {
        struct upload_round *r = u->rounds;
        u->rounds = r->next;
        free(r->job_id);
        free(r);
    }
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    free(u->fallback);
    strv_free(u->urls, u->n_urls);
    strv_free(u->notes, u->n_notes);
    free(u->last_failure);
    free(u->node_id);
    free(u->data_dir);
    free(u->ca_file);
    if (u->curl)
        curl_easy_cleanup(u->curl);
    free(u);
    a->uploader = NULL;
}
