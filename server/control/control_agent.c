/* Messages from agents (docs/agent-protocol.md): register, heartbeat, worker events; reports go
 * to control_report.c. Each is parsed by the shared protocol module (common/agent_proto.c), acted
 * on here, and answered with a message built there. */
#include "control_internal.h"

#include "agent_proto.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void send_error_and_close(struct control *ctl, uint64_t conn, const char *message)
{
    ctl__send_text(ctl, conn, aproto_msg_error(message));
    hub_close(ctl->hub, conn);
}

static void ack_seq(struct control *ctl, uint64_t conn, int64_t seq)
{
    ctl__send_text(ctl, conn, aproto_msg_ack(seq));
}

/* Could not record an event of this node: an agent may read acks as cumulative, so a later ack
 * could make it forget this one. Close the connection instead; the agent reconnects and resends
 * everything unacked. */
static void reconnect_to_resend(struct control *ctl, struct ctl_node *node, uint64_t conn,
                                const char *type)
{
    TY_WARN("control", "node %s: could not record %s; reconnecting it so that it resends", node->id,
            type);
    node->conn = 0;
    hub_close(ctl->hub, conn);
}

/* ------------------------------------------------------------------------------------------ */
/* worker_started, in batches                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Queues a worker_started of a registered node; a full batch is committed first. */
static void queue_started(struct control *ctl, struct ctl_node *node, uint64_t conn,
                          const struct aproto_worker_event *e, int64_t job)
{
    struct ctl_started *b = &ctl->started;
    if (b->n == CTL_STARTED_MAX)
        ctl__flush_started(ctl);
    b->rows[b->n] = (struct store_worker_start){
        .node = node->id,
        .job = job,
        .attempt = (int)e->attempt,
        .rank = (int)e->rank,
        .pid = e->pid,
        .code_fetch_s = e->startup.code_fetch_s,
        .checkpoint_fetch_s = e->startup.checkpoint_fetch_s,
        .process_start_s = e->startup.process_start_s,
    };
    b->conn[b->n] = conn;
    b->has_seq[b->n] = true;
    b->seq[b->n] = e->seq;
    b->n++;
}

void ctl__flush_started(struct control *ctl)
{
    struct ctl_started *b = &ctl->started;
    if (b->n == 0)
        return;
    bool one_txn = store_workers_started(ctl->db, b->rows, b->n) >= 0;
    if (one_txn)
        TY_DEBUG("control", "recorded %zu worker start(s) in one transaction", b->n);
    else
        TY_DEBUG("control", "recording %zu worker starts together failed; one by one", b->n);
    for (size_t i = 0; i < b->n; i++) {
        /* NULL: its connection was closed by an earlier failure below; the agent resends. */
        struct ctl_node *node = ctl__node_by_conn(ctl, b->conn[i]);
        if (node == NULL)
            continue;
        const struct store_worker_start *r = &b->rows[i];
        if (!one_txn && store_worker_started(ctl->db, r) < 0) {
            reconnect_to_resend(ctl, node, b->conn[i], "worker_started");
            continue;
        }
        if (b->has_seq[i])
            ack_seq(ctl, b->conn[i], b->seq[i]);
    }
    b->n = 0;
}

/* Applies a worker exit reported by node `node` (exit_code, signal: -1 for null; reason: the
 * failure line of its output, or NULL); stops the job's other workers when it failed. The store
 * ignores it unless the worker is on that node. Returns 0 or -1. */
