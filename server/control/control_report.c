/* Agent message `report` (docs/agent-protocol.md): a worker's trainyard.report() / ty_report(),
 * relayed by its node's agent from its on-disk spool, parsed by common/agent_proto_report.c.
 * As a batch's rows are made, the blocks of report_blocks its reports complete are summed up
 * here (report_fold.h) and sent with it, and each report not stored lets its block go to the
 * leader's maintenance (below), which sums up whatever this thread did not see whole.
 *
 * Reports are ingested in batches, per lane (an agent connection's reports all go by lane
 * conn % CTL_LANES, so that they are stored in their order while several PostgreSQL backends
 * store the lanes' batches at once): ctl__queue_report() keeps each valid report in its lane's
 * queue (up to CTL_QUEUE_MAX), and a lane's batch of at most CTL_BATCH_MAX of them is committed
 * in one transaction (store_reports_insert: report rows, metrics rows, one `report` row per new
 * report in its job's stream, the jobs' results), then their checkpoint parts
 * (on_round_complete: checkpoint_bytes, and checkpoint k once round k is complete), and only
 * then are they acked. As the control loop reads the hub's events (every CTL_DRAIN_PUSH_EVERY of
 * them) and once it has read them, it pushes the batches (ctl__push_reports): a lane's
 * statement is sent on a pooled connection and runs while the loop reads the next messages; a
 * later push finishes it once it is done (result, checkpoints, acks) and sends the lane's next
 * batch. A push after a round without messages waits for whichever lane is done first (or the
 * next event), a report for a lane whose queue is full until that lane takes some of it. Before
 * any other message or event of a connection, ctl__flush_reports(ctl, conn) waits until that
 * connection's queued reports are committed and acked (the other lanes go on meanwhile), so
 * that its messages are applied in their order.
 * What the server does with each report:
 *
 *   committed, or a resend of a committed one      -> ack (resends change nothing)
 *   malformed (a field missing or of a wrong type) -> logged as the agent's fault, then acked
 *   (control_agent.c), or refused by the database     (a resend would be refused the same way,
 *   for its data                                      and the agent must not keep it forever)
 *   for a worker that does not run on that node    -> logged, acked, dropped (a deleted job)
 *   not committed (database down, out of memory)   -> not acked, and the connection is dropped
 *   no integer seq                                 -> logged; nothing to ack
 *
 * A batch the database refuses is retried report by report, so that one bad report (a date
 * PostgreSQL will not take) neither blocks nor drops the others.
 *
 * Dropping the connection is what makes "not acked" mean "will be resent": an agent may read
 * acks as cumulative (docs/agent-protocol.md: an ack of seq covering every event before it), so
 * merely staying silent would let the ack of a later event drop this report from the agent's spool.
 * After the node is detached from the connection, later messages on it are refused ("send register
 * first") and none is acked; the agent reconnects, registers and resends everything not acked, in
 * order. */
#include "control_internal.h"

#include "agent_proto.h"
#include "leader.h"
#include "report_fold.h"
#include "report_names.h"
#include "retire.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The report could not be committed: detach the node from this connection and close it, so that
 * no later ack covers the report and the agent resends it after reconnecting (see the top). */
static void drop_connection(struct control *ctl, struct ctl_node *node, uint64_t conn)
{
    node->conn = 0;
    hub_close(ctl->hub, conn);
}

/* Checkpoint registration (DESIGN section 4): records this report's checkpoint_bytes and, when
 * `try_register` (round k now complete, or a resend of a report whose registration may have
 * failed), registers checkpoint k of the attempt if every rank made its k-th report and one of
 * them passed a checkpoint_dir (store_checkpoint_round: one row per (job, attempt, k), rank 0's
 * step and metrics, location = the agent-owned directories on each node). Runs before the ack:
 * returns 0 (ack), 1 (refused by the database for its data: log, ack, drop) or -1 (not
 * committed: do not ack, drop the connection so that the agent resends and this runs again). */
