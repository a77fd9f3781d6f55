/* Topics (a job's stream, the cluster's), subscriptions, live fan-out and catch-up. The rules
 * that keep every subscriber's sequence gapless and duplicate-free are in stream_internal.h
 * (struct stream_topic); the cluster's ordering rule is stream_deliverable (stream_proto.c). */
#include "stream_internal.h"

#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_WAIT_CHECK_S 0.02 /* how often a pending cluster wait is checked */

struct stream_topic *stream__topic(struct stream *st, int64_t job)
{
    if (job == 0)
        return &st->cluster;
    for (struct stream_topic *t = st->topics; t; t = t->next)
        if (t->job == job)
            return t;
    return NULL;
}

static void topic_free(struct stream *st, struct stream_topic *t)
{
    for (struct stream_topic **p = &st->topics; *p; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            break;
        }
    }
    free(t->subs);
    free(t);
}

static struct stream_sub *sub_of(struct stream_client *cl, int64_t job)
{
    for (size_t i = 0; i < cl->nsubs; i++)
        if (cl->subs[i]->topic->job == job)
            return cl->subs[i];
    return NULL;
}

void stream__sub_remove(struct stream *st, struct stream_sub *sub)
{
    struct stream_client *cl = sub->client;
    struct stream_topic *t = sub->topic;
    for (size_t i = 0; i < cl->nsubs; i++) {
        if (cl->subs[i] == sub) {
            cl->subs[i] = cl->subs[--cl->nsubs];
            break;
        }
    }
    for (size_t i = 0; i < t->nsubs; i++) {
        if (t->subs[i] == sub) {
            t->subs[i] = t->subs[--t->nsubs];
            break;
        }
    }
    free(sub);
    if (t->nsubs == 0 && t->job != 0)
        topic_free(st, t);
}

/* Adds a subscription of cl to t. Returns it, or NULL when out of memory. */
static struct stream_sub *sub_add(struct stream_client *cl, struct stream_topic *t, int64_t after)
{
    if (t->nsubs == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        struct stream_sub **subs = realloc(t->subs, cap * sizeof(*subs));
        if (subs == NULL)
            return NULL;
        t->subs = subs;
        t->cap = cap;
    }
    struct stream_sub *sub = calloc(1, sizeof(*sub));
    if (sub == NULL)
        return NULL;
    sub->client = cl;
    sub->topic = t;
    sub->sent = after;
    sub->live = t->ready && after >= t->cursor;
    t->subs[t->nsubs++] = sub;
    cl->subs[cl->nsubs++] = sub;
    return sub;
}

/* The cluster topic gets its first subscriber: a fresh cursor (the one it had may be far
 * behind), valid once the transactions running when it was read have ended. Returns a db_qs. */
static int cluster_restart(struct stream *st)
{
    struct stream_topic *t = &st->cluster;
    int64_t head = 0;
    char *snapshot = NULL;
    int qs = store_cluster_stream_head(st->db, &head, &snapshot);
    if (qs < 0)
        return qs;
    free(t->wait_snapshot);
    t->cursor = head;
    t->settled = head;
    t->ready = false;
    t->wait_snapshot = snapshot;
    t->wait_limit = head;
    t->next_wait_check = 0;
    t->dirty = true;
    return qs;
}

