/* The process supervisor, starting half: starts workers, each under a trainyard-supervisor
 * (supervisor.c; posix_spawn: log file, chdir, exec; the worker in a process group of its own),
 * and records a worker's end (agent__worker_exited). Noticing those ends and stopping workers is
 * in supervise_reap.c. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ------------------------------------------------------------------------------------------ */
/* Starting one process                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* 0 when dir can be entered, else the errno chdir would fail with. */
static int dir_enter_error(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    return access(dir, X_OK) == 0 ? 0 : errno;
}

/* True when `path` (relative ones taken from working_dir, where the child will be) is a file
 * the agent may execute; else false with *err updated the way execvp would report it. */
static bool is_executable(const char *path, const char *working_dir, int *err)
{
    char buf[4096];
    if (path[0] != '/' && working_dir) {
        int n = snprintf(buf, sizeof(buf), "%s/%s", working_dir, path);
        if (n < 0 || (size_t)n >= sizeof(buf)) {
            *err = ENAMETOOLONG;
            return false;
        }
        path = buf;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return false; /* keep looking; ENOENT unless a later entry says otherwise */
    if (S_ISREG(st.st_mode) && access(path, X_OK) == 0)
        return true;
    *err = EACCES;
    return false;
}

/* The program execvp(file) would run with the worker's environment: posix_spawnp would search
 * the agent's PATH, and the job's env may set another. A name with a slash is used as it is.
 * Returns a malloc'd path, or NULL with errno (ENOENT, EACCES, ENOMEM). */
static char *resolve_program(const char *file, char *const *env, const char *working_dir)
{
    if (strchr(file, '/'))
        return strdup(file);
    const char *path = agent_env_get(env, "PATH");
    if (path == NULL)
        path = "/bin:/usr/bin"; /* glibc's execvp default (confstr _CS_PATH) */
    size_t flen = strlen(file);
    int err = ENOENT;
    for (const char *p = path;;) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        char *cand = malloc(dlen + flen + 2);
        if (cand == NULL) {
            errno = ENOMEM;
            return NULL;
        }
        /* An empty entry is the current directory (the worker's working_dir), as in execvp. */
        if (dlen > 0) {
            memcpy(cand, p, dlen);
            cand[dlen++] = '/';
        }
        memcpy(cand + dlen, file, flen + 1);
        if (is_executable(cand, working_dir, &err))
            return cand;
        free(cand);
        if (*end == '\0')
            break;
        p = end + 1;
    }
    errno = err;
    return NULL;
}

/* The supervisor's descriptors 3, 4 and 5 (supervisor.c): its worker's status file, the agent
 * lease (read only: the worker, under the supervisor's uid, can take its descriptors with
 * pidfd_getfd) and the start pipe; and the cgroup.procs files of the worker's cgroups, which the
 * child joins before anything else. Each is numbered 10 or above here, so that moving them down
 * clobbers none of the others. */
struct sup_fds {
    int fd[3];
    int cg[AGENT_CG_MAX];
    int n_cg;
    int in; /* stdin (10 or above; a warm interpreter's socket pair), or -1: /dev/null */
};

/* The child half of spawn_as: only async-signal-safe calls (the agent may have other threads).
 * Returns the errno of the failed step; on success it does not return. */
