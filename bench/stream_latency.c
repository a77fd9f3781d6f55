/* Report → subscriber latency of the live stream (docs/bench-streams.md).
 *
 * One thread ingests report rows into PostgreSQL at a fixed rate with ty_stream_append_batch (one
 * statement, one commit per batch, as batched ingestion does); each row's body carries the
 * wall-clock time it was handed to PostgreSQL (t_ns) and its batch number; the ingester also
 * notes when each batch's statement returned (committed). Another thread holds `subscribers`
 * websocket connections to /stream, spread over the jobs, and for every event received records
 * now - t_ns. Same machine, same clock. Printed: that latency (report -> subscriber, commit
 * included), the commit time of the batches (commit_*), and each event's latency after its
 * batch's commit returned (after_commit_*: the stream's own part; it can be slightly negative, as
 * the NOTIFY may beat the commit's reply). It also checks that every subscriber's seqs are
 * contiguous and counts subscribers closed as too slow. --batch: subscribers ask for batched
 * delivery ("batch": true, several events per frame).
 *
 * Run through bench/stream_latency.py, which starts PostgreSQL and the server and makes the jobs:
 *   stream_latency --conninfo C --ws HOST:PORT --token T --jobs 1,2,3 [--subscribers 100]
 *                  [--points 100000] [--metrics 20] [--batch-ms 10] [--seconds 30] [--warmup 5]
 *                  [--batch]
 * Prints one line of key=value figures. Not a test. */
#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct opts {
    const char *conninfo, *ws, *token;
    long long jobs[256];
    int njobs;
    int subscribers;
    double points, seconds, warmup;
    int metrics, batch_ms;
    bool batch;
};

/* Per ingest batch (by number): microseconds from handing it to PostgreSQL to the commit's
 * reply; -1 when not sent. Written by the ingester, read after it ended. */
static int32_t *commit_us;
static size_t ncommit;

static atomic_bool stop_all;
static atomic_bool measuring;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "stream_latency: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* ------------------------------------------------------------------ ingestion */

struct ingest_result {
    long long rows, batches, late_batches;
    double seconds;
};

static void *ingest(void *arg)
{
    const struct opts *o = arg;
    static struct ingest_result res;
    PGconn *pg = PQconnectdb(o->conninfo);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "stream_latency: %s", PQerrorMessage(pg));
        exit(1);
    }
    double rows_per_s = o->points / o->metrics;
    double per_batch = rows_per_s * o->batch_ms / 1000.0;
    size_t cap = (size_t)(per_batch + 2) * (size_t)(64 + 24 * o->metrics) + 64;
    char *buf = malloc(cap);
    long long k = 0;
    double owed = 0;
    int64_t start = now_ns(), period = (int64_t)o->batch_ms * 1000000LL;
    int64_t end = start + (int64_t)((o->warmup + o->seconds) * 1e9);
    for (long long b = 0; !atomic_load(&stop_all); b++) {
        int64_t due = start + b * period;
        int64_t t = now_ns();
        if (t >= end)
            break;
        if (due > t) {
            struct timespec d = {(time_t)((due - t) / 1000000000LL),
                                 (long)((due - t) % 1000000000LL)};
            nanosleep(&d, NULL);
        } else if (t - due > period) {
            res.late_batches++;
        }
        owed += per_batch;
        int n = (int)owed;
        owed -= n;
        if (n == 0)
            continue;
        int64_t t_ns = now_ns();
        size_t len = 0;
        buf[len++] = '[';
        for (int i = 0; i < n; i++, k++) {
            long long job = o->jobs[k % o->njobs];
            len += (size_t)snprintf(buf + len, cap - len,
                                    "%s{\"job_id\":%lld,\"kind\":\"report\",\"attempt\":1,"
                                    "\"rank\":%lld,\"body\":{\"rank\":%lld,\"attempt\":1,"
                                    "\"k\":%lld,\"step\":%lld,\"b\":%lld,\"t_ns\":%lld,"
                                    "\"metrics\":{",
                                    i ? "," : "", job, k % 8, k % 8, k, k, b, (long long)t_ns);
            for (int m = 0; m < o->metrics; m++)
                len += (size_t)snprintf(buf + len, cap - len, "%s\"m%d\":%d.%03d", m ? "," : "", m,
                                        (int)(k % 1000), m);
            len += (size_t)snprintf(buf + len, cap - len, "}}}");
        }
        buf[len++] = ']';
        buf[len] = '\0';
        const char *params[] = {buf};
        /* Written as another server of an HA group would, with a NOTIFY (the server wakes its
         * stream thread itself only for its own commits). */
        PGresult *r = PQexecParams(pg,
                                   "SELECT ty_stream_append_batch($1::jsonb), "
                                   "pg_notify('ty_stream', '')",
                                   1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            fprintf(stderr, "stream_latency: ingest: %s", PQerrorMessage(pg));
            exit(1);
        }
        PQclear(r);
        if ((size_t)b < ncommit)
            commit_us[b] = (int32_t)((now_ns() - t_ns) / 1000);
        if (t_ns - start >= (int64_t)(o->warmup * 1e9)) {
            atomic_store(&measuring, true);
            res.rows += n;
            res.batches++;
        }
    }
    res.seconds = (double)(now_ns() - start) / 1e9 - o->warmup;
    free(buf);
    PQfinish(pg);
    return &res;
}

