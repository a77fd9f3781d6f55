/*
 * rendezvous.c — connect the native TCP ring through rank 0.
 *
 * 1. Rank 0 listens on MASTER_PORT. Every other rank connects to MASTER_ADDR:MASTER_PORT
 *    (retrying while refused), opens an ephemeral listener on the local address of that
 *    connection (the address from which it reaches rank 0, which also works across network
 *    namespaces), and sends HELLO {rank, world, attempt, job hash, listen address}.
 * 2. Rank 0 collects world-1 distinct HELLOs (stale or foreign ones are dropped), opens its own
 *    ring listener the same way and sends everyone the TABLE of listen addresses.
 * 3. Every rank connects to its successor, sends LINK {rank, world, job hash}, and accepts its
 *    predecessor's LINK on its listener.
 * All messages are fixed-layout big-endian; every wait is bounded by one deadline
 * (the collective timeout). A listener serves every connection at once (rv_gate): each must
 * send its first message within RV_FIRST_MSG_MS, so a silent or slow stranger on MASTER_PORT or
 * a ring port is dropped while the ranks go on meeting.
 *
 * Under Trainyard every message ends with an 8-byte tag: SipHash-2-4 of the message, keyed by
 * the attempt's TRAINYARD_RENDEZVOUS_SECRET (which the server makes per attempt and sends only
 * to the agents running it). A HELLO, TABLE or LINK with a wrong tag is dropped, so a process
 * that does not know the secret can neither take a rank nor pose as rank 0; the secret itself
 * never crosses the network. Without the variable (a local run) the tag is 0 and not checked.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "util.h"

#define RV_MAGIC_HELLO 0x54595248u /* "TYRH" */
#define RV_MAGIC_TABLE 0x54595254u /* "TYRT" */
#define RV_MAGIC_LINK 0x5459524cu  /* "TYRL" */
#define RV_ADDR_LEN 20             /* family u16, port u16, 16 address bytes */
#define RV_TAG_LEN 8
#define RV_HELLO_LEN (4 + 4 + 4 + 4 + 8 + RV_ADDR_LEN + RV_TAG_LEN)
#define RV_LINK_LEN (4 + 4 + 4 + 8 + RV_TAG_LEN)
/* A TABLE of `world` addresses, tag included. */
#define RV_TABLE_LEN(world) (8 + (size_t)(world)*RV_ADDR_LEN + RV_TAG_LEN)

/* Milliseconds a connection to a rendezvous listener has to send its whole first message (a
 * rank sends it at once); at most RV_MAX_PENDING connections wait at a time, and past that the
 * oldest is dropped (a rank dropped so connects again: rv_join). */
#define RV_FIRST_MSG_MS 5000
#define RV_MAX_PENDING 64

/* FNV-1a of the job id and attempt: tells this job's connections from stale ones. */
static uint64_t rv_job_hash(const ty_ctx *c)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = c->job_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ (uint64_t)c->attempt) * 1099511628211ull;
    return h;
}

/* ---- message tags: SipHash-2-4 (Aumasson and Bernstein) keyed by the rendezvous secret ---- */

#define RV_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define RV_SIPROUND                                                                                \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = RV_ROTL(v1, 13);                                                                      \
        v1 ^= v0;                                                                                  \
        v0 = RV_ROTL(v0, 32);                                                                      \
        v2 += v3;                                                                                  \
        v3 = RV_ROTL(v3, 16);                                                                      \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = RV_ROTL(v3, 21);                                                                      \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = RV_ROTL(v1, 17);                                                                      \
        v1 ^= v2;                                                                                  \
        v2 = RV_ROTL(v2, 32);                                                                      \
    } while (0)

static uint64_t rv_siphash(uint64_t k0, uint64_t k1, const unsigned char *m, size_t len)
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
    uint64_t b = (uint64_t)len << 56;
    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) {
        uint64_t w = 0;
        for (int k = 7; k >= 0; k--)
            w = (w << 8) | m[i + (size_t)k];
        v3 ^= w;
        RV_SIPROUND;
        RV_SIPROUND;
        v0 ^= w;
    }
    for (size_t i = full; i < len; i++)
        b |= (uint64_t)m[i] << (8 * (i - full));
    v3 ^= b;
    RV_SIPROUND;
    RV_SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    RV_SIPROUND;
    RV_SIPROUND;
    RV_SIPROUND;
    RV_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* The tag of the len bytes at m (0 without a secret). */
