/*
 * shm.c — allreduce through shared memory when every rank runs on this host.
 *
 * Over loopback TCP every byte of a ring allreduce is copied into the kernel and out again, by
 * the same cores that reduce. When all ranks share a host, they instead share one segment:
 *
 *   header (one page) | set 0: slot[0] … slot[world-1] | set 1: … | set 2: …
 *
 * Small buffers (whole buffer <= s->small bytes): rank r copies its buffer into slot[r],
 * waits at a barrier, and reduces every slot, in rank order, into its buffer. One copy and one
 * barrier; every rank folds the same sources in the same order, so the results are
 * bit-identical.
 *
 * Larger buffers go in chunks of at most one slot. Chunk k is split into world shares (cut at
 * cache-line multiples); share j is reduced by rank j only. For chunk k, rank r
 *   A. copies every share but its own into slot[r] of set k%3           — barrier k —
 *   B. reduces its own share in one pass, from its own buffer and the same share of every other
 *      slot, storing the result both into its buffer and into its own share of slot[r];
 *   C. copies the results of chunk k-1 (share j from slot[j]) into its buffer.
 * Step C of chunk k-1 needs every rank's step B of chunk k-1, which each rank did before it
 * arrived at barrier k: one barrier per chunk, plus one after the last chunk before its step C.
 * A rank reads a set only until its second barrier after the one that published the set's
 * data, and a rank writes that set again only after the third; three sets therefore keep a
 * fast rank from overwriting what a slower one still reads. Per chunk a rank copies (p-1)/p of
 * it in, reduces 1/p (reading p shares, storing the result twice) and copies (p-1)/p out; the
 * earlier scheme copied all of it in, reduced in p-1 read-modify-write passes, copied the
 * result into the segment and then out, with two barriers per chunk.
 *
 * The barrier is a shared counter. A waiting rank polls it (with a pause instruction), then
 * sleeps on its futex and counts itself in `sleepers`; the last rank to arrive makes the
 * wake-up system call only when someone sleeps. System calls cost ~2 µs on the benchmark VM,
 * more than a small allreduce, so a barrier between running ranks makes none. A rank polls for
 * about as long as a running peer would still need for the work before the barrier (2 µs plus
 * 4 ns per KiB, at most 20 µs): a peer later than that is off its CPU, and polling then only
 * keeps it off (measured on the loaded 2-core host: longer polls lost 2-4x at 64 KiB-1 MiB).
 * When ranks outnumber the CPUs this process may run on, a rank polls 2 µs at most. Otherwise,
 * after the poll, it keeps looking for up to 200 µs with sched_yield between looks before it
 * sleeps: when no CPU is idle the scheduler wakes a sleeper on its waker's CPU, so a late peer is
 * often queued behind the rank that waits for it; yielding runs it at once, without a futex
 * wake-up, and still sees a peer running elsewhere within a system call.
 *
 * The TCP ring stays connected beside the segment: a rank that dies closes its sockets, its ring
 * neighbours see that while they wait, raise the shared abort flag and wake everyone, so a dead
 * peer gives TY_EPEER, not a hang; no barrier progress for the collective timeout gives
 * TY_ETIMEDOUT.
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
#include <sched.h>
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

#define SHM_MAGIC 0x5459534d454d3032ull /* "TYSMEM02" */
#define SHM_HEADER 4096
#define SHM_NAME_LEN 64
#define SHM_SETS 3
/* Shares are cut at multiples of this many bytes, so no two ranks write one cache line. */
#define SHM_ALIGN 64
/* How long a waiting rank polls the barrier before it sleeps: adapted between these bounds
 * (shm_adapt_spin) with a CPU per rank; always the least when ranks outnumber the CPUs. */
#define SHM_SPIN_MIN_NS (2 * 1000)
#define SHM_SPIN_MAX_NS (20 * 1000)
#define SHM_SPIN_PER_KIB_NS 4
/* Then, with a CPU per rank, how long a rank keeps looking with sched_yield between looks before
 * it sleeps: a peer queued on this CPU runs at once, one running elsewhere is seen without a
 * wake-up. */
#define SHM_YIELD_NS (200 * 1000)
/* Longest single futex sleep: how often a waiting rank looks at its ring links. */
#define SHM_CHECK_MS 50

struct shm_header {
    uint64_t magic;
    uint64_t token;
    uint64_t world;
    uint64_t slot;
    uint64_t small;
    _Alignas(64) _Atomic uint32_t arrived; /* barrier arrivals, wrapping */
    _Atomic uint32_t sleepers;             /* ranks in (or entering) a futex wait */
    _Alignas(64) _Atomic uint32_t abort;   /* set once by a failing rank */
};