static int apply_exit(struct control *ctl, const char *node, int64_t job, int attempt, int rank,
                      int exit_code, int signal, const char *error, const char *reason)
{
    int64_t c = exit_code, s = signal;
    enum store_exit_outcome outcome = STORE_EXIT_IGNORED;
    char *words = aproto_exit_words(exit_code, signal, error, reason);
    if (words == NULL && error != NULL)
        return -1; /* out of memory */
    int qs = store_worker_exited(ctl->db, node, job, attempt, rank, exit_code >= 0 ? &c : NULL,
                                 signal >= 0 ? &s : NULL, words, &outcome);
    free(words);
    if (qs < 0)
        return -1;
    if (outcome == STORE_EXIT_STOP_OTHERS)
        ctl__send_stops(ctl, job);
    if (outcome == STORE_EXIT_STOP_OTHERS || outcome == STORE_EXIT_SETTLED)
        ctl->dirty = ctl->gained = true; /* resources were freed */
    return 0;
}

/* The job id of a worker event or state (the protocol's decimal string), or 0 when it names no
 * job this server could have made. */
static int64_t job_of(const struct aproto_worker_event *e)
{
    int64_t id = 0;
    return util_parse_int64(e->job_id, 1, INT64_MAX, &id) == 0 ? id : 0;
}

/* Applies the report caps (the option table): keeps at most --max-metrics-per-report metrics
 * of the report (the others count as skipped), and returns false for a report past
 * --max-reports-per-worker of its worker's attempt, which is then dropped. */
static bool within_report_caps(struct control *ctl, struct ctl_node *node,
                               struct aproto_node_msg *m)
{
    struct aproto_report *r = &m->report;
    if (r->report_seq > ctl->srv->cfg.max_reports_per_worker) {
        TY_BAD_PEER("control",
                    "node %s: job %lld rank %lld report %lld is past --max-reports-per-worker; "
                    "dropped",
                    node->id, (long long)r->job, (long long)r->rank, (long long)r->report_seq);
        return false;
    }
    size_t cap = (size_t)ctl->srv->cfg.max_metrics_per_report;
    if (r->n_metrics <= cap)
        return true;
    size_t cut = r->n_metrics - cap;
    aproto_report_keep(r, cap); /* the first ones, and the text of those only is stored */
    TY_BAD_PEER("control",
                "node %s: job %lld report %lld: %zu metrics over --max-metrics-per-report",
                node->id, (long long)r->job, (long long)r->report_seq, cut);
    return true;
}

/* Acks a report dropped for a cap, after committing the reports queued before it (an agent
 * may read acks as cumulative: this one must not cover a report that is not committed yet). */
static void drop_over_cap(struct control *ctl, uint64_t conn, int64_t seq)
{
    ctl__flush_reports(ctl, conn);
    if (seq >= 0 && ctl__node_by_conn(ctl, conn) != NULL)
        ack_seq(ctl, conn, seq);
}

/* Whether `register` listed worker (job, attempt, rank). */
static bool reported(const struct aproto_node_msg *reg, int64_t job, int attempt, int rank)
{
    for (size_t k = 0; k < reg->n_workers; k++) {
        const struct aproto_worker_event *w = &reg->workers[k];
        if (job_of(w) == job && w->attempt == attempt && w->rank == rank)
            return true;
    }
    return false;
}

/* Whether (job, attempt, rank) is among the n live workers. */
static bool is_live(const struct store_live_worker *live, size_t n, int64_t job, int64_t attempt,
                    int64_t rank)
{
    for (size_t i = 0; i < n; i++)
        if (live[i].job == job && live[i].attempt == attempt && live[i].rank == rank)
            return true;
    return false;
}

/* Workers the agent still runs (re-adopted after an agent restart, docs/agent-restart.md) that
 * the database no longer counts as live on this node (the node was LOST meanwhile, or the job
 * ended): each attempt of them is stopped, so that none is left running unaccounted for. */
