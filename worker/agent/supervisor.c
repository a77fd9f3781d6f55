/* trainyard-supervisor: one per worker, between the agent and the worker, so that a worker
 * outlives an agent crash and its exit status still reaches the restarted agent (as Slurm's
 * slurmstepd outlives slurmd; docs/agent-restart.md).
 *
 *   trainyard-supervisor ORPHAN_TIMEOUT_S PROGRAM ARGV0 [ARGS...]
 *
 * Started by the agent only (supervise.c), already as the worker's uid, in the worker's
 * environment and working directory, stdout and stderr on the worker's log file, and with three
 * descriptors of the agent's:
 *   3  the worker's status file (<data>/workers/<key>.status), opened for writing by the agent:
 *      "exit N", "signal N" or "orphaned N" once the worker is gone, synced before exiting;
 *   4  the agent lease (<data>/agent.lease), read only: "PID START TIMEOUT_S" of the live agent;
 *   5  the start pipe: 8 bytes, {0, worker pid} once the worker has exec'd, or {1, errno} when
 *      it could not, then closed.
 * The worker runs in a process group of its own (its pid), which the agent signals; the
 * supervisor is not in it. A worker whose supervisor dies gets SIGKILL (PR_SET_PDEATHSIG).
 * Once a second the supervisor reads the lease: when the agent it names is gone (pid and start
 * time, /proc/PID/stat field 22) for ORPHAN_TIMEOUT_S seconds (or the lease's newer timeout), it
 * kills the worker's process group and records "orphaned". A restarted agent rewrites the lease
 * and so takes every supervisor over. Exits as its worker did (same code, same signal). */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SUP_STATUS_FD 3
#define SUP_LEASE_FD 4
#define SUP_START_FD 5

extern char **environ;

/* Writes all of buf to fd (retrying short writes and EINTR). 0 or -1. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reports the start to the agent and closes the pipe. */
static void start_report(int32_t kind, int32_t value)
{
    int32_t msg[2] = {kind, value};
    write_all(SUP_START_FD, msg, sizeof(msg));
    close(SUP_START_FD);
}

/* Writes the final status line durably (best effort: the agent falls back on the exit status). */
static void status_write(const char *what, int value)
{
    char line[64];
    int n = snprintf(line, sizeof(line), "%s %d\n", what, value);
    if (n > 0 && write_all(SUP_STATUS_FD, line, (size_t)n) == 0)
        fdatasync(SUP_STATUS_FD);
}

/* Reads the lease: 1 when the agent it names runs (and updates *timeout_s from it when the lease
 * gives one), 0 when that agent is gone, -1 when the lease cannot be read (counts as gone). */
static int agent_alive(int64_t *timeout_s)
{
    char buf[128];
    ssize_t n = pread(SUP_LEASE_FD, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long pid = strtoll(buf, &end, 10);
    unsigned long long start = strtoull(end, &end, 10);
    long long tmo = strtoll(end, &end, 10);
    if (errno != 0 || pid <= 0 || pid > INT32_MAX)
        return -1;
    if (tmo > 0)
        *timeout_s = tmo;
    unsigned long long now_start = 0;
    return util_proc_start_time((pid_t)pid, &now_start) == 0 && now_start == start;
}

/* The worker child: its own process group, killed with its supervisor, default signals, only
 * fds 0-2 (and the close-on-exec error pipe). Never returns. */
static void child_exec(const char *program, char **argv, int errfd)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    close(SUP_STATUS_FD);
    close(SUP_LEASE_FD);
    close(SUP_START_FD);
    execve(program, argv, environ);
    if (errno == ENOEXEC) { /* a script without "#!": run by /bin/sh, as execvp would */
        size_t argc = 0;
        while (argv[argc])
            argc++;
        char **sh = calloc(argc + 2, sizeof(*sh));
        if (sh) {
            sh[0] = "/bin/sh";
            sh[1] = (char *)program;
            for (size_t i = 1; i < argc; i++)
                sh[i + 1] = argv[i];
            execve("/bin/sh", sh, environ);
        }
    }
    int err = errno;
    write_all(errfd, &err, sizeof(err));
    _exit(127);
}

/* Exits the way the worker did: the same code, or the same signal (no core file). */
static void exit_like(int st)
{
    if (WIFSIGNALED(st)) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(WTERMSIG(st), SIG_DFL);
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        raise(WTERMSIG(st));
        _exit(128 + WTERMSIG(st));
    }
    _exit(WEXITSTATUS(st));
}

int main(int argc, char **argv)
{
    char *end = NULL;
    errno = 0;
    int64_t timeout_s = argc >= 4 ? strtoll(argv[1], &end, 10) : 0;
    bool fds = fcntl(SUP_STATUS_FD, F_GETFD) >= 0 && fcntl(SUP_LEASE_FD, F_GETFD) >= 0 &&
               fcntl(SUP_START_FD, F_GETFD) >= 0;
    if (argc < 4 || errno != 0 || end == argv[1] || *end != '\0' || timeout_s < 1 || !fds) {
        fprintf(stderr, "trainyard-supervisor: started by trainyard-agent only\n");
        return 2;
    }
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    /* The agent's stop signals go to the worker's group; a terminal's go nowhere near us. */
    signal(SIGHUP, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        start_report(1, errno);
        return 127;
    }
    pid_t self = getpid();
    pid_t child = fork();
    if (child < 0) {
        start_report(1, errno);
        return 127;
    }
    if (child == 0) {
        signal(SIGHUP, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        close(errpipe[0]);
        if (getppid() != self)
            _exit(137);
        child_exec(argv[2], argv + 3, errpipe[1]);
    }
    setpgid(child, child); /* also here, so that the group exists before the agent signals it */
    close(errpipe[1]);
    int err = 0;
    ssize_t n;
    while ((n = read(errpipe[0], &err, sizeof(err))) < 0 && errno == EINTR)
        ;
    close(errpipe[0]);
    if (n == (ssize_t)sizeof(err)) {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
            ;
        /* As the agent words a start failure (its own log line is for what it checks itself). */
        fprintf(stderr, "trainyard-agent: cannot execute %s: %s\n", argv[3], strerror(err));
        start_report(1, err);
        return 127;
    }
    start_report(0, child);

    int64_t seen_ms = util_mono_ms();
    for (;;) {
        struct timespec tick = {1, 0};
        sigtimedwait(&chld, NULL, &tick);
        int st;
        pid_t r = waitpid(child, &st, WNOHANG);
        if (r == child) {
            status_write(WIFSIGNALED(st) ? "signal" : "exit",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            exit_like(st);
        }
        if (r < 0 && errno != EINTR)
            return 127; /* cannot happen: the worker is our only child */
        if (agent_alive(&timeout_s) == 1) {
            seen_ms = util_mono_ms();
            continue;
        }
        if (util_mono_ms() - seen_ms < timeout_s * 1000)
            continue;
        fprintf(stderr, "trainyard-supervisor: no agent for %lld s: killing the worker (pid %ld)\n",
                (long long)timeout_s, (long)child);
        kill(-child, SIGKILL);
        while (waitpid(child, &st, 0) < 0 && errno == EINTR)
            ;
        status_write("orphaned", (int)timeout_s);
        return 137;
    }
}
