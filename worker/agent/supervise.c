/* The process supervisor: starts workers (fork, own process group, log file, chdir, execvp), reaps
 * them (waitpid WNOHANG from the poll timer) and stops their process groups (SIGTERM, then SIGKILL
 * after the grace period). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* ------------------------------------------------------------------------------------------ */
/* Child side                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Reports a launch failure through the error pipe and the log (stderr), then exits 127. Only
 * async-signal-safe calls: this runs between fork and exec. */
static void child_fail(int errfd, const char *what, const char *arg, int err)
{
    char msg[1024];
    int n = snprintf(msg, sizeof(msg), "%s %s: %s", what, arg, strerror(err));
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(msg))
        n = sizeof(msg) - 1;
    ssize_t r = write(errfd, msg, (size_t)n);
    r = write(STDERR_FILENO, "trainyard-agent: ", 17);
    r = write(STDERR_FILENO, msg, (size_t)n);
    r = write(STDERR_FILENO, "\n", 1);
    (void)r;
    _exit(127);
}

static void child_exec(int errfd, const char *log_path, const struct agent_launch *l, char **env)
{
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    /* Its own process group (so a stop reaches its children too), but not its own session:
     * with sched_autogroup a new session is a new scheduling group, and the ranks of a job then
     * stall each other (measured: 40 % slower DDP epochs on this kernel). */
    setpgid(0, 0);
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        child_fail(errfd, "cannot open log file", log_path, errno);
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0 || dup2(nullfd, STDIN_FILENO) < 0 || dup2(logfd, STDOUT_FILENO) < 0 ||
        dup2(logfd, STDERR_FILENO) < 0)
        child_fail(errfd, "cannot set up", "stdio", errno);
    /* Nothing of the agent (websocket, report socket) leaks into the worker. */
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) { /* kernel < 5.11 */
        long max = sysconf(_SC_OPEN_MAX);
        for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
            if (fd != errfd)
                fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    if (l->working_dir && chdir(l->working_dir) != 0)
        child_fail(errfd, "cannot enter working_dir", l->working_dir, errno);
    environ = env;
    execvp(l->argv[0], (char *const *)l->argv);
    child_fail(errfd, "cannot execute", l->argv[0], errno);
}

/* ------------------------------------------------------------------------------------------ */
/* Parent side                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static struct agent_worker *worker_new(struct agent *a, const char *job_id, int64_t attempt,
                                       int64_t rank)
{
    struct agent_worker *w = calloc(1, sizeof(*w));
    if (!w || !(w->job_id = strdup(job_id))) {
        free(w);
        return NULL;
    }
    w->attempt = attempt;
    w->rank = rank;
    w->exit_code = -1;
    w->signal = -1;
    w->next = a->workers;
    a->workers = w;
    return w;
}

/* Marks w exited and queues its worker_exited event. */
static void worker_exited(struct agent *a, struct agent_worker *w, int exit_code, int sig,
                          const char *error)
{
    w->status = AGENT_WORKER_EXITED;
    w->exit_code = exit_code;
    w->signal = sig;
    w->kill_at_ms = 0;
    if (error && !w->error)
        w->error = strdup(error);
    int64_t seq = agent__next_seq(a);
    w->exit_seq = seq;
    agent__event_push(
        a, AGENT_EV_EXITED,
        agent_msg_worker_exited(seq, w->job_id, w->attempt, w->rank, exit_code, sig, w->error), seq,
        NULL);
}

/* A worker forked but not yet known to have exec'ed. */
struct pending_start {
    struct agent_worker *w;
    pid_t pid;
    int fd; /* read end of the exec-status pipe; -1 when nothing is pending */
};

/* Forks one worker without waiting for its exec, so the workers of a launch start side by
 * side. Fills *p when a child was forked; reports launch failures itself. */
static void spawn_one(struct agent *a, const struct agent_launch *l,
                      const struct agent_launch_worker *lw, struct pending_start *p)
{
    p->fd = -1;
    if (agent__worker_find(a, l->job_id, l->attempt, lw->rank)) {
        TY_INFO("proc", "job %s attempt %lld rank %lld already launched; ignoring the repeat",
                l->job_id, (long long)l->attempt, (long long)lw->rank);
        return;
    }
    struct agent_worker *w = worker_new(a, l->job_id, l->attempt, lw->rank);
    if (!w) {
        TY_ERROR("proc", "out of memory launching job %s", l->job_id);
        return;
    }
    char errbuf[1100];
    if (a->shutting_down) {
        worker_exited(a, w, 127, -1, "the agent is shutting down");
        return;
    }
    char *log_path = agent__log_path(a, l->job_id, l->attempt, lw->rank, true);
    if (!log_path) {
        snprintf(errbuf, sizeof(errbuf), "cannot create the log directory: %s", strerror(errno));
        worker_exited(a, w, 127, -1, errbuf);
        return;
    }
    char **env = agent_env_build(environ, l, lw, a->cfg->python_path, a->report_socket);
    int pfd[2] = {-1, -1};
    if (!env || pipe2(pfd, O_CLOEXEC) != 0) {
        snprintf(errbuf, sizeof(errbuf), "cannot prepare the worker: %s",
                 env ? strerror(errno) : "out of memory");
        worker_exited(a, w, 127, -1, errbuf);
        agent_env_free(env);
        free(log_path);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        child_exec(pfd[1], log_path, l, env);
    }
    int fork_errno = errno;
    close(pfd[1]);
    agent_env_free(env);
    free(log_path);
    if (pid < 0) {
        close(pfd[0]);
        snprintf(errbuf, sizeof(errbuf), "fork: %s", strerror(fork_errno));
        worker_exited(a, w, 127, -1, errbuf);
        return;
    }
    setpgid(pid, pid); /* also in the child: whichever runs first, no window without a group */
    w->pid = pid;
    *p = (struct pending_start){.w = w, .pid = pid, .fd = pfd[0]};
}

