/* Jobs placed through Slurm (--slurm, README "Slurm"). Every waiting job (PENDING, or RESTARTING
 * after an attempt ended) holds one Slurm allocation sized from its scaling config; the
 * allocation's script starts one ephemeral agent per node (srun), registered under the node id
 * slurm-<slurm job id>-<node name> and offering the custom resource slurm_job_<job id>, which
 * every worker of that job (and only of it) asks for (ctl__slurm_bind_spec): so the scheduler
 * places the attempt on exactly those agents, as it places any job. Slurm's pending reason is the
 * job's status message; slurmrestd down or refusing the token is an event and a message, the
 * job staying PENDING; an allocation Slurm rejects fails the job with Slurm's message. Once an
 * attempt ran in the allocation, the allocation is cancelled when the job finishes or the
 * attempt ends (a restart submits a new one): Slurm then ends the agents, and they their
 * workers. Control thread only; slurmrestd calls block it for at most 2 s each. */
#include "control_internal.h"

#include "jobspec.h"
#include "log.h"
#include "server.h"
#include "slurm_rest.h"
#include "store.h"
#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How often slurmrestd is asked about the allocations of waiting jobs. Only for the status
 * message and to notice one that ended unused: the job is placed when its agents register, not
 * when this look sees the allocation RUNNING. Each ask blocks this thread (tens of ms, more on a
 * loaded host), delaying the pass that an agent's registration asks for: at 0.2 s, one
 * registration in three or four waited on one (docs/benchmarks.md, "Slurm"). */
#define CTL_SLURM_EVERY_S 1.0
#define CTL_SLURM_KICK_EVERY_S 0.02
#define CTL_SLURM_ENV_MAX 64
#define CTL_SLURM_SIGNAL_S 60 /* --signal=USR1@this */
/* The agents' --ephemeral, unless the server's environment sets TRAINYARD_AGENT_EPHEMERAL: they
 * exit after this long without a server (it is gone). */
#define CTL_SLURM_AGENT_ORPHAN "TRAINYARD_AGENT_EPHEMERAL=30"
/* The longest an ended attempt's allocation is left to its agents before it is cancelled. */
#define CTL_SLURM_RETIRE_S CTL_SLURM_SIGNAL_S
/* The longest the allocation of an attempt the job has left is kept while the attempt's
 * workers are still stopping (a worker that never ends must not hold the job's restart). */
#define CTL_SLURM_STOPPING_MAX_S (5 * CTL_SLURM_RETIRE_S)
/* A tick stops asking slurmrestd once it has spent this long (each call: at most 2 s). */
#define CTL_SLURM_TICK_BUDGET_S 1.0

extern char **environ;

int ctl__slurm_start(struct control *ctl)
{
    const struct srv_config *cfg = &ctl->srv->cfg;
    if (cfg->slurm == NULL || cfg->slurm[0] == '\0')
        return 0;
    char err[256];
    ctl->slurm = slurm_client_new(cfg->slurm, cfg->slurm_token_file, err, sizeof(err));
    if (ctl->slurm == NULL) {
        TY_ERROR("control", "%s", err);
        return -1;
    }
    TY_INFO("control", "placing jobs through Slurm at %s", cfg->slurm);
    return 0;
}

void ctl__slurm_stop(struct control *ctl)
{
    slurm_client_free(ctl->slurm);
    ctl->slurm = NULL;
    free(ctl->slurm_cluster_token);
    ctl->slurm_cluster_token = NULL;
    free(ctl->slurm_ready);
    ctl->slurm_ready = NULL;
    ctl->nslurm_ready = 0;
}

/* Binds a job's parsed spec to allocation slurm_id: every worker asks for one unit of the custom
 * resource slurm_<slurm_id>, which that allocation's agents alone offer. The cached spec is this
 * module's to amend (control_specs.c keeps it for the job's life). 0, or -1 out of memory. */
