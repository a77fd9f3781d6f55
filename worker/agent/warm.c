/* Warm starts (issue 27; docs/decisions.md): interpreters started ahead of their job, with the
 * framework imported, by the cold path's own spawn (supervise.c: supervisor, uid, cgroup, TMPDIR,
 * log and status files), as the placeholder job AGENT_WARM_JOB. A Python worker that fits takes
 * one at launch: supervise.c applies its limits, environment and private files as for a cold
 * worker, then agent__warm_send hands it its working directory, argv and environment over its
 * stdin, and only then does its user code run. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Most bytes of a hand-off (working directory, argv, environment): it must fit the socket's
 * buffer, so that the agent never waits for an interpreter still importing its framework. */
#define WARM_MSG_MAX (48 * 1024)

/* The interpreter's program (python -c STUB FRAMEWORK): imports FRAMEWORK ("none": nothing),
 * reads "CWD\0ARGC\0ARGV...\0ENV...\0" from stdin until the agent closes it (nothing: exit), puts
 * /dev/null on stdin, enters CWD, takes ENV as its whole environment and runs ARGV as the Python
 * command line would: [-u] -c CODE | -m MODULE | SCRIPT, then ARGS. */
static const char STUB[] =
    "def _trainyard_warm():\n"
    "    import os, sys\n"
    "    if sys.argv[1] != 'none':\n"
    "        __import__(sys.argv[1])\n"
    "    chunks = []\n"
    "    while True:\n"
    "        b = os.read(0, 65536)\n"
    "        if not b:\n"
    "            break\n"
    "        chunks.append(b)\n"
    "    parts = b''.join(chunks).split(b'\\0')\n"
    "    if len(parts) < 3:\n"
    "        os._exit(0)\n"
    "    cwd, argc = os.fsdecode(parts[0]), int(parts[1])\n"
    "    argv = [os.fsdecode(x) for x in parts[2:2 + argc]]\n"
    "    fd = os.open(os.devnull, os.O_RDONLY)\n"
    "    os.dup2(fd, 0)\n"
    "    os.close(fd)\n"
    "    if cwd:\n"
    "        os.chdir(cwd)\n"
    "    os.environ.clear()\n"
    "    for kv in parts[2 + argc:-1]:\n"
    "        k, _, v = os.fsdecode(kv).partition('=')\n"
    "        os.environ[k] = v\n"
    "    import tempfile\n"
    "    tempfile.tempdir = None\n"
    "    i = 1\n"
    "    if argv[i] == '-u' or os.environ.get('PYTHONUNBUFFERED'):\n"
    "        i += argv[i] == '-u'\n"
    "        sys.stdout.reconfigure(write_through=True)\n"
    "        sys.stderr.reconfigure(write_through=True)\n"
    "    import builtins, runpy\n"
    "    main = vars(sys.modules['__main__'])\n"
    "    main.clear()\n"
    "    main.update(__name__='__main__', __builtins__=builtins, __doc__=None)\n"
    "    if argv[i] == '-c':\n"
    "        sys.argv[:] = ['-c'] + argv[i + 2:]\n"
    "        sys.path[0] = ''\n"
    "        exec(compile(argv[i + 1], '<string>', 'exec'), main)\n"
    "    elif argv[i] == '-m':\n"
    "        sys.argv[:] = argv[i + 1:]\n"
    "        sys.path[0] = os.getcwd()\n"
    "        runpy.run_module(argv[i + 1], run_name='__main__', alter_sys=True)\n"
    "    else:\n"
    "        sys.argv[:] = argv[i:]\n"
    "        sys.path[0] = os.path.dirname(os.path.realpath(argv[i]))\n"
    "        runpy.run_path(argv[i], run_name='__main__')\n"
    "_trainyard_warm()\n";

/* Whether argv runs Python the way STUB can: [-u] then -c CODE, -m MODULE or a script. */
static bool argv_fits(const char *const *argv)
{
    size_t i = 1;
    if (argv[i] && strcmp(argv[i], "-u") == 0)
        i++;
    if (!argv[i])
        return false;
    if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "-m") == 0)
        return argv[i + 1] != NULL;
    return argv[i][0] != '-';
}

/* Whether the variables the interpreter reads at start-up (PYTHON* but PYTHONUNBUFFERED, which
 * STUB applies, and LD_*) are the same in both environments. */
static bool startup_var(const char *kv)
{
    return (strncmp(kv, "PYTHON", 6) == 0 && strncmp(kv, "PYTHONUNBUFFERED=", 17) != 0) ||
           strncmp(kv, "LD_", 3) == 0;
}

