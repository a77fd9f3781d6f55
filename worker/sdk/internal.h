/*
 * internal.h — definitions shared by the files of libtrainyard (prefix ty__). Not installed.
 */
#ifndef TY_INTERNAL_H
#define TY_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "trainyard.h"

#define TY__DEFAULT_COLLECTIVE_TIMEOUT_MS (300 * 1000)
#define TY__DEFAULT_REPORT_TIMEOUT_MS (120 * 1000)
/* Bytes staged per receive before reducing: the pipelining grain of the ring. */
#define TY__RING_CHUNK (256 * 1024)
/* Requested kernel socket buffer size for ring links. */
#define TY__RING_SOCKBUF (4 * 1024 * 1024)
/* Bytes per rank and chunk of the shared-memory allreduce. */
#define TY__SHM_CHUNK (256 * 1024)
/* Buffers up to this many bytes take the shared-memory allreduce's one-barrier path. */
#define TY__SHM_SMALL (256 * 1024)

typedef enum {
    TY__BACKEND_NATIVE,
    TY__BACKEND_TORCH,
    TY__BACKEND_TENSORFLOW,
    TY__BACKEND_NONE
} ty__backend;

struct ty__nccl;     /* nccl.c */
struct ty__progress; /* progress.c */
struct ty__shm;      /* shm.c */

struct ty_ctx {
    /* identity (context.c / env.c) */
    bool standalone;
    int rank, world, local_rank, local_world, node_rank, attempt;
    char *job_id;
    char *master_addr;
    int master_port; /* 0 when unset */
    ty__backend backend;
    json_t *config;
    char *checkpoint_dir;
    char *checkpoint_request_file; /* TRAINYARD_CHECKPOINT_REQUEST_FILE; NULL when unset */
    char *report_socket;
    char *report_secret;     /* TRAINYARD_REPORT_SECRET, sent in hello; NULL when unset */
    char *rendezvous_secret; /* TRAINYARD_RENDEZVOUS_SECRET, checked in the rendezvous; NULL */
    int64_t coll_timeout_ms;
    int64_t report_timeout_ms;

    /* collectives (ring.c / collectives.c) */
    int coll_err;        /* sticky: 0 or the first collective error */
    bool coll_ready;     /* ring connected */
    int send_fd;         /* to rank+1, -1 when closed */
    int recv_fd;         /* from rank-1, -1 when closed */
    char *staging;       /* ring_chunk bytes, receive buffer for reducing steps */
    size_t ring_chunk;   /* TRAINYARD_RING_CHUNK, multiple of 8 */
    int ring_sockbuf;    /* TRAINYARD_RING_SOCKBUF; 0 = kernel autotuning */
    bool tcp_only;       /* TRAINYARD_TRANSPORT=tcp: never the shared-memory allreduce */
    size_t shm_chunk;    /* TRAINYARD_SHM_CHUNK_KIB, multiple of 8 */
    size_t shm_small;    /* TRAINYARD_SHM_SMALL_KIB */
    struct ty__shm *shm; /* set when every rank shares this host's memory */
    struct ty__nccl *nccl;
    void *cuda_stream; /* ty_set_cuda_stream: the caller's cudaStream_t, NULL: the SDK's own */

    /* report client (report.c) */
    int report_fd; /* -1 when not connected */
    int64_t report_seq;

    /* progress (progress.c): published by the calling thread with relaxed atomic stores, read by
     * the heartbeat thread. progress_word = coll_seq << 8 | op << 1 | in_collective. */
    int64_t coll_seq;                 /* collectives entered so far (calling thread only) */
    _Atomic uint64_t progress_word;   /* what the heartbeat thread sends */
    _Atomic int64_t progress_reports; /* reports made (report_seq), for the heartbeat */
    int64_t test_stall_seq;           /* TY_TEST_STALL: 0 = off (tests only) */
    double test_stall_s;              /* how long that collective sleeps */
    struct ty__progress *progress;    /* the heartbeat thread; NULL: none */
};

/* ---- env.c: environment parsing ---- */

