/* trainyard-agent: the per-node daemon. Start-up, signals, the event loop and shutdown.
 *
 * SIGINT/SIGTERM stop every worker (SIGTERM to its process group, SIGKILL after --stop-grace-s),
 * wait until all are reaped, then exit 0 with everything freed. A crash (SIGKILL) leaves the
 * workers running under their supervisors; the next agent on the same data directory re-adopts
 * them (adopt.c). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <libwebsockets.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define AGENT_POLL_US (50 * LWS_US_PER_MS)

static volatile sig_atomic_t stop_requested;

static volatile sig_atomic_t usr1_received;

static void on_signal(int sig)
{
    stop_requested = sig;
}

static void on_usr1(int sig)
{
    (void)sig;
    usr1_received = 1;
}

/* An ephemeral agent without a server for longer than --ephemeral seconds. */
static bool ephemeral_orphaned(const struct agent *a, int64_t now)
{
    return a->ephemeral_lost_ms && now - a->ephemeral_lost_ms > a->cfg->ephemeral_s * 1000;
}

/* --ephemeral (an agent started in a Slurm allocation, bound to one attempt): SIGUSR1, Slurm's
 * warning before preemption or the time limit, asks the server to preempt this node's jobs; the
 * agent exits once the workers that ran here have all ended (the attempt is over on this node:
 * a restart gets a new allocation), or when no server has been reachable for --ephemeral
 * seconds (the server is gone: nobody would stop this agent). Sets a->shutting_down. */
static void ephemeral_tick(struct agent *a)
{
    if (a->cfg->ephemeral_s <= 0)
        return;
    int64_t now = util_mono_ms();
    a->ephemeral_lost_ms = a->registered ? 0 : a->ephemeral_lost_ms ? a->ephemeral_lost_ms : now;
    if (a->shutting_down)
        return;
    if (usr1_received) {
        usr1_received = 0;
        TY_WARN("agent", "SIGUSR1 (Slurm's warning before preemption or the time limit): asking "
                         "the server to preempt this node's jobs");
        agent__preempt_notice(a, "Slurm signalled the end of the allocation (preemption or "
                                 "time limit)");
    }
    size_t running = agent__workers_running(a);
    if (running > 0)
        a->ephemeral_ran = true;
    const char *why = NULL;
    if (a->ephemeral_ran && running == 0)
        why = "the workers that ran here have ended";
    else if (ephemeral_orphaned(a, now))
        why = "no server reachable for the --ephemeral time";
    if (why == NULL)
        return;
    TY_INFO("agent", "ephemeral: %s; stopping %zu worker(s), then exiting", why, running);
    a->shutting_down = true;
    agent__stop(a, NULL, -1, a->cfg->stop_grace_s, 0);
}

/* Removes an ephemeral agent's data directory, and the allocation's directory above it once it
 * is empty (the last node's agent to leave it; on one host the nodes share it). */
static void ephemeral_remove_data(const char *data_dir)
{
    agent__remove_tree(data_dir);
    char *parent = strdup(data_dir);
    char *slash = parent ? strrchr(parent, '/') : NULL;
    if (slash && slash != parent) {
        *slash = '\0';
        rmdir(parent); /* ENOTEMPTY: another node's agent, or the first agent's pid file */
    }
    free(parent);
    TY_INFO("agent", "ephemeral: data directory %s removed", data_dir);
}

/* Whether an ephemeral agent that is shutting down still waits for its checkpoint uploads: its
 * node id and data directory end with the allocation, so a part it leaves unsent is never sent,
 * and the restart (on a new allocation, whose nodes hold no copy) could not resume from it. It
 * waits while the server is reachable; Slurm's SIGKILL bounds the wait. */
static bool ephemeral_uploading(struct agent *a)
{
    if (a->cfg->ephemeral_s <= 0 || ephemeral_orphaned(a, util_mono_ms()))
        return false;
    size_t n = agent__uploads_pending(a);
    if (n > 0 && !a->ephemeral_upload_wait) {
        TY_INFO("agent", "ephemeral: waiting for %zu checkpoint upload(s) before exiting", n);
        a->ephemeral_upload_wait = true;
    }
    return n > 0;
}