/* ------------------------------------------------------------------ subscribers */

struct sub {
    int fd;
    long long job;
    char *buf;
    size_t len, cap;
    long long last_seq;
    long long events, gaps;
    bool closed, dropped, subscribed;
};

static int connect_ws(const char *hostport)
{
    char host[256];
    snprintf(host, sizeof(host), "%s", hostport);
    char *colon = strrchr(host, ':');
    if (colon == NULL)
        die("--ws HOST:PORT");
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        die("getaddrinfo");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
        die("connect");
    freeaddrinfo(ai);
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "GET /stream HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: trainyard-stream.v1\r\n"
                     "\r\n",
                     hostport);
    if (write(fd, req, (size_t)n) != n)
        die("handshake");
    char reply[2048];
    size_t got = 0;
    while (got < sizeof(reply) - 1) {
        ssize_t r = read(fd, reply + got, 1); /* byte by byte: nothing after the headers */
        if (r <= 0)
            die("handshake reply");
        got += (size_t)r;
        reply[got] = '\0';
        if (got >= 4 && memcmp(reply + got - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    if (strstr(reply, " 101 ") == NULL) {
        fprintf(stderr, "stream_latency: handshake refused: %s\n", reply);
        exit(1);
    }
    return fd;
}

/* Sends a masked (zero mask: the payload is unchanged) text frame. */
static void send_text(int fd, const char *text)
{
    size_t n = strlen(text);
    unsigned char frame[1024];
    size_t h = 0;
    frame[h++] = 0x81;
    if (n < 126) {
        frame[h++] = (unsigned char)(0x80 | n);
    } else {
        frame[h++] = 0x80 | 126;
        frame[h++] = (unsigned char)(n >> 8);
        frame[h++] = (unsigned char)n;
    }
    memset(frame + h, 0, 4);
    h += 4;
    memcpy(frame + h, text, n);
    if (write(fd, frame, h + n) != (ssize_t)(h + n))
        die("send");
}

/* Reads exactly n bytes. */
static void read_full(int fd, void *buf, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r <= 0)
            die("reading the welcome");
        got += (size_t)r;
    }
}

/* Reads the first frame (short, unmasked) and checks it is the welcome. */
static void read_welcome(int fd)
{
    unsigned char h[2];
    char text[256];
    read_full(fd, h, 2);
    size_t len = h[1] & 0x7f;
    if (len >= sizeof(text) || len >= 126)
        die("an unexpected first message");
    read_full(fd, text, len);
    text[len] = '\0';
    if (strstr(text, "\"welcome\"") == NULL) {
        fprintf(stderr, "stream_latency: auth refused: %s\n", text);
        exit(1);
    }
}

/* One event received: its latency and its batch's number. */
struct sample {
    int32_t us;
    int32_t batch;
};
static struct sample *samples;
static size_t nsamples, samples_cap;

static long long field(const char *p, size_t n, const char *name)
{
    const char *at = memmem(p, n, name, strlen(name));
    if (at == NULL)
        return -1;
    at += strlen(name);
    while (*at == ' ')
        at++;
    return strtoll(at, NULL, 10);
}

/* One event message at p (n bytes). */
static void on_event(struct sub *s, const char *p, size_t n, int64_t t)
{
    long long seq = field(p, n, "\"seq\":");
    if (s->last_seq >= 0 && seq != s->last_seq + 1)
        s->gaps++;
    s->last_seq = seq;
    long long t_ns = field(p, n, "\"t_ns\":");
    if (t_ns > 0 && atomic_load(&measuring)) {
        s->events++;
        if (nsamples < samples_cap)
            samples[nsamples++] =
                (struct sample){(int32_t)((t - t_ns) / 1000), (int32_t)field(p, n, "\"b\":")};
    }
}