/* Waits for a forked worker's exec: EOF without data on the close-on-exec pipe means it
 * succeeded; otherwise the child wrote why it failed. Reports started or exited. */
static void confirm_one(struct agent *a, const struct agent_launch *l, struct pending_start *p)
{
    if (p->fd < 0)
        return;
    char errbuf[1100];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(p->fd, errbuf + got, sizeof(errbuf) - 1 - got);
        if (n > 0) {
            got += (size_t)n;
            if (got >= sizeof(errbuf) - 1)
                break;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        break;
    }
    close(p->fd);
    p->fd = -1;
    struct agent_worker *w = p->w;
    if (got > 0) {
        errbuf[got] = '\0';
        int st;
        while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
            ;
        TY_WARN("proc", "job %s attempt %lld rank %lld did not start: %s", l->job_id,
                (long long)l->attempt, (long long)w->rank, errbuf);
        worker_exited(a, w, 127, -1, errbuf);
        return;
    }
    w->status = AGENT_WORKER_RUNNING;
    TY_INFO("proc", "started job %s attempt %lld rank %lld: pid %ld", l->job_id,
            (long long)l->attempt, (long long)w->rank, (long)p->pid);
    int64_t seq = agent__next_seq(a);
    agent__event_push(a, AGENT_EV_STARTED,
                      agent_msg_worker_started(seq, l->job_id, l->attempt, w->rank, (long)p->pid),
                      seq, NULL);
}

void agent__launch(struct agent *a, const struct agent_launch *l)
{
    TY_INFO("proc", "launch job %s attempt %lld: %zu worker(s) of %lld", l->job_id,
            (long long)l->attempt, l->n_workers, (long long)l->world_size);
    struct pending_start *pending = calloc(l->n_workers ? l->n_workers : 1, sizeof(*pending));
    if (pending == NULL) {
        TY_ERROR("proc", "out of memory launching job %s", l->job_id);
        return;
    }
    /* Fork every worker first, then collect their exec results. */
    for (size_t i = 0; i < l->n_workers; i++)
        spawn_one(a, l, &l->workers[i], &pending[i]);
    for (size_t i = 0; i < l->n_workers; i++)
        confirm_one(a, l, &pending[i]);
    free(pending);
}

void agent__stop(struct agent *a, const char *job_id, int64_t attempt, int64_t grace_s)
{
    int64_t now = agent_now_ms();
    for (struct agent_worker *w = a->workers; w; w = w->next) {
        if (w->status != AGENT_WORKER_RUNNING || (job_id && strcmp(w->job_id, job_id) != 0) ||
            (attempt >= 0 && w->attempt != attempt))
            continue;
        int64_t at = now + grace_s * 1000;
        if (w->kill_at_ms && w->kill_at_ms <= at)
            continue; /* already stopping, sooner */
        TY_INFO("proc", "stopping job %s attempt %lld rank %lld (pgid %ld), grace %llds", w->job_id,
                (long long)w->attempt, (long long)w->rank, (long)w->pid, (long long)grace_s);
        if (kill(-w->pid, grace_s > 0 ? SIGTERM : SIGKILL) != 0 && errno != ESRCH)
            TY_WARN("proc", "kill(-%ld): %s", (long)w->pid, strerror(errno));
        w->kill_at_ms = at > 0 ? at : 1;
    }
}

void agent__supervise_poll(struct agent *a)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        struct agent_worker *w = a->workers;
        while (w && !(w->pid == pid && w->status == AGENT_WORKER_RUNNING))
            w = w->next;
        if (!w)
            continue;
        /* Whatever the worker left behind in its process group goes with it. */
        kill(-pid, SIGKILL);
        if (WIFSIGNALED(st)) {
            TY_INFO("proc", "job %s attempt %lld rank %lld (pid %ld) killed by signal %d",
                    w->job_id, (long long)w->attempt, (long long)w->rank, (long)pid, WTERMSIG(st));
            worker_exited(a, w, -1, WTERMSIG(st), NULL);
        } else {
            TY_INFO("proc", "job %s attempt %lld rank %lld (pid %ld) exited with %d", w->job_id,
                    (long long)w->attempt, (long long)w->rank, (long)pid, WEXITSTATUS(st));
            worker_exited(a, w, WEXITSTATUS(st), -1, NULL);
        }
    }
    int64_t now = agent_now_ms();
    for (struct agent_worker *w = a->workers; w; w = w->next) {
        if (w->status == AGENT_WORKER_RUNNING && w->kill_at_ms && w->kill_at_ms <= now) {
            TY_WARN("proc", "job %s attempt %lld rank %lld outlived its grace period: SIGKILL",
                    w->job_id, (long long)w->attempt, (long long)w->rank);
            kill(-w->pid, SIGKILL);
            w->kill_at_ms = now + 1000; /* again in a second if it somehow survives */
        }
    }
}