struct ty__shm {
    struct shm_header *hdr;
    char *slots; /* SHM_SETS * world slots */
    size_t map_len;
    size_t slot;
    size_t small; /* whole buffers up to this many bytes take the one-barrier path */
    int world, rank;
    uint32_t barriers;                                 /* barriers passed by this rank */
    unsigned set;                                      /* slot set of the next chunk */
    int64_t spin_min_ns, spin_max_ns, spin_per_kib_ns; /* polling before a sleep */
    int64_t yield_ns;                                  /* then yielding before a sleep */
    const void **srcs; /* world entries: the sources of one reduction */
};

static long shm_futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static char *shm_slot(const struct ty__shm *s, unsigned set, int rank)
{
    return s->slots + ((size_t)set * (size_t)s->world + (size_t)rank) * s->slot;
}

/* Elements [*b, *e) of share k of a chunk of n elements of esz bytes: p shares of equal size
 * rounded up to SHM_ALIGN bytes (the last ones may be short or empty). */
static void shm_share(size_t n, size_t esz, int k, int p, size_t *b, size_t *e)
{
    size_t unit = SHM_ALIGN / esz;
    size_t q = (n + (size_t)p - 1) / (size_t)p;
    q = (q + unit - 1) / unit * unit;
    *b = (size_t)k * q < n ? (size_t)k * q : n;
    *e = *b + q < n ? *b + q : n;
}

static void shm_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
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

static int shm_reached(const struct shm_header *h, uint32_t target)
{
    return (int32_t)(atomic_load_explicit(&h->arrived, memory_order_acquire) - target) >= 0;
}

/* Sleep until the barrier completes: 0, TY_EPEER (abort flag, or a dead neighbour), or
 * TY_ETIMEDOUT after the collective timeout. */
static int shm_barrier_sleep(ty_ctx *c, uint32_t target)
{
    struct shm_header *h = c->shm->hdr;
    int64_t deadline = util_mono_ms() + c->coll_timeout_ms;
    for (;;) {
        /* Count in before looking: the last arrival adds to `arrived` before it reads
         * `sleepers`, so either it sees this rank and wakes it, or this load sees its arrival
         * (and the futex refuses to sleep when the counter moved since). */
        atomic_fetch_add(&h->sleepers, 1);
        uint32_t cur = atomic_load(&h->arrived);
        int rc = 1;
        if ((int32_t)(cur - target) >= 0)
            rc = 0;
        else if (atomic_load(&h->abort))
            rc = TY_EPEER;
        else if (ty__ms_left(deadline) == 0)
            rc = TY_ETIMEDOUT;
        int timed_out = 0;
        if (rc == 1) {
            int left = ty__ms_left(deadline);
            int ms = left < SHM_CHECK_MS ? left : SHM_CHECK_MS;
            struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
            timed_out = shm_futex(&h->arrived, FUTEX_WAIT, cur, &ts) != 0 && errno == ETIMEDOUT;
        }
        atomic_fetch_sub(&h->sleepers, 1);
        if (rc != 1)
            return rc;
        if (timed_out && shm_links_broken(c)) {
            /* A peer closes its links only after it has seen this barrier complete, or when it
             * died: look again before calling it dead. */
            return shm_reached(h, target) ? 0 : TY_EPEER;
        }
    }
}

/* Wait until every rank has arrived at its barrier number s->barriers + 1. `work`: bytes each
 * rank moves before it arrives, which sets how long it is worth polling for a peer that is
 * running (one that is not would take longer). */
static int shm_barrier(ty_ctx *c, size_t work)
{
    struct ty__shm *s = c->shm;
    struct shm_header *h = s->hdr;
    s->barriers++;
    uint32_t target = s->barriers * (uint32_t)s->world;
    if (atomic_fetch_add(&h->arrived, 1) + 1 == target) {
        if (atomic_load(&h->sleepers))
            shm_futex(&h->arrived, FUTEX_WAKE, INT_MAX, NULL);
        return 0;
    }
    int64_t until = 0;
    int yielding = 0;
    for (unsigned spin = 0;; spin++) {
        if (shm_reached(h, target))
            return 0;
        if (atomic_load_explicit(&h->abort, memory_order_relaxed))
            return TY_EPEER;
        if (yielding || (spin & 63) == 0) {
            int64_t now = util_mono_ns();
            if (until == 0) {
                int64_t spin = (int64_t)(work / 1024) * s->spin_per_kib_ns;
                spin = spin < s->spin_min_ns ? s->spin_min_ns : spin;
                until = now + (spin < s->spin_max_ns ? spin : s->spin_max_ns);
            } else if (now >= until + s->yield_ns) {
                break;
            } else if (now >= until) {
                yielding = 1;
            }
        }
        if (yielding)
            sched_yield();
        else
            shm_pause();
    }
    return shm_barrier_sleep(c, target);
}