static void stop_unaccounted(struct control *ctl, uint64_t conn, const struct aproto_node_msg *reg,
                             const struct store_live_worker *live, size_t nlive)
{
    for (size_t k = 0; k < reg->n_workers; k++) {
        const struct aproto_worker_event *w = &reg->workers[k];
        if (w->exited || is_live(live, nlive, job_of(w), w->attempt, w->rank))
            continue;
        bool sent = false; /* one stop per attempt */
        for (size_t j = 0; j < k && !sent; j++)
            sent = !reg->workers[j].exited && reg->workers[j].attempt == w->attempt &&
                   strcmp(reg->workers[j].job_id, w->job_id) == 0 &&
                   !is_live(live, nlive, job_of(&reg->workers[j]), reg->workers[j].attempt,
                            reg->workers[j].rank);
        if (sent)
            continue;
        TY_WARN("control", "node %s runs job %s attempt %lld, which is no longer live there: stop",
                reg->node.id, w->job_id, (long long)w->attempt);
        ctl__send_text(ctl, conn,
                       aproto_msg_stop(w->job_id, w->attempt, ctl->srv->cfg.stop_grace_s, 0));
    }
}

/* Workers the database believes live on this node but the agent does not report: a PLACED one
 * whose launch was lost is launched again; a RUNNING one is gone. Then the reverse: workers the
 * agent reports running that the database does not count are stopped. */
static void reconcile(struct control *ctl, uint64_t conn, const char *node_id,
                      const struct aproto_node_msg *reg)
{
    struct store_live_worker *live = NULL;
    size_t nlive = 0;
    if (store_node_live_workers(ctl->db, node_id, &live, &nlive) < 0)
        return;
    int64_t last_job = 0;
    int last_attempt = 0;
    for (size_t i = 0; i < nlive; i++) {
        int64_t job = live[i].job;
        int attempt = live[i].attempt;
        int rank = live[i].rank;
        bool placed = live[i].placed;
        if (reported(reg, job, attempt, rank))
            continue;
        if (placed) {
            if (job != last_job || attempt != last_attempt)
                ctl__send_launches(ctl, job, attempt, node_id);
            last_job = job;
            last_attempt = attempt;
        } else {
            apply_exit(ctl, node_id, job, attempt, rank, -1, -1,
                       "was lost: its agent restarted without it", NULL);
        }
    }
    stop_unaccounted(ctl, conn, reg, live, nlive);
    free(live);
}

/* ------------------------------------------------------------------------------------------ */
/* register                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Records the node in the database. Returns a db_qs. */
static int record_node(struct control *ctl, const struct aproto_node_msg *reg)
{
    const struct aproto_node_info *n = &reg->node;
    char *res_text = json_dumps(reg->resources, JSON_COMPACT);
    char *labels_text = n->labels ? json_dumps(n->labels, JSON_COMPACT) : strdup("{}");
    int qs = res_text && labels_text
                 ? store_node_register(ctl->db, n->id, n->hostname, n->address, res_text,
                                       n->gpu_type, labels_text, n->version, n->port_lo, n->port_hi)
                 : DB_HARD_ERROR;
    free(res_text);
    free(labels_text);
    return qs;
}

/* Makes `conn` the connection of node `id` in the registry (closing an older one). NULL when out
 * of memory. */
static struct ctl_node *attach_node(struct control *ctl, const char *id, uint64_t conn)
{
    struct ctl_node *n = ctl__node_by_id(ctl, id);
    if (n == NULL) {
        n = calloc(1, sizeof(*n));
        if (n == NULL || (n->id = strdup(id)) == NULL) {
            free(n);
            return NULL;
        }
        n->next = ctl->nodes;
        ctl->nodes = n;
    }
    if (n->conn && n->conn != conn)
        hub_close(ctl->hub, n->conn); /* an older connection of the same node */
    n->conn = conn;
    n->alive = true;
    n->last_seen = util_mono_s();
    n->disk_known = false;
    return n;
}

/* Sends `forget` for each job deleted while node `id` was away (its staging is still there). */
static void forget_deleted(struct control *ctl, uint64_t conn, const char *id)
{
    int64_t *jobs = NULL;
    size_t n = 0;
    if (store_node_forgets_take(ctl->db, id, &jobs, &n) < 0)
        TY_WARN("control", "node %s: cannot read the deleted jobs it must forget", id);
    for (size_t i = 0; i < n; i++) {
        char job[32];
        snprintf(job, sizeof(job), "%lld", (long long)jobs[i]);
        ctl__send_text(ctl, conn, aproto_msg_forget(job));
    }
    if (n > 0)
        TY_INFO("control", "node %s: told to forget %zu jobs deleted while it was away", id, n);
    free(jobs);
}

