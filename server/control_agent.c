/* Messages from agents (docs/agent-protocol.md): register, heartbeat, worker events. */
#include "control_internal.h"

#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ctl__job_id(json_t *msg)
{
    json_t *v = json_object_get(msg, "job_id");
    if (json_is_integer(v))
        return json_integer_value(v);
    int64_t id = 0;
    if (json_is_string(v) && ty_parse_int64(json_string_value(v), 1, INT64_MAX, &id) == 0)
        return id;
    return 0;
}

static void send_error_and_close(struct control *ctl, uint64_t conn, const char *message)
{
    ctl__send(ctl, conn, json_pack("{s:s, s:s}", "type", "error", "message", message));
    hub_close(ctl->hub, conn);
}

static void ack_seq(struct control *ctl, uint64_t conn, json_int_t seq)
{
    ctl__send(ctl, conn, json_pack("{s:s, s:I}", "type", "ack", "seq", seq));
}

static void ack(struct control *ctl, uint64_t conn, json_t *msg)
{
    json_t *seq = json_object_get(msg, "seq");
    if (json_is_integer(seq))
        ack_seq(ctl, conn, json_integer_value(seq));
}

/* Could not record an event of this node: acks are cumulative, so a later ack would make the
 * agent forget it. Close the connection instead; the agent reconnects and resends everything
 * unacked. */
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
static void queue_started(struct control *ctl, uint64_t conn, json_t *msg, int64_t job, int attempt,
                          int rank)
{
    struct ctl_started *b = &ctl->started;
    if (b->n == CTL_STARTED_MAX)
        ctl__flush_started(ctl);
    json_t *seq = json_object_get(msg, "seq");
    b->rows[b->n] = (struct store_worker_start){
        .job = job,
        .attempt = attempt,
        .rank = rank,
        .pid = json_integer_value(json_object_get(msg, "pid")),
    };
    b->conn[b->n] = conn;
    b->has_seq[b->n] = json_is_integer(seq);
    b->seq[b->n] = json_integer_value(seq);
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
        if (!one_txn && store_worker_started(ctl->db, r->job, r->attempt, r->rank, r->pid) < 0) {
            reconnect_to_resend(ctl, node, b->conn[i], "worker_started");
            continue;
        }
        if (b->has_seq[i])
            ack_seq(ctl, b->conn[i], b->seq[i]);
    }
    b->n = 0;
}

/* Applies a worker exit; stops the job's other workers when it failed. Returns 0 or -1. */
static int apply_exit(struct control *ctl, int64_t job, int attempt, int rank, json_t *code,
                      json_t *sig, const char *error)
{
    int64_t c = json_integer_value(code), s = json_integer_value(sig);
    enum store_exit_outcome outcome = STORE_EXIT_IGNORED;
    int qs = store_worker_exited(ctl->db, job, attempt, rank, json_is_integer(code) ? &c : NULL,
                                 json_is_integer(sig) ? &s : NULL, error, &outcome);
    if (qs < 0)
        return -1;
    if (outcome == STORE_EXIT_STOP_OTHERS)
        ctl__send_stops(ctl, job);
    if (outcome == STORE_EXIT_STOP_OTHERS || outcome == STORE_EXIT_SETTLED)
        ctl->dirty = true; /* resources were freed */
    return 0;
}

/* Workers the database believes live on this node but the agent does not report: a PLACED one
 * whose launch was lost is launched again; a RUNNING one is gone. */
static void reconcile(struct control *ctl, const char *node_id, json_t *reported)
{
    struct store_live_worker *live = NULL;
    size_t nlive = 0;
    if (store_node_live_workers(ctl->db, node_id, &live, &nlive) <= 0)
        return;
    int64_t last_job = 0;
    int last_attempt = 0;
    for (size_t i = 0; i < nlive; i++) {
        int64_t job = live[i].job;
        int attempt = live[i].attempt;
        int rank = live[i].rank;
        bool placed = live[i].placed;
        bool known = false;
        size_t k;
        json_t *w;
        json_array_foreach(reported, k, w)
        {
            if (ctl__job_id(w) == job &&
                json_integer_value(json_object_get(w, "attempt")) == attempt &&
                json_integer_value(json_object_get(w, "rank")) == rank)
                known = true;
        }
        if (known)
            continue;
        if (placed) {
            if (job != last_job || attempt != last_attempt)
                ctl__send_launches(ctl, job, attempt, node_id);
            last_job = job;
            last_attempt = attempt;
        } else {
            apply_exit(ctl, job, attempt, rank, NULL, NULL,
                       "was lost: its agent restarted without it");
        }
    }
    free(live);
}

