/* The process supervisor, ending half: stops workers (asks them to checkpoint, then SIGTERM
 * and, after the grace period, SIGKILL to their process groups) and notices their ends (waitpid
 * WNOHANG on the supervisors when a SIGCHLD arrives on a signalfd in the event loop, and on the
 * poll timer; /proc for the supervisors of adopted workers, adopt.c). Starting them is in
 * supervise.c. */
#include "agent.h"

#include "log.h"
#include "report_proto.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libwebsockets.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Stopping                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Creates w's checkpoint request file (AGENT_CHECKPOINT_REQUEST_FILE in its TMPDIR); best effort.
 */
static void request_checkpoint(const struct agent_worker *w)
{
    if (w->tmp_dir == NULL)
        return;
    /* The worker may have replaced its TMPDIR (or anything above it it can write to) with a
     * link: each component is opened without following one, and the directory must still be
     * the worker's. */
    int dfd = agent__open_dir_nofollow(w->tmp_dir);
    struct stat st;
    if (dfd < 0 || fstat(dfd, &st) != 0 || (w->uid != AGENT_NO_UID && st.st_uid != w->uid)) {
        TY_WARN("proc",
                "cannot ask job %s rank %lld to checkpoint: its TMPDIR %s is gone or "
                "was replaced (%s)",
                w->job_id, (long long)w->rank, w->tmp_dir, dfd < 0 ? strerror(errno) : "owner");
        if (dfd >= 0)
            close(dfd);
        return;
    }
    int fd = openat(dfd, AGENT_CHECKPOINT_REQUEST_FILE,
                    O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0)
        TY_WARN("proc", "cannot create %s/%s: %s", w->tmp_dir, AGENT_CHECKPOINT_REQUEST_FILE,
                strerror(errno));
    else
        close(fd);
    close(dfd);
}

/* SIGTERM to w's process group now (SIGKILL when grace_s is 0), SIGKILL grace_s later. */
static void terminate(struct agent_worker *w, int64_t now, int64_t grace_s)
{
    int64_t at = now + grace_s * 1000;
    TY_INFO("proc", "stopping job %s attempt %lld rank %lld (pgid %ld), grace %llds", w->job_id,
            (long long)w->attempt, (long long)w->rank, (long)w->pid, (long long)grace_s);
    if (kill(-w->pid, grace_s > 0 ? SIGTERM : SIGKILL) != 0 && errno != ESRCH)
        TY_WARN("proc", "kill(-%ld): %s", (long)w->pid, strerror(errno));
    w->term_at_ms = 0;
    w->kill_at_ms = at > 0 ? at : 1;
}