static bool env_has(char *const *env, const char *kv)
{
    for (size_t i = 0; env[i]; i++)
        if (strcmp(env[i], kv) == 0)
            return true;
    return false;
}

static bool env_fits(char *const *job, char *const *pool)
{
    for (size_t i = 0; job[i]; i++)
        if (startup_var(job[i]) && !env_has(pool, job[i]))
            return false;
    for (size_t i = 0; pool[i]; i++)
        if (startup_var(pool[i]) && !env_has(job, pool[i]))
            return false;
    return true;
}

static size_t env_bytes(char *const *env)
{
    size_t n = 0;
    for (size_t i = 0; env[i]; i++)
        n += strlen(env[i]) + 1;
    return n;
}

/* Whether e's interpreter still waits (its end of the socket pair open). */
static bool alive(const struct agent_warm *e)
{
    struct pollfd p = {e->ctl, POLLIN, 0};
    return e->ctl >= 0 && poll(&p, 1, 0) == 0;
}

static bool per_job_uids(const struct agent *a)
{
    return a->uid_lo != AGENT_NO_UID && !a->run_as_user[0];
}

/* Whether e's uid is still the pool's (under --run-as uids a job may have taken it). */
static bool uid_pools(const struct agent *a, const struct agent_warm *e)
{
    const char *holder = per_job_uids(a) ? agent__uid_holder(a, e->w->uid) : AGENT_WARM_JOB;
    return holder && strcmp(holder, AGENT_WARM_JOB) == 0;
}

void agent__warm_free(struct agent_warm *e)
{
    if (!e)
        return;
    if (e->ctl >= 0)
        close(e->ctl);
    agent__worker_free(e->w);
    free(e->log_path[0]);
    free(e->log_path[1]);
    agent_env_free(e->env);
    free(e);
}

void agent__warm_discard(struct agent *a, struct agent_warm *e)
{
    if (e->ctl >= 0)
        close(e->ctl);
    e->ctl = -1;
    if (e->w->sup_pid > 0) { /* never handed off: its processes go */
        if (e->w->pid > 0)
            kill(-e->w->pid, SIGKILL);
        kill(e->w->sup_pid, SIGKILL);
        e->w->sup_pid = e->w->pid = 0;
    }
    /* Its status and log files (moved to a worker's at a hand-off: then gone from here). */
    char *status = e->w->job_id
                       ? agent__record_path(a, e->w->job_id, e->w->attempt, e->w->rank, ".status")
                       : NULL;
    if (status)
        unlink(status);
    free(status);
    for (int i = 0; i < 2; i++)
        if (e->log_path[i])
            unlink(e->log_path[i]);
    if (e->w->tmp_dir)
        agent__remove_tree(e->w->tmp_dir);
    UTIL_FREE(e->w->tmp_dir);
    agent__cgroup_kill(e->w);
    if (agent__cgroup_remove(e->w)) {
        agent__warm_free(e);
        return;
    }
    e->next = a->warm; /* agent__warm_poll removes its cgroups once its processes are gone */
    a->warm = e;
}

bool agent__warm_uses_uid(const struct agent *a, uid_t uid)
{
    for (const struct agent_warm *e = a->warm; e; e = e->next)
        if (e->w->uid == uid)
            return true;
    return false;
}

/* <dir>/<n>.log (stdout) or <dir>/<n>.err.log (stderr), malloc'd, or NULL. */
static char *log_name(const char *dir, int64_t n, int stream)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/%lld%s.log", dir, (long long)n,
                         stream == APROTO_LOG_STDERR ? ".err" : "") >= sizeof(path)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    return strdup(path);
}

/* Creates e's log file of `stream` in dir: its descriptor (3 or above), or -1 with errno. */
static int log_create(struct agent_warm *e, const char *dir, int stream)
{
    if (!(e->log_path[stream] = log_name(dir, e->w->rank, stream)))
        return -1;
    int fd = open(e->log_path[stream], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0 && fd < 3) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        fd = hi;
    }
    return fd;
}