static int child_exec(const char *program, char *const *argv, const struct aproto_launch *l,
                      char *const *env, const int logfd[2], int errfd, uid_t uid, gid_t gid,
                      const struct sup_fds *keep)
{
    sigset_t none;
    sigemptyset(&none);
    static const int dfl[] = {SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGHUP, SIGQUIT};
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
        sigaction(dfl[i], &sa, NULL);
    /* An ephemeral agent catches SIGUSR1, Slurm's warning before preemption or the time limit,
     * which Slurm sends to every process of the step: the supervisor and the worker ignore it
     * (an ignored signal stays ignored across exec) and checkpoint when the server asks. */
    struct sigaction usr1;
    if (sigaction(SIGUSR1, NULL, &usr1) == 0 && usr1.sa_handler != SIG_DFL) {
        sa.sa_handler = SIG_IGN;
        sigaction(SIGUSR1, &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Into the worker's cgroups first: all it starts from here on is counted and killed there. */
    for (int i = 0; i < keep->n_cg; i++)
        if (write(keep->cg[i], "0", 1) != 1)
            return errno;
    if (setpgid(0, 0) != 0 || dup2(logfd[0], STDOUT_FILENO) < 0 ||
        dup2(logfd[1], STDERR_FILENO) < 0)
        return errno;
    int nul = keep->in >= 0 ? keep->in : open("/dev/null", O_RDONLY);
    if (nul < 0 || (nul != STDIN_FILENO && dup2(nul, STDIN_FILENO) < 0))
        return errno;
    /* errfd and the supervisor's descriptors are 10 or above (spawn_as): move these to 3-5. */
    for (int i = 0; i < 3; i++)
        if (dup2(keep->fd[i], 3 + i) < 0)
            return errno;
    /* Every other fd of the agent goes; errfd (close-on-exec) stays to report a failure. */
    if (errfd > 6)
        syscall(SYS_close_range, 6, errfd - 1, 0);
    syscall(SYS_close_range, errfd + 1, ~0U, 0);
    /* Raw system calls: glibc's wrappers would try to change every thread of the process. */
    if (uid != AGENT_NO_UID &&
        (syscall(SYS_setgroups, 0, NULL) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
         syscall(SYS_setresuid, uid, uid, uid) != 0))
        return errno;
    if (l->working_dir && chdir(l->working_dir) != 0)
        return errno;
    execve(program, argv, env);
    return errno;
}

/* spawn_worker for a worker with a uid or cgroups of its own: posix_spawn can neither change
 * the uid nor join a cgroup, so fork, join the cgroups, drop every privilege (supplementary
 * groups, gid, uid; unless uid is AGENT_NO_UID) and exec. Like posix_spawn, it returns
 * once the child has exec'd (a close-on-exec pipe carries the errno of a failed step). Returns
 * 0 and *pid, or that errno. */
static int spawn_as(pid_t *pid, const char *program, char *const *argv,
                    const struct aproto_launch *l, char *const *env, const int logfd[2], uid_t uid,
                    gid_t gid, const struct sup_fds *keep)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return errno;
    int hi = fcntl(pfd[1], F_DUPFD_CLOEXEC, 10); /* clear of 3-5, which the child fills */
    if (hi < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return e;
    }
    close(pfd[1]);
    pfd[1] = hi;
    pid_t p = fork();
    if (p < 0) {
        int e = errno;
        close(pfd[0]);
        close(pfd[1]);
        return e;
    }
    if (p == 0) {
        close(pfd[0]);
        int err = child_exec(program, argv, l, env, logfd, pfd[1], uid, gid, keep);
        ssize_t r = write(pfd[1], &err, sizeof(err));
        (void)r;
        _exit(127);
    }
    close(pfd[1]);
    int err = 0;
    ssize_t n;
    while ((n = read(pfd[0], &err, sizeof(err))) < 0 && errno == EINTR)
        ;
    close(pfd[0]);
    if (n == (ssize_t)sizeof(err)) {
        while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
            ;
        return err;
    }
    *pid = p;
    return 0;
}

/* Starts argv (a worker's supervisor) in its own process group (not its own session: with
 * sched_autogroup a new session is a new scheduling group, and the ranks of a job then stall
 * each other; measured: 40 % slower DDP epochs on this kernel), every signal unblocked and the
 * usual ones at their default, stdin /dev/null, stdout appended to logfd[0] and stderr to
 * logfd[1], in working_dir, with keep's descriptors as 3, 4 and 5 and no other fd of the agent
 * (websocket, report socket). glibc's posix_spawn is clone(CLONE_VM | CLONE_VFORK): no page-table
 * copy, and it returns once the child has exec'd. Returns 0 and *pid, or the errno of the failed
 * step (the chdir or the exec). */
static int spawn_worker(pid_t *pid, const char *program, char *const *argv,
                        const struct aproto_launch *l, char *const *env, const int logfd[2],
                        const struct agent_worker *w, const struct sup_fds *keep)
{
    if (w->uid != AGENT_NO_UID || keep->n_cg > 0)
        return spawn_as(pid, program, argv, l, env, logfd, w->uid, w->gid, keep);
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    int rc = posix_spawnattr_init(&attr);
    if (rc != 0)
        return rc;
    rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0) {
        posix_spawnattr_destroy(&attr);
        return rc;
    }
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE); /* ignored by the agent */
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGCHLD);
    sigaddset(&dfl, SIGHUP);
    sigaddset(&dfl, SIGQUIT);
    rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                             POSIX_SPAWN_SETSIGDEF);
    if (rc == 0)
        rc = posix_spawnattr_setpgroup(&attr, 0);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&attr, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&attr, &dfl);
    /* The dup2s first: a logfd may itself be 0 when the agent runs without stdin. */
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, logfd[0], STDOUT_FILENO);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, logfd[1], STDERR_FILENO);
    if (rc == 0 && keep->in >= 0)
        rc = posix_spawn_file_actions_adddup2(&fa, keep->in, STDIN_FILENO);
    else if (rc == 0)
        rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (rc == 0 && l->working_dir)
        rc = posix_spawn_file_actions_addchdir_np(&fa, l->working_dir);
    for (int i = 0; rc == 0 && i < 3; i++)
        rc = posix_spawn_file_actions_adddup2(&fa, keep->fd[i], 3 + i);
    if (rc == 0)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, 6);
    if (rc == 0)
        rc = posix_spawn(pid, program, &fa, &attr, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Launching                                                                                    */
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
    w->uid = w->gid = AGENT_NO_UID;
    w->next = a->workers;
    a->workers = w;
    return w;
}