/* Sends `checkpoint_delete` for the checkpoints retention deleted (migration 0021) to the
 * connected agents among the n_ids nodes; a row whose node's connection went meanwhile is lost, as
 * the node's staging of it is removed with the job by `forget`. */
static void send_ckpt_deletes(struct control *ctl, const char *const *ids, size_t n_ids)
{
    struct store_ckpt_delete *rows = NULL;
    size_t n = 0;
    if (store_node_ckpt_deletes_take(ctl->db, ids, n_ids, &rows, &n) < 0)
        TY_WARN("control", "cannot read the deleted checkpoints the nodes must remove");
    for (size_t i = 0; i < n; i++) {
        struct ctl_node *node = ctl__node_by_id(ctl, rows[i].node_id);
        if (node == NULL || node->conn == 0)
            continue;
        char job[32];
        snprintf(job, sizeof(job), "%lld", (long long)rows[i].job);
        ctl__send_text(ctl, node->conn,
                       aproto_msg_checkpoint_delete(job, rows[i].attempt, rows[i].index));
        TY_DEBUG("control", "node %s: told to delete checkpoint %s/%lld/%lld", rows[i].node_id, job,
                 (long long)rows[i].attempt, (long long)rows[i].index);
    }
    store_ckpt_deletes_free(rows, n);
}

void ctl__send_ckpt_deletes(struct control *ctl)
{
    size_t n = 0, cap = 0;
    const char **ids = NULL;
    for (struct ctl_node *node = ctl->nodes; node; node = node->next) {
        if (node->conn == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            const char **grown = realloc(ids, cap * sizeof(*grown));
            if (grown == NULL) {
                free(ids);
                return;
            }
            ids = grown;
        }
        ids[n++] = node->id;
    }
    if (n > 0)
        send_ckpt_deletes(ctl, ids, n);
    free(ids);
}

static void on_register(struct control *ctl, uint64_t conn, const struct aproto_node_msg *reg)
{
    char minted[CTL_CREDENTIAL_MAX], minted_hash[65], why[300];
    if (ctl__enrol(ctl, reg, minted, minted_hash, why, sizeof(why)) != 0) {
        TY_BAD_PEER("control", "agent on connection %llu refused: %s", (unsigned long long)conn,
                    why);
        send_error_and_close(ctl, conn, why);
        return;
    }
    const char *id = reg->node.id;
    if (record_node(ctl, reg) < 0 ||
        (minted[0] && store_node_set_credential(ctl->db, id, minted_hash) < 0)) {
        send_error_and_close(ctl, conn, "the server could not record the node; retry");
        return;
    }
    if (attach_node(ctl, id, conn) == NULL)
        return;
    hub_authenticated(ctl->hub, conn);
    TY_INFO("control", "node %s registered (%s)", id, reg->node.address);
    int64_t timeout = ctl->srv->cfg.heartbeat_timeout_s;
    char *urls[APROTO_MAX_API_URLS];
    size_t n_urls = ctl__api_urls(ctl, conn, urls, APROTO_MAX_API_URLS);
    ctl__send_text(ctl, conn,
                   aproto_msg_registered(id, timeout >= 4 ? timeout / 4 : 1,
                                         minted[0] ? minted : NULL, (const char *const *)urls,
                                         n_urls));
    for (size_t i = 0; i < n_urls; i++)
        free(urls[i]);
    for (size_t i = 0; i < reg->n_workers; i++) {
        const struct aproto_worker_event *w = &reg->workers[i];
        if (w->exited)
            apply_exit(ctl, id, job_of(w), (int)w->attempt, (int)w->rank, w->exit_code, w->signal,
                       w->error, w->reason);
    }
    reconcile(ctl, conn, id, reg);
    forget_deleted(ctl, conn, id);
    send_ckpt_deletes(ctl, &id, 1);
    ctl->dirty = ctl->gained = true;
}

