/*
 * shm.c — allreduce through shared memory when every rank runs on this host.
 *
 * Over loopback TCP every byte of a ring allreduce is copied into the kernel and out again, by
 * the same cores that reduce. When all ranks share a host, they instead share one segment:
 *
 *   header (one page) | set 0: slot[0] … slot[world-1] | set 1: slot[0] … slot[world-1]
 *
 * A buffer is processed in chunks of at most one slot. For each chunk, rank r
 *   A. copies its chunk into slot[r]                                  — barrier —
 *   B. reduces segment r of the chunk (ty_shard_range) over every slot into its own buffer and
 *      writes the result back into segment r of slot[r]                — barrier —
 *   C. copies every other segment j from slot[j] into its buffer.
 * Each segment is reduced by one rank only, so all ranks get bit-identical results. Chunks
 * alternate between the two slot sets, so the next chunk's step A never overwrites a slot that a
 * slower rank is still copying from in step C: two barriers per chunk suffice.
 *
 * The barrier is a shared counter (futex wait/wake). The TCP ring stays connected beside it: a
 * rank that dies closes its sockets, its ring neighbours see that while they wait, raise the
 * shared abort flag and wake everyone, so a dead peer gives TY_EPEER, not a hang; no barrier
 * progress for the collective timeout gives TY_ETIMEDOUT.
 *
 * Set-up (ty__shm_setup, after the ring is connected): rank 0 creates the segment with a random
 * name and token, broadcasts both over the ring, every rank maps it and checks the token, an
 * allreduce (MIN) over the ring agrees on the result, and rank 0 unlinks the name. Ranks on
 * other hosts cannot open the name, so the agreement falls back to the TCP ring for everyone.
 * The name starts with the job's prefix (rproto_shm_prefix): should rank 0 die before it
 * unlinks it, the agent does once the attempt's workers on the node are gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "report_proto.h"
#include "util.h"

#define SHM_MAGIC 0x5459534d454d3031ull /* "TYSMEM01" */
#define SHM_HEADER 4096
#define SHM_NAME_LEN 64
/* Busy-wait this many polls of the counter before sleeping on the futex. */
#define SHM_SPIN 2000
/* Longest single futex sleep: how often a waiting rank looks at its ring links. */
#define SHM_CHECK_MS 50

struct shm_header {
    uint64_t magic;
    uint64_t token;
    uint64_t world;
    uint64_t slot;
    _Alignas(64) _Atomic uint32_t arrived; /* barrier arrivals, wrapping */
    _Alignas(64) _Atomic uint32_t abort;   /* set once by a failing rank */
};

struct ty__shm {
    struct shm_header *hdr;
    char *slots; /* 2 * world slots */
    size_t map_len;
    size_t slot;
    int world, rank;
    uint32_t barriers; /* barriers passed by this rank */
    int set;           /* slot set of the next chunk */
};

static long shm_futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static char *shm_slot(const struct ty__shm *s, int set, int rank)
{
    return s->slots + ((size_t)set * (size_t)s->world + (size_t)rank) * s->slot;
}

/* 1 when a ring neighbour's socket shows a hang-up or an error (the peer died or closed). Data
 * alone does not count: a neighbour that already passed the barrier may have moved on to a
 * collective on the ring, or finished and closed its links, which is why the caller looks at
 * the barrier again after this says yes. */