void stream__subscribe(struct stream *st, struct stream_client *cl, int64_t job, int64_t after,
                       bool batch)
{
    char detail[128];
    if (sub_of(cl, job)) {
        snprintf(detail, sizeof(detail), "already subscribed to %s",
                 job ? "this job" : "the cluster");
        stream__send(st, cl, stream_msg_error(STREAM_E_ALREADY_SUBSCRIBED, detail));
        return;
    }
    if (cl->nsubs >= STREAM_MAX_SUBS) {
        snprintf(detail, sizeof(detail), "at most %d subscriptions per connection",
                 STREAM_MAX_SUBS);
        stream__send(st, cl, stream_msg_error(STREAM_E_TOO_MANY_SUBSCRIPTIONS, detail));
        return;
    }
    struct stream_topic *t = stream__topic(st, job);
    int64_t head = 0;
    int qs = 1;
    if (job != 0) {
        /* A job the client may not see is answered as one that does not exist (issue 22). */
        bool visible = true;
        if (cl->who.role != SRV_ROLE_ADMIN)
            qs = store_job_visible(st->db, &cl->who, job, &visible);
        if (qs > 0 && !visible)
            qs = 0;
        if (qs > 0)
            qs = store_job_stream_head(st->db, job, &head);
    } else if (t->nsubs == 0) {
        qs = cluster_restart(st);
    }
    if (qs < 0) {
        stream__db_failed(st);
        stream__send(st, cl,
                     stream_msg_error(STREAM_E_UNAVAILABLE, "the database is unavailable; retry"));
        return;
    }
    if (qs == 0) {
        snprintf(detail, sizeof(detail), "there is no job %lld", (long long)job);
        stream__send(st, cl, stream_msg_error(STREAM_E_UNKNOWN_JOB, detail));
        return;
    }
    if (t == NULL) {
        t = calloc(1, sizeof(*t));
        if (t == NULL)
            return;
        t->job = job;
        t->cursor = head; /* committed with every row up to it: the invariant holds */
        t->ready = true;
        t->next = st->topics;
        st->topics = t;
    }
    if (job == 0)
        head = t->cursor;
    struct stream_sub *sub = sub_add(cl, t, after);
    if (sub == NULL) {
        if (t->nsubs == 0 && t->job != 0)
            topic_free(st, t);
        return;
    }
    sub->batch = batch;
    stream__send(st, cl, stream_msg_subscribed(job, head > t->cursor ? head : t->cursor));
}

void stream__unsubscribe(struct stream *st, struct stream_client *cl, int64_t job)
{
    struct stream_sub *sub = sub_of(cl, job);
    if (sub == NULL) {
        stream__send(
            st, cl,
            stream_msg_error(STREAM_E_NOT_SUBSCRIBED,
                             job ? "not subscribed to this job" : "not subscribed to the cluster"));
        return;
    }
    stream__sub_remove(st, sub);
}

/* ------------------------------------------------------------------ live fan-out */

/* Builds one message per row into msgs (hub_msg references). Returns 0, or -1 (OOM; none
 * left). */
static int build_messages(int64_t job, const struct store_stream_rows *rows, struct hub_msg **msgs)
{
    for (size_t i = 0; i < rows->n; i++) {
        msgs[i] = hub_msg_steal(stream_msg_event(job, &rows->rows[i]));
        if (msgs[i] == NULL) {
            for (size_t k = 0; k < i; k++)
                hub_msg_unref(msgs[k]);
            return -1;
        }
    }
    return 0;
}

/* Queues rows (seqs[] ascending, msgs[] their messages) after sub->sent to sub. Returns false
 * when the client's queue is full (it must be dropped). */
static bool deliver(struct stream *st, struct stream_sub *sub, const int64_t *seqs,
                    struct hub_msg **msgs, size_t n)
{
    size_t k = 0;
    while (k < n && seqs[k] <= sub->sent)
        k++;
    if (k == n)
        return true;
    int queued = hub_stream_send(st->hub, sub->client->conn, msgs + k, n - k, sub->batch, NULL);
    if (queued < 0)
        return true; /* gone: its HUB_CLOSED is on the way */
    st->flush = true;
    SRV_COUNT(&st->srv->telemetry, stream_events_sent, (uint64_t)queued);
    if (queued > 0)
        sub->sent = seqs[k + (size_t)queued - 1];
    return (size_t)queued == n - k;
}

/* Whether cluster row r is kept from cl: a job of a private project, and cl is not an admin.
 * Members too follow such a job on its own stream only (docs/streams.md). */
static bool hidden_from(const struct stream_client *cl, const struct store_stream_row *r)
{
    return r->restricted && cl->who.role != SRV_ROLE_ADMIN;
}

/* deliver() of the rows of seqs/msgs[0..n) (read into rows) that sub's client may see; rows kept
 * from it count as sent. */
static bool deliver_visible(struct stream *st, struct stream_sub *sub,
                            const struct store_stream_rows *rows, const int64_t *seqs,
                            struct hub_msg **msgs, size_t n)
{
    size_t hidden = 0;
    for (size_t i = 0; i < n; i++)
        hidden += hidden_from(sub->client, &rows->rows[i]);
    if (hidden == 0)
        return deliver(st, sub, seqs, msgs, n);
    int64_t *vseqs = malloc(n * sizeof(*vseqs));
    struct hub_msg **vmsgs = malloc(n * sizeof(*vmsgs));
    bool all = false;
    if (vseqs && vmsgs) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (hidden_from(sub->client, &rows->rows[i]))
                continue;
            vseqs[k] = seqs[i];
            vmsgs[k++] = msgs[i];
        }
        all = k == 0 || deliver(st, sub, vseqs, vmsgs, k);
        if (all && seqs[n - 1] > sub->sent)
            sub->sent = seqs[n - 1];
    }
    free(vseqs);
    free(vmsgs);
    return all;
}