static int on_round_complete(struct control *ctl, const struct aproto_report *r,
                             const int64_t *bytes, bool try_register)
{
    struct store_checkpoint_round in = {r->job,       r->report_seq, (int)r->attempt,
                                        (int)r->rank, bytes,         try_register};
    bool registered = false, refreshed = false;
    char sqlstate[6];
    int qs = store_checkpoint_round(ctl->db, &in, &registered, &refreshed, sqlstate);
    if (qs < 0) {
        bool refused = strncmp(sqlstate, "22", 2) == 0 || strncmp(sqlstate, "23", 2) == 0;
        TY_WARN("control", "job %lld attempt %lld: checkpoint %lld not registered (%s%s)",
                (long long)r->job, (long long)r->attempt, (long long)r->report_seq,
                refused ? "refused by the database, SQLSTATE " : "database error",
                refused ? sqlstate : "");
        return refused ? 1 : -1;
    }
    if (registered || refreshed) {
        /* Once per checkpoint: a later report of its round (a rank's size, a resend) refreshes
         * the row quietly. */
        if (registered)
            TY_INFO("control", "job %lld attempt %lld: checkpoint %lld registered",
                    (long long)r->job, (long long)r->attempt, (long long)r->report_seq);
        else
            TY_DEBUG("control", "job %lld attempt %lld: checkpoint %lld: size and location updated",
                     (long long)r->job, (long long)r->attempt, (long long)r->report_seq);
        /* Its parts may all have been uploaded before it registered: it is complete now. */
        artifact_retire(ctl->db, ctl->srv->artifacts, r->job);
    }
    return 0;
}

/* The lane of an agent connection's reports: one, so that they are stored in their order. */
static int lane_of(uint64_t conn)
{
    return (int)(conn % CTL_LANES);
}

static void make_room(struct control *ctl, int l);

void ctl__queue_report(struct control *ctl, uint64_t conn, struct aproto_node_msg *m)
{
    int lane = lane_of(conn);
    struct ctl_queue *b = &ctl->queued[lane];
    make_room(ctl, lane);
    struct ctl_report_item *it = &b->items[b->n++];
    it->conn = conn;
    it->r = m->report; /* taken over: it holds its own strings */
    m->report = (struct aproto_report){0};
    it->acked = false;
}

/* The store's view of a queued report; `step` holds its step when it has one. */
static struct store_report store_row(const struct control *ctl, const struct ctl_report_item *it,
                                     const char *node_id, int64_t *step)
{
    *step = it->r.step;
    return (struct store_report){
        .job = it->r.job,
        .seq = it->r.report_seq,
        .attempt = (int)it->r.attempt,
        .rank = (int)it->r.rank,
        .step = it->r.step >= 0 ? step : NULL,
        .checkpoint_dir = it->r.checkpoint_dir,
        .node_id = node_id,
        .time = it->r.time,
        .metrics = it->r.metrics,
        .n_metrics = it->r.n_metrics,
        .values_text = it->r.values_text,
        .values_len = it->r.values_len,
        .max_bytes = ctl->srv->cfg.max_job_report_bytes,
    };
}

/* After its report committed: logs what happened, runs checkpoint registration, and marks the
 * item to ack, or drops the connection when registration could not be committed. */
static void after_commit(struct control *ctl, struct ctl_report_item *it, struct ctl_node *node,
                         const struct store_report_outcome *out)
{
    const struct aproto_report *r = &it->r;
    if (!out->known_worker)
        TY_INFO("control",
                "node %s: report of job %lld attempt %lld rank %lld, a worker this node does not "
                "run; dropped",
                node->id, (long long)r->job, (long long)r->attempt, (long long)r->rank);
    else if (out->duplicate)
        TY_DEBUG("control", "job %lld rank %lld report %lld: already recorded", (long long)r->job,
                 (long long)r->rank, (long long)r->report_seq);
    if (r->skipped > 0)
        TY_DEBUG("control", "job %lld rank %lld report %lld: %zu metrics skipped (bad names)",
                 (long long)r->job, (long long)r->rank, (long long)r->report_seq, r->skipped);
    /* A duplicate retries registration too: its first delivery may have committed the report
     * and then failed here, before the ack. */
    bool has_bytes = r->checkpoint_dir != NULL && r->checkpoint_bytes >= 0;
    bool try_register = out->known_worker && (out->round_ready || out->duplicate);
    if (try_register || (out->known_worker && has_bytes)) {
        if (on_round_complete(ctl, r, has_bytes ? &r->checkpoint_bytes : NULL, try_register) < 0) {
            drop_connection(ctl, node, it->conn);
            return;
        }
    }
    it->acked = true;
}

