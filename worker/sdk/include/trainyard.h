/*
 * trainyard.h — the Trainyard training SDK (libtrainyard).
 *
 * A training program calls ty_init() once, asks the context who it is (rank, world size, config),
 * runs its loop with collectives (ty_allreduce, ty_broadcast, ty_barrier, ty_allgather), reports
 * metrics and checkpoints with ty_report(), and ends with ty_finish().
 *
 * Managed mode: the agent sets the environment of DESIGN §3 (RANK, WORLD_SIZE, TRAINYARD_JOB_ID,
 * ...). Standalone mode (neither TRAINYARD_JOB_ID nor RANK set): rank 0 of 1, config from
 * `--config FILE` or `{}`, reports printed to stderr as JSON lines, collectives are local copies.
 *
 * All functions returning int return 0 on success or a negative TY_E* code (ty_strerror()).
 * A context is not thread-safe: use it from one thread at a time.
 */
#ifndef TRAINYARD_H
#define TRAINYARD_H

#include <stddef.h>
#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TY_API __attribute__((visibility("default")))
#else
#define TY_API
#endif

/*
 * Error codes: X(name, value, message). Codes are only ever appended, never renumbered.
 */
#define TY_ERRNO_MAP(X)                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(EIO, -3, "input/output error")                                                               \
    X(ETIMEDOUT, -4, "timed out")                                                                  \
    X(EPEER, -5, "peer closed the connection or died")                                             \
    X(EPROTO, -6, "protocol error")                                                                \
    X(ENOTSUP, -7, "operation not supported")                                                      \
    X(ECONFIG, -8, "invalid configuration or environment")                                         \
    X(EFAILED, -9, "collectives failed earlier in this context")                                   \
    X(EREJECTED, -10, "the agent rejected the report")                                             \
    X(EADDR, -11, "cannot resolve or bind address")                                                \
    X(ECUDA, -12, "CUDA or NCCL error")                                                            \
    X(ERANGE, -13, "value out of range")

enum {
#define TY__ERRNO_ENUM(name, value, msg) TY_##name = (value),
    TY_ERRNO_MAP(TY__ERRNO_ENUM)
#undef TY__ERRNO_ENUM
};

/* Short English description of an error code; "unknown error" for unknown codes, "success"
 * for 0. The string is static. */
TY_API const char *ty_strerror(int code);

typedef struct ty_ctx ty_ctx;

/*
 * Create the context from the environment (DESIGN §3) or, standalone, from argv.
 * `--config FILE` / `--config=FILE` is removed from argc and argv when present (argc/argv may be
 * NULL); in managed mode TRAINYARD_CONFIG takes precedence over the file.
 * Collectives connect lazily: the TCP rendezvous happens in the first collective call (or in
 * ty_connect()), so programs that only report never open a collective port.
 * Fails with TY_ECONFIG on a malformed environment or config. On success *out must be released
 * with ty_finish().
 */
TY_API int ty_init(ty_ctx **out, int *argc, char ***argv);

TY_API int ty_world_rank(const ty_ctx *c);
TY_API int ty_world_size(const ty_ctx *c);
TY_API int ty_local_rank(const ty_ctx *c);
TY_API int ty_local_world_size(const ty_ctx *c);
TY_API int ty_node_rank(const ty_ctx *c);
TY_API const char *ty_job_id(const ty_ctx *c); /* "local" standalone */
TY_API int ty_attempt(const ty_ctx *c);        /* 0 standalone */
TY_API int ty_is_standalone(const ty_ctx *c);  /* 1 standalone, 0 managed */

/* train_loop_config; borrowed, valid until ty_finish(). Never NULL ({} when absent). */
TY_API const json_t *ty_config(const ty_ctx *c);

/* TRAINYARD_CHECKPOINT_DIR (checkpoint to resume from, on local disk) or NULL. */
TY_API const char *ty_checkpoint_dir(const ty_ctx *c);

/* 1 when the agent asks this worker to save a checkpoint now (ty_report with a directory) because
 * it is about to be stopped: its node is being drained, or a user stopped the job. SIGTERM follows
 * after the job's run_config.failure_config.preemption_grace_s, then SIGKILL after the agent's
 * stop grace. 0 otherwise (always 0 standalone); TY_EINVAL for a NULL ctx. Cheap (one access(2)):
 * call it every step. */
TY_API int ty_should_checkpoint(const ty_ctx *c);

/*
 * Report metrics (a JSON object of any JSON values, numbers charted, plus an optional integer
 * "step") and optionally a
 * checkpoint directory (must exist; sent as an absolute path). Blocks until the agent
 * acknowledges that it owns the report (TRAINYARD_REPORT_TIMEOUT_S, default 120 s); the agent
 * takes the directory's files by moving them (it is left empty of files), so this returns
 * quickly whatever the checkpoint's size.
 * Every rank must call ty_report the same number of times. Standalone: one JSON line on stderr.
 * Errors: TY_EINVAL (bad metrics/dir), TY_EPEER (agent gone), TY_ETIMEDOUT, TY_EREJECTED.
 */