/* One live read of topic t: returns 1 when a full page was delivered (more may follow), 0 when
 * the topic is up to date (or blocked by a cluster hole), or a negative db_qs. */
static int fan_out_page(struct stream *st, struct stream_topic *t)
{
    struct store_stream_rows rows;
    int qs = t->job ? store_job_stream_read(st->db, t->job, t->cursor, -1, STREAM_PAGE, &rows)
                    : store_cluster_stream_read(st->db, t->cursor, -1, STREAM_PAGE, &rows);
    if (qs <= 0) {
        store_stream_rows_free(&rows);
        return qs;
    }
    size_t nread = rows.n;
    int64_t *seqs = malloc(rows.n * sizeof(*seqs));
    struct hub_msg **msgs = malloc(rows.n * sizeof(*msgs));
    if (seqs == NULL || msgs == NULL || build_messages(t->job, &rows, msgs) != 0) {
        free(seqs);
        free(msgs);
        store_stream_rows_free(&rows);
        return DB_SOFT_ERROR;
    }
    for (size_t i = 0; i < rows.n; i++)
        seqs[i] = rows.rows[i].seq;
    size_t n = rows.n;
    if (t->job == 0) {
        n = stream_deliverable(t->cursor, t->settled, seqs, rows.n);
        if (n < rows.n && t->wait_snapshot == NULL) {
            /* A hole: only a transaction running in this read's snapshot can fill it. */
            t->wait_snapshot = strdup(rows.snapshot);
            t->wait_limit = seqs[rows.n - 1];
            t->next_wait_check = util_mono_s() + STREAM_WAIT_CHECK_S;
        }
    }
    /* Slow clients are dropped after the loop: dropping changes t->subs. */
    struct stream_client **slow = calloc(t->nsubs ? t->nsubs : 1, sizeof(*slow));
    size_t nslow = 0;
    for (size_t i = 0; i < t->nsubs && n > 0; i++) {
        struct stream_sub *sub = t->subs[i];
        if (sub->live && !sub->client->closing && !deliver_visible(st, sub, &rows, seqs, msgs, n) &&
            slow)
            slow[nslow++] = sub->client;
    }
    if (n > 0)
        t->cursor = seqs[n - 1];
    for (size_t i = 0; i < rows.n; i++)
        hub_msg_unref(msgs[i]);
    free(msgs);
    free(seqs);
    store_stream_rows_free(&rows);
    /* t may be freed from here on (its last subscribers dropped). */
    for (size_t i = 0; i < nslow; i++)
        stream__drop(st, slow[i], "slow_consumer");
    free(slow);
    return n == nread && nread == STREAM_PAGE ? 1 : 0;
}

/* Live reads of job `job` (0: the cluster) while it is dirty, at most STREAM_PAGES_PER_TURN.
 * Returns 1 when it is still dirty, 0 when done, or a negative db_qs. */
static int fan_out_topic(struct stream *st, int64_t job)
{
    for (int page = 0; page < STREAM_PAGES_PER_TURN; page++) {
        struct stream_topic *t = stream__topic(st, job);
        if (t == NULL || !t->dirty || !t->ready || t->nsubs == 0)
            return 0;
        int rc = fan_out_page(st, t);
        if (rc < 0)
            return rc;
        if (rc == 0 && (t = stream__topic(st, job)) != NULL)
            t->dirty = false;
    }
    return 1;
}

bool stream__fan_out(struct stream *st)
{
    if (util_mono_s() < st->backoff_until)
        return false;
    /* By job id, not by pointer: dropping a slow client can free other topics. */
    size_t n = 1;
    for (struct stream_topic *t = st->topics; t; t = t->next)
        n += t->dirty;
    int64_t *jobs = malloc(n * sizeof(*jobs));
    if (jobs == NULL)
        return true;
    n = 0;
    for (struct stream_topic *t = st->topics; t; t = t->next)
        if (t->dirty)
            jobs[n++] = t->job;
    jobs[n++] = 0;
    bool left = false;
    for (size_t i = 0; i < n; i++) {
        int rc = fan_out_topic(st, jobs[i]);
        if (rc < 0) {
            stream__db_failed(st);
            break;
        }
        left = left || rc > 0;
    }
    free(jobs);
    if (st->cluster.nsubs == 0)
        st->cluster.dirty = false;
    return left;
}

