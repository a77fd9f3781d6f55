/* launch_spawn: what starting N worker processes costs on this machine, the way
 * trainyard-agent does it today and the ways it could. Not a test; prints milliseconds.
 *
 *   build-bench3/bench/launch_spawn [N] [ROUNDS]        (default 16 workers, 7 rounds)
 *
 * Each worker is `/bin/sh -c 'exec sleep 0.2'` in a new session with stdout/stderr appended to a
 * log file and stdin from /dev/null, as worker/agent/supervise.c sets them up:
 *
 *   fork-serial   fork(); child: setsid, open log, dup2, close_range, execv; parent blocks on
 *                 a close-on-exec pipe until the child has exec'd; then the next worker
 *                 (trainyard-agent's launch_one() today)
 *   fork-overlap  the same forks, but all of them first, then wait for every exec
 *   spawn-serial  posix_spawn (glibc: clone(CLONE_VM|CLONE_VFORK), returns once exec'd) with
 *                 POSIX_SPAWN_SETSID and file actions for the log and /dev/null
 *   fork-exit     fork() + _exit(0) only: the bare fork cost, no exec
 *
 * The figures are per batch of N; docs/bench-launch.md has them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

static char *const worker_argv[] = {"/bin/sh", "-c", "exec sleep 0.2", NULL};
static char log_path[] = "/tmp/launch_spawn.log";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void child(int errfd)
{
    setsid();
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (logfd < 0 || nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
        _exit(126);
    syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
    execv(worker_argv[0], worker_argv);
    ssize_t r = write(errfd, "x", 1);
    (void)r;
    _exit(127);
}

static void wait_exec(int fd)
{
    char c;
    while (read(fd, &c, 1) < 0 && errno == EINTR)
        ;
    close(fd);
}

static pid_t fork_one(int *rfd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        child(p[1]);
    }
    close(p[1]);
    *rfd = p[0];
    return pid;
}

static void reap(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            waitpid(pids[i], NULL, 0);
}

static double fork_serial(pid_t *pids, int n)
{
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        int fd;
        pids[i] = fork_one(&fd);
        if (pids[i] > 0)
            wait_exec(fd);
    }
    return now_ms() - t0;
}

static double fork_overlap(pid_t *pids, int n)
{
    int fds[1024];
    double t0 = now_ms();
    for (int i = 0; i < n; i++)
        pids[i] = fork_one(&fds[i]);
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            wait_exec(fds[i]);
    return now_ms() - t0;
}

static double spawn_serial(pid_t *pids, int n)
{
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        posix_spawnattr_t at;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_init(&at);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
        sigset_t none;
        sigemptyset(&none);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        if (posix_spawn(&pids[i], worker_argv[0], &fa, &at, worker_argv, environ) != 0)
            pids[i] = -1;
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
    }
    return now_ms() - t0;
}

static double fork_exit(pid_t *pids, int n)
{
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(0);
    }
    return now_ms() - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* argv[i] as an integer in [lo, hi], `dflt` when absent, -1 when malformed. */
static long arg_long(int argc, char **argv, int i, long dflt, long lo, long hi)
{
    if (argc <= i)
        return dflt;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || end == argv[i] || *end != '\0' || v < lo || v > hi)
        return -1;
    return v;
}

int main(int argc, char **argv)
{
    int n = (int)arg_long(argc, argv, 1, 16, 1, 1024);
    int rounds = (int)arg_long(argc, argv, 2, 7, 1, 1000);
    if (n < 1 || rounds < 1) {
        fprintf(stderr, "usage: launch_spawn [N 1..1024] [ROUNDS]\n");
        return 2;
    }
    static pid_t pids[1024];
    static const struct {
        const char *name;
        double (*fn)(pid_t *, int);
    } methods[] = {{"fork-serial", fork_serial},
                   {"fork-overlap", fork_overlap},
                   {"spawn-serial", spawn_serial},
                   {"fork-exit", fork_exit}};
    enum { M = sizeof(methods) / sizeof(methods[0]) };
    double *t = calloc((size_t)(M * rounds), sizeof(double));
    if (t == NULL)
        return 1;
    /* Interleave the methods round by round so that machine noise hits all of them. */
    for (int r = 0; r < rounds; r++)
        for (int m = 0; m < M; m++) {
            t[m * rounds + r] = methods[m].fn(pids, n);
            reap(pids, n);
        }
    printf("starting %d workers (/bin/sh -c 'exec sleep 0.2', setsid, log file), %d rounds, ms "
           "per batch:\n",
           n, rounds);
    printf("  %-13s %8s %8s %8s %10s\n", "method", "min", "median", "max", "per worker");
    for (int m = 0; m < M; m++) {
        double *v = &t[m * rounds];
        qsort(v, (size_t)rounds, sizeof(double), cmp);
        double med = v[rounds / 2];
        printf("  %-13s %8.1f %8.1f %8.1f %10.2f\n", methods[m].name, v[0], med, v[rounds - 1],
               med / n);
    }
    free(t);
    unlink(log_path);
    return 0;
}