/* A heartbeat's `disk`: stored in nodes.disk when it is new since the node registered, when its
 * disk pressure (free below --disk-pressure-mb) changes, or when its free space moved by at least
 * 1% of the file system (a heartbeat every few seconds writes nothing otherwise). A change of
 * pressure asks for a scheduling pass. */
static void on_disk(struct control *ctl, struct ctl_node *node, const struct aproto_disk *d)
{
    int64_t limit = ctl->srv->cfg.disk_pressure_mb;
    bool pressure = limit > 0 && d->free_mb < limit;
    int64_t step = d->total_mb / 100 > 1 ? d->total_mb / 100 : 1;
    int64_t moved = d->free_mb - node->disk_free_mb;
    if (node->disk_known && pressure == node->disk_pressure && moved < step && -moved < step)
        return;
    json_t *o =
        json_pack("{s:s, s:I, s:I, s:b}", "path", d->path, "free_mb", (json_int_t)d->free_mb,
                  "total_mb", (json_int_t)d->total_mb, "pressure", pressure);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text && store_node_disk(ctl->db, node->id, text) >= 0) {
        if (pressure != node->disk_pressure || !node->disk_known) {
            char why[APROTO_MAX_CHECKPOINT_PATH + 160];
            snprintf(why, sizeof(why), "%lld MiB free of %lld in %s, below --disk-pressure-mb %lld",
                     (long long)d->free_mb, (long long)d->total_mb, d->path, (long long)limit);
            if (store_node_condition_set(ctl->db, node->id, CTL_CONDITION_DISK,
                                         pressure ? why : NULL) < 0)
                TY_WARN("control", "node %s: its disk pressure condition was not stored", node->id);
            if (pressure)
                TY_WARN("control",
                        "node %s: disk pressure: %lld MiB free of %lld in %s (below "
                        "--disk-pressure-mb %lld): no new workers go there",
                        node->id, (long long)d->free_mb, (long long)d->total_mb, d->path,
                        (long long)limit);
            else if (node->disk_known)
                TY_INFO("control", "node %s: disk pressure over: %lld MiB free in %s", node->id,
                        (long long)d->free_mb, d->path);
            ctl->dirty = true;
        }
        node->disk_known = true;
        node->disk_pressure = pressure;
        node->disk_free_mb = d->free_mb;
    }
    free(text);
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* A worker event of a registered node. Returns 0, or -1 when it could not be recorded. */
static int on_worker_event(struct control *ctl, struct ctl_node *node, uint64_t conn,
                           const struct aproto_node_msg *m)
{
    const struct aproto_worker_event *e = &m->event;
    int64_t job = job_of(e);
    if (job == 0) {
        TY_BAD_PEER("control", "node %s: %s for job '%s', which this server never ran", node->id,
                    m->type_name, e->job_id);
        ack_seq(ctl, conn, e->seq);
        return 0;
    }
    if (m->type == APROTO_MSG_WORKER_STARTED) {
        queue_started(ctl, node, conn, e, job);
        return 0;
    }
    if (apply_exit(ctl, node->id, job, (int)e->attempt, (int)e->rank, e->exit_code, e->signal,
                   e->error, e->reason) < 0)
        return -1;
    ack_seq(ctl, conn, e->seq);
    return 0;
}

