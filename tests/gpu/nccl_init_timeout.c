/*
 * nccl_init_timeout.c — a `gpu` test (tests/gpu/gpu.cmake): NCCL communicator creation is bounded
 * by the collective timeout. Two ranks on the native ring; rank 0 has the GPU
 * (CUDA_VISIBLE_DEVICES, set by CTest) and calls ty_allreduce on a device buffer, rank 1 has none
 * (CUDA_VISIBLE_DEVICES empty): it takes part in the ring broadcast of the ncclUniqueId (a host
 * ty_broadcast of the same size from root 0) and never calls NCCL. Rank 0's communicator
 * therefore waits for a peer that never arrives and must give up with TY_ETIMEDOUT, the
 * communicator aborted, instead of blocking in ncclCommInitRank forever (CTest's TIMEOUT catches
 * a hang). Exits 0 when rank 0 got TY_ETIMEDOUT and rank 1's broadcast succeeded.
 */
#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trainyard.h"

/* Collective timeout of both ranks, seconds. */
#define TIMEOUT_S "5"

/* A loopback port free at the time of asking, or -1. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* The environment of one rank of a two-rank job with no agent. */
static void set_rank_env(int rank, int port)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%d", rank);
    setenv("RANK", buf, 1);
    setenv("LOCAL_RANK", buf, 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(buf, sizeof buf, "%d", port);
    setenv("MASTER_PORT", buf, 1);
    setenv("TRAINYARD_JOB_ID", "test-nccl-init-timeout", 1);
    setenv("TRAINYARD_BACKEND", "native", 1);
    setenv("TRAINYARD_TRANSPORT", "tcp", 1);
    setenv("TRAINYARD_COLLECTIVE_TIMEOUT_S", TIMEOUT_S, 1);
    unsetenv("TRAINYARD_REPORT_SOCKET");
}

/* Rank 1: the unique id's broadcast on the host, then no NCCL. Exit code 0 when it arrived. */
static int peer(int port)
{
    set_rank_env(1, port);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    ty_ctx *c = NULL;
    int rc = ty_init(&c, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "rank 1: ty_init: %s\n", ty_strerror(rc));
        return 2;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    rc = ty_broadcast(c, &id, sizeof id, 0);
    printf("rank 1: broadcast of the unique id: %s\n", rc == 0 ? "ok" : ty_strerror(rc));
    fflush(stdout);
    /* Stay in the ring until rank 0 gives up and closes it. */
    if (rc == 0)
        ty_barrier(c);
    ty_finish(&c);
    return rc == 0 ? 0 : 1;
}

/* Rank 0: ty_allreduce on a device buffer; 0 when it answered TY_ETIMEDOUT. */
static int root(int port)
{
    set_rank_env(0, port);
    ty_ctx *c = NULL;
    int rc = ty_init(&c, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "rank 0: ty_init: %s\n", ty_strerror(rc));
        return 2;
    }
    float *dev = NULL;
    if (cudaMalloc((void **)&dev, 256 * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "rank 0: cudaMalloc failed\n");
        ty_finish(&c);
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = ty_allreduce(c, dev, 256, TY_FLOAT32, TY_SUM);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s: rank 0: ty_allreduce with a peer that never creates its communicator: rc %d "
           "(%s) after %.1f s (collective timeout %s s)\n",
           rc == TY_ETIMEDOUT ? "ok" : "FAILED", rc, ty_strerror(rc), s, TIMEOUT_S);
    fflush(stdout);
    cudaFree(dev);
    ty_finish(&c);
    return rc == TY_ETIMEDOUT ? 0 : 1;
}

int main(void)
{
    int port = free_port();
    if (port < 0) {
        perror("free port");
        return 2;
    }
    fflush(stdout);
    pid_t pid = fork(); /* before any CUDA call */
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0)
        _exit(peer(port));
    int rc0 = root(port);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("FAILED: rank 1 (the peer) did not take part in the id's broadcast\n");
        return 1;
    }
    return rc0;
}