void stream__cluster_wait(struct stream *st)
{
    struct stream_topic *c = &st->cluster;
    double now = util_mono_s();
    if (c->wait_snapshot == NULL || now < c->next_wait_check || now < st->backoff_until)
        return;
    c->next_wait_check = now + STREAM_WAIT_CHECK_S;
    int64_t running = 0;
    if (store_snapshot_running(st->db, c->wait_snapshot, &running) < 0) {
        stream__db_failed(st);
        return;
    }
    if (running > 0)
        return;
    if (c->wait_limit > c->settled)
        c->settled = c->wait_limit;
    c->ready = true;
    free(c->wait_snapshot);
    c->wait_snapshot = NULL;
    c->dirty = true;
}

/* ------------------------------------------------------------------ catch-up */

/* One page of catch-up for sub: rows (sent, cursor] up to `room`. Returns a db_qs. */
static int catch_up_page(struct stream *st, struct stream_sub *sub, size_t room)
{
    struct stream_topic *t = sub->topic;
    int limit = room < STREAM_PAGE ? (int)room : STREAM_PAGE;
    struct store_stream_rows rows;
    int qs = t->job ? store_job_stream_read(st->db, t->job, sub->sent, t->cursor, limit, &rows)
                    : store_cluster_stream_read(st->db, sub->sent, t->cursor, limit, &rows);
    if (qs < 0) {
        store_stream_rows_free(&rows);
        return qs;
    }
    for (size_t i = 0; i < rows.n; i++) {
        if (hidden_from(sub->client, &rows.rows[i])) {
            sub->sent = rows.rows[i].seq;
            continue;
        }
        struct hub_msg *m = hub_msg_steal(stream_msg_event(t->job, &rows.rows[i]));
        int queued = m ? hub_stream_send(st->hub, sub->client->conn, &m, 1, sub->batch, NULL) : 0;
        hub_msg_unref(m);
        if (queued < 0)
            break; /* gone */
        if (queued == 0) {
            store_stream_rows_free(&rows);
            stream__drop(st, sub->client, "slow_consumer");
            return qs;
        }
        SRV_COUNT(&st->srv->telemetry, stream_events_sent, 1);
        sub->sent = rows.rows[i].seq;
        st->flush = true;
    }
    /* A short page: nothing more up to the cursor (rows removed by the log cap leave holes). */
    if (rows.n < (size_t)limit)
        sub->sent = t->cursor;
    if (sub->sent >= t->cursor)
        sub->live = true;
    store_stream_rows_free(&rows);
    return qs;
}

bool stream__catch_up(struct stream *st)
{
    if (util_mono_s() < st->backoff_until)
        return false;
    size_t high = st->queue_max / 2 ? st->queue_max / 2 : 1;
    bool left = false;
    for (struct stream_client *cl = st->clients; cl; cl = cl->next) {
        if (cl->closing || cl->waiting_drain)
            continue;
        struct stream_sub *sub = NULL;
        for (size_t i = 0; i < cl->nsubs && sub == NULL; i++)
            if (!cl->subs[i]->live && cl->subs[i]->topic->ready)
                sub = cl->subs[i];
        if (sub == NULL)
            continue;
        if (sub->sent >= sub->topic->cursor) {
            sub->live = true;
            left = true;
            continue;
        }
        size_t depth = 0;
        if (hub_stream_send(st->hub, cl->conn, NULL, 0, false, &depth) < 0)
            continue;
        if (depth >= high) {
            cl->waiting_drain = true;
            hub_stream_watch(st->hub, cl->conn, st->queue_max / 4);
            continue;
        }
        if (catch_up_page(st, sub, high - depth) < 0) {
            stream__db_failed(st);
            return false;
        }
        left = true;
    }
    return left;
}

void stream__free_topics(struct stream *st)
{
    while (st->topics) {
        struct stream_topic *t = st->topics;
        st->topics = t->next;
        free(t->subs);
        free(t);
    }
    free(st->cluster.subs);
    free(st->cluster.wait_snapshot);
    memset(&st->cluster, 0, sizeof(st->cluster));
}