/* Starts one interpreter importing fw into the pool. 0, or -1 (logged). */
static int fill_one(struct agent *a, const char *fw, const char *exe)
{
    static int64_t seq;
    struct agent_warm *e = calloc(1, sizeof(*e));
    struct agent_worker *w = e ? calloc(1, sizeof(*w)) : NULL;
    if (!w) {
        free(e);
        return -1;
    }
    e->w = w;
    e->ctl = -1;
    snprintf(e->framework, sizeof(e->framework), "%s", fw);
    w->rank = ++seq;
    w->uid = w->gid = AGENT_NO_UID;
    w->exit_code = w->signal = -1;
    const char *what = "memory";
    int err = ENOMEM, logfd[2] = {-1, -1}, sp[2] = {-1, -1};
    json_t *no_env = json_object();
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/warm", a->data_dir);
    if (!no_env || !(w->job_id = strdup(AGENT_WARM_JOB)))
        goto fail;
    what = "a uid";
    if (agent__worker_credentials(a, w) != 0)
        goto fail_errno;
    what = "its temporary directory";
    if (agent__worker_tmp_dir(w) != 0)
        goto fail_errno;
    what = "its cgroup";
    if (agent__cgroup_create(a, w, 0, 0) != 0)
        goto fail_errno;
    what = "its log file";
    if ((mkdir(dir, 0700) != 0 && errno != EEXIST) ||
        (logfd[0] = log_create(e, dir, APROTO_LOG_STDOUT)) < 0 ||
        (logfd[1] = log_create(e, dir, APROTO_LOG_STDERR)) < 0)
        goto fail_errno;
    struct aproto_launch l;
    memset(&l, 0, sizeof(l));
    l.job_id = AGENT_WARM_JOB;
    l.backend = "none";
    l.env = no_env;
    l.master_addr = "";
    struct aproto_launch_worker lw;
    memset(&lw, 0, sizeof(lw));
    char user[64];
    struct agent_env_private priv = {NULL, w->tmp_dir, agent__worker_user(a, w, user, sizeof(user)),
                                     NULL, 0};
    e->env = agent_env_build(environ, &l, &lw, a->cfg->python_path, a->report_socket,
                             a->socket_ifname[0] ? a->socket_ifname : NULL, &priv);
    what = "its environment";
    if (!e->env)
        goto fail;
    what = "its socket pair";
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
        goto fail_errno;
    const char *argv[] = {exe, "-c", STUB, fw, NULL};
    what = "it";
    err = agent__spawn_warm(a, w, exe, argv, e->env, logfd, sp[1]);
    close(sp[1]);
    close(logfd[0]);
    close(logfd[1]);
    logfd[0] = logfd[1] = -1;
    e->ctl = sp[0];
    if (err != 0)
        goto fail;
    json_decref(no_env);
    e->next = a->warm;
    a->warm = e;
    TY_DEBUG("proc", "warm interpreter %lld (%s) started: pid %ld, uid %ld", (long long)w->rank, fw,
             (long)w->pid, w->uid == AGENT_NO_UID ? -1L : (long)w->uid);
    return 0;
fail_errno:
    err = errno;
fail:
    TY_WARN("proc", "cannot start a warm interpreter (%s): cannot make %s: %s", fw, what,
            strerror(err));
    for (int i = 0; i < 2; i++)
        if (logfd[i] >= 0)
            close(logfd[i]);
    json_decref(no_env);
    agent__warm_discard(a, e);
    return -1;
}

void agent__warm_poll(struct agent *a)
{
    for (struct agent_warm **pp = &a->warm; *pp;) {
        struct agent_warm *e = *pp;
        if (e->ctl < 0) { /* discarded: waits for its processes to go */
            agent__cgroup_kill(e->w);
            if (agent__cgroup_remove(e->w)) {
                *pp = e->next;
                agent__warm_free(e);
            } else {
                pp = &e->next;
            }
            continue;
        }
        if (a->shutting_down || !alive(e) || !uid_pools(a, e)) {
            *pp = e->next;
            agent__warm_discard(a, e);
            continue;
        }
        pp = &e->next;
    }
    if (a->cfg->warm_python <= 0 || a->shutting_down || util_mono_ms() < a->warm_retry_ms)
        return;
    char *exe = realpath(a->cfg->warm_python_exe, NULL);
    if (!exe) {
        TY_WARN("proc", "--warm-python-exe %s: %s; no warm starts for 60 s",
                a->cfg->warm_python_exe, strerror(errno));
        a->warm_retry_ms = util_mono_ms() + 60000;
        return;
    }
    for (const char *f = a->cfg->warm_frameworks; *f;) {
        size_t n = strcspn(f, ",");
        char fw[64];
        snprintf(fw, sizeof(fw), "%.*s", (int)n, f);
        f += n + (f[n] == ',');
        int64_t have = 0;
        for (const struct agent_warm *e = a->warm; e; e = e->next)
            have += e->ctl >= 0 && strcmp(e->framework, fw) == 0;
        for (; have < a->cfg->warm_python; have++) {
            if (fill_one(a, fw, exe) != 0) {
                a->warm_retry_ms = util_mono_ms() + 5000;
                free(exe);
                return;
            }
        }
    }
    free(exe);
}

