/*
 * nccl.c — NCCL backend for device buffers (built with TY_WITH_NCCL).
 *
 * libcudart and libnccl are dlopen'ed at run time, and only when CUDA_VISIBLE_DEVICES is
 * non-empty: the same libtrainyard.so loads and runs its CPU path on machines with no GPU, no
 * driver and no CUDA libraries. The headers are used only for types and constants.
 *
 * The NCCL communicator is created at the first collective on a device buffer (collective:
 * every rank must pass device buffers to that call): rank 0 makes the ncclUniqueId and
 * broadcasts it over the native TCP ring. The device is the caller's current CUDA device.
 * The communicator is non-blocking (ncclCommInitRankConfig, config.blocking = 0): its creation
 * and every enqueue may answer ncclInProgress, and ncclCommGetAsyncError is polled until
 * ncclSuccess, so a peer that never arrives is bounded by the collective timeout too. An NCCL
 * without ncclCommInitRankConfig (before 2.14) gets the blocking ncclCommInitRank, said once on
 * stderr. Each call is enqueued on the caller's stream (ty_set_cuda_stream) or a private one, and
 * that stream is waited for by polling, so the collective timeout applies; on timeout or
 * asynchronous error (a failed peer: TY_EPEER) the communicator is aborted.
 */
#include "internal.h"
#include "util.h"

#ifndef TY_WITH_NCCL

int ty__nccl_is_device_ptr(ty_ctx *c, const void *buf)
{
    (void)c;
    (void)buf;
    return 0;
}

int ty__nccl_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op)
{
    (void)c, (void)buf, (void)count, (void)dt, (void)op;
    return TY_ENOTSUP;
}

int ty__nccl_broadcast(ty_ctx *c, void *buf, size_t bytes, int root)
{
    (void)c, (void)buf, (void)bytes, (void)root;
    return TY_ENOTSUP;
}

int ty__nccl_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank)
{
    (void)c, (void)send, (void)recv, (void)bytes_per_rank;
    return TY_ENOTSUP;
}

void ty__nccl_free(ty_ctx *c)
{
    (void)c;
}

int ty_set_cuda_stream(ty_ctx *c, void *stream)
{
    (void)stream;
    return c ? TY_ENOTSUP : TY_EINVAL;
}

#else /* TY_WITH_NCCL */

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef TY_CUDART_PATH
#define TY_CUDART_PATH "libcudart.so"
#endif
#ifndef TY_NCCL_PATH
#define TY_NCCL_PATH "libnccl.so"
#endif

struct ty__nccl {
    int state; /* 1 loaded, -1 unavailable */
    void *cudart, *lib;
    ncclComm_t comm;
    bool nonblocking; /* comm made by ncclCommInitRankConfig with blocking = 0 */
    cudaStream_t stream;
    cudaError_t (*PointerGetAttributes)(struct cudaPointerAttributes *, const void *);
    cudaError_t (*GetDevice)(int *);
    cudaError_t (*StreamCreate)(cudaStream_t *);
    cudaError_t (*StreamQuery)(cudaStream_t);
    cudaError_t (*StreamDestroy)(cudaStream_t);
    cudaError_t (*GetLastError)(void);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    /* NULL when the loaded NCCL predates it (2.14): the blocking ncclCommInitRank is used. */
    ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    const char *(*GetErrorString)(ncclResult_t);
};

/* dlopen the first of two names that loads. */
static void *nccl_open(const char *a, const char *b)
{
    void *h = dlopen(a, RTLD_NOW | RTLD_LOCAL);
    return h ? h : dlopen(b, RTLD_NOW | RTLD_LOCAL);
}

/* Resolve every symbol; 0 or -1 when a required one is missing (ncclCommInitRankConfig is
 * optional). */
static int nccl_bind(struct ty__nccl *n)
{
#define SYM(h, field, name)                                                                        \
    do {                                                                                           \
        *(void **)(&n->field) = dlsym(h, name);                                                    \
        if (!n->field)                                                                             \
            return -1;                                                                             \
    } while (0)
    SYM(n->cudart, PointerGetAttributes, "cudaPointerGetAttributes");
    SYM(n->cudart, GetDevice, "cudaGetDevice");
    SYM(n->cudart, StreamCreate, "cudaStreamCreate");
    SYM(n->cudart, StreamQuery, "cudaStreamQuery");
    SYM(n->cudart, StreamDestroy, "cudaStreamDestroy");
    SYM(n->cudart, GetLastError, "cudaGetLastError");
    SYM(n->lib, GetUniqueId, "ncclGetUniqueId");
    SYM(n->lib, CommInitRank, "ncclCommInitRank");
    SYM(n->lib, AllReduce, "ncclAllReduce");
    SYM(n->lib, Broadcast, "ncclBroadcast");
    SYM(n->lib, AllGather, "ncclAllGather");
    SYM(n->lib, CommGetAsyncError, "ncclCommGetAsyncError");
    SYM(n->lib, CommAbort, "ncclCommAbort");
    SYM(n->lib, CommDestroy, "ncclCommDestroy");
    SYM(n->lib, GetErrorString, "ncclGetErrorString");
#undef SYM
    *(void **)(&n->CommInitRankConfig) = dlsym(n->lib, "ncclCommInitRankConfig");
    return 0;
}