/* The batch could not be committed together: each report alone, so that one the database
 * refuses is acked and dropped, and one that cannot be committed closes only its connection. */
static void one_by_one(struct control *ctl, struct ctl_reports *b)
{
    for (size_t i = 0; i < b->n; i++) {
        struct ctl_report_item *it = &b->items[i];
        /* NULL: its connection was closed by an earlier failure; the agent resends. */
        struct ctl_node *node = ctl__node_by_conn(ctl, it->conn);
        if (node == NULL)
            continue;
        int64_t step;
        struct store_report row = store_row(ctl, it, node->id, &step);
        struct store_report_outcome out;
        char sqlstate[6];
        int qs = store_reports_insert(ctl->db, &row, 1, NULL, NULL, &out, sqlstate);
        bool refused = qs == DB_HARD_ERROR &&
                       (strncmp(sqlstate, "22", 2) == 0 || strncmp(sqlstate, "23", 2) == 0);
        if (refused) {
            TY_BAD_PEER("control",
                        "node %s: report (event %lld) of job %lld rank %lld refused by the "
                        "database (SQLSTATE %s); dropped",
                        node->id, (long long)it->r.seq, (long long)it->r.job, (long long)it->r.rank,
                        sqlstate);
            it->acked = true;
        } else if (qs < 0) {
            TY_WARN("control",
                    "node %s: could not record report (event %lld); closing the connection so "
                    "the agent resends it",
                    node->id, (long long)it->r.seq);
            drop_connection(ctl, node, it->conn);
        } else {
            SRV_COUNT(&ctl->srv->telemetry, reports_ingested,
                      out.known_worker && !out.duplicate ? 1 : 0);
            SRV_COUNT(&ctl->srv->telemetry, metric_points_ingested, (uint64_t)out.metrics_stored);
            after_commit(ctl, it, node, &out);
        }
    }
}

/* Acks every report that may be acked, in order, one ack each: the agent forgets exactly the
 * event whose seq an ack names (worker/agent/events.c). Reports of a connection closed meanwhile
 * are not acked; the agent resends them. */
static void send_acks(struct control *ctl, struct ctl_reports *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].acked && ctl__node_by_conn(ctl, b->items[i].conn) != NULL)
            ctl__send_text(ctl, b->items[i].conn, aproto_msg_ack(b->items[i].r.seq));
}

/* The batch's rows for the store: its reports from nodes still attached (one detached meanwhile
 * is not acked; the agent resends after the reconnect). */
static void batch_rows(struct control *ctl, struct ctl_flight *f)
{
    f->n = 0;
    for (size_t i = 0; i < f->b.n; i++) {
        struct ctl_node *node = ctl__node_by_conn(ctl, f->b.items[i].conn);
        if (node == NULL)
            continue;
        f->rows[f->n] = store_row(ctl, &f->b.items[i], node->id, &f->steps[f->n]);
        f->idx[f->n++] = i;
    }
    if (ctl->known_names == NULL)
        ctl->known_names = report_names_new();
    f->names_sent = ctl->known_names != NULL &&
                    report_names_list(ctl->known_names, f->rows, f->n, &f->names) == 0;
    if (ctl->fold == NULL)
        ctl->fold = report_fold_new();
    f->blocks.n = 0;
    if (ctl->fold != NULL) {
        report_fold_begin(ctl->fold, &f->blocks);
        for (size_t k = 0; k < f->n; k++)
            report_fold_add(ctl->fold, &f->rows[k], &f->blocks);
    }
}