void agent__stop(struct agent *a, const char *job_id, int64_t attempt, int64_t grace_s,
                 int64_t notice_s)
{
    agent__prepare_cancel(a, job_id, attempt);
    int64_t now = util_mono_ms();
    for (struct agent_worker *w = a->workers; w; w = w->next) {
        if (w->status != AGENT_WORKER_RUNNING || (job_id && strcmp(w->job_id, job_id) != 0) ||
            (attempt >= 0 && w->attempt != attempt))
            continue;
        int64_t term_at = now + (notice_s > 0 ? notice_s * 1000 : 0);
        if (w->kill_at_ms && w->kill_at_ms <= term_at + grace_s * 1000)
            continue; /* already stopping, sooner */
        if (w->term_at_ms && w->term_at_ms <= term_at)
            continue; /* its notice ends sooner */
        request_checkpoint(w);
        if (notice_s <= 0) {
            terminate(w, now, grace_s);
            continue;
        }
        TY_INFO("proc",
                "job %s attempt %lld rank %lld asked to checkpoint; SIGTERM in %llds, then "
                "SIGKILL after %llds",
                w->job_id, (long long)w->attempt, (long long)w->rank, (long long)notice_s,
                (long long)grace_s);
        w->term_at_ms = term_at;
        w->term_grace_s = grace_s;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Reaping                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* Whether a worker of this attempt of the job still runs on this node. */
static bool attempt_running(const struct agent *a, const char *job_id, int64_t attempt)
{
    for (const struct agent_worker *w = a->workers; w; w = w->next) {
        if (w->status == AGENT_WORKER_RUNNING && w->attempt == attempt &&
            strcmp(w->job_id, job_id) == 0)
            return true;
    }
    return false;
}

/* Unlinks the shared-memory segments of an attempt whose workers on this node are all gone.
 * libtrainyard's rank 0 unlinks its segment as soon as every rank has mapped it; one killed in
 * between would leave it in /dev/shm (RAM) until reboot. */
static void remove_shm_leftovers(const char *job_id, int64_t attempt)
{
    char prefix[RPROTO_SHM_PREFIX_MAX];
    rproto_shm_prefix(job_id, attempt, prefix, sizeof(prefix));
    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    size_t n = strlen(prefix + 1); /* names in /dev/shm lack the leading '/' */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char name[NAME_MAX + 2];
        if (strncmp(e->d_name, prefix + 1, n) != 0 ||
            (size_t)snprintf(name, sizeof(name), "/%s", e->d_name) >= sizeof(name))
            continue;
        if (shm_unlink(name) == 0)
            TY_INFO("proc", "removed shared-memory segment %s left by job %s attempt %lld", name,
                    job_id, (long long)attempt);
    }
    closedir(d);
}

void agent__worker_gone(struct agent *a, struct agent_worker *w, const int *wait_status)
{
    /* Whatever the worker left behind goes with it: everything in its cgroups (it cannot leave
     * them), or without cgroups its process group. */
    int64_t ooms = agent__cgroup_oom_kills(a, w);
    if (w->cg_n > 0)
        agent__cgroup_kill(w);
    else
        kill(-w->pid, SIGKILL);
    int code = -1, sig = -1;
    char error[200];
    if (ooms > 0) {
        /* Said first: the worker's own exit (a SIGKILL, or its launcher's error) hides why. */
        agent__worker_status_read(a, w, &code, &sig, error, sizeof(error));
        if (code < 0 && sig < 0)
            sig = SIGKILL;
        snprintf(error, sizeof(error),
                 "was killed by the out-of-memory killer (memory limit %lld MiB)",
                 (long long)w->memory_mb);
    } else if (agent__worker_status_read(a, w, &code, &sig, error, sizeof(error)) != 0) {
        error[0] = '\0';
        if (wait_status && WIFSIGNALED(*wait_status))
            sig = WTERMSIG(*wait_status);
        else if (wait_status)
            code = WEXITSTATUS(*wait_status);
        else {
            sig = SIGKILL;
            snprintf(error, sizeof(error), "its supervisor ended without a status");
        }
    }
    agent__usage_final(a, w);
    char usage[96] = "";
    int64_t cpu_usec, mem_bytes, mem_peak;
    if (agent__cgroup_usage(a, w, &cpu_usec, &mem_bytes, &mem_peak) == 0)
        snprintf(usage, sizeof(usage), " after %.1f s of CPU", (double)cpu_usec / 1e6);
    if (sig >= 0)
        TY_INFO("proc", "job %s attempt %lld rank %lld (pid %ld) killed by signal %d%s", w->job_id,
                (long long)w->attempt, (long long)w->rank, (long)w->pid, sig, usage);
    else
        TY_INFO("proc", "job %s attempt %lld rank %lld (pid %ld) exited with %d%s", w->job_id,
                (long long)w->attempt, (long long)w->rank, (long)w->pid, code, usage);
    /* A failure: the line of its output that says why goes with the exit (the server adds it to
     * the job's error). */
    if ((code != 0 || sig >= 0) && !w->reason)
        w->reason = agent__log_failure_reason(a, w);
    agent__worker_exited(a, w, code, sig, error[0] ? error : NULL);
    if (!attempt_running(a, w->job_id, w->attempt)) {
        remove_shm_leftovers(w->job_id, w->attempt);
        agent__code_release(a, w->job_id, w->attempt);
    }
}

/* The running worker whose supervisor (our child) is pid, or NULL. */
static struct agent_worker *supervised_by(struct agent *a, pid_t pid)
{
    for (struct agent_worker *w = a->workers; w; w = w->next)
        if (w->status == AGENT_WORKER_RUNNING && !w->adopted && w->sup_pid == pid)
            return w;
    return NULL;
}

void agent__supervise_poll(struct agent *a)
{
    /* Every child of this (the main) thread is reaped: our supervisors, and the orphans of
     * workers, which become ours (a child subreaper, main.c), daemons and double forks
     * included. __WNOTHREAD leaves alone the children other threads spawn and wait for
     * themselves (tar in the uploader and the preparation thread); orphans always come to the
     * main thread, the first live thread of the process. */
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG | __WNOTHREAD);
        if (pid <= 0)
            break;
        struct agent_worker *w = supervised_by(a, pid);
        if (w)
            agent__worker_gone(a, w, &st);
    }
    for (struct agent_worker *w = a->workers; w; w = w->next)
        if (w->status == AGENT_WORKER_RUNNING && w->adopted && !agent__supervisor_alive(w))
            agent__worker_gone(a, w, NULL);
    agent__isolation_poll(a);
    int64_t now = util_mono_ms();
    for (struct agent_worker *w = a->workers; w; w = w->next) {
        if (w->status == AGENT_WORKER_RUNNING && w->term_at_ms && w->term_at_ms <= now)
            terminate(w, now, w->term_grace_s);
        if (w->status == AGENT_WORKER_RUNNING && w->kill_at_ms && w->kill_at_ms <= now) {
            TY_WARN("proc", "job %s attempt %lld rank %lld outlived its grace period: SIGKILL",
                    w->job_id, (long long)w->attempt, (long long)w->rank);
            kill(-w->pid, SIGKILL);
            w->kill_at_ms = now + 1000; /* again in a second if it somehow survives */
        }
    }
}