/* Load CUDA + NCCL once per context; a failure is remembered (state -1). */
static struct ty__nccl *nccl_load(ty_ctx *c)
{
    if (c->nccl)
        return c->nccl->state == 1 ? c->nccl : NULL;
    struct ty__nccl *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    c->nccl = n;
    n->state = -1;
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (!vis || !*vis || strcmp(vis, "-1") == 0)
        return NULL;
    n->cudart = nccl_open("libcudart.so.13", TY_CUDART_PATH);
    n->lib = n->cudart ? nccl_open("libnccl.so.2", TY_NCCL_PATH) : NULL;
    if (!n->cudart || !n->lib || nccl_bind(n) < 0)
        return NULL;
    n->state = 1;
    return n;
}

int ty__nccl_is_device_ptr(ty_ctx *c, const void *buf)
{
    struct ty__nccl *n = nccl_load(c);
    if (!n)
        return 0;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    if (n->PointerGetAttributes(&a, buf) != cudaSuccess) {
        n->GetLastError(); /* clear the sticky "invalid value" of a host pointer */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice;
}

/* Abort the communicator after an error or a timeout; returns rc. */
static int nccl_abort(struct ty__nccl *n, int rc)
{
    if (n->comm)
        n->CommAbort(n->comm);
    n->comm = NULL;
    n->nonblocking = false;
    return rc;
}

/* Brief pause between polls of a stream or of the communicator's state. */
static void nccl_nap(void)
{
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* A non-blocking communicator's pending call (its creation, an enqueue that answered
 * ncclInProgress): poll ncclCommGetAsyncError until ncclSuccess (0), an error (TY_EPEER) or the
 * deadline (TY_ETIMEDOUT), the communicator aborted on either. */
static int nccl_settle(struct ty__nccl *n, int64_t deadline)
{
    for (;;) {
        ncclResult_t ar = ncclInProgress;
        ncclResult_t r = n->CommGetAsyncError(n->comm, &ar);
        if (r == ncclSuccess && ar == ncclSuccess)
            return 0;
        if (r != ncclSuccess || ar != ncclInProgress) {
            fprintf(stderr, "trainyard: nccl: %s\n", n->GetErrorString(r != ncclSuccess ? r : ar));
            return nccl_abort(n, TY_EPEER);
        }
        if (ty__ms_left(deadline) == 0)
            return nccl_abort(n, TY_ETIMEDOUT);
        nccl_nap();
    }
}

/* Create the communicator (collective over the TCP ring, which carries rank 0's unique id to
 * the others; a world of one needs none): non-blocking where the loaded NCCL
 * has ncclCommInitRankConfig, its creation then bounded by the collective timeout. 0, TY_ECUDA,
 * TY_EPEER (NCCL failed asynchronously), TY_ETIMEDOUT (a peer never arrived) or a ring error. */
static int nccl_comm(ty_ctx *c, struct ty__nccl *n)
{
    if (n->comm)
        return 0;
    /* One rank needs no ring (and no MASTER_PORT): its unique id stays with it. */
    int rc = c->world > 1 ? ty__coll_ready(c) : 0;
    if (rc < 0)
        return rc;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0 && n->GetUniqueId(&id) != ncclSuccess)
        return TY_ECUDA; /* the others time out or see the ring close */
    rc = c->world > 1 ? ty__ring_broadcast(c, &id, sizeof id, 0) : 0;
    if (rc < 0)
        return rc;
    int dev = 0;
    if (n->GetDevice(&dev) != cudaSuccess ||
        (!n->stream && n->StreamCreate(&n->stream) != cudaSuccess))
        return TY_ECUDA;
    if (!n->CommInitRankConfig) {
        fprintf(stderr, "trainyard: nccl: the loaded NCCL has no ncclCommInitRankConfig; using the "
                        "blocking ncclCommInitRank, not bounded by the collective timeout\n");
        ncclResult_t r = n->CommInitRank(&n->comm, c->world, id, c->rank);
        if (r != ncclSuccess) {
            fprintf(stderr, "trainyard: ncclCommInitRank: %s\n", n->GetErrorString(r));
            n->comm = NULL;
            return TY_ECUDA;
        }
        return 0;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = n->CommInitRankConfig(&n->comm, c->world, id, c->rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        fprintf(stderr, "trainyard: ncclCommInitRankConfig: %s\n", n->GetErrorString(r));
        return nccl_abort(n, TY_ECUDA);
    }
    n->nonblocking = true;
    return nccl_settle(n, util_mono_ms() + c->coll_timeout_ms);
}

/* The stream collectives are enqueued on: the caller's, else the SDK's own. */
static cudaStream_t nccl_stream(const ty_ctx *c, const struct ty__nccl *n)
{
    return c->cuda_stream ? (cudaStream_t)c->cuda_stream : n->stream;
}

int ty_set_cuda_stream(ty_ctx *c, void *stream)
{
    if (!c)
        return TY_EINVAL;
    c->cuda_stream = stream;
    return 0;
}

/* Wait for the stream by polling until deadline. */
static int nccl_wait(ty_ctx *c, struct ty__nccl *n, int64_t deadline)
{
    for (;;) {
        cudaError_t e = n->StreamQuery(nccl_stream(c, n));
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return TY_ECUDA;
        ncclResult_t ar = ncclSuccess;
        if (n->CommGetAsyncError(n->comm, &ar) != ncclSuccess ||
            (ar != ncclSuccess && ar != ncclInProgress))
            return nccl_abort(n, TY_EPEER);
        if (ty__ms_left(deadline) == 0)
            return nccl_abort(n, TY_ETIMEDOUT);
        nccl_nap();
    }
}

static ncclDataType_t nccl_dtype(ty_dtype dt)
{
    switch (dt) {
    case TY_FLOAT32:
        return ncclFloat32;
    case TY_FLOAT64:
        return ncclFloat64;
    case TY_INT32:
        return ncclInt32;
    case TY_INT64:
        return ncclInt64;
    }
    return ncclInt8;
}

static ncclRedOp_t nccl_op(ty_op op)
{
    switch (op) {
    case TY_SUM:
        return ncclSum;
    case TY_MIN:
        return ncclMin;
    case TY_MAX:
        return ncclMax;
    case TY_AVG:
        return ncclAvg;
    }
    return ncclSum;
}

/* Common tail: check the enqueue result (ncclInProgress on a non-blocking communicator: the
 * enqueue is settled first, the stream holds the work only then) and wait for the stream, both
 * within one collective timeout. */
static int nccl_finish(ty_ctx *c, struct ty__nccl *n, ncclResult_t r)
{
    int64_t deadline = util_mono_ms() + c->coll_timeout_ms;
    if (r == ncclInProgress && n->nonblocking) {
        int rc = nccl_settle(n, deadline);
        if (rc < 0)
            return rc;
    } else if (r != ncclSuccess) {
        fprintf(stderr, "trainyard: nccl: %s\n", n->GetErrorString(r));
        return TY_ECUDA;
    }
    return nccl_wait(c, n, deadline);
}

int ty__nccl_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op)
{
    struct ty__nccl *n = nccl_load(c);
    int rc = n ? nccl_comm(c, n) : TY_ENOTSUP;
    if (rc < 0)
        return rc;
    return nccl_finish(
        c, n,
        n->AllReduce(buf, buf, count, nccl_dtype(dt), nccl_op(op), n->comm, nccl_stream(c, n)));
}

int ty__nccl_broadcast(ty_ctx *c, void *buf, size_t bytes, int root)
{
    struct ty__nccl *n = nccl_load(c);
    int rc = n ? nccl_comm(c, n) : TY_ENOTSUP;
    if (rc < 0)
        return rc;
    return nccl_finish(c, n,
                       n->Broadcast(buf, buf, bytes, ncclInt8, root, n->comm, nccl_stream(c, n)));
}

int ty__nccl_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank)
{
    struct ty__nccl *n = nccl_load(c);
    int rc = n ? nccl_comm(c, n) : TY_ENOTSUP;
    if (rc < 0)
        return rc;
    return nccl_finish(
        c, n, n->AllGather(send, recv, bytes_per_rank, ncclInt8, n->comm, nccl_stream(c, n)));
}

void ty__nccl_free(ty_ctx *c)
{
    struct ty__nccl *n = c->nccl;
    if (!n)
        return;
    if (n->comm)
        n->CommDestroy(n->comm);
    if (n->stream)
        n->StreamDestroy(n->stream);
    if (n->lib)
        dlclose(n->lib);
    if (n->cudart)
        dlclose(n->cudart);
    free(n);
    c->nccl = NULL;
}

#endif /* TY_WITH_NCCL */