/* The names sent with the batch, or NULL: the reports' trigger finds them. */
static const struct store_report_names *sent_names(const struct ctl_flight *f)
{
    return f->names_sent ? &f->names : NULL;
}

/* After the batch's statement (qs, sqlstate: store_reports_insert's): each report's
 * checkpoints and acks, or the reports one by one when the batch failed; then the batch is
 * emptied. */
static void finish_batch(struct control *ctl, struct ctl_flight *f, int qs, const char *sqlstate)
{
    struct ctl_reports *b = &f->b;
    if (qs >= 0) {
        TY_DEBUG("control", "recorded %zu report(s) in one transaction", f->n);
        if (f->names_sent)
            report_names_settle(ctl->known_names, f->rows, &f->names, f->outs);
        for (size_t k = 0; k < f->n; k++) {
            struct ctl_report_item *it = &b->items[f->idx[k]];
            struct ctl_node *node = ctl__node_by_conn(ctl, it->conn);
            if (!f->outs[k].duplicate && f->outs[k].known_worker)
                SRV_COUNT(&ctl->srv->telemetry, reports_ingested, 1);
            else if (ctl->fold != NULL)
                report_fold_forget(ctl->fold, &f->rows[k]);
            SRV_COUNT(&ctl->srv->telemetry, metric_points_ingested,
                      (uint64_t)f->outs[k].metrics_stored);
            if (node != NULL)
                after_commit(ctl, it, node, &f->outs[k]);
        }
    } else {
        TY_DEBUG("control", "recording %zu reports together failed (%s); one by one", f->n,
                 sqlstate[0] ? sqlstate : "no SQLSTATE");
        if (ctl->fold != NULL) /* their blocks go to the maintenance */
            report_fold_clear(ctl->fold);
        one_by_one(ctl, b);
    }
    send_acks(ctl, b);
    ctl->tune_due = true;
    for (size_t i = 0; i < b->n; i++)
        aproto_report_free(&b->items[i].r);
    b->n = 0;
}

/* Waits for the flight's batch, if in flight, and finishes it. A batch whose statement was lost
 * with its connection is stored again in a transaction of the control thread's (a report it did
 * store is then a resend: nothing changes). */
static void collect_flight(struct control *ctl, struct ctl_flight *f)
{
    if (f->conn == NULL)
        return;
    char sqlstate[6];
    int qs = store_reports_collect(f->conn, f->rows, f->n, f->outs, sqlstate);
    db_release(ctl->srv->db, f->conn);
    f->conn = NULL;
    if (qs == DB_SOFT_ERROR) {
        if (ctl->fold != NULL) /* the rows are summed up again, from scratch */
            report_fold_clear(ctl->fold);
        batch_rows(ctl, f);
        qs = store_reports_insert(ctl->db, f->rows, f->n, sent_names(f), &f->blocks, f->outs,
                                  sqlstate);
    }
    finish_batch(ctl, f, qs, sqlstate);
}

static void collect_all(struct control *ctl)
{
    for (int l = 0; l < CTL_LANES; l++)
        collect_flight(ctl, &ctl->flights[l]);
}

/* Moves the first CTL_BATCH_MAX queued reports of `lane` into its flight's batch (which is
 * empty), in their order, and makes their rows. */
static void take_queue(struct control *ctl, int lane)
{
    struct ctl_queue *q = &ctl->queued[lane];
    struct ctl_flight *f = &ctl->flights[lane];
    f->b.n = q->n < CTL_BATCH_MAX ? q->n : CTL_BATCH_MAX;
    memcpy(f->b.items, q->items, f->b.n * sizeof(q->items[0]));
    q->n -= f->b.n;
    memmove(q->items, q->items + f->b.n, q->n * sizeof(q->items[0]));
    batch_rows(ctl, f);
}

/* Stores the flight's batch in a transaction on the control thread's connection, and waits. */
static void store_now(struct control *ctl, struct ctl_flight *f)
{
    char sqlstate[6];
    int qs =
        store_reports_insert(ctl->db, f->rows, f->n, sent_names(f), &f->blocks, f->outs, sqlstate);
    finish_batch(ctl, f, qs, sqlstate);
}

