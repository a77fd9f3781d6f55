/*
 * allreduce_bench — time ty_allreduce (float32, sum) over a range of sizes.
 *
 *   allreduce_bench [--ranks N] [--min BYTES] [--max BYTES] [--factor F] [--seconds S]
 *                   [--heartbeat S]
 *
 * With --ranks N (default 2) it forks N ranks on 127.0.0.1 itself; under a launcher that sets
 * RANK/WORLD_SIZE/MASTER_* it runs as that one rank. Rank 0 prints one line per size:
 *   <bytes> <iterations> <seconds per op> <algbw GB/s> <busbw GB/s>
 * busbw follows nccl-tests: algbw * 2(n-1)/n. Time per op is the slowest rank's.
 * --heartbeat S: the forked ranks get a report socket (a sink process that reads and drops what
 * it gets, standing in for the agent), so their heartbeat threads run and send every S seconds
 * (TRAINYARD_HEARTBEAT_S): the cost of hang detection (docs/bench-allreduce.md).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
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

/* Forks a process listening on a unix socket `path` that accepts every connection and reads
 * and drops what arrives (one child per connection). Returns its pid, or -1. */
static pid_t start_sink(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 64) < 0)
        return -1;
    pid_t pid = fork();
    if (pid != 0) {
        close(lfd);
        return pid;
    }
    setpgid(0, 0);
    signal(SIGCHLD, SIG_IGN);
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            continue;
        if (fork() == 0) {
            char buf[4096];
            while (read(fd, buf, sizeof buf) > 0)
                ;
            _exit(0);
        }
        close(fd);
    }
}

int main(int argc, char **argv)
{
    int ranks = 2;
    size_t lo = 4096, hi = 256u << 20;
    double seconds = 0.5;
    size_t factor = 2;
    const char *heartbeat = NULL;
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
        else if (strcmp(argv[i], "--heartbeat") == 0)
            heartbeat = argv[i + 1];
        else {
            fprintf(stderr,
                    "usage: %s [--ranks N] [--min B] [--max B] [--factor F] [--seconds S] "
                    "[--heartbeat S]\n",
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

    char dir[] = "/tmp/ty-bench-XXXXXX", sock[64] = "";
    pid_t sink = -1;
    if (heartbeat) {
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
        snprintf(sock, sizeof sock, "%s/report.sock", dir);
        sink = start_sink(sock);
        if (sink < 0) {
            fprintf(stderr, "cannot start the report sink at %s\n", sock);
            return 1;
        }
        setenv("TRAINYARD_REPORT_SOCKET", sock, 1);
        setenv("TRAINYARD_HEARTBEAT_S", heartbeat, 1);
    }
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
    if (sink > 0) {
        kill(-sink, SIGKILL);
        waitpid(sink, NULL, 0);
        unlink(sock);
        rmdir(dir);
    }
    return bad;
}