static uint64_t rv_tag(const ty_ctx *c, const unsigned char *m, size_t len)
{
    const char *s = c->rendezvous_secret;
    if (!s)
        return 0;
    size_t n = strlen(s);
    /* The key: two SipHashes of the secret under fixed keys, so any secret text will do. */
    uint64_t k0 = rv_siphash(0x747261696e796172ull, 1, (const unsigned char *)s, n);
    uint64_t k1 = rv_siphash(0x747261696e796172ull, 2, (const unsigned char *)s, n);
    return rv_siphash(k0, k1, m, len);
}

/* Writes the tag of the message's first len - RV_TAG_LEN bytes into its last RV_TAG_LEN. */
static void rv_seal(const ty_ctx *c, unsigned char *m, size_t len)
{
    ty__put_u64(m + len - RV_TAG_LEN, rv_tag(c, m, len - RV_TAG_LEN));
}

/* Whether a received message carries the right tag (always without a secret). */
static bool rv_sealed(const ty_ctx *c, const unsigned char *m, size_t len)
{
    return !c->rendezvous_secret ||
           ty__get_u64(m + len - RV_TAG_LEN) == rv_tag(c, m, len - RV_TAG_LEN);
}

static void rv_put_addr(unsigned char *p, const struct sockaddr_storage *ss)
{
    memset(p, 0, RV_ADDR_LEN);
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        ty__put_u16(p, 4);
        memcpy(p + 2, &a->sin_port, 2);
        memcpy(p + 4, &a->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        ty__put_u16(p, 6);
        memcpy(p + 2, &a->sin6_port, 2);
        memcpy(p + 4, &a->sin6_addr, 16);
    }
}

/* Decode an address; returns its length or 0 if malformed. */
static socklen_t rv_get_addr(const unsigned char *p, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    uint16_t fam = ty__get_u16(p);
    if (fam == 4) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        memcpy(&a->sin_port, p + 2, 2);
        memcpy(&a->sin_addr, p + 4, 4);
        return sizeof *a;
    }
    if (fam == 6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_port, p + 2, 2);
        memcpy(&a->sin6_addr, p + 4, 16);
        return sizeof *a;
    }
    return 0;
}

/* Listen on the local address of connected socket fd (port 0 = ephemeral, or `port`).
 * Returns the listening fd and fills *bound, or a negative code. */
static int rv_listen_like(int fd, int port, struct sockaddr_storage *bound, int backlog)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return TY_EIO;
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
    int l = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l < 0)
        return TY_EIO;
    if (bind(l, (struct sockaddr *)&ss, sl) < 0 || listen(l, backlog) < 0) {
        close(l);
        return TY_EADDR;
    }
    sl = sizeof *bound;
    if (getsockname(l, (struct sockaddr *)bound, &sl) < 0) {
        close(l);
        return TY_EIO;
    }
    return l;
}

/* Resolve MASTER_ADDR:MASTER_PORT (first result). */
static int rv_resolve_master(const ty_ctx *c, struct sockaddr_storage *ss, socklen_t *len)
{
    char port[16];
    snprintf(port, sizeof port, "%d", c->master_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(c->master_addr, port, &hints, &res) != 0 || !res)
        return TY_EADDR;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Connect, retrying while the peer is not listening yet, until deadline: the last try is at the
 * deadline itself, so a peer gets the whole timeout (a retry skipped because the next pause was
 * longer than the time left gave up to a pause early, by up to 0.3 s of a 1 s timeout). */
static int rv_connect_retry(const struct sockaddr *sa, socklen_t len, int64_t deadline)
{
    int delay_ms = 10;
    for (;;) {
        int fd = ty__tcp_connect(sa, len, deadline);
        if (fd >= 0 || fd != TY_EPEER)
            return fd;
        int left = ty__ms_left(deadline);
        if (left <= 0)
            return TY_ETIMEDOUT;
        int pause_ms = left < delay_ms ? left : delay_ms;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)pause_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (delay_ms < 200)
            delay_ms *= 2;
    }
}