static int bind_spec(struct jobspec *js, int64_t slurm_id)
{
    char name[48];
    snprintf(name, sizeof(name), "slurm_%lld", (long long)slurm_id);
    struct jobspec_resource *last = js->n_custom ? &js->custom[js->n_custom - 1] : NULL;
    if (last && strncmp(last->name, "slurm_", 6) == 0) {
        if (strcmp(last->name, name) == 0)
            return 0;
        char *copy = strdup(name);
        if (copy == NULL)
            return -1;
        free(last->name);
        last->name = copy;
        return 0;
    }
    struct jobspec_resource *r = realloc(js->custom, (js->n_custom + 1) * sizeof(*r));
    if (r == NULL)
        return -1;
    js->custom = r;
    if ((r[js->n_custom].name = strdup(name)) == NULL)
        return -1;
    r[js->n_custom].amount_milli = 1000;
    js->n_custom++;
    return 0;
}

void ctl__slurm_filter(struct control *ctl, const int64_t *ids, size_t n,
                       const struct jobspec **specs)
{
    if (ctl->slurm == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        if (specs[i] == NULL)
            continue;
        int64_t alloc = -1;
        for (size_t k = 0; ids[i] > 0 && k < ctl->nslurm_ready; k++)
            if (ctl->slurm_ready[k].job == ids[i])
                alloc = ctl->slurm_ready[k].slurm_job_id;
        if (alloc <= 0 || bind_spec((struct jobspec *)specs[i], alloc) != 0)
            specs[i] = NULL; /* no running allocation (or a growth probe): not this pass */
    }
}

/* The agents' websocket URL: --public-url's host, else --http-host unless it is a wildcard,
 * else this host's name; on --ws-port. */
static void server_ws_url(const struct srv_config *cfg, char *out, size_t n)
{
    char host[256] = "";
    const char *scheme = cfg->tls_cert ? "wss" : "ws";
    if (cfg->public_url) {
        const char *p = strstr(cfg->public_url, "://");
        p = p ? p + 3 : cfg->public_url;
        size_t len = strcspn(p, ":/");
        snprintf(host, sizeof(host), "%.*s", (int)len, p);
    } else if (cfg->http_host && strcmp(cfg->http_host, "0.0.0.0") != 0 &&
               strcmp(cfg->http_host, "::") != 0) {
        snprintf(host, sizeof(host), "%s", cfg->http_host);
    } else if (gethostname(host, sizeof(host) - 1) != 0) {
        snprintf(host, sizeof(host), "localhost");
    }
    snprintf(out, n, "%s://%s:%lld", scheme, host, (long long)cfg->ws_port);
}

/* The agent binary the nodes run: --slurm-agent-path, else trainyard-agent beside the server
 * (the build tree: ../worker/agent/trainyard-agent). */
static void agent_path(const struct srv_config *cfg, char *out, size_t n)
{
    if (cfg->slurm_agent_path && cfg->slurm_agent_path[0]) {
        snprintf(out, n, "%s", cfg->slurm_agent_path);
        return;
    }
    char exe[PATH_MAX - 64];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[len > 0 ? len : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, n, "%s/trainyard-agent", exe);
    if (access(out, X_OK) != 0)
        snprintf(out, n, "%s/../worker/agent/trainyard-agent", exe);
}