static void on_message(struct sub *s, const char *p, size_t n, int64_t t)
{
    static const char ev[] = "{\"type\":\"event\",";
    if (n > 16 && memcmp(p, ev, strlen(ev)) == 0) {
        on_event(s, p, n, t);
    } else if (n > 16 && memcmp(p, "{\"type\":\"events\"", 16) == 0) {
        /* {"type":"events","events":[e1,e2,...]}: each event runs to the next one's start (the
         * bench's bodies never contain that text). */
        const char *end = p + n, *at = memmem(p + 16, n - 16, ev, strlen(ev));
        while (at) {
            const char *next = memmem(at + 1, (size_t)(end - at - 1), ev, strlen(ev));
            on_event(s, at, (size_t)((next ? next : end) - at), t);
            at = next;
        }
    } else if (strstr(p, "\"closing\"")) {
        s->dropped = true;
    } else if (strstr(p, "\"subscribed\"")) {
        s->subscribed = true;
    } else if (strstr(p, "\"error\"")) {
        fprintf(stderr, "stream_latency: %.*s\n", (int)n, p);
        exit(1);
    }
}

/* Parses the complete frames in s->buf. */
static void parse(struct sub *s, int64_t t)
{
    size_t off = 0;
    for (;;) {
        unsigned char *b = (unsigned char *)s->buf + off;
        size_t avail = s->len - off;
        if (avail < 2)
            break;
        size_t plen = b[1] & 0x7f, h = 2;
        if (plen == 126) {
            if (avail < 4)
                break;
            plen = (size_t)b[2] << 8 | b[3];
            h = 4;
        } else if (plen == 127) {
            if (avail < 10)
                break;
            plen = 0;
            for (int i = 0; i < 8; i++)
                plen = plen << 8 | b[2 + i];
            h = 10;
        }
        if (avail < h + plen)
            break;
        int op = b[0] & 0x0f;
        if (op == 1) {
            char save = s->buf[off + h + plen];
            s->buf[off + h + plen] = '\0';
            on_message(s, (char *)b + h, plen, t);
            s->buf[off + h + plen] = save;
        } else if (op == 8) {
            s->closed = true;
        }
        off += h + plen;
    }
    memmove(s->buf, s->buf + off, s->len - off);
    s->len -= off;
}

static void usage(void)
{
    fprintf(stderr, "usage: stream_latency --conninfo C --ws HOST:PORT --token T --jobs 1,2 "
                    "[--subscribers N] [--points P] [--metrics M] [--batch-ms B] "
                    "[--seconds S] [--warmup W]\n");
    exit(2);
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and prints its percentiles (milliseconds) as NAME_p50_ms=... */
static void print_pcts(const char *name, int32_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_i32);
    static const double ps[] = {0.5, 0.9, 0.99, 0.999};
    static const char *const names[] = {"p50", "p90", "p99", "p999"};
    for (int i = 0; i < 4; i++)
        printf(" %s%s_ms=%.2f", name, names[i],
               n ? v[(size_t)((double)(n - 1) * ps[i])] / 1000.0 : -1.0);
    printf(" %smax_ms=%.2f", name, n ? v[n - 1] / 1000.0 : -1.0);
}