void ctl__on_agent_message(struct control *ctl, uint64_t conn, const char *text, size_t len)
{
    struct aproto_node_msg m;
    char err[256];
    bool ok = aproto_node_msg_parse(text, len, &m, err, sizeof(err)) == 0;
    if (!ok && m.type == APROTO_MSG_UNKNOWN) {
        TY_BAD_PEER("control", "connection %llu: not a JSON message with a type: %s",
                    (unsigned long long)conn, err);
        if (ctl__node_by_conn(ctl, conn) == NULL)
            send_error_and_close(ctl, conn, "send register first");
        return;
    }
    /* Every other message is applied after the worker starts queued before it, a change of a
     * job's state after the log chunks queued before it, and every message but a report after
     * the reports queued before it (so a worker's exit follows its reports and its output). */
    bool unordered = m.type == APROTO_MSG_LOG || m.type == APROTO_MSG_PROGRESS ||
                     m.type == APROTO_MSG_GPUS || m.type == APROTO_MSG_USAGE ||
                     m.type == APROTO_MSG_ARTIFACT_STORE || m.type == APROTO_MSG_DISK_FULL;
    if (m.type != APROTO_MSG_WORKER_STARTED && !unordered)
        ctl__flush_started(ctl);
    if ((m.type != APROTO_MSG_REPORT && !unordered) || !ok)
        ctl__flush_reports(ctl, conn);
    if (m.type == APROTO_MSG_REGISTER || m.type == APROTO_MSG_WORKER_EXITED)
        ctl__flush_logs(ctl);
    struct ctl_node *node = ctl__node_by_conn(ctl, conn);
    if (m.type == APROTO_MSG_REGISTER) {
        if (ok) {
            on_register(ctl, conn, &m);
        } else {
            char reply[300];
            snprintf(reply, sizeof(reply), "invalid register: %s", err);
            TY_BAD_PEER("control", "connection %llu: %s", (unsigned long long)conn, reply);
            send_error_and_close(ctl, conn, reply);
        }
    } else if (node == NULL) {
        send_error_and_close(ctl, conn, "send register first");
    } else if (!ok) {
        /* A resend would be refused the same way: ack it so that the agent drops it. */
        TY_BAD_PEER("control", "node %s: malformed message dropped: %s", node->id, err);
        node->last_seen = util_mono_s();
        if (m.seq >= 0)
            ack_seq(ctl, conn, m.seq);
    } else {
        node->last_seen = util_mono_s();
        int rc = 0;
        if (m.type == APROTO_MSG_WORKER_STARTED || m.type == APROTO_MSG_WORKER_EXITED)
            rc = on_worker_event(ctl, node, conn, &m);
        else if (m.type == APROTO_MSG_LOG)
            ctl__on_log(ctl, node, conn, &m);
        else if (m.type == APROTO_MSG_REPORT && !within_report_caps(ctl, node, &m))
            drop_over_cap(ctl, conn, m.seq);
        else if (m.type == APROTO_MSG_REPORT)
            ctl__queue_report(ctl, conn, &m);
        else if (m.type == APROTO_MSG_PROGRESS)
            ctl__on_progress(ctl, node, &m);
        else if (m.type == APROTO_MSG_GPUS)
            ctl__on_gpus(ctl, node, &m);
        else if (m.type == APROTO_MSG_USAGE)
            ctl__on_usage(ctl, node, &m);
        else if (m.type == APROTO_MSG_ARTIFACT_STORE)
            ctl__on_artifact_store(ctl, node, &m);
        else if (m.type == APROTO_MSG_DISK_FULL)
            ctl__on_disk_full(ctl, node, &m);
        else if (m.type == APROTO_MSG_PREEMPT_NOTICE)
            ctl__slurm_preempt_notice(ctl, node, m.preempt_reason);
        else if (m.type == APROTO_MSG_HEARTBEAT && m.has_disk) /* last_seen updated above */
            on_disk(ctl, node, &m.disk);
        else if (m.type != APROTO_MSG_HEARTBEAT)
            TY_DEBUG("control", "node %s: ignoring message type '%s'", node->id, m.type_name);
        if (rc < 0)
            reconnect_to_resend(ctl, node, conn, m.type_name);
    }
    aproto_node_msg_free(&m);
}