struct poll_timer {
    lws_sorted_usec_list_t sul;
    struct agent *a;
};

/* Every 50 ms: reap workers (should a SIGCHLD have been missed), enforce grace periods, notice a
 * stop signal, and end the loop once shutdown has stopped every worker. */
static void poll_tick(lws_sorted_usec_list_t *sul)
{
    struct poll_timer *pt = lws_container_of(sul, struct poll_timer, sul);
    struct agent *a = pt->a;
    agent__supervise_poll(a);
    agent__prepare_poll(a);
    agent__warm_poll(a);
    agent__tails_poll(a);
    agent__progress_tick(a);
    agent__usage_tick(a);
    agent__gpus_tick(a);
    agent__uploader_poll(a);
    agent__report_poll(a);
    ephemeral_tick(a);
    if (stop_requested && !a->shutting_down) {
        TY_INFO("agent", "signal %d: stopping %zu worker(s), then exiting", (int)stop_requested,
                agent__workers_running(a));
        a->shutting_down = true;
        agent__stop(a, NULL, -1, a->cfg->stop_grace_s, 0);
    }
    if (a->shutting_down && agent__workers_running(a) == 0 && !ephemeral_uploading(a)) {
        /* Give the server up to a second to take the last worker_exited events. */
        if (a->shutdown_deadline_ms == 0)
            a->shutdown_deadline_ms = util_mono_ms() + 1000;
        if (a->registered && a->events && util_mono_ms() < a->shutdown_deadline_ms) {
            lws_sul_schedule(a->ctx, 0, &pt->sul, poll_tick, AGENT_POLL_US);
            return;
        }
        a->done = true;
        lws_cancel_service(a->ctx);
        return;
    }
    lws_sul_schedule(a->ctx, 0, &pt->sul, poll_tick, AGENT_POLL_US);
}

static void lws_log_emit(int level, const char *line)
{
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    if (level & LLL_ERR)
        TY_ERROR("lws", "%.*s", (int)n, line);
    else if (level & LLL_WARN)
        TY_WARN("lws", "%.*s", (int)n, line);
    else
        TY_DEBUG("lws", "%.*s", (int)n, line);
}

/* Finds trainyard-supervisor beside the agent's own executable (after agent__isolation_init:
 * workers under uids of their own run a copy). 0 or -1 (logged). */
static int supervisor_locate(struct agent *a)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        TY_ERROR("agent", "cannot find the agent's executable: %s", strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    size_t dir = slash ? (size_t)(slash - exe) : 0;
    size_t len = dir + sizeof("/trainyard-supervisor");
    if (!(a->supervisor_path = malloc(len)))
        return -1;
    snprintf(a->supervisor_path, len, "%.*s/trainyard-supervisor", (int)dir, exe);
    if (access(a->supervisor_path, X_OK) != 0) {
        TY_ERROR("agent", "cannot run %s (installed beside trainyard-agent): %s",
                 a->supervisor_path, strerror(errno));
        return -1;
    }
    if (a->uid_lo == AGENT_NO_UID)
        return 0;
    /* It runs under the workers' uids, which may not reach the agent's build or install
     * directory (a clone under /root): a copy in <data>/bin (0755; the data directory is 0711),
     * as for trainyard.py (isolate.c). Replaced by a rename: running supervisors keep theirs. */
    char bindir[PATH_MAX], dest[PATH_MAX + 32];
    snprintf(bindir, sizeof(bindir), "%s/bin", a->data_dir);
    snprintf(dest, sizeof(dest), "%s/trainyard-supervisor", bindir);
    size_t size = 0;
    char *data = util_read_file(a->supervisor_path, &size);
    char *copy = strdup(dest);
    if (!data || !copy || util_mkdir_p(bindir, 0755) != 0 || chmod(bindir, 0755) != 0 ||
        util_write_file_durable(dest, data, size, 0755) != 0 || chmod(dest, 0755) != 0) {
        TY_ERROR("agent", "cannot copy %s to %s: %s", a->supervisor_path, dest, strerror(errno));
        free(data);
        free(copy);
        return -1;
    }
    free(data);
    free(a->supervisor_path);
    a->supervisor_path = copy;
    return 0;
}

