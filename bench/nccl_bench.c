/*
 * nccl_bench — ty_allreduce (float32, sum) on CUDA device buffers, through the SDK's NCCL
 * backend, one rank (world size 1: the one GPU of a lent machine). Standalone (no Trainyard
 * environment): CUDA_VISIBLE_DEVICES names the GPU.
 *
 *   nccl_bench [--min BYTES] [--max BYTES] [--seconds S]
 *
 * Prints one line per size, in nccl-tests' terms:
 *   <bytes> <iterations> <us per op> <algbw GB/s> <busbw GB/s>
 * busbw = algbw * 2(n-1)/n, which is 0 at n = 1 by definition (nothing crosses a link): at world
 * size 1 algbw is the figure that says something (the GPU's in-place reduction copy rate and the
 * SDK's per-call cost). Results and the command: docs/gpu.md.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trainyard.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Time ty_allreduce on `bytes` of dev for about `seconds` (after 5 warm-ups). */
static int time_size(ty_ctx *c, float *dev, size_t bytes, double seconds)
{
    size_t count = bytes / sizeof(float);
    for (int i = 0; i < 5; i++)
        if (ty_allreduce(c, dev, count, TY_FLOAT32, TY_SUM) != 0)
            return -1;
    long iters = 0;
    double t0 = now_s(), t;
    do {
        for (int i = 0; i < 10; i++, iters++) {
            int rc = ty_allreduce(c, dev, count, TY_FLOAT32, TY_SUM);
            if (rc != 0) {
                fprintf(stderr, "ty_allreduce of %zu bytes: %s\n", bytes, ty_strerror(rc));
                return -1;
            }
        }
        t = now_s() - t0;
    } while (t < seconds);
    double per_op = t / (double)iters, algbw = (double)bytes / per_op / 1e9;
    int n = ty_world_size(c);
    printf("%zu %ld %.2f %.2f %.2f\n", bytes, iters, per_op * 1e6, algbw,
           algbw * 2.0 * (n - 1) / n);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    size_t min = 8, max = (size_t)1 << 30;
    double seconds = 0.5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--min") == 0)
            min = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--max") == 0)
            max = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = strtod(argv[i + 1], NULL);
        else {
            fprintf(stderr, "usage: nccl_bench [--min BYTES] [--max BYTES] [--seconds S]\n");
            return 2;
        }
    }
    if (min < sizeof(float) || max < min) {
        fprintf(stderr, "nccl_bench: need 4 <= --min <= --max\n");
        return 2;
    }
    ty_ctx *c = NULL;
    int rc = ty_init(&c, &argc, &argv);
    if (rc < 0) {
        fprintf(stderr, "ty_init: %s\n", ty_strerror(rc));
        return 1;
    }
    float *dev = NULL;
    if (cudaMalloc((void **)&dev, max) != cudaSuccess || cudaMemset(dev, 0, max) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc of %zu bytes failed\n", max);
        ty_finish(&c);
        return 1;
    }
    printf("# world size %d; bytes iterations us_per_op algbw_GBps busbw_GBps\n", ty_world_size(c));
    int failed = 0;
    for (size_t b = min; b <= max && !failed; b *= 4)
        failed = time_size(c, dev, b, seconds) != 0;
    cudaFree(dev);
    ty_finish(&c);
    return failed;
}