/* Fill identity fields of c from the environment and argv (see ty_init). Returns 0, TY_ECONFIG
 * (message in err), or TY_ENOMEM. */
int ty__ctx_from_env(ty_ctx *c, int *argc, char ***argv, char *err, size_t errlen);

/* ---- net.c: sockets with deadlines ---- */

/* Milliseconds left until deadline_ms (>= 0), clamped to INT32_MAX for poll(). */
int ty__ms_left(int64_t deadline_ms);
/* Set O_NONBLOCK and FD_CLOEXEC. Returns 0 or TY_EIO. */
int ty__set_nonblock(int fd);
/* Write all n bytes to a nonblocking fd by deadline. TY_EPEER on EPIPE/ECONNRESET,
 * TY_ETIMEDOUT, TY_EIO. */
int ty__send_all(int fd, const void *buf, size_t n, int64_t deadline_ms);
/* Read exactly n bytes from a nonblocking fd by deadline. TY_EPEER on EOF/reset. */
int ty__recv_all(int fd, void *buf, size_t n, int64_t deadline_ms);
/* Nonblocking TCP connect to addr by deadline; returns the fd (>= 0) or a negative code.
 * TY_EPEER when refused (caller may retry). */
int ty__tcp_connect(const struct sockaddr *addr, socklen_t len, int64_t deadline_ms);
/* Accept one connection on a listening nonblocking socket by deadline; returns fd or code. */
int ty__tcp_accept(int lfd, int64_t deadline_ms);
/* Tune a ring link: TCP_NODELAY, nonblocking, SO_SNDBUF/SO_RCVBUF = sockbuf unless 0. */
void ty__tune_link(int fd, int sockbuf);
/* Big-endian helpers. */
void ty__put_u16(unsigned char *p, uint16_t v);
void ty__put_u32(unsigned char *p, uint32_t v);
void ty__put_u64(unsigned char *p, uint64_t v);
uint16_t ty__get_u16(const unsigned char *p);
uint32_t ty__get_u32(const unsigned char *p);
uint64_t ty__get_u64(const unsigned char *p);

/* ---- rendezvous.c ---- */

/* Rendezvous through rank 0 at MASTER_ADDR:MASTER_PORT and connect the ring: on success
 * c->send_fd / c->recv_fd are open, tuned links. Returns 0 or a negative code. */
int ty__rendezvous(ty_ctx *c);

/* ---- reduce.c: reduction kernels ---- */

/* dst[i] = op(dst[i], src[i]) for i < count. TY_AVG reduces as TY_SUM. */
void ty__reduce(void *dst, const void *src, size_t count, ty_dtype dt, ty_op op);
/* dst[i] = op(src[0][i], src[1][i], ..., src[nsrc-1][i]) for i < count, folded left in that
 * order (so every caller passing the same sources in the same order gets bit-identical results),
 * and the same value stored to dst2[i] unless dst2 is NULL. nsrc >= 1. dst may be src[0] (in
 * place); no other two buffers may overlap. TY_AVG reduces as TY_SUM. */
void ty__reduce_n(void *dst, void *dst2, const void *const *src, int nsrc, size_t count,
                  ty_dtype dt, ty_op op);
/* buf[i] /= divisor (truncating for integers). */
void ty__scale_div(void *buf, size_t count, ty_dtype dt, int divisor);

/* ---- ring.c: the pipelined ring engine ---- */

/* One step of a ring schedule: send send_len bytes to the successor and receive recv_len bytes
 * from the predecessor, concurrently. Sending step i may only send bytes already completed by
 * receiving step send_dep (-1: no dependency); steps are streamed back to back. */
struct ty__ring_step {
    const char *send;
    size_t send_len;
    int send_dep;
    char *recv;
    size_t recv_len;
    bool reduce; /* receive into staging and reduce into recv (else copy straight into recv) */
    int avg_div; /* after reducing, divide by this (0 = no) */
};

/* Run nsteps ring steps. dt/op describe reducing steps. Returns 0 or a negative code; on error
 * the caller must fail the context. */