static void on_register(struct control *ctl, uint64_t conn, json_t *msg)
{
    if (ctl->cluster_token_hash) {
        const char *token = json_string_value(json_object_get(msg, "token"));
        char hash[65];
        if (token)
            ty_sha256_hex(token, strlen(token), hash);
        if (token == NULL || strcmp(hash, ctl->cluster_token_hash) != 0) {
            TY_WARN("control", "agent on connection %llu sent a wrong cluster token",
                    (unsigned long long)conn);
            send_error_and_close(ctl, conn, "unknown cluster join token");
            return;
        }
    }
    json_t *node = json_object_get(msg, "node");
    const char *id = json_string_value(json_object_get(node, "id"));
    const char *hostname = json_string_value(json_object_get(node, "hostname"));
    const char *address = json_string_value(json_object_get(node, "address"));
    json_t *resources = json_object_get(node, "resources");
    json_t *range = json_object_get(node, "port_range");
    if (id == NULL || *id == '\0' || strlen(id) > 128 || address == NULL ||
        !json_is_object(resources)) {
        send_error_and_close(ctl, conn, "register needs node.id, node.address, node.resources");
        return;
    }
    int lo = 29500, hi = 29999;
    if (json_is_array(range) && json_array_size(range) == 2) {
        lo = (int)json_integer_value(json_array_get(range, 0));
        hi = (int)json_integer_value(json_array_get(range, 1));
        if (lo < 1 || hi > 65535 || lo > hi) {
            send_error_and_close(ctl, conn, "node.port_range must be [lo, hi] within 1..65535");
            return;
        }
    }
    json_t *labels = json_object_get(node, "labels");
    char *res_text = json_dumps(resources, JSON_COMPACT);
    char *labels_text = json_is_object(labels) ? json_dumps(labels, JSON_COMPACT) : strdup("{}");
    int qs = store_node_register(ctl->db, id, hostname ? hostname : id, address, res_text,
                                 json_string_value(json_object_get(node, "gpu_type")), labels_text,
                                 json_string_value(json_object_get(node, "version")), lo, hi);
    free(res_text);
    free(labels_text);
    if (qs < 0) {
        send_error_and_close(ctl, conn, "the server could not record the node; retry");
        return;
    }
    struct ctl_node *n = ctl__node_by_id(ctl, id);
    if (n == NULL) {
        n = calloc(1, sizeof(*n));
        if (n == NULL || (n->id = strdup(id)) == NULL) {
            free(n);
            return;
        }
        n->next = ctl->nodes;
        ctl->nodes = n;
    }
    if (n->conn && n->conn != conn)
        hub_close(ctl->hub, n->conn); /* an older connection of the same node */
    n->conn = conn;
    n->alive = true;
    n->last_seen = ctl__now();
    TY_INFO("control", "node %s registered (%s)", id, address);
    ctl__send(ctl, conn,
              json_pack("{s:s, s:s, s:I}", "type", "registered", "node_id", id,
                        "heartbeat_interval_s",
                        (json_int_t)(ctl->srv->cfg.heartbeat_timeout_s >= 4
                                         ? ctl->srv->cfg.heartbeat_timeout_s / 4
                                         : 1)));
    json_t *workers = json_object_get(msg, "workers");
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w)
    {
        if (strcmp(json_string_value(json_object_get(w, "status")) ?: "", "EXITED") == 0)
            apply_exit(ctl, ctl__job_id(w), (int)json_integer_value(json_object_get(w, "attempt")),
                       (int)json_integer_value(json_object_get(w, "rank")),
                       json_object_get(w, "exit_code"), json_object_get(w, "signal"),
                       json_string_value(json_object_get(w, "error")));
    }
    reconcile(ctl, id, workers);
    ctl->dirty = true;
}

void ctl__on_agent_message(struct control *ctl, uint64_t conn, const char *text, size_t len)
{
    json_error_t err;
    json_t *msg = json_loadb(text, len, 0, &err);
    const char *type = json_string_value(json_object_get(msg, "type"));
    if (type == NULL) {
        TY_BAD_PEER("control", "connection %llu: not a JSON message with a type: %s",
                    (unsigned long long)conn, msg ? "missing type" : err.text);
        json_decref(msg);
        return;
    }
    /* Every other message is applied after the worker starts queued before it. */
    if (strcmp(type, "worker_started") != 0)
        ctl__flush_started(ctl);
    struct ctl_node *node = ctl__node_by_conn(ctl, conn);
    if (strcmp(type, "register") == 0) {
        on_register(ctl, conn, msg);
    } else if (node == NULL) {
        send_error_and_close(ctl, conn, "send register first");
    } else {
        node->last_seen = ctl__now();
        int64_t job = ctl__job_id(msg);
        int attempt = (int)json_integer_value(json_object_get(msg, "attempt"));
        int rank = (int)json_integer_value(json_object_get(msg, "rank"));
        int rc = 0;
        if (strcmp(type, "heartbeat") == 0) {
            /* last_seen updated above */
        } else if (strcmp(type, "worker_started") == 0) {
            queue_started(ctl, conn, msg, job, attempt, rank);
        } else if (strcmp(type, "worker_exited") == 0) {
            rc = apply_exit(ctl, job, attempt, rank, json_object_get(msg, "exit_code"),
                            json_object_get(msg, "signal"),
                            json_string_value(json_object_get(msg, "error")));
            if (rc >= 0)
                ack(ctl, conn, msg);
        } else if (strcmp(type, "report") == 0) {
            ctl__on_report(ctl, conn, msg);
        } else {
            TY_DEBUG("control", "node %s: ignoring message type '%s'", node->id, type);
        }
        if (rc < 0)
            reconnect_to_resend(ctl, node, conn, type);
    }
    json_decref(msg);
}
