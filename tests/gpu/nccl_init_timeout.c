/*
 * nccl_init_timeout.c — a `gpu` test (tests/gpu/gpu.cmake): NCCL communicator creation is bounded
 * by the collective timeout. Two ranks on the native ring; rank 0 has the GPU
 * and calls ty_allreduce on a device buffer; rank 1 takes part in the ring broadcast of the
 * ncclUniqueId (a host ty_broadcast of the same size from root 0) and never calls NCCL. Rank 0's
 * communicator therefore waits for a peer that never arrives and must give up with TY_ETIMEDOUT,
 * the communicator aborted, instead of blocking in ncclCommInitRank forever (CTest's TIMEOUT
 * catches a hang). Exits 0 when rank 0 got TY_ETIMEDOUT and rank 1's broadcast succeeded.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_collectives_world.h"
#include "trainyard.h"

/* Collective timeout of both ranks, seconds. */
#define TIMEOUT_S 5.0

/* Rank 1: the unique id's broadcast on the host, then no NCCL. 0 when it arrived. */
static int peer(ty_ctx *c)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int rc = ty_broadcast(c, &id, sizeof id, 0);
    printf("rank 1: broadcast of the unique id: %s\n", rc == 0 ? "ok" : ty_strerror(rc));
    fflush(stdout);
    /* Stay in the ring until rank 0 gives up and closes it. */
    if (rc == 0)
        ty_barrier(c);
    return rc == 0 ? 0 : 1;
}

/* Rank 0: ty_allreduce on a device buffer; 0 when it answered TY_ETIMEDOUT. */
static int root(ty_ctx *c)
{
    /* The world's ranks start with no GPU (test_collectives_world.c unsets it); rank 0 has one.
     * The SDK reads it at its first collective. */
    setenv("CUDA_VISIBLE_DEVICES", "0", 1);
    float *dev = NULL;
    if (cudaMalloc((void **)&dev, 256 * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "rank 0: cudaMalloc failed\n");
        return 2;
    }
    long long t0 = tw_now_ms();
    int rc = ty_allreduce(c, dev, 256, TY_FLOAT32, TY_SUM);
    printf("%s: rank 0: ty_allreduce with a peer that never creates its communicator: rc %d "
           "(%s) after %.1f s (collective timeout %.0f s)\n",
           rc == TY_ETIMEDOUT ? "ok" : "FAILED", rc, ty_strerror(rc),
           (double)(tw_now_ms() - t0) / 1e3, TIMEOUT_S);
    fflush(stdout);
    cudaFree(dev);
    return rc == TY_ETIMEDOUT ? 0 : 1;
}

static int rank_main(ty_ctx *c, void *arg)
{
    (void)arg;
    return ty_world_rank(c) == 0 ? root(c) : peer(c);
}

int main(void)
{
    /* Two forked ranks (test_collectives_world.c: the agent's environment, no CUDA call in the
     * parent before the fork); every rank must exit 0. */
    int failed = tw_run(2, rank_main, NULL, TIMEOUT_S, 60000);
    if (failed)
        printf("FAILED: %d rank(s) did not end as expected\n", failed);
    return failed ? 1 : 0;
}