/* Sends the next batch of lane l (idle) as one statement on a pooled connection; with none
 * free, stores it now on this thread's. */
static void send_lane(struct control *ctl, int l)
{
    struct ctl_flight *f = &ctl->flights[l];
    struct db_conn *c = db_try_acquire(ctl->srv->db);
    take_queue(ctl, l);
    if (c == NULL) {
        store_now(ctl, f);
        return;
    }
    if (store_reports_send(c, f->rows, f->n, sent_names(f), &f->blocks) == 0) {
        f->conn = c;
        return;
    }
    db_release(ctl->srv->db, c);
    store_now(ctl, f);
}

/* Finishes each lane whose batch is done, and sends each idle lane's queued reports; returns
 * how many batches it finished. */
static int advance_lanes(struct control *ctl)
{
    int finished = 0;
    for (int l = 0; l < CTL_LANES; l++) {
        struct ctl_flight *f = &ctl->flights[l];
        if (f->conn != NULL) {
            if (!store_reports_done(f->conn))
                continue;
            collect_flight(ctl, f);
            finished++;
        }
        if (ctl->queued[l].n > 0)
            send_lane(ctl, l);
    }
    return finished;
}

/* Waits, at most a tick, until a batch in flight is done or, with `signals`, the loop is
 * signalled (ctl__signal_locked: a hub event, a kick, the stop). Not in the order the lanes
 * were sent: a lane done early is refilled while another still runs. */