int agent__children_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                             void *in, size_t len)
{
    (void)user;
    (void)in;
    (void)len;
    if (reason != LWS_CALLBACK_RAW_RX_FILE)
        return 0;
    struct agent *a = lws_context_user(lws_get_context(wsi));
    struct signalfd_siginfo si[8];
    while (read(lws_get_socket_fd(wsi), si, sizeof(si)) > 0)
        ; /* drained: one waitpid loop reaps every child that exited */
    agent__supervise_poll(a);
    return 0;
}

int agent__children_watch(struct agent *a)
{
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    /* Workers get an empty signal mask from posix_spawn (spawn_worker), so blocking it here
     * changes nothing for them. */
    if (sigprocmask(SIG_BLOCK, &chld, NULL) != 0)
        return -1;
    int fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        TY_WARN("proc", "signalfd: %s; exits are noticed by the poll timer", strerror(errno));
        sigprocmask(SIG_UNBLOCK, &chld, NULL);
        return -1;
    }
    lws_adopt_desc_t ad;
    memset(&ad, 0, sizeof(ad));
    ad.vh = lws_get_vhost_by_name(a->ctx, "default");
    ad.type = LWS_ADOPT_RAW_FILE_DESC;
    ad.fd.filefd = fd;
    ad.vh_prot_name = "trainyard-children";
    if (!ad.vh || !lws_adopt_descriptor_vhost_via_info(&ad)) {
        TY_WARN("proc", "cannot watch SIGCHLD in the event loop; exits are noticed by the poll "
                        "timer");
        close(fd);
        sigprocmask(SIG_UNBLOCK, &chld, NULL);
        return -1;
    }
    return 0;
}