static int shm_links_broken(const ty_ctx *c)
{
    struct pollfd p[2] = {{.fd = c->recv_fd, .events = POLLRDHUP},
                          {.fd = c->send_fd, .events = POLLRDHUP}};
    if (poll(p, 2, 0) <= 0)
        return 0;
    return ((p[0].revents | p[1].revents) & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void ty__shm_abort(ty_ctx *c)
{
    struct ty__shm *s = c->shm;
    if (!s)
        return;
    atomic_store(&s->hdr->abort, 1);
    shm_futex(&s->hdr->arrived, FUTEX_WAKE, INT_MAX, NULL);
}

static int shm_barrier(ty_ctx *c)
{
    struct ty__shm *s = c->shm;
    struct shm_header *h = s->hdr;
    s->barriers++;
    uint32_t target = s->barriers * (uint32_t)s->world;
    if (atomic_fetch_add(&h->arrived, 1) + 1 == target) {
        shm_futex(&h->arrived, FUTEX_WAKE, INT_MAX, NULL);
        return 0;
    }
    int64_t deadline = util_mono_ms() + c->coll_timeout_ms;
    for (unsigned spin = 0;; spin++) {
        uint32_t cur = atomic_load(&h->arrived);
        if ((int32_t)(cur - target) >= 0)
            return 0;
        if (atomic_load(&h->abort))
            return TY_EPEER;
        if (spin < SHM_SPIN)
            continue;
        int left = ty__ms_left(deadline);
        if (left == 0)
            return TY_ETIMEDOUT;
        int ms = left < SHM_CHECK_MS ? left : SHM_CHECK_MS;
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        if (shm_futex(&h->arrived, FUTEX_WAIT, cur, &ts) != 0 && errno == ETIMEDOUT &&
            shm_links_broken(c)) {
            /* A peer closes its links only after it has seen this barrier complete, or when it
             * died: look again before calling it dead. */
            if ((int32_t)(atomic_load(&h->arrived) - target) >= 0)
                return 0;
            return TY_EPEER;
        }
    }
}

int ty__shm_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op)
{
    struct ty__shm *s = c->shm;
    int p = s->world, r = s->rank;
    size_t esz = ty_dtype_size(dt), per = s->slot / esz;
    for (size_t off = 0; off < count; off += per) {
        size_t n = count - off < per ? count - off : per;
        char *mine = (char *)buf + off * esz;
        char *own = shm_slot(s, s->set, r);
        memcpy(own, mine, n * esz);
        int rc = shm_barrier(c);
        if (rc < 0)
            return rc;
        size_t b, e;
        ty_shard_range(n, r, p, &b, &e);
        if (e > b) {
            for (int j = 0; j < p; j++) {
                if (j != r)
                    ty__reduce(mine + b * esz, shm_slot(s, s->set, j) + b * esz, e - b, dt, op);
            }
            if (op == TY_AVG)
                ty__scale_div(mine + b * esz, e - b, dt, p);
            memcpy(own + b * esz, mine + b * esz, (e - b) * esz);
        }
        if ((rc = shm_barrier(c)) < 0)
            return rc;
        for (int j = 0; j < p; j++) {
            ty_shard_range(n, j, p, &b, &e);
            if (j != r && e > b)
                memcpy(mine + b * esz, shm_slot(s, s->set, j) + b * esz, (e - b) * esz);
        }
        s->set ^= 1;
    }
    return 0;
}

/* What rank 0 tells the others about the segment (broadcast over the ring). */
struct shm_offer {
    char name[SHM_NAME_LEN]; /* empty: rank 0 could not create one */
    uint64_t token;
    uint64_t slot;
};

static void shm_unmap(struct ty__shm *s)
{
    if (s->hdr)
        munmap(s->hdr, s->map_len);
    free(s);
}

/* Rank 0: create, size and map a fresh segment. 0 or -1 (then nothing is left behind). */
static int shm_create(const ty_ctx *c, struct ty__shm *s, struct shm_offer *o)
{
    uint64_t rnd[2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return -1;
    char prefix[RPROTO_SHM_PREFIX_MAX];
    rproto_shm_prefix(c->job_id, c->attempt, prefix, sizeof prefix);
    snprintf(o->name, sizeof o->name, "%s%016llx", prefix, (unsigned long long)rnd[0]);
    o->token = rnd[1] | 1;
    int fd = shm_open(o->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    /* Reserve the pages now: a full /dev/shm fails here, not with SIGBUS mid-collective. */
    int rc = posix_fallocate(fd, 0, (off_t)s->map_len);
    void *m =
        rc == 0 ? mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED) {
        fprintf(stderr, "trainyard: no shared-memory transport (%s): using the TCP ring\n",
                strerror(rc ? rc : errno));
        shm_unlink(o->name);
        return -1;
    }
    s->hdr = m;
    s->hdr->magic = SHM_MAGIC;
    s->hdr->token = o->token;
    s->hdr->world = (uint64_t)s->world;
    s->hdr->slot = s->slot;
    return 0;
}

/* Ranks > 0: map the offered segment and check that it is this job's. 0 or -1. */
static int shm_attach(struct ty__shm *s, const struct shm_offer *o)
{
    int fd = shm_open(o->name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return -1; /* another host, typically */
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size == s->map_len)
        m = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return -1;
    s->hdr = m;
    if (s->hdr->magic != SHM_MAGIC || s->hdr->token != o->token ||
        s->hdr->world != (uint64_t)s->world || s->hdr->slot != s->slot) {
        munmap(m, s->map_len);
        s->hdr = NULL;
        return -1;
    }
    return 0;
}

int ty__shm_setup(ty_ctx *c)
{
    struct ty__shm *s = calloc(1, sizeof *s);
    if (!s)
        return TY_ENOMEM;
    s->world = c->world;
    s->rank = c->rank;
    s->slot = c->shm_chunk;
    s->map_len = SHM_HEADER + 2 * (size_t)c->world * s->slot;
    struct shm_offer o = {0};
    if (c->rank == 0 && shm_create(c, s, &o) < 0)
        o.name[0] = '\0';
    o.slot = s->slot;
    int rc = ty__ring_broadcast(c, &o, sizeof o, 0);
    int32_t ok = 0;
    if (rc == 0) {
        o.name[SHM_NAME_LEN - 1] = '\0';
        ok = o.name[0] && (c->rank == 0 || shm_attach(s, &o) == 0);
        rc = ty__ring_allreduce(c, &ok, 1, TY_INT32, TY_MIN);
    }
    if (c->rank == 0 && o.name[0])
        shm_unlink(o.name); /* mapped by everyone (or given up): the name is no longer needed */
    if (rc == 0 && ok) {
        s->slots = (char *)s->hdr + SHM_HEADER;
        c->shm = s;
    } else {
        shm_unmap(s);
    }
    return rc;
}

void ty__shm_free(ty_ctx *c)
{
    if (c->shm)
        shm_unmap(c->shm);
    c->shm = NULL;
}
