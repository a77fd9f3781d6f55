/*
 * allreduce_bench — time ty_allreduce (float32, sum) over a range of sizes.
 *
 *   allreduce_bench [--ranks N] [--min BYTES] [--max BYTES] [--factor F] [--seconds S]
 *
 * With --ranks N (default 2) it forks N ranks on 127.0.0.1 itself; under a launcher that sets
 * RANK/WORLD_SIZE/MASTER_* it runs as that one rank. Rank 0 prints one line per size:
 *   <bytes> <iterations> <seconds per op> <algbw GB/s> <busbw GB/s>
 * busbw follows nccl-tests: algbw * 2(n-1)/n. Time per op is the slowest rank's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trainyard.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Parse a size like 4096, 4K, 64M, 1G. Returns 0 on error. */
static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return 0;
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    else if (*end == 'G' || *end == 'g')
        v <<= 30, end++;
    return *end ? 0 : (size_t)v;
}

/* One rank's benchmark loop; rank 0 prints. Returns 0 or an error code. */
static int bench_rank(size_t lo, size_t hi, size_t factor, double seconds)
{
    ty_ctx *c;
    int rc = ty_init(&c, NULL, NULL);
    if (rc < 0)
        return rc;
    int p = ty_world_size(c), r = ty_world_rank(c);
    float *buf = malloc(hi);
    if (!buf) {
        ty_finish(&c);
        return TY_ENOMEM;
    }
    for (size_t i = 0; i < hi / sizeof(float); i++)
        buf[i] = (float)(i % 7);
    if ((rc = ty_barrier(c)) < 0)
        goto out;
    if (r == 0)
        printf("# ranks %d  float32 sum\n# bytes iters sec_per_op algbw_GBps busbw_GBps\n", p);
    for (size_t bytes = lo; bytes <= hi; bytes *= factor) {
        size_t n = bytes / sizeof(float);
        /* warm up, then pick an iteration count that fills `seconds` (agreed by rank 0) */
        double t = now_s();
        for (int w = 0; w < 2 && rc == 0; w++)
            rc = ty_allreduce(c, buf, n, TY_FLOAT32, TY_SUM);
        double per = (now_s() - t) / 2;
        int32_t iters = per > 0 ? (int32_t)(seconds / per) : 1000;
        iters = iters < 3 ? 3 : iters > 2000 ? 2000 : iters;
        if (rc == 0)
            rc = ty_broadcast(c, &iters, sizeof iters, 0);
        if (rc == 0)
            rc = ty_barrier(c);
        t = now_s();
        for (int32_t i = 0; i < iters && rc == 0; i++)
            rc = ty_allreduce(c, buf, n, TY_FLOAT32, TY_SUM);
        double el = now_s() - t;
        if (rc == 0)
            rc = ty_allreduce(c, &el, 1, TY_FLOAT64, TY_MAX);
        if (rc < 0)
            break;
        double op = el / iters, alg = (double)bytes / op / 1e9;
        if (r == 0) {
            printf("%zu %d %.6e %.3f %.3f\n", bytes, iters, op, alg, alg * 2.0 * (p - 1) / p);
            fflush(stdout);
        }
    }
out:
    free(buf);
    ty_finish(&c);
    return rc;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

int main(int argc, char **argv)
{
    int ranks = 2;
    size_t lo = 4096, hi = 256u << 20;
    double seconds = 0.5;
    size_t factor = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--ranks") == 0)
            ranks = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--min") == 0)
            lo = parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "--max") == 0)
            hi = parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "--factor") == 0)
            factor = parse_size(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = strtod(argv[i + 1], NULL);
        else {
            fprintf(stderr,
                    "usage: %s [--ranks N] [--min B] [--max B] [--factor F] [--seconds S]\n",
                    argv[0]);
            return 2;
        }
    }
    if (ranks < 1 || ranks > 64 || lo < 4 || hi < lo || factor < 2 || !(seconds > 0)) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    if (getenv("RANK")) /* launched by someone else */
        return bench_rank(lo, hi, factor, seconds) < 0;

    int port = free_port();
    char buf[32];
    pid_t pid[64];
    for (int r = 0; r < ranks; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            snprintf(buf, sizeof buf, "%d", r);
            setenv("RANK", buf, 1);
            snprintf(buf, sizeof buf, "%d", ranks);
            setenv("WORLD_SIZE", buf, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(buf, sizeof buf, "%d", port);
            setenv("MASTER_PORT", buf, 1);
            setenv("TRAINYARD_JOB_ID", "bench", 1);
            int rc = bench_rank(lo, hi, factor, seconds);
            if (rc < 0)
                fprintf(stderr, "rank %d: %s\n", r, ty_strerror(rc));
            _exit(rc < 0);
        }
    }
    int bad = 0;
    for (int r = 0; r < ranks; r++) {
        int st;
        waitpid(pid[r], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}