static void wait_lanes(struct control *ctl, bool signals)
{
    struct pollfd fds[CTL_LANES + 1];
    nfds_t n = 0;
    for (int l = 0; l < CTL_LANES; l++) {
        int fd = ctl->flights[l].conn ? store_reports_socket(ctl->flights[l].conn) : -1;
        if (fd >= 0)
            fds[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    if (signals) {
        pthread_mutex_lock(&ctl->lock);
        bool due = ctl->woken || ctl->kicked || ctl->stopping;
        ctl->polling = !due;
        pthread_mutex_unlock(&ctl->lock);
        if (due)
            return;
        fds[n++] = (struct pollfd){.fd = ctl->wake_fd, .events = POLLIN};
    }
    if (poll(fds, n, CTL_TICK_MS) < 0 && errno != EINTR)
        TY_DEBUG("control", "poll for the reports' batches: %s", strerror(errno));
    if (signals) {
        pthread_mutex_lock(&ctl->lock);
        ctl->polling = false;
        pthread_mutex_unlock(&ctl->lock);
        uint64_t count;
        if (read(ctl->wake_fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
            TY_DEBUG("control", "cannot read the control loop's wake-ups: %s", strerror(errno));
    }
}

/* Waits until lane l's queue has room: its batch in flight done, and the next one sent. */
static void make_room(struct control *ctl, int l)
{
    while (ctl->queued[l].n == CTL_QUEUE_MAX) {
        if (ctl->flights[l].conn != NULL)
            wait_lanes(ctl, false);
        advance_lanes(ctl);
    }
}

/* Whether a report of connection `conn` is queued or in its lane's batch in flight. */
static bool conn_pending(const struct control *ctl, uint64_t conn)
{
    int l = lane_of(conn);
    const struct ctl_queue *q = &ctl->queued[l];
    for (size_t i = 0; i < q->n; i++)
        if (q->items[i].conn == conn)
            return true;
    const struct ctl_flight *f = &ctl->flights[l];
    for (size_t i = 0; f->conn != NULL && i < f->b.n; i++)
        if (f->b.items[i].conn == conn)
            return true;
    return false;
}

void ctl__flush_reports(struct control *ctl, uint64_t conn)
{
    while (conn_pending(ctl, conn)) {
        if (ctl->flights[lane_of(conn)].conn != NULL)
            wait_lanes(ctl, false);
        advance_lanes(ctl);
    }
}

void ctl__push_reports(struct control *ctl, bool wait)
{
    int finished = advance_lanes(ctl);
    if (wait && finished == 0 && ctl__reports_in_flight(ctl)) {
        wait_lanes(ctl, true);
        advance_lanes(ctl);
    }
}

void ctl__finish_reports(struct control *ctl)
{
    collect_all(ctl);
}

void ctl__reports_free(struct control *ctl)
{
    for (int l = 0; l < CTL_LANES; l++) {
        struct ctl_queue *q = &ctl->queued[l];
        for (size_t i = 0; i < q->n; i++)
            aproto_report_free(&q->items[i].r);
        q->n = 0;
    }
}

bool ctl__reports_in_flight(const struct control *ctl)
{
    for (int l = 0; l < CTL_LANES; l++)
        if (ctl->flights[l].conn != NULL)
            return true;
    return false;
}

/* Series summed up per call (each by at most 16 blocks, so that a call stays short even after a
 * bulk INSERT or COPY of many reports: they are summed up over several calls, each its own
 * transaction), and the wait when nothing moved on (nothing to do, or every series due held by a
 * writer's transaction: FOR UPDATE SKIP LOCKED). */
#define CTL_BLOCKS_SERIES 32
#define CTL_BLOCKS_IDLE_MS 200

/* One round: while this server leads, calls until no series moves on (or the database cannot
 * be reached or refuses: the next round, after the idle wait, tries again). */
static void blocks_round(struct control *ctl)
{
    if (!leader_is_leader(ctl->leader))
        return;
    struct db_conn *c = db_acquire(ctl->srv->db);
    if (c == NULL)
        return;
    int moved = 1;
    while (moved > 0) {
        if (store_report_blocks_fill(c, CTL_BLOCKS_SERIES, &moved) < 0) {
            TY_WARN("control", "cannot sum up the reports' blocks (report_blocks); retried "
                               "after a tick");
            break;
        }
        pthread_mutex_lock(&ctl->blocks_lock);
        bool stopping = ctl->blocks_stopping;
        pthread_mutex_unlock(&ctl->blocks_lock);
        if (stopping)
            break;
    }
    db_release(ctl->srv->db, c);
}

static void *blocks_thread(void *arg)
{
    struct control *ctl = arg;
    pthread_mutex_lock(&ctl->blocks_lock);
    while (!ctl->blocks_stopping) {
        pthread_mutex_unlock(&ctl->blocks_lock);
        blocks_round(ctl);
        pthread_mutex_lock(&ctl->blocks_lock);
        struct timespec until = util_clock_in_ms(CLOCK_REALTIME, CTL_BLOCKS_IDLE_MS);
        if (!ctl->blocks_stopping)
            pthread_cond_timedwait(&ctl->blocks_cond, &ctl->blocks_lock, &until);
    }
    pthread_mutex_unlock(&ctl->blocks_lock);
    return NULL;
}

int ctl__report_blocks_start(struct control *ctl)
{
    pthread_mutex_init(&ctl->blocks_lock, NULL);
    pthread_cond_init(&ctl->blocks_cond, NULL);
    ctl->blocks_stopping = false;
    ctl->blocks_started = pthread_create(&ctl->blocks_thread, NULL, blocks_thread, ctl) == 0;
    if (!ctl->blocks_started) {
        pthread_mutex_destroy(&ctl->blocks_lock);
        pthread_cond_destroy(&ctl->blocks_cond);
        return -1;
    }
    return 0;
}

void ctl__report_blocks_stop(struct control *ctl)
{
    if (!ctl->blocks_started)
        return;
    pthread_mutex_lock(&ctl->blocks_lock);
    ctl->blocks_stopping = true;
    pthread_cond_signal(&ctl->blocks_cond);
    pthread_mutex_unlock(&ctl->blocks_lock);
    pthread_join(ctl->blocks_thread, NULL);
    pthread_mutex_destroy(&ctl->blocks_lock);
    pthread_cond_destroy(&ctl->blocks_cond);
    ctl->blocks_started = false;
}