/* Creates the data directory and fills the node's identity and resources. 0 or -1 (logged). */
static int agent_setup(struct agent *a)
{
    const struct agent_config *cfg = a->cfg;
    if (util_mkdir_p(cfg->data_dir, 0755) != 0) {
        TY_ERROR("agent", "cannot create --data-dir %s: %s", cfg->data_dir, strerror(errno));
        return -1;
    }
    a->data_dir = realpath(cfg->data_dir, NULL);
    if (!a->data_dir) {
        TY_ERROR("agent", "cannot resolve %s: %s", cfg->data_dir, strerror(errno));
        return -1;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/logs", a->data_dir);
    if (util_mkdir_p(path, 0755) != 0) {
        TY_ERROR("agent", "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/spool", a->data_dir);
    if (util_mkdir_p(path, 0700) != 0 || !(a->spool_dir = strdup(path))) {
        TY_ERROR("agent", "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/report.sock", a->data_dir);
    if (!(a->report_socket = strdup(path)))
        return -1;
    if (strlen(path) >= 108)
        TY_WARN("agent", "%s is too long for a unix socket; reports will fail", path);
    if (agent__isolation_init(a) != 0 || supervisor_locate(a) != 0 || agent__lease_open(a) != 0)
        return -1;
    if (!(a->node_id = agent__node_id_load(a->data_dir, cfg->node_id)) ||
        agent__cgroup_init(a) != 0)
        return -1;
    a->node_credential = agent__credential_load(a->data_dir);
    if (gethostname(a->hostname, sizeof(a->hostname) - 1) != 0)
        snprintf(a->hostname, sizeof(a->hostname), "localhost");
    snprintf(a->address, sizeof(a->address), "%s", cfg->address ? cfg->address : a->hostname);
    a->cpus = cfg->cpus > 0 ? cfg->cpus : agent__detect_cpus();
    a->memory_mb = cfg->memory_mb > 0 ? cfg->memory_mb : agent__detect_memory_mb();
    char *detected_type = NULL;
    if (cfg->gpus_declared) {
        if (cfg->n_gpus > 0) {
            a->gpus = malloc(cfg->n_gpus * sizeof(int));
            if (!a->gpus)
                return -1;
            memcpy(a->gpus, cfg->gpu_list, cfg->n_gpus * sizeof(int));
        }
        a->n_gpus = cfg->n_gpus;
    } else {
        a->n_gpus = agent__detect_gpus(cfg->nvml_library, &a->gpus, &a->gpu_info);
        a->n_gpu_info = a->n_gpus;
        if (a->n_gpus > 0 && a->gpu_info[0].name[0]) {
            detected_type = strndup(a->gpu_info[0].name, 64); /* node.gpu_type limit */
            if (!detected_type)
                return -1;
        }
    }
    if (cfg->gpu_type) {
        free(detected_type);
        a->gpu_type = a->n_gpus > 0 ? strdup(cfg->gpu_type) : NULL;
    } else {
        a->gpu_type = a->n_gpus > 0 ? detected_type : NULL;
        if (a->n_gpus == 0)
            free(detected_type);
    }
    TY_INFO("agent", "node %s (%s): %lld CPU, %lld MiB, %zu GPU%s%s", a->node_id, a->hostname,
            (long long)a->cpus, (long long)a->memory_mb, a->n_gpus, a->gpu_type ? " " : "",
            a->gpu_type ? a->gpu_type : "");
    return 0;
}

static void agent_free(struct agent *a)
{
    agent__events_free_all(a);
    agent__warm_fini(a);
    agent__uid_release_all(a);
    agent__workers_free_all(a);
    agent__cgroup_fini(a);
    agent__tails_free_all(a);
    UTIL_FREE(a->data_dir);
    UTIL_FREE(a->node_id);
    UTIL_FREE(a->node_credential);
    UTIL_FREE(a->gpu_type);
    UTIL_FREE(a->gpus);
    UTIL_FREE(a->gpu_info);
    agent__nvml_close();
    UTIL_FREE(a->report_socket);
    UTIL_FREE(a->spool_dir);
    UTIL_FREE(a->workers_dir);
    UTIL_FREE(a->supervisor_path);
    if (a->lease_fd >= 0)
        close(a->lease_fd);
    a->lease_fd = -1;
    if (a->lease_read_fd >= 0)
        close(a->lease_read_fd);
    a->lease_read_fd = -1;
}

int main(int argc, char **argv)
{
    /* First of all, so that a SIGTERM at any point of start-up still means a clean exit. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct agent_config cfg;
    int rc = agent_config_load(&cfg, argc, argv);
    if (rc == 1)
        return 0;
    if (rc < 0)
        return 2;

    if (cfg.ephemeral_s > 0) {
        sa.sa_handler = on_usr1;
        sigaction(SIGUSR1, &sa, NULL);
    }

    struct agent a;
    memset(&a, 0, sizeof(a));
    a.cfg = &cfg;
    a.report_listen_fd = -1;
    a.inotify_fd = -1;
    a.lease_fd = -1;
    a.lease_read_fd = -1;
    int status = 1;
    struct poll_timer pt = {.a = &a};

    /* Orphans of workers (their daemonized children) become ours, so the poll timer reaps them
     * instead of leaving zombies behind. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    srand48((long)agent_wall_ms() ^ (long)getpid());

    if (agent_setup(&a) != 0)
        goto out;

    lws_set_log_level(LLL_ERR | LLL_WARN, lws_log_emit);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof(info));
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = agent__protocols();
    info.user = &a;
    info.gid = (gid_t)-1;
    info.uid = (uid_t)-1;
    if (cfg.url_tls) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.client_ssl_ca_filepath = cfg.ca_file;
    }
    a.ctx = lws_create_context(&info);
    if (!a.ctx) {
        TY_ERROR("agent", "cannot create the libwebsockets context");
        goto out;
    }
    if (agent__report_listen(&a) != 0 || agent__uploader_start(&a) != 0 ||
        agent__prepare_start(&a) != 0)
        goto out;
    agent__children_watch(&a);
    agent__tails_watch(&a);
    agent__spool_reload(&a);
    agent__spool_reload_exits(&a);
    agent__workers_adopt(&a);
    agent__tails_reload(&a);
    if (agent__ws_init(&a) != 0)
        goto out;
    lws_sul_schedule(a.ctx, 0, &pt.sul, poll_tick, AGENT_POLL_US);
    TY_INFO("agent", "trainyard-agent %s: server %s, data %s", AGENT_VERSION, cfg.server,
            a.data_dir);

    while (!a.done)
        if (lws_service(a.ctx, 0) < 0)
            break;
    status = a.done ? 0 : 1;
    TY_INFO("agent", "exiting");

out:
    if (a.ctx) {
        lws_sul_cancel(&pt.sul);
        agent__ws_fini(&a);
        agent__report_close_all(&a);
        lws_context_destroy(a.ctx);
    }
    /* An ephemeral agent's data directory is its allocation's alone (no later agent resumes
     * from it): once its checkpoint parts are all in the artifact store, nothing in it is of
     * use, and on a cluster's nodes it would pile up (checkpoint copies) under /tmp. */
    bool tidy = status == 0 && cfg.ephemeral_s > 0 && a.data_dir && agent__uploads_pending(&a) == 0;
    agent__prepare_stop(&a); /* before the uploader: it fetches through it */
    agent__uploader_stop(&a);
    agent__ws_free_timers(&a);
    if (tidy)
        ephemeral_remove_data(a.data_dir);
    agent_free(&a);
    agent_config_free(&cfg);
    return status;
}