/* A listener's connections whose first message (len bytes) has not all arrived yet. */
struct rv_gate {
    int lfd;
    size_t len;
    int n;
    struct {
        int fd;
        size_t got;
        int64_t until; /* dropped then */
        unsigned char buf[RV_HELLO_LEN];
    } p[RV_MAX_PENDING];
};

static void rv_gate_drop(struct rv_gate *g, int i)
{
    close(g->p[i].fd);
    g->p[i] = g->p[--g->n];
}

static void rv_gate_close(struct rv_gate *g)
{
    while (g->n > 0)
        rv_gate_drop(g, g->n - 1);
}

/* Accepts what waits on the listener; at RV_MAX_PENDING the oldest connection goes. */
static int rv_gate_accept(struct rv_gate *g, int64_t deadline)
{
    for (;;) {
        int fd = accept4(g->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EMFILE || errno == ENFILE
                       ? 0
                       : TY_EIO;
        }
        if (g->n == RV_MAX_PENDING) {
            int oldest = 0;
            for (int i = 1; i < g->n; i++)
                if (g->p[i].until < g->p[oldest].until)
                    oldest = i;
            rv_gate_drop(g, oldest);
        }
        int64_t until = util_mono_ms() + RV_FIRST_MSG_MS;
        g->p[g->n].fd = fd;
        g->p[g->n].got = 0;
        g->p[g->n].until = until < deadline ? until : deadline;
        g->n++;
    }
}

/* Waits for the next connection on g's listener whose first g->len bytes have arrived, serving
 * every pending connection at once; those silent past their time, closed or failing are
 * dropped. The connection's fd (the bytes in msg), or a negative code (TY_ETIMEDOUT at the
 * deadline). */