struct agent_warm *agent__warm_take(struct agent *a, const struct aproto_launch *l,
                                    const char *program, char *const *env)
{
    char *exe = realpath(a->cfg->warm_python_exe, NULL);
    bool python = exe && strcmp(exe, program) == 0;
    free(exe);
    if (!python || !argv_fits(l->argv))
        return NULL;
    size_t bytes = env_bytes(env) + (l->working_dir ? strlen(l->working_dir) : 0) + 4096;
    for (size_t i = 0; l->argv[i]; i++)
        bytes += strlen(l->argv[i]) + 1;
    if (bytes > WARM_MSG_MAX)
        return NULL;
    const char *backend = l->backend ? l->backend : "torch";
    uid_t job_uid = per_job_uids(a) ? agent__uid_of_job(a, l->job_id) : AGENT_NO_UID;
    struct agent_warm **best = NULL;
    for (struct agent_warm **pp = &a->warm; *pp; pp = &(*pp)->next) {
        struct agent_warm *e = *pp;
        bool exact = strcmp(e->framework, backend) == 0;
        if (!alive(e) || (!exact && strcmp(e->framework, "none") != 0) || !env_fits(env, e->env))
            continue;
        /* Under --run-as uids: a job already here keeps its uid; else the pool's goes to it. */
        if (job_uid != AGENT_NO_UID ? e->w->uid != job_uid : !uid_pools(a, e))
            continue;
        if (!best || (exact && strcmp((*best)->framework, backend) != 0))
            best = pp;
    }
    if (!best)
        return NULL;
    struct agent_warm *e = *best;
    *best = e->next;
    e->next = NULL;
    if (per_job_uids(a) && job_uid == AGENT_NO_UID)
        agent__uid_give(a, e->w->uid, l->job_id);
    return e;
}

int agent__warm_send(struct agent *a, struct agent_warm *e, const struct agent_worker *w,
                     const char *working_dir, const char *const *argv, char *const *env)
{
    size_t argc = 0, len = (working_dir ? strlen(working_dir) : 0) + 32 + env_bytes(env);
    while (argv[argc])
        len += strlen(argv[argc++]) + 1;
    char *buf = malloc(len);
    char *from = agent__record_path(a, e->w->job_id, e->w->attempt, e->w->rank, ".status");
    char *to = agent__record_path(a, w->job_id, w->attempt, w->rank, ".status");
    int rc = -1;
    if (buf && from && to && rename(from, to) == 0) {
        size_t off = (size_t)snprintf(buf, len, "%s", working_dir ? working_dir : "") + 1;
        off += (size_t)snprintf(buf + off, len - off, "%zu", argc) + 1;
        for (size_t i = 0; i < argc; i++)
            off += (size_t)snprintf(buf + off, len - off, "%s", argv[i]) + 1;
        for (size_t i = 0; env[i]; i++)
            off += (size_t)snprintf(buf + off, len - off, "%s", env[i]) + 1;
        rc = send(e->ctl, buf, off, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)off ? 0 : -1;
    }
    if (rc != 0)
        TY_WARN("proc", "job %s rank %lld: cannot hand a warm interpreter its launch: %s",
                w->job_id, (long long)w->rank, strerror(errno));
    close(e->ctl); /* its end of file: the interpreter goes on, or exits when rc is -1 */
    e->ctl = -1;
    free(buf);
    free(from);
    free(to);
    return rc;
}

void agent__warm_fini(struct agent *a)
{
    struct agent_warm *list = a->warm;
    a->warm = NULL;
    a->warm_retry_ms = INT64_MAX; /* no refill from here on */
    while (list) {
        struct agent_warm *e = list;
        list = e->next;
        pid_t sup = e->w->sup_pid;
        agent__warm_discard(a, e);
        if (sup > 0)
            while (waitpid(sup, NULL, 0) < 0 && errno == EINTR)
                ;
    }
    /* What is left waits for its killed processes to leave its cgroups. */
    for (int round = 0; a->warm && round < 200; round++) {
        usleep(10000);
        agent__warm_poll(a);
    }
    while (a->warm) {
        struct agent_warm *e = a->warm;
        a->warm = e->next;
        agent__warm_free(e);
    }
}