TY_API int ty_report(ty_ctx *c, const json_t *metrics, const char *checkpoint_dir);

typedef enum { TY_FLOAT32, TY_FLOAT64, TY_INT32, TY_INT64 } ty_dtype;
typedef enum { TY_SUM, TY_MIN, TY_MAX, TY_AVG } ty_op;

/* Size in bytes of one element of dt, 0 for an unknown dtype. */
TY_API size_t ty_dtype_size(ty_dtype dt);

/*
 * Collectives. Every rank must call the same collectives in the same order with the same sizes.
 * A peer that dies or closes yields TY_EPEER; no progress for the collective timeout yields
 * TY_ETIMEDOUT. After any collective error the context stays failed: every later collective
 * returns that same error at once instead of desynchronizing, and the ring links are closed so
 * the other ranks fail promptly too. Argument errors (TY_EINVAL) are checked before anything is
 * sent and do not fail the context.
 * Native backend transports: when every rank runs on this host (LOCAL_WORLD_SIZE == WORLD_SIZE
 * and the ranks can open one POSIX shared-memory segment), ty_allreduce runs through shared
 * memory; otherwise, and for the other collectives, through the TCP ring.
 * Tuning (environment): TRAINYARD_TRANSPORT (auto, default; tcp: never shared memory),
 * TRAINYARD_SHM_CHUNK_KIB (bytes per rank and chunk of the shared-memory allreduce, default
 * 256), TRAINYARD_SHM_SMALL_KIB (buffers up to this size, at most one chunk, take its
 * one-barrier path, default 256), TRAINYARD_RING_CHUNK_KIB (ring pipelining grain, default 256) and
 * TRAINYARD_RING_SOCKBUF_KIB (SO_SNDBUF/SO_RCVBUF, default 4096; 0 = kernel autotuning).
 */

/* In-place allreduce of count elements. TY_AVG on integers is the sum divided by the world size
 * with C truncating division (toward zero). count 0 is a no-op. */
TY_API int ty_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op);
/* Copy bytes from root's buf into every rank's buf. */
TY_API int ty_broadcast(ty_ctx *c, void *buf, size_t bytes, int root);
/* Return once every rank has entered the barrier. */
TY_API int ty_barrier(ty_ctx *c);
/* recv (world_size * bytes_per_rank bytes) receives rank i's send at offset i*bytes_per_rank.
 * send may point into recv at this rank's slot. */
TY_API int ty_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank);

/* Device buffers (libtrainyard built with NCCL, CUDA_VISIBLE_DEVICES not empty): ty_allreduce,
 * ty_broadcast and ty_allgather on CUDA device memory run through NCCL, at any world size; the
 * communicator is made at the first such call (every rank must pass device memory to it) from a
 * unique id rank 0 broadcasts over the native ring, on the caller's current CUDA device. Each call
 * is enqueued on `stream` (a cudaStream_t; NULL, the default: a private stream of the SDK) and
 * returns once that stream is idle, polling within the collective timeout. A peer that fails
 * (NCCL's asynchronous error) aborts the communicator (ncclCommAbort) and yields TY_EPEER; no
 * progress for the collective timeout aborts it too and yields TY_ETIMEDOUT. ty_barrier uses the
 * native ring. Returns 0, TY_EINVAL for c == NULL, or TY_ENOTSUP without the NCCL backend. */
TY_API int ty_set_cuda_stream(ty_ctx *c, void *stream);

/* Run the collective rendezvous now instead of at the first collective. */
TY_API int ty_connect(ty_ctx *c);
/* How ty_allreduce moves host buffers: "shm" or "tcp" once connected, "self" with one rank,
 * "none" before ty_connect() or the first collective (and for c == NULL). */
TY_API const char *ty_transport(const ty_ctx *c);
/* Collective timeout (no progress for this long fails the call) and rendezvous timeout, seconds;
 * default TRAINYARD_COLLECTIVE_TIMEOUT_S or 300. */
TY_API int ty_set_collective_timeout(ty_ctx *c, double seconds);
/* Time ty_report waits for the agent's ack, seconds; default TRAINYARD_REPORT_TIMEOUT_S or 120. */
TY_API int ty_set_report_timeout(ty_ctx *c, double seconds);

/* This rank's contiguous, balanced share [*begin, *end) of n items: the first n % size ranks get
 * one item more. */
TY_API void ty_shard(const ty_ctx *c, size_t n, size_t *begin, size_t *end);
/* Pure variant: share of `rank` out of `size` (size >= 1, 0 <= rank < size). */
TY_API void ty_shard_range(size_t n, int rank, int size, size_t *begin, size_t *end);

/* Close connections, free everything, set *c = NULL. Returns 0; safe with c == NULL or
 * *c == NULL. Does not synchronize with other ranks (call ty_barrier() first if needed). */
TY_API int ty_finish(ty_ctx **c);

#ifdef __cplusplus
}
#endif

#endif /* TRAINYARD_H */