/* Submits the allocation of a waiting job. Returns an enum slurm_rc with err. */
static int submit(struct control *ctl, const struct store_slurm_job *row, int64_t *slurm_id,
                  char *err, size_t errlen)
{
    const struct srv_config *cfg = &ctl->srv->cfg;
    json_t *spec = json_loads(row->spec_json, 0, NULL);
    struct jobspec js;
    char perr[256];
    if (spec == NULL || jobspec_from_json(spec, &js, perr, sizeof(perr)) != 0) {
        json_decref(spec);
        snprintf(err, errlen, "the job's spec does not parse");
        return SLURM_REJECTED;
    }
    json_decref(spec);
    /* One worker per node, all of them on one node under STRICT_PACK. */
    int workers = js.num_workers_max;
    int nodes = js.strategy == JOBSPEC_STRATEGY_STRICT_PACK ? 1 : workers;
    int per_node = (workers + nodes - 1) / nodes;
    int cpus = (int)((js.cpu_milli + 999) / 1000);
    struct slurm_alloc a = {
        .nodes = nodes,
        .tasks_per_node = per_node,
        .cpus_per_task = cpus > 0 ? cpus : 1,
        .gpus_per_node = js.gpu * per_node,
        .mem_per_node_mb = js.memory_mb * per_node,
        /* Slurm's limit a minute past timeout_s: Trainyard's own timeout fires first. */
        .time_limit_min = js.timeout_s > 0 ? (int)(js.timeout_s / 60) + 2 : 0,
        /* SIGUSR1 a minute before the time limit, or at a preemption's GraceTime: the agents
         * ask the server to preempt the job (checkpoint, restart on a new allocation). */
        .signal_s = CTL_SLURM_SIGNAL_S,
        .partition = cfg->slurm_partition,
        .account = cfg->slurm_account,
        .cwd = "/tmp",
    };
    char name[64], exe[PATH_MAX], url[512], script[2048], nonce[17];
    unsigned char rnd[8];
    if (util_random_bytes(rnd, sizeof(rnd)) != 0) {
        jobspec_clear(&js);
        snprintf(err, errlen, "no random bytes for the agents' data directory");
        return SLURM_UNAVAILABLE;
    }
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);
    /* The attempt the allocation is for: the job's next one. */
    snprintf(name, sizeof(name), "trainyard-%lld-%d", (long long)row->job, row->attempt + 1);
    a.name = name;
    agent_path(cfg, exe, sizeof(exe));
    server_ws_url(cfg, url, sizeof(url));
    /* One agent per node, each with its own node id and data directory, offering the node's
     * share of the allocation (its CPUs and memory as Slurm counts them). The data directory is
     * the cluster's, the allocation's and this submission's (a random suffix): Slurm job ids
     * recur (another cluster on the host, slurmctld without its state), and an agent that found
     * a former agent's spool there would replay its workers' exits to this attempt. A fresh name
     * instead of emptying the directory: no `rm` to start on each node before its agent. The
     * other nodes' agents are started by one srun step over all nodes, in the background, first
     * thing: it is the slower path (a step takes 0.4-0.8 s to reach its tasks), and srun's own
     * start no longer shares the CPU with the first agent's. The first node's agent is started
     * by the batch script itself, next, from a subshell (no second shell to exec). On the first
     * node the step's task only relays Slurm's warning (--signal=USR1 reaches the steps, never
     * the batch script) to the agent there, whose pid the script leaves in first-agent.pid of
     * the allocation's directory, and ends with it. The script lives until the step has ended
     * too (an allocation that ended with the first node's agent would kill the other nodes'
     * workers). Each agent removes its data directory when it exits with its checkpoint parts
     * all stored, and the allocation's once empty (worker/agent/main.c): the relay removes the
     * pid file once read (the script itself may not outlive its agents: the server cancels the
     * allocation once they are gone). */
    snprintf(
        script, sizeof(script),
        "#!/bin/sh\n"
        "a='export TRAINYARD_NODE_ID=slurm-$SLURM_JOB_ID-$SLURMD_NODENAME "
        "TRAINYARD_AGENT_RESOURCES=\"{\\\"slurm_$SLURM_JOB_ID\\\": %d}\" "
        "TRAINYARD_AGENT_DATA_DIR=$TRAINYARD_SLURM_D/$SLURMD_NODENAME "
        "TRAINYARD_AGENT_CPUS=$SLURM_CPUS_ON_NODE; exec \"$TRAINYARD_SLURM_AGENT\"'\n"
        "export TRAINYARD_SLURM_A=\"$a\" "
        "TRAINYARD_SLURM_D=/tmp/trainyard-slurm/$SLURM_CLUSTER_NAME/$SLURM_JOB_ID-%s "
        "TRAINYARD_SLURM_FIRST=\"$SLURMD_NODENAME\"\n"
        "srun --ntasks-per-node=1 --cpus-per-task=%d --kill-on-bad-exit=0 /bin/sh -c "
        "'[ \"$SLURMD_NODENAME\" = \"$TRAINYARD_SLURM_FIRST\" ] || eval \"$TRAINYARD_SLURM_A\"; "
        "n=0; until read p <\"$TRAINYARD_SLURM_D/first-agent.pid\" || [ $n -ge 300 ]; "
        "do n=$((n+1)); sleep 0.1; done 2>/dev/null; rm -f \"$TRAINYARD_SLURM_D/first-agent.pid\"; "
        "trap \"kill -USR1 $p\" USR1; "
        "while kill -0 $p 2>/dev/null; do sleep 1 & wait $!; done' &\n"
        "s=$!\n"
        "(eval \"$a\") &\n"
        "p=$!\n"
        "mkdir -p \"$TRAINYARD_SLURM_D\" && echo $p >\"$TRAINYARD_SLURM_D/first-agent.pid\"\n"
        "while kill -0 $p 2>/dev/null; do wait $p; done\n"
        "while kill -0 $s 2>/dev/null; do wait $s; done\n",
        per_node, nonce, a.cpus_per_task * per_node);
    a.script = script;
    const char *env[CTL_SLURM_ENV_MAX];
    char e_path[1024], e_agent[PATH_MAX + 32], e_server[600], e_tok[300];
    size_t ne = 0;
    const char *path = getenv("PATH");
    snprintf(e_path, sizeof(e_path), "PATH=%s", path ? path : "/usr/bin:/bin");
    snprintf(e_agent, sizeof(e_agent), "TRAINYARD_SLURM_AGENT=%s", exe);
    snprintf(e_server, sizeof(e_server), "TRAINYARD_AGENT_SERVER=%s", url);
    env[ne++] = e_path;
    env[ne++] = e_agent;
    env[ne++] = e_server;
    if (ctl->slurm_cluster_token) {
        snprintf(e_tok, sizeof(e_tok), "TRAINYARD_CLUSTER_TOKEN=%s", ctl->slurm_cluster_token);
        env[ne++] = e_tok;
    }
    if (getenv("TRAINYARD_AGENT_EPHEMERAL") == NULL)
        env[ne++] = CTL_SLURM_AGENT_ORPHAN;
    if (js.gpu == 0)
        env[ne++] = "TRAINYARD_AGENT_GPUS=none";
    /* The server's own TRAINYARD_AGENT_* settings travel to its agents (run-as, uid lock
     * directory, python path, ...), but not those set above. */
    for (char **e = environ; *e && ne < CTL_SLURM_ENV_MAX; e++)
        if (strncmp(*e, "TRAINYARD_AGENT_", 16) == 0 &&
            strncmp(*e, "TRAINYARD_AGENT_RESOURCES=", 26) != 0 &&
            strncmp(*e, "TRAINYARD_AGENT_DATA_DIR=", 25) != 0 &&
            strncmp(*e, "TRAINYARD_AGENT_CPUS=", 21) != 0 &&
            strncmp(*e, "TRAINYARD_AGENT_SERVER=", 23) != 0 &&
            !(js.gpu == 0 && strncmp(*e, "TRAINYARD_AGENT_GPUS=", 21) == 0))
            env[ne++] = *e;
    a.env = env;
    a.nenv = ne;
    int rc = slurm_client_submit(ctl->slurm, &a, slurm_id, err, errlen);
    jobspec_clear(&js);
    return rc;
}