static int rv_gate_next(struct rv_gate *g, int64_t deadline, unsigned char *msg)
{
    for (;;) {
        int64_t now = util_mono_ms();
        int64_t wake = deadline;
        for (int i = g->n - 1; i >= 0; i--) {
            if (g->p[i].until <= now)
                rv_gate_drop(g, i);
            else if (g->p[i].until < wake)
                wake = g->p[i].until;
        }
        if (now >= deadline)
            return TY_ETIMEDOUT;
        struct pollfd pf[RV_MAX_PENDING + 1];
        pf[0] = (struct pollfd){.fd = g->lfd, .events = POLLIN};
        for (int i = 0; i < g->n; i++)
            pf[i + 1] = (struct pollfd){.fd = g->p[i].fd, .events = POLLIN};
        int pn = g->n;
        int r = poll(pf, (nfds_t)pn + 1, (int)(wake - now));
        if (r < 0 && errno != EINTR)
            return TY_EIO;
        if (r <= 0)
            continue;
        /* Backwards, so that a drop (the last entry moves into the hole) skips nothing. */
        for (int i = pn - 1; i >= 0; i--) {
            if (!(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k =
                recv(g->p[i].fd, g->p[i].buf + g->p[i].got, g->len - g->p[i].got, MSG_DONTWAIT);
            if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
                continue;
            if (k <= 0) {
                rv_gate_drop(g, i);
                continue;
            }
            g->p[i].got += (size_t)k;
            if (g->p[i].got == g->len) {
                int fd = g->p[i].fd;
                memcpy(msg, g->p[i].buf, g->len);
                g->p[i] = g->p[--g->n];
                return fd;
            }
        }
        if (pf[0].revents & POLLIN) {
            int rc = rv_gate_accept(g, deadline);
            if (rc < 0)
                return rc;
        }
    }
}

/* Rank 0: collect HELLOs, send the TABLE. On success *listener is rank 0's ring listener. */
static int rv_serve(ty_ctx *c, int64_t deadline, unsigned char *table, int *listener)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = rv_resolve_master(c, &ss, &sl);
    if (rc < 0)
        return rc;
    /* Listen on the wildcard address of MASTER_ADDR's family, at MASTER_PORT. */
    int fam = ss.ss_family;
    memset(&ss, 0, sizeof ss);
    ss.ss_family = (sa_family_t)fam;
    if (fam == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)c->master_port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)c->master_port);
    int lfd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        return TY_EIO;
    int one = 1;
    (void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&ss, sl) < 0 || listen(lfd, c->world + 16) < 0) {
        fprintf(stderr, "trainyard: rank 0 cannot listen on port %d: %s\n", c->master_port,
                strerror(errno));
        close(lfd);
        return TY_EADDR;
    }
    int *fds = malloc((size_t)c->world * sizeof *fds);
    if (!fds) {
        close(lfd);
        return TY_ENOMEM;
    }
    for (int i = 0; i < c->world; i++)
        fds[i] = -1;
    uint64_t job = rv_job_hash(c);
    int have = 1;
    *listener = -1;
    struct rv_gate *gate = calloc(1, sizeof *gate);
    if (!gate) {
        rc = TY_ENOMEM;
        goto out;
    }
    gate->lfd = lfd;
    gate->len = RV_HELLO_LEN;
    while (have < c->world) {
        unsigned char h[RV_HELLO_LEN];
        int fd = rv_gate_next(gate, deadline, h);
        if (fd < 0) {
            rc = fd;
            goto out;
        }
        if (ty__get_u32(h) != RV_MAGIC_HELLO || ty__get_u32(h + 8) != (uint32_t)c->world ||
            ty__get_u32(h + 12) != (uint32_t)c->attempt || ty__get_u64(h + 16) != job ||
            !rv_sealed(c, h, sizeof h)) {
            close(fd); /* a stranger, an intruder or a stale attempt: ignore it */
            continue;
        }
        uint32_t r = ty__get_u32(h + 4);
        struct sockaddr_storage peer;
        if (r == 0 || r >= (uint32_t)c->world || fds[r] >= 0 || !rv_get_addr(h + 24, &peer)) {
            close(fd);
            continue;
        }
        fds[r] = fd;
        memcpy(table + 8 + (size_t)r * RV_ADDR_LEN, h + 24, RV_ADDR_LEN);
        if (*listener < 0) {
            struct sockaddr_storage mine;
            *listener = rv_listen_like(fd, 0, &mine, 4);
            if (*listener < 0) {
                rc = *listener;
                goto out;
            }
            rv_put_addr(table + 8, &mine);
        }
        have++;
    }
    ty__put_u32(table, RV_MAGIC_TABLE);
    ty__put_u32(table + 4, (uint32_t)c->world);
    size_t tlen = RV_TABLE_LEN(c->world);
    rv_seal(c, table, tlen);
    rc = 0;
    for (int r = 1; r < c->world && rc == 0; r++)
        rc = ty__send_all(fds[r], table, tlen, deadline);
out:
    if (gate) {
        rv_gate_close(gate);
        free(gate);
    }
    for (int i = 0; i < c->world; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
    }
    free(fds);
    close(lfd);
    if (rc < 0 && *listener >= 0) {
        close(*listener);
        *listener = -1;
    }
    return rc;
}

/* One try of rv_join on rank 0's address. */
static int rv_join_once(ty_ctx *c, const struct sockaddr_storage *ss, socklen_t sl,
                        int64_t deadline, unsigned char *table, int *listener)
{
    int rc;
    int fd = rv_connect_retry((const struct sockaddr *)ss, sl, deadline);
    if (fd < 0)
        return fd;
    struct sockaddr_storage mine;
    *listener = rv_listen_like(fd, 0, &mine, 4);
    if (*listener < 0) {
        close(fd);
        return *listener;
    }
    unsigned char h[RV_HELLO_LEN];
    ty__put_u32(h, RV_MAGIC_HELLO);
    ty__put_u32(h + 4, (uint32_t)c->rank);
    ty__put_u32(h + 8, (uint32_t)c->world);
    ty__put_u32(h + 12, (uint32_t)c->attempt);
    ty__put_u64(h + 16, rv_job_hash(c));
    rv_put_addr(h + 24, &mine);
    rv_seal(c, h, sizeof h);
    size_t tlen = RV_TABLE_LEN(c->world);
    rc = ty__send_all(fd, h, sizeof h, deadline);
    if (rc == 0)
        rc = ty__recv_all(fd, table, tlen, deadline);
    if (rc == 0 &&
        (ty__get_u32(table) != RV_MAGIC_TABLE || ty__get_u32(table + 4) != (uint32_t)c->world))
        rc = TY_EPROTO;
    if (rc == 0 && !rv_sealed(c, table, tlen)) {
        fprintf(stderr, "trainyard: the rendezvous at MASTER_ADDR:MASTER_PORT is not this job's "
                        "rank 0 (wrong TRAINYARD_RENDEZVOUS_SECRET)\n");
        rc = TY_EPROTO;
    }
    close(fd);
    if (rc < 0) {
        close(*listener);
        *listener = -1;
    }
    return rc;
}