/* Whole buffer at once: copy in, one barrier, every rank reduces every slot in rank order. */
static int shm_allreduce_small(ty_ctx *c, char *buf, size_t count, size_t esz, ty_dtype dt,
                               ty_op op)
{
    struct ty__shm *s = c->shm;
    int p = s->world;
    memcpy(shm_slot(s, s->set, s->rank), buf, count * esz);
    int rc = shm_barrier(c, count * esz);
    if (rc < 0)
        return rc;
    for (int j = 0; j < p; j++)
        s->srcs[j] = shm_slot(s, s->set, j);
    ty__reduce_n(buf, NULL, s->srcs, p, count, dt, op);
    if (op == TY_AVG)
        ty__scale_div(buf, count, dt, p);
    s->set = (s->set + 1) % SHM_SETS;
    return 0;
}

/* Step C: copy the other ranks' results of a chunk of n elements (slot set `set`) into buf. */
static void shm_gather(const struct ty__shm *s, char *buf, size_t n, size_t esz, unsigned set)
{
    for (int j = 0; j < s->world; j++) {
        size_t b, e;
        shm_share(n, esz, j, s->world, &b, &e);
        if (j != s->rank && e > b)
            memcpy(buf + b * esz, shm_slot(s, set, j) + b * esz, (e - b) * esz);
    }
}

int ty__shm_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op)
{
    struct ty__shm *s = c->shm;
    int p = s->world, r = s->rank;
    size_t esz = ty_dtype_size(dt), per = s->slot / esz;
    if (count * esz <= s->small)
        return shm_allreduce_small(c, buf, count, esz, dt, op);
    char *prev = NULL; /* the chunk whose step C is due, its length and slot set */
    size_t prev_n = 0;
    unsigned prev_set = 0;
    for (size_t off = 0; off < count; off += per) {
        size_t n = count - off < per ? count - off : per, b, e;
        char *mine = (char *)buf + off * esz, *own = shm_slot(s, s->set, r);
        for (int j = 0; j < p; j++) {
            shm_share(n, esz, j, p, &b, &e);
            if (j != r && e > b)
                memcpy(own + b * esz, mine + b * esz, (e - b) * esz);
        }
        int rc = shm_barrier(c, 2 * n * esz);
        if (rc < 0)
            return rc;
        shm_share(n, esz, r, p, &b, &e);
        if (e > b) {
            s->srcs[0] = mine + b * esz;
            for (int j = 0, k = 1; j < p; j++) {
                if (j != r)
                    s->srcs[k++] = shm_slot(s, s->set, j) + b * esz;
            }
            if (op == TY_AVG) {
                ty__reduce_n(mine + b * esz, NULL, s->srcs, p, e - b, dt, op);
                ty__scale_div(mine + b * esz, e - b, dt, p);
                memcpy(own + b * esz, mine + b * esz, (e - b) * esz);
            } else {
                ty__reduce_n(mine + b * esz, own + b * esz, s->srcs, p, e - b, dt, op);
            }
        }
        if (prev)
            shm_gather(s, prev, prev_n, esz, prev_set);
        prev = mine;
        prev_n = n;
        prev_set = s->set;
        s->set = (s->set + 1) % SHM_SETS;
    }
    int rc = shm_barrier(c, 2 * prev_n * esz / (size_t)p);
    if (rc < 0)
        return rc;
    shm_gather(s, prev, prev_n, esz, prev_set);
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
    free(s->srcs);
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
    s->hdr->small = s->small;
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
        s->hdr->world != (uint64_t)s->world || s->hdr->slot != s->slot ||
        s->hdr->small != s->small) {
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
    s->small = c->shm_small < s->slot ? c->shm_small : s->slot;
    s->map_len = SHM_HEADER + SHM_SETS * (size_t)c->world * s->slot;
    cpu_set_t cpus;
    int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
    if (ncpu <= 0)
        ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    s->spin_min_ns = SHM_SPIN_MIN_NS;
    s->spin_max_ns = c->world > ncpu ? SHM_SPIN_MIN_NS : SHM_SPIN_MAX_NS;
    s->spin_per_kib_ns = SHM_SPIN_PER_KIB_NS;
    s->yield_ns = c->world > ncpu ? 0 : SHM_YIELD_NS;
    s->srcs = calloc((size_t)c->world, sizeof *s->srcs);
    if (!s->srcs) {
        free(s);
        return TY_ENOMEM;
    }
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