/* Whether the job Slurm knows as row->slurm_job_id is an allocation of row's job: named
 * trainyard-<job>-<attempt> (submit). slurmctld restarted without its state (no slurmdbd, a
 * lost StateSaveLocation) hands out ids again: a job with our id but another name is someone
 * else's, not to be watched, bound to or cancelled as ours. */
static bool ours(const struct store_slurm_job *row, const struct slurm_job_info *info)
{
    char prefix[48];
    int n = snprintf(prefix, sizeof(prefix), "trainyard-%lld-", (long long)row->job);
    if (strncmp(info->name, prefix, (size_t)n) == 0)
        return true;
    TY_WARN("control",
            "job %lld: Slurm job %lld is now \"%s\", not its allocation (slurmctld reused the "
            "id): forgetting it",
            (long long)row->job, (long long)row->slurm_job_id, info->name);
    return false;
}

/* Returns the enum slurm_rc of the call. */
static int cancel(struct control *ctl, const struct store_slurm_job *row)
{
    char err[256];
    struct slurm_job_info info;
    int rc = slurm_client_job(ctl->slurm, row->slurm_job_id, &info, err, sizeof(err));
    if (rc == SLURM_UNAVAILABLE) {
        TY_WARN("control", "job %lld: cannot cancel Slurm job %lld yet: %s", (long long)row->job,
                (long long)row->slurm_job_id, err);
        return rc;
    }
    if (rc == SLURM_REJECTED || !ours(row, &info) || slurm_state_is_final(info.state)) {
        store_slurm_set(ctl->db, row->job, -1); /* gone, ended, or not ours: nothing to cancel */
        return SLURM_OK;
    }
    rc = slurm_client_cancel(ctl->slurm, row->slurm_job_id, err, sizeof(err));
    if (rc == SLURM_UNAVAILABLE) {
        TY_WARN("control", "job %lld: cannot cancel Slurm job %lld yet: %s", (long long)row->job,
                (long long)row->slurm_job_id, err);
        return rc;
    }
    if (rc != SLURM_OK)
        TY_WARN("control", "job %lld: Slurm job %lld: %s", (long long)row->job,
                (long long)row->slurm_job_id, err);
    TY_INFO("control", "job %lld: Slurm job %lld cancelled", (long long)row->job,
            (long long)row->slurm_job_id);
    store_slurm_set(ctl->db, row->job, -1);
    return rc;
}