void agent__worker_exited(struct agent *a, struct agent_worker *w, int exit_code, int sig,
                          const char *error)
{
    w->status = AGENT_WORKER_EXITED;
    w->exit_code = exit_code;
    w->signal = sig;
    w->kill_at_ms = 0;
    if (error && !w->error)
        w->error = strdup(error);
    /* Its last output goes first, then the exit, spooled so that an agent restart resends it. */
    agent__tail_finish(a, w->job_id, w->attempt, w->rank);
    char *spooled = agent__spool_exit(a, w);
    if (spooled && w->sup_pid > 0)
        agent__worker_record_remove(a, w); /* a restart now resends the spooled exit */
    agent__isolation_worker_done(a, w);
    int64_t seq = agent__next_seq(a);
    w->exit_seq = seq;
    agent__event_push(a, AGENT_EV_EXITED,
                      aproto_msg_worker_exited(seq, w->job_id, w->attempt, w->rank, exit_code, sig,
                                               w->error, w->reason),
                      seq, spooled);
}

/* A worker that could not start: the reason goes to its log (when open) and to the server as a
 * worker_exited with exit code 127. */
static void start_failed_msg(struct agent *a, struct agent_worker *w, int logfd, const char *msg)
{
    if (logfd >= 0) {
        char line[1200];
        int n = snprintf(line, sizeof(line), "trainyard-agent: %s\n", msg);
        if (n > 0) { /* best effort: the server gets the reason anyway */
            ssize_t r = write(logfd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
            (void)r;
        }
    }
    TY_WARN("proc", "job %s attempt %lld rank %lld did not start: %s", w->job_id,
            (long long)w->attempt, (long long)w->rank, msg);
    agent__worker_exited(a, w, 127, -1, msg);
}

static void start_failed(struct agent *a, struct agent_worker *w, int logfd, const char *what,
                         const char *arg, int err)
{
    char msg[1100];
    snprintf(msg, sizeof(msg), "%s %s: %s", what, arg, strerror(err));
    start_failed_msg(a, w, logfd, msg);
}

/* What makes w private before it starts (its uid, TMPDIR, report secret, read access to the
 * checkpoint it resumes from) and its environment. Returns the environment (agent_env_free),
 * or NULL after queuing w's worker_exited. */
static char **worker_env(struct agent *a, struct agent_worker *w, const struct aproto_launch *l,
                         const struct aproto_launch_worker *lw, int logfd, struct agent_warm *e)
{
    unsigned char raw[24];
    if (util_random_bytes(raw, sizeof(raw)) != 0) {
        start_failed(a, w, logfd, "cannot make", "the report secret", errno);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(w->secret + 2 * i, 3, "%02x", raw[i]);
    if (agent__worker_credentials(a, w) != 0) {
        start_failed(a, w, logfd, "cannot pick", "a uid for the worker (--worker-uids full)",
                     errno);
        return NULL;
    }
    if (e) { /* a warm interpreter's TMPDIR and cgroups become w's, with w's limits */
        if (w->uid != e->w->uid) {
            start_failed(a, w, logfd, "cannot take", "a warm interpreter (another uid)", EPERM);
            return NULL;
        }
        w->tmp_dir = e->w->tmp_dir;
        e->w->tmp_dir = NULL;
        for (size_t i = 0; i < e->w->cg_n; i++) {
            w->cg_dirs[i] = e->w->cg_dirs[i];
            e->w->cg_dirs[i] = NULL;
        }
        w->cg_n = e->w->cg_n;
        e->w->cg_n = 0;
        if (agent__cgroup_limit(a, w, l->cpu_milli, l->memory_mb) != 0) {
            start_failed(a, w, logfd, "cannot set", "the limits of the worker's cgroup", errno);
            return NULL;
        }
    } else if (agent__worker_tmp_dir(w) != 0) {
        start_failed(a, w, logfd, "cannot create", "the worker's temporary directory", errno);
        return NULL;
    } else if (agent__cgroup_create(a, w, l->cpu_milli, l->memory_mb) != 0) {
        start_failed(a, w, logfd, "cannot create", "the worker's cgroup", errno);
        return NULL;
    }
    if (agent__grant_checkpoint(a, w, l->checkpoint_dir) != 0) {
        start_failed(a, w, logfd, "cannot open", "the checkpoint to resume from", ENOMEM);
        return NULL;
    }
    char why[600];
    if ((l->code_sha256 && l->working_dir &&
         agent__code_unpack(a, w, l->working_dir, l->code_sha256, "code package", why,
                            sizeof(why)) != 0) ||
        (l->checkpoint_package && l->checkpoint_dir &&
         agent__code_unpack(a, w, l->checkpoint_dir, l->checkpoint_package, "checkpoint package",
                            why, sizeof(why)) != 0)) {
        start_failed_msg(a, w, logfd, why);
        return NULL;
    }
    char user[64];
    struct agent_env_private priv = {w->secret, w->tmp_dir,
                                     agent__worker_user(a, w, user, sizeof(user)), a->gpu_info,
                                     a->n_gpu_info};
    char **env = agent_env_build(environ, l, lw, a->cfg->python_path, a->report_socket,
                                 a->socket_ifname[0] ? a->socket_ifname : NULL, &priv);
    if (!env)
        start_failed(a, w, logfd, "cannot prepare", "the worker's environment", ENOMEM);
    return env;
}

/* Starts `program` for w under a trainyard-supervisor (supervisor.c): sets w->sup_pid and
 * *start_fd, the pipe on which the supervisor says when the worker has exec'd (read it with
 * supervised_started). Returns 0, or the errno of the failed step (*start_fd is then -1). */
static int spawn_supervised(struct agent *a, struct agent_worker *w, const char *program,
                            const struct aproto_launch *l, char *const *env, const int logfd[2],
                            int *start_fd, int in_fd)
{
    size_t argc = 0;
    while (l->argv[argc])
        argc++;
    char timeout[32];
    snprintf(timeout, sizeof(timeout), "%lld",
             (long long)(a->orphan_timeout_s > 0 ? a->orphan_timeout_s : 60));
    const char **argv = calloc(argc + 4, sizeof(*argv));
    int pfd[2] = {-1, -1};
    struct sup_fds keep = {{agent__worker_status_open(a, w), a->lease_read_fd, -1}, {-1}, 0, -1};
    int err = 0;
    if (!argv)
        err = ENOMEM;
    else if ((keep.n_cg = agent__cgroup_join_fds(w, keep.cg)) < 0)
        err = errno;
    else if (keep.fd[0] < 0 || pipe2(pfd, O_CLOEXEC) != 0 ||
             (keep.fd[2] = fcntl(pfd[1], F_DUPFD_CLOEXEC, 10)) < 0 ||
             (in_fd >= 0 && (keep.in = fcntl(in_fd, F_DUPFD_CLOEXEC, 10)) < 0))
        err = errno;
    pid_t sup = -1;
    if (err == 0) {
        argv[0] = a->supervisor_path;
        argv[1] = timeout;
        argv[2] = program;
        for (size_t i = 0; i < argc; i++)
            argv[3 + i] = l->argv[i];
        err = spawn_worker(&sup, a->supervisor_path, (char *const *)argv, l, env, logfd, w, &keep);
    }
    if (pfd[1] >= 0)
        close(pfd[1]);
    if (keep.fd[2] >= 0)
        close(keep.fd[2]);
    if (keep.fd[0] >= 0)
        close(keep.fd[0]);
    if (keep.in >= 0)
        close(keep.in);
    for (int i = 0; i < keep.n_cg; i++)
        close(keep.cg[i]);
    free(argv);
    if (err != 0) {
        if (pfd[0] >= 0)
            close(pfd[0]);
        *start_fd = -1;
        return err;
    }
    w->sup_pid = sup;
    *start_fd = pfd[0];
    return 0;
}

/* Waits for w's supervisor to say that the worker has exec'd (closes start_fd): sets w->pid (the
 * worker, leader of its process group) and w->sup_start. Returns 0, or the errno of the failed
 * exec (the supervisor, which wrote it to the log, is reaped), or -1 when the supervisor ended
 * without saying either (*sup_status: its waitpid status, -1 when it could not be had). */
static int supervised_started(struct agent_worker *w, int start_fd, int *sup_status)
{
    int32_t msg[2] = {1, 0};
    ssize_t n;
    while ((n = read(start_fd, msg, sizeof(msg))) < 0 && errno == EINTR)
        ;
    close(start_fd);
    if (n == (ssize_t)sizeof(msg) && msg[0] == 0 && msg[1] > 0) {
        w->pid = (pid_t)msg[1];
        util_proc_start_time((int)w->sup_pid, &w->sup_start);
        return 0;
    }
    int st = -1;
    while (waitpid(w->sup_pid, &st, 0) < 0 && errno == EINTR)
        ;
    w->sup_pid = 0;
    *sup_status = st;
    return n == (ssize_t)sizeof(msg) && msg[0] == 1 && msg[1] > 0 ? msg[1] : -1;
}

/* A warm interpreter that fits worker lw of launch l (agent__warm_take), or NULL. */
static struct agent_warm *warm_pick(struct agent *a, const struct aproto_launch *l,
                                    const struct aproto_launch_worker *lw)
{
    if (!a->warm)
        return NULL;
    char **env = agent_env_build(environ, l, lw, a->cfg->python_path, a->report_socket,
                                 a->socket_ifname[0] ? a->socket_ifname : NULL, NULL);
    char *program = env ? resolve_program(l->argv[0], env, l->working_dir) : NULL;
    char *real = program ? realpath(program, NULL) : NULL;
    struct agent_warm *e = real ? agent__warm_take(a, l, real, env) : NULL;
    free(real);
    free(program);
    agent_env_free(env);
    return e;
}

/* start_one with warm interpreter e (its log files already moved to the rank's): makes w private
 * exactly as the cold path does (worker_env, given e's TMPDIR and cgroups, which get w's limits),
 * then hands e the launch. Returns w (started: no start pipe to read), or NULL after queuing its
 * worker_exited. */
static struct agent_worker *start_warm(struct agent *a, const struct aproto_launch *l,
                                       const struct aproto_launch_worker *lw,
                                       struct agent_worker *w, struct agent_warm *e)
{
    int logfd[2];
    if (agent__log_open(a, l->job_id, l->attempt, lw->rank, logfd) != 0)
        logfd[0] = logfd[1] = -1;
    agent__tail_start(a, l->job_id, l->attempt, lw->rank);
    char **env = worker_env(a, w, l, lw, logfd[1], e);
    if (env) {
        w->sup_pid = e->w->sup_pid;
        w->pid = e->w->pid;
        w->sup_start = e->w->sup_start;
        e->w->sup_pid = e->w->pid = 0; /* w's now: its supervisor's exit is w's end */
        if (agent__warm_send(a, e, w, l->working_dir, l->argv, env) == 0)
            TY_DEBUG("proc", "job %s attempt %lld rank %lld: warm start (%s)", l->job_id,
                     (long long)l->attempt, (long long)lw->rank, e->framework);
        /* else the interpreter exits without running anything: reaped as w's end */
    }
    agent_env_free(env);
    agent__warm_discard(a, e); /* what is left of it: the placeholder, nothing running */
    for (int i = 0; i < 2; i++)
        if (logfd[i] >= 0)
            close(logfd[i]);
    return env ? w : NULL;
}

/* Starts one worker's supervisor. Returns the worker, with *start_fd to pass to
 * supervised_started; NULL when it was already launched or could not start (then its
 * worker_exited is queued). */
static struct agent_worker *start_one(struct agent *a, const struct aproto_launch *l,
                                      const struct aproto_launch_worker *lw, int *start_fd)
{
    *start_fd = -1;
    if (agent__worker_find(a, l->job_id, l->attempt, lw->rank)) {
        TY_INFO("proc", "job %s attempt %lld rank %lld already launched; ignoring the repeat",
                l->job_id, (long long)l->attempt, (long long)lw->rank);
        return NULL;
    }
    struct agent_worker *w = worker_new(a, l->job_id, l->attempt, lw->rank);
    if (w && l->storage_path && (w->storage_path = strdup(l->storage_path)) == NULL) {
        agent__worker_exited(a, w, 127, -1, "out of memory");
        return NULL;
    }
    if (!w) {
        TY_ERROR("proc", "out of memory launching job %s", l->job_id);
        return NULL;
    }
    if (a->shutting_down) {
        agent__worker_exited(a, w, 127, -1, "the agent is shutting down");
        return NULL;
    }
    /* Opened here, not as a file action, so that a failure can be written into them. */
    char *log_path[2] = {
        agent__log_path(a, l->job_id, l->attempt, lw->rank, APROTO_LOG_STDOUT, true),
        agent__log_path(a, l->job_id, l->attempt, lw->rank, APROTO_LOG_STDERR, false)};
    if (!log_path[0] || !log_path[1]) {
        start_failed(a, w, -1, "cannot create", "the log directory", errno);
        free(log_path[0]);
        free(log_path[1]);
        return NULL;
    }
    struct agent_warm *e = warm_pick(a, l, lw);
    for (int i = 0; e && i < 2; i++)
        if (rename(e->log_path[i], log_path[i]) != 0) {
            TY_WARN("proc", "cannot move %s to %s: %s; starting cold", e->log_path[i], log_path[i],
                    strerror(errno));
            agent__warm_discard(a, e);
            e = NULL;
        }
    if (e) {
        free(log_path[0]);
        free(log_path[1]);
        return start_warm(a, l, lw, w, e);
    }
    /* Private: only the agent reads them (the worker writes to the descriptors it inherits). */
    int logfd[2];
    if (agent__log_open(a, l->job_id, l->attempt, lw->rank, logfd) != 0) {
        start_failed(a, w, -1, "cannot open log file", log_path[0], errno);
        free(log_path[0]);
        free(log_path[1]);
        return NULL;
    }
    free(log_path[0]);
    free(log_path[1]);
    agent__tail_start(a, l->job_id, l->attempt, lw->rank);
    char **env = worker_env(a, w, l, lw, logfd[1], NULL);
    if (!env) {
        close(logfd[0]);
        close(logfd[1]);
        return NULL;
    }
    char *program = resolve_program(l->argv[0], env, l->working_dir);
    int err = program ? spawn_supervised(a, w, program, l, env, logfd, start_fd, -1) : errno;
    free(program);
    agent_env_free(env);
    if (err != 0) {
        /* posix_spawn gives one errno for every step: a working_dir that cannot be entered
         * explains it first, as the chdir came before the exec. */
        int wd_err = l->working_dir ? dir_enter_error(l->working_dir) : 0;
        if (wd_err != 0)
            start_failed(a, w, logfd[1], "cannot enter working_dir", l->working_dir, wd_err);
        else
            start_failed(a, w, logfd[1], "cannot execute", l->argv[0], err);
        close(logfd[0]);
        close(logfd[1]);
        return NULL;
    }
    close(logfd[0]);
    close(logfd[1]);
    return w;
}

/* The second half of starting w: once its worker has exec'd, records it (adopt.c). Returns w,
 * or NULL after queuing its worker_exited. */
static struct agent_worker *start_finish(struct agent *a, const struct aproto_launch *l,
                                         struct agent_worker *w, int start_fd)
{
    int sup_status = -1;
    /* A warm start has no start pipe: its supervisor reported the exec long ago. */
    int err = start_fd < 0 ? 0 : supervised_started(w, start_fd, &sup_status);
    if (err > 0) {
        /* The supervisor wrote the reason to the log. */
        start_failed(a, w, -1, "cannot execute", l->argv[0], err);
        return NULL;
    }
    if (err < 0) {
        /* Killed (say, by a signal to the worker's uid) or broken before it could tell. */
        char how[64];
        if (sup_status == -1)
            snprintf(how, sizeof(how), "status unknown");
        else if (WIFSIGNALED(sup_status))
            snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(sup_status));
        else
            snprintf(how, sizeof(how), "exit status %d", WEXITSTATUS(sup_status));
        TY_WARN("proc",
                "job %s attempt %lld: the supervisor of worker rank %lld exited before "
                "starting it (%s)",
                w->job_id, (long long)w->attempt, (long long)w->rank, how);
        /* The server reads it after "worker rank N ". */
        char msg[160];
        snprintf(msg, sizeof(msg), "did not start: its supervisor exited before starting it (%s)",
                 how);
        agent__worker_exited(a, w, 127, -1, msg);
        return NULL;
    }
    agent__worker_record_write(a, w);
    TY_INFO("proc", "started job %s attempt %lld rank %lld: pid %ld (supervisor %ld)", l->job_id,
            (long long)l->attempt, (long long)w->rank, (long)w->pid, (long)w->sup_pid);
    return w;
}

/* A worker whose job's code package (or checkpoint package: `kind`, `sha256`) could not be made
 * ready: it exits at once (127) with the reason. Returns NULL, as start_one does for a worker
 * that did not start. */
static struct agent_worker *code_failed(struct agent *a, const struct aproto_launch *l,
                                        const struct aproto_launch_worker *lw, const char *kind,
                                        const char *sha256, const char *why)
{
    if (agent__worker_find(a, l->job_id, l->attempt, lw->rank))
        return NULL;
    struct agent_worker *w = worker_new(a, l->job_id, l->attempt, lw->rank);
    if (w == NULL)
        return NULL;
    char what[200];
    snprintf(what, sizeof(what), "%s %s:", kind, sha256);
    start_failed(a, w, -1, what, why ? why : "unknown error", EIO);
    return NULL;
}

void agent__launch(struct agent *a, const struct aproto_launch *l, bool may_fetch)
{
    TY_INFO("proc", "launch job %s attempt %lld: %zu worker(s) of %lld", l->job_id,
            (long long)l->attempt, l->n_workers, (long long)l->world_size);
    struct agent_worker **started = calloc(l->n_workers ? l->n_workers : 1, sizeof(*started));
    if (started == NULL) {
        TY_ERROR("proc", "out of memory launching job %s", l->job_id);
        return;
    }
    /* How long each step takes goes to the server with worker_started (the job's startup
     * breakdown): < 0 for a step this launch has not. */
    struct aproto_startup st = {-1, -1, -1};
    double t0 = util_mono_s();
    /* A node without a copy of the checkpoint to resume from fetches it first (issue 11). */
    struct aproto_launch local = *l;
    char *fetched = NULL;
    if (l->checkpoint_dir == NULL && l->checkpoint_fetch_id > 0) {
        fetched = agent__checkpoint_fetch(a, l->checkpoint_fetch_id, l->checkpoint_fetch_sha256,
                                          l->checkpoint_fetch_shared, may_fetch);
        local.checkpoint_dir = fetched;
        st.checkpoint_fetch_s = util_mono_s() - t0;
    }
    /* A job with a code package runs in this node's private copy of it (issue 15). */
    char *code = NULL;
    const char *code_why = NULL;
    if (l->code_sha256) {
        t0 = util_mono_s();
        code = agent__code_prepare(a, l->job_id, l->attempt, l->code_sha256, may_fetch, &code_why);
        local.working_dir = code;
        st.code_fetch_s = util_mono_s() - t0;
    }
    /* One resuming from a checkpoint package (resume_from_package) gets a private copy of it,
     * unless it resumes from a checkpoint of its own (a restart). */
    char *ckpkg = NULL;
    const char *ckpkg_why = NULL;
    local.checkpoint_package = NULL;
    if (l->checkpoint_package && l->checkpoint_dir == NULL && l->checkpoint_fetch_id <= 0) {
        t0 = util_mono_s();
        ckpkg = agent__code_checkpoint_prepare(a, l->job_id, l->attempt, l->checkpoint_package,
                                               may_fetch, &ckpkg_why);
        local.checkpoint_dir = ckpkg;
        local.checkpoint_package = l->checkpoint_package;
        st.checkpoint_fetch_s = util_mono_s() - t0;
    }
    /* Start every worker first, then queue their worker_started events together, which the
     * server records in one transaction. */
    int *start_fds = calloc(l->n_workers ? l->n_workers : 1, sizeof(*start_fds));
    if (start_fds == NULL) {
        TY_ERROR("proc", "out of memory launching job %s", l->job_id);
        free(started);
        free(fetched);
        free(ckpkg);
        return;
    }
    /* Every supervisor first, then their answers: the workers' fork and exec overlap. */
    t0 = util_mono_s();
    for (size_t i = 0; i < l->n_workers; i++)
        started[i] =
            l->code_sha256 && code == NULL
                ? code_failed(a, &local, &l->workers[i], "code package", l->code_sha256, code_why)
            : local.checkpoint_package && ckpkg == NULL
                ? code_failed(a, &local, &l->workers[i], "checkpoint package",
                              local.checkpoint_package, ckpkg_why)
                : start_one(a, &local, &l->workers[i], &start_fds[i]);
    agent__code_track(started, l->n_workers, code ? l->code_sha256 : NULL,
                      ckpkg ? local.checkpoint_package : NULL);
    for (size_t i = 0; i < l->n_workers; i++)
        if (started[i])
            started[i] = start_finish(a, &local, started[i], start_fds[i]);
    st.process_start_s = util_mono_s() - t0;
    if (code || ckpkg)
        agent__code_trim(a);
    if (a->warm)
        agent__warm_poll(a); /* what is left of a pool whose uid went with this job goes */
    free(start_fds);
    free(fetched);
    free(code);
    free(ckpkg);
    for (size_t i = 0; i < l->n_workers; i++) {
        struct agent_worker *w = started[i];
        if (w == NULL)
            continue;
        int64_t seq = agent__next_seq(a);
        agent__event_push(
            a, AGENT_EV_STARTED,
            aproto_msg_worker_started(seq, w->job_id, w->attempt, w->rank, (long)w->pid, &st), seq,
            NULL);
    }
    free(started);
}

int agent__spawn_warm(struct agent *a, struct agent_worker *w, const char *program,
                      const char *const *argv, char *const *env, const int logfd[2], int in_fd)
{
    struct aproto_launch l;
    memset(&l, 0, sizeof(l));
    l.argv = (const char **)argv;
    int start_fd = -1, sup_status = -1;
    int err = spawn_supervised(a, w, program, &l, env, logfd, &start_fd, in_fd);
    if (err != 0)
        return err;
    err = supervised_started(w, start_fd, &sup_status);
    return err == 0 ? 0 : err > 0 ? err : ECHILD;
}