int main(int argc, char **argv)
{
    struct opts o = {.subscribers = 100,
                     .points = 100000,
                     .seconds = 30,
                     .warmup = 5,
                     .metrics = 20,
                     .batch_ms = 10};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc && strcmp(argv[i], "--batch") != 0)
            usage();
        const char *k = argv[i], *v = argv[i + 1];
        if (strcmp(k, "--conninfo") == 0)
            o.conninfo = v;
        else if (strcmp(k, "--ws") == 0)
            o.ws = v;
        else if (strcmp(k, "--token") == 0)
            o.token = v;
        else if (strcmp(k, "--subscribers") == 0)
            o.subscribers = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--points") == 0)
            o.points = strtod(v, NULL);
        else if (strcmp(k, "--metrics") == 0)
            o.metrics = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--batch-ms") == 0)
            o.batch_ms = (int)strtol(v, NULL, 10);
        else if (strcmp(k, "--seconds") == 0)
            o.seconds = strtod(v, NULL);
        else if (strcmp(k, "--warmup") == 0)
            o.warmup = strtod(v, NULL);
        else if (strcmp(k, "--batch") == 0) {
            o.batch = true;
            i--;
        } else if (strcmp(k, "--jobs") == 0) {
            char *end = (char *)v;
            while (*end && o.njobs < 256) {
                o.jobs[o.njobs++] = strtoll(end, &end, 10);
                if (*end == ',')
                    end++;
            }
        } else
            usage();
    }
    if (!o.conninfo || !o.ws || !o.token || o.njobs == 0 || o.subscribers < 1 || o.metrics < 1 ||
        o.batch_ms < 1)
        usage();
    samples_cap = (size_t)(o.points / o.metrics * (o.seconds + 5) * o.subscribers / o.njobs) + 1024;
    samples = malloc(samples_cap * sizeof(*samples));
    ncommit = (size_t)((o.warmup + o.seconds) * 1000 / o.batch_ms) + 16;
    commit_us = malloc(ncommit * sizeof(*commit_us));
    if (commit_us == NULL)
        die("setup");
    for (size_t i = 0; i < ncommit; i++)
        commit_us[i] = -1;
    struct sub *subs = calloc((size_t)o.subscribers, sizeof(*subs));
    int ep = epoll_create1(0);
    if (!samples || !subs || ep < 0)
        die("setup");
    for (int i = 0; i < o.subscribers; i++) {
        struct sub *s = &subs[i];
        s->fd = connect_ws(o.ws);
        s->job = o.jobs[i % o.njobs];
        s->cap = 1 << 20;
        s->buf = malloc(s->cap + 1);
        s->last_seq = -1;
        char msg[512];
        snprintf(msg, sizeof(msg), "{\"type\":\"auth\",\"token\":\"%s\"}", o.token);
        send_text(s->fd, msg);
        /* Waits for the welcome: the server limits a peer's unauthenticated connections. */
        read_welcome(s->fd);
        snprintf(msg, sizeof(msg), "{\"type\":\"subscribe\",\"job\":%lld,\"after\":0%s}", s->job,
                 o.batch ? ",\"batch\":true" : "");
        send_text(s->fd, msg);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev) != 0)
            die("epoll_ctl");
    }
    pthread_t ingester;
    if (pthread_create(&ingester, NULL, ingest, &o) != 0)
        die("pthread_create");
    /* Read until the ingester has finished and a second more has passed. */
    void *ires = NULL;
    bool ingest_done = false;
    int64_t quiet_until = 0;
    struct epoll_event evs[128];
    while (!ingest_done || now_ns() < quiet_until) {
        int n = epoll_wait(ep, evs, 128, 100);
        int64_t t = now_ns();
        for (int i = 0; i < n; i++) {
            struct sub *s = evs[i].data.ptr;
            ssize_t r = read(s->fd, s->buf + s->len, s->cap - s->len);
            if (r <= 0) {
                s->closed = true;
                epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
                continue;
            }
            s->len += (size_t)r;
            parse(s, t);
        }
        if (!ingest_done && pthread_tryjoin_np(ingester, &ires) == 0) {
            ingest_done = true;
            quiet_until = now_ns() + 1000000000LL;
        }
    }
    const struct ingest_result *ir = ires;
    long long events = 0, gaps = 0, dropped = 0, closed = 0;
    for (int i = 0; i < o.subscribers; i++) {
        events += subs[i].events;
        gaps += subs[i].gaps;
        dropped += subs[i].dropped;
        closed += subs[i].closed;
    }
    /* Latency (commit included), commit time of the measured batches, latency after commit. */
    int32_t *lat = malloc((nsamples + 1) * sizeof(*lat)),
            *after = malloc((nsamples + 1) * sizeof(*after));
    int32_t *commits = malloc((ncommit + 1) * sizeof(*commits));
    if (!lat || !after || !commits)
        die("results");
    size_t nafter = 0, ncommits = 0;
    for (size_t i = 0; i < nsamples; i++) {
        lat[i] = samples[i].us;
        int32_t b = samples[i].batch;
        if (b >= 0 && (size_t)b < ncommit && commit_us[b] >= 0)
            after[nafter++] = samples[i].us - commit_us[b];
    }
    size_t first = (size_t)(o.warmup * 1000 / o.batch_ms);
    for (size_t b = first; b < ncommit; b++)
        if (commit_us[b] >= 0)
            commits[ncommits++] = commit_us[b];
    printf("points_per_s=%.0f rows_per_s=%.0f batches=%lld late_batches=%lld subscribers=%d "
           "jobs=%d batch=%d events=%lld events_per_s=%.0f gaps=%lld dropped=%lld closed=%lld",
           (double)ir->rows * o.metrics / ir->seconds, (double)ir->rows / ir->seconds, ir->batches,
           ir->late_batches, o.subscribers, o.njobs, o.batch, events, (double)events / ir->seconds,
           gaps, dropped, closed);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf(" client_cpu_s=%.1f", (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                                     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    print_pcts("", lat, nsamples);
    printf("\n");
    print_pcts("commit_", commits, ncommits);
    print_pcts("after_commit_", after, nafter);
    printf("\n");
    free(lat);
    free(after);
    free(commits);
    return 0;
}