/* Whether the allocation of an attempt that is over (the job restarting or finished) is left
 * running for now: its agents, still connected, exit by themselves once their workers have
 * ended (a preemption's grace lets them checkpoint first) and their checkpoint parts are in the
 * artifact store (worker/agent/main.c); a cancel would kill them mid-checkpoint or mid-upload
 * (Slurm ends the steps), and the restart or the user would find no stored copy of the last
 * checkpoint. At most CTL_SLURM_RETIRE_S after the attempt finished (Slurm's own warning lead);
 * until it has, while its agents are connected (the server stops its workers), at most
 * CTL_SLURM_STOPPING_MAX_S after the job left the attempt. */
static bool retiring(const struct store_slurm_job *row)
{
    if (!row->used || row->agents == 0)
        return false;
    if (row->ended_s >= 0)
        return row->ended_s < CTL_SLURM_RETIRE_S;
    return row->over_s < CTL_SLURM_STOPPING_MAX_S;
}

/* Job `job` may be placed on the agents of allocation slurm_id (ctl__slurm_filter). */
static void mark_ready(struct control *ctl, int64_t job, int64_t slurm_id)
{
    struct ctl_slurm_ready *r = realloc(ctl->slurm_ready, (ctl->nslurm_ready + 1) * sizeof(*r));
    if (r) {
        ctl->slurm_ready = r;
        r[ctl->nslurm_ready++] = (struct ctl_slurm_ready){job, slurm_id};
    }
}

/* A waiting job: submits its allocation, or says what Slurm says of it. Returns the enum slurm_rc
 * of its slurmrestd call (SLURM_UNAVAILABLE: the rest of the tick does without Slurm). */
static int drive_waiting(struct control *ctl, const struct store_slurm_job *row, bool ask)
{
    char err[400], msg[512];
    struct store_slurm_job next;
    if (row->slurm_job_id > 0 && row->used) {
        /* The allocation of an attempt that ended: cancelled once its agents are done, and the
         * next attempt's submitted at once, not at the next look. */
        if (retiring(row))
            return SLURM_OK;
        int rc = cancel(ctl, row);
        if (rc == SLURM_UNAVAILABLE)
            return rc;
        next = *row;
        next.slurm_job_id = -1;
        row = &next;
    }
    if (row->slurm_job_id <= 0) {
        int64_t id = -1;
        int rc = submit(ctl, row, &id, err, sizeof(err));
        if (rc == SLURM_OK) {
            TY_INFO("control", "job %lld: Slurm job %lld submitted", (long long)row->job,
                    (long long)id);
            if (store_slurm_set(ctl->db, row->job, id) < 0) {
                slurm_client_cancel(ctl->slurm, id, err, sizeof(err)); /* not recorded */
                return rc;
            }
            /* Bound at once: the agents may register before the next look. */
            mark_ready(ctl, row->job, id);
            snprintf(msg, sizeof(msg), "waiting: Slurm job %lld submitted", (long long)id);
            store_slurm_event(ctl->db, row->job, msg);
        } else if (rc == SLURM_REJECTED) {
            if (id > 0)
                slurm_client_cancel(ctl->slurm, id, msg, sizeof(msg));
            TY_WARN("control", "job %lld: Slurm rejected the allocation: %s", (long long)row->job,
                    err);
            store_slurm_fail(ctl->db, row->job, err); /* pending or restarting: FAILED */
        } else {
            if (id > 0) /* created all the same: the next look submits anew */
                slurm_client_cancel(ctl->slurm, id, msg, sizeof(msg));
            snprintf(msg, sizeof(msg), "waiting: %s", err);
            store_slurm_event(ctl->db, row->job, msg);
        }
        return rc;
    }
    if (!ask) {
        mark_ready(ctl, row->job, row->slurm_job_id); /* as the last ask left it */
        return SLURM_OK;
    }
    struct slurm_job_info info;
    int rc = slurm_client_job(ctl->slurm, row->slurm_job_id, &info, err, sizeof(err));
    if (rc == SLURM_UNAVAILABLE) {
        snprintf(msg, sizeof(msg), "waiting: %s", err);
        store_slurm_event(ctl->db, row->job, msg);
        return rc;
    }
    if (rc == SLURM_REJECTED || !ours(row, &info) || slurm_state_is_final(info.state)) {
        /* Gone or ended before an attempt ran in it (or its id now another job's): submit
         * another at the next look. */
        TY_WARN("control", "job %lld: Slurm job %lld ended before its agents were used (%s)",
                (long long)row->job, (long long)row->slurm_job_id,
                rc == SLURM_REJECTED ? err : info.state);
        store_slurm_set(ctl->db, row->job, -1);
        return SLURM_OK;
    }
    /* Bound at once: the job is placed as soon as the allocation's agents have registered (a
     * registration runs a pass), with no wait for this loop to see the allocation RUNNING. */
    mark_ready(ctl, row->job, row->slurm_job_id);
    if (strcmp(info.state, "PENDING") == 0)
        snprintf(msg, sizeof(msg), "waiting: Slurm job %lld is pending (%s)",
                 (long long)row->slurm_job_id, info.reason);
    else
        snprintf(msg, sizeof(msg), "waiting: Slurm job %lld is %s on %s; its agents are starting",
                 (long long)row->slurm_job_id, info.state, info.nodes);
    store_slurm_event(ctl->db, row->job, msg);
    return SLURM_OK;
}

