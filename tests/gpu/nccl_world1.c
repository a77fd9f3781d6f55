/*
 * nccl_world1.c — a `gpu` test (tests/gpu/gpu.cmake): the SDK's collectives on CUDA device
 * buffers through NCCL with one rank (one GPU cannot hold two NCCL ranks): ty_allreduce (sum and
 * max), ty_broadcast and ty_allgather on device memory, on the SDK's stream and then on a stream
 * of the caller (ty_set_cuda_stream), each result copied back and checked. Standalone (no
 * Trainyard environment): CUDA_VISIBLE_DEVICES must name a GPU. Exits 0 when all hold.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "trainyard.h"

#define N 1024

static int failed;

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    failed |= !ok;
}

/* Every collective once on device buffers, results checked on the host. */
static void run(ty_ctx *c, float *dev, float *dev2, const char *stream_name)
{
    float host[N], back[N];
    char what[128];
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    cudaMemcpy(dev, host, sizeof(host), cudaMemcpyHostToDevice);
    int rc = ty_allreduce(c, dev, N, TY_FLOAT32, TY_SUM);
    cudaMemcpy(back, dev, sizeof(back), cudaMemcpyDeviceToHost);
    snprintf(what, sizeof(what), "allreduce sum, %s (rc %d)", stream_name, rc);
    check(rc == 0 && memcmp(back, host, sizeof(host)) == 0, what);
    rc = ty_allreduce(c, dev, N, TY_FLOAT32, TY_MAX);
    snprintf(what, sizeof(what), "allreduce max, %s (rc %d)", stream_name, rc);
    check(rc == 0, what);
    rc = ty_broadcast(c, dev, sizeof(host), 0);
    cudaMemcpy(back, dev, sizeof(back), cudaMemcpyDeviceToHost);
    snprintf(what, sizeof(what), "broadcast, %s (rc %d)", stream_name, rc);
    check(rc == 0 && memcmp(back, host, sizeof(host)) == 0, what);
    cudaMemset(dev2, 0, sizeof(host));
    rc = ty_allgather(c, dev, dev2, sizeof(host));
    cudaMemcpy(back, dev2, sizeof(back), cudaMemcpyDeviceToHost);
    snprintf(what, sizeof(what), "allgather, %s (rc %d)", stream_name, rc);
    check(rc == 0 && memcmp(back, host, sizeof(host)) == 0, what);
}

int main(int argc, char **argv)
{
    ty_ctx *c = NULL;
    int rc = ty_init(&c, &argc, &argv);
    if (rc < 0) {
        fprintf(stderr, "ty_init: %s\n", ty_strerror(rc));
        return 1;
    }
    float *dev = NULL, *dev2 = NULL;
    if (cudaMalloc((void **)&dev, N * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&dev2, N * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    run(c, dev, dev2, "the SDK's stream");
    cudaStream_t s;
    cudaStreamCreate(&s);
    check(ty_set_cuda_stream(c, s) == 0, "ty_set_cuda_stream");
    run(c, dev, dev2, "the caller's stream");
    ty_set_cuda_stream(c, NULL);
    cudaStreamDestroy(s);
    cudaFree(dev);
    cudaFree(dev2);
    ty_finish(&c);
    return failed;
}