int ty__ring_run(ty_ctx *c, const struct ty__ring_step *steps, int nsteps, ty_dtype dt, ty_op op);

/* ---- collectives.c ---- */

/* Make sure the ring is connected (lazy rendezvous); returns 0 or the sticky error. */
int ty__coll_ready(ty_ctx *c);
/* Record err as the context's sticky collective error and close the ring links. Returns err. */
int ty__coll_fail(ty_ctx *c, int err);
/* Native ring implementations (world_size > 1, connected). */
int ty__ring_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op);
int ty__ring_broadcast(ty_ctx *c, void *buf, size_t bytes, int root);
int ty__ring_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank);

/* ---- shm.c: allreduce through shared memory (all ranks on one host) ---- */

/* With the ring connected: try to share a segment with every other rank. Sets c->shm when all
 * ranks could; leaves it NULL (TCP ring) when any could not. Returns 0, or a ring error. */
int ty__shm_setup(ty_ctx *c);
/* The shared-memory allreduce (c->shm set). */
int ty__shm_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op);
/* Raise the shared abort flag so that ranks waiting in a barrier fail at once. */
void ty__shm_abort(ty_ctx *c);
void ty__shm_free(ty_ctx *c);

/* ---- nccl.c: NCCL backend (TY_WITH_NCCL); stubs return TY_ENOTSUP otherwise ---- */

/* 1 if buf is CUDA device memory and the NCCL backend can be used (loads CUDA at most once, only
 * when CUDA_VISIBLE_DEVICES is non-empty), else 0. */
int ty__nccl_is_device_ptr(ty_ctx *c, const void *buf);
int ty__nccl_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op);
int ty__nccl_broadcast(ty_ctx *c, void *buf, size_t bytes, int root);
int ty__nccl_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank);
void ty__nccl_free(ty_ctx *c);

/* ---- report.c ---- */
void ty__report_close(ty_ctx *c);
/* Connects to the agent's report socket and sends hello: *fd is the connection. 0, TY_EPEER
 * (agent not there), TY_EINVAL (path too long), TY_ETIMEDOUT, TY_EIO, TY_ENOMEM. */
int ty__report_dial(const ty_ctx *c, int timeout_ms, int *fd);

/* ---- progress.c: heartbeat and collective progress (docs/report-protocol.md) ---- */

enum { TY__OP_ALLREDUCE = 1, TY__OP_BROADCAST = 2, TY__OP_ALLGATHER = 3 };

/* Starts the heartbeat thread when the worker has an agent (TRAINYARD_HEARTBEAT_S, default 1;
 * 0 turns it off) and reads TY_TEST_STALL. 0, or TY_ECONFIG (message in err). */
int ty__progress_start(ty_ctx *c, char *err, size_t errlen);
/* Stops and joins the heartbeat thread. */
void ty__progress_stop(ty_ctx *c);
/* The test stall (TY_TEST_STALL): sleeps inside collective c->coll_seq. */
void ty__progress_test_stall(ty_ctx *c);

/* The calling thread enters a collective: no system call, one relaxed store. */
static inline void ty__progress_enter(ty_ctx *c, int op)
{
    c->coll_seq++;
    atomic_store_explicit(&c->progress_word, (uint64_t)c->coll_seq << 8 | (uint64_t)op << 1 | 1u,
                          memory_order_relaxed);
}

/* The calling thread leaves the collective it entered last. */
static inline void ty__progress_leave(ty_ctx *c)
{
    if (c->test_stall_seq == c->coll_seq)
        ty__progress_test_stall(c);
    atomic_store_explicit(&c->progress_word,
                          atomic_load_explicit(&c->progress_word, memory_order_relaxed) & ~1ull,
                          memory_order_relaxed);
}

/* Report seq was made (ty_report). */
static inline void ty__progress_note_report(ty_ctx *c, int64_t seq)
{
    atomic_store_explicit(&c->progress_reports, seq, memory_order_relaxed);
}

#endif