void ctl__slurm_tick(struct control *ctl, bool now)
{
    /* A kick's look (a submission, a stop), at most every 20 ms: a flood of kicks does not
     * become a flood of calls. It submits and cancels; asking about submitted allocations waits
     * for its own period. */
    double t = util_mono_s();
    bool ask = t - ctl->slurm_asked >= CTL_SLURM_EVERY_S;
    if (ctl->slurm == NULL || t - ctl->slurm_last < CTL_SLURM_KICK_EVERY_S || !(now || ask))
        return;
    double start = ctl->slurm_last = t;
    if (ask)
        ctl->slurm_asked = t;
    struct store_slurm_job *rows = NULL;
    size_t n = 0;
    if (store_slurm_jobs(ctl->db, &rows, &n) < 0)
        return;
    ctl->nslurm_ready = 0;
    /* slurmrestd calls block this thread: after one that could not reach Slurm, or once the
     * tick has spent its budget, the rest wait for the next tick. */
    for (size_t i = 0; i < n && util_mono_s() - start < CTL_SLURM_TICK_BUDGET_S; i++) {
        const struct store_slurm_job *r = &rows[i];
        bool waiting = strcmp(r->status, "PENDING") == 0 || strcmp(r->status, "RESTARTING") == 0;
        bool live = strcmp(r->status, "STARTING") == 0 || strcmp(r->status, "RUNNING") == 0 ||
                    strcmp(r->status, "STOPPING") == 0;
        int rc = SLURM_OK;
        if (waiting)
            rc = drive_waiting(ctl, r, ask);
        else if (!live && r->slurm_job_id > 0 && !retiring(r))
            rc = cancel(ctl, r); /* finished: the agents go with the allocation */
        if (rc == SLURM_UNAVAILABLE)
            break;
    }
    store_slurm_jobs_free(rows, n);
}

void ctl__slurm_placed(struct control *ctl, int64_t job, int attempt)
{
    if (ctl->slurm)
        store_slurm_attempt(ctl->db, job, attempt);
}

void ctl__slurm_preempt_notice(struct control *ctl, struct ctl_node *node, const char *reason)
{
    TY_WARN("control", "node %s: %s; preempting its jobs", node->id, reason);
    char *json = NULL, *preempted = NULL;
    if (store_node_set_draining(ctl->db, node->id, true, true, &json, &preempted) > 0)
        TY_INFO("control", "node %s drained; jobs preempted: %s", node->id,
                preempted ? preempted : "[]");
    else
        TY_WARN("control", "node %s: the preemption was not stored", node->id);
    free(json);
    free(preempted);
    ctl->dirty = true;
}