/* Rank > 0: say HELLO to rank 0 and receive the TABLE; *listener is this rank's listener. A
 * connection rank 0 closes before the TABLE (it dropped it among too many strangers) is made
 * again, until the deadline. */
static int rv_join(ty_ctx *c, int64_t deadline, unsigned char *table, int *listener)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = rv_resolve_master(c, &ss, &sl);
    while (rc == 0) {
        rc = rv_join_once(c, &ss, sl, deadline, table, listener);
        if (rc != TY_EPEER || ty__ms_left(deadline) <= 50)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000000L};
        nanosleep(&ts, NULL);
        rc = 0;
    }
    return rc;
}

/* Connect to the successor and accept the predecessor on listener. */
static int rv_link(ty_ctx *c, const unsigned char *table, int listener, int64_t deadline)
{
    int next = (c->rank + 1) % c->world, prev = (c->rank + c->world - 1) % c->world;
    struct sockaddr_storage ss;
    socklen_t sl = rv_get_addr(table + 8 + (size_t)next * RV_ADDR_LEN, &ss);
    if (sl == 0)
        return TY_EPROTO;
    uint64_t job = rv_job_hash(c);
    int out = rv_connect_retry((struct sockaddr *)&ss, sl, deadline);
    if (out < 0)
        return out;
    ty__tune_link(out, c->ring_sockbuf);
    unsigned char l[RV_LINK_LEN];
    ty__put_u32(l, RV_MAGIC_LINK);
    ty__put_u32(l + 4, (uint32_t)c->rank);
    ty__put_u32(l + 8, (uint32_t)c->world);
    ty__put_u64(l + 12, job);
    rv_seal(c, l, sizeof l);
    int rc = ty__send_all(out, l, sizeof l, deadline);
    if (rc < 0) {
        close(out);
        return rc;
    }
    struct rv_gate *gate = calloc(1, sizeof *gate);
    if (!gate) {
        close(out);
        return TY_ENOMEM;
    }
    gate->lfd = listener;
    gate->len = RV_LINK_LEN;
    for (;;) {
        unsigned char p[RV_HELLO_LEN];
        int in = rv_gate_next(gate, deadline, p);
        if (in < 0) {
            close(out);
            rc = in;
            break;
        }
        if (ty__get_u32(p) == RV_MAGIC_LINK && ty__get_u32(p + 4) == (uint32_t)prev &&
            ty__get_u32(p + 8) == (uint32_t)c->world && ty__get_u64(p + 12) == job &&
            rv_sealed(c, p, RV_LINK_LEN)) {
            ty__tune_link(in, c->ring_sockbuf);
            c->send_fd = out;
            c->recv_fd = in;
            rc = 0;
            break;
        }
        close(in);
    }
    rv_gate_close(gate);
    free(gate);
    return rc;
}

int ty__rendezvous(ty_ctx *c)
{
    if (c->master_port <= 0) {
        fprintf(stderr, "trainyard: MASTER_PORT is not set; cannot connect the collectives\n");
        return TY_ECONFIG;
    }
    int64_t deadline = util_mono_ms() + c->coll_timeout_ms;
    unsigned char *table = calloc(1, RV_TABLE_LEN(c->world));
    if (!table)
        return TY_ENOMEM;
    int listener = -1;
    int rc = c->rank == 0 ? rv_serve(c, deadline, table, &listener)
                          : rv_join(c, deadline, table, &listener);
    if (rc == 0)
        rc = rv_link(c, table, listener, deadline);
    if (listener >= 0)
        close(listener);
    free(table);
    return rc;
}
