/* The control thread's loop, the node registry and the periodic checks (heartbeats, timeouts,
 * jobs being stopped). With several servers on one database, only the leader schedules, times
 * out and marks nodes LOST (control_ha.c). See control.h. */
#include "control_internal.h"

#include "agent_proto.h"
#include "artifact.h"
#include "leader.h"
#include "log.h"
#include "report_fold.h"
#include "report_names.h"
#include "server.h"
#include "store.h"
#include "token.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* How often the checkpoints retention deleted are sent to the agents connected here. */
#define CTL_CKPT_DELETES_S 1.0
#define CTL_PASS_INTERVAL_S 5.0 /* a pass at least this often: backfill windows move with time */
/* After a pass that placed nothing, the next waits this many times its cost (control_thread). */
#define CTL_IDLE_PASS_SPACING 4.0
#define CTL_STOP_RESEND_S 15.0
/* The longest one round of the control thread handles the hub's events (control_thread). */
#define CTL_DRAIN_S 0.05
/* Within a round, the batches of reports are looked at after every this many events. */
#define CTL_DRAIN_PUSH_EVERY 32

struct ctl_node *ctl__node_by_conn(struct control *ctl, uint64_t conn)
{
    for (struct ctl_node *n = ctl->nodes; n; n = n->next)
        if (n->conn == conn)
            return n;
    return NULL;
}

struct ctl_node *ctl__node_by_id(struct control *ctl, const char *id)
{
    for (struct ctl_node *n = ctl->nodes; n; n = n->next)
        if (strcmp(n->id, id) == 0)
            return n;
    return NULL;
}

void ctl__send_text(struct control *ctl, uint64_t conn, char *text)
{
    if (text == NULL) {
        TY_ERROR("control", "out of memory building a message for connection %llu",
                 (unsigned long long)conn);
        return;
    }
    if (conn == 0 || hub_send(ctl->hub, conn, text, strlen(text)) != 0)
        TY_DEBUG("control", "dropped message for a closed connection: %.80s", text);
    free(text);
}

void ctl__signal_locked(struct control *ctl)
{
    pthread_cond_signal(&ctl->cond);
    if (ctl->polling) {
        uint64_t one = 1;
        if (write(ctl->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
            TY_DEBUG("control", "cannot wake the control loop: %s", strerror(errno));
    }
}

/* Called by the hub thread when it queued an event: wakes the loop without forcing a pass. */
static void wake(void *arg)
{
    struct control *ctl = arg;
    pthread_mutex_lock(&ctl->lock);
    ctl->woken = true;
    ctl__signal_locked(ctl);
    pthread_mutex_unlock(&ctl->lock);
}

struct hub *control_hub(struct control *ctl)
{
    return ctl->hub;
}

void control_kick(struct control *ctl)
{
    if (ctl == NULL)
        return;
    pthread_mutex_lock(&ctl->lock);
    ctl->kicked = true;
    ctl__signal_locked(ctl);
    pthread_mutex_unlock(&ctl->lock);
}

void control_forget_job(struct control *ctl, int64_t id)
{
    if (ctl == NULL)
        return;
    pthread_mutex_lock(&ctl->lock);
    if (ctl->nforget == ctl->forget_cap) {
        size_t cap = ctl->forget_cap ? ctl->forget_cap * 2 : 16;
        int64_t *grown = realloc(ctl->forget, cap * sizeof(*grown));
        if (grown != NULL) {
            ctl->forget = grown;
            ctl->forget_cap = cap;
        }
    }
    if (ctl->nforget < ctl->forget_cap)
        ctl->forget[ctl->nforget++] = id;
    ctl->kicked = true;
    ctl__signal_locked(ctl);
    pthread_mutex_unlock(&ctl->lock);
}

/* Sends `forget` for each job deleted since the last call to every connected agent. */
static void send_forgets(struct control *ctl)
{
    pthread_mutex_lock(&ctl->lock);
    int64_t *ids = ctl->forget;
    size_t n = ctl->nforget;
    ctl->forget = NULL;
    ctl->nforget = ctl->forget_cap = 0;
    pthread_mutex_unlock(&ctl->lock);
    for (size_t i = 0; i < n; i++) {
        char job[32];
        snprintf(job, sizeof(job), "%lld", (long long)ids[i]);
        for (struct ctl_node *node = ctl->nodes; node; node = node->next)
            if (node->conn != 0)
                ctl__send_text(ctl, node->conn, aproto_msg_forget(job));
        ctl__ha_announce_forget(ctl, ids[i]);
    }
    free(ids);
}

/* Jobs in STOPPING: stop their workers connected here (again, now and then); the leader also
 * times jobs out and settles those with no worker left. */
static void drive_stopping_jobs(struct control *ctl)
{
    int64_t *jobs = NULL;
    size_t n = 0;
    if (ctl->leading && store_jobs_timed_out(ctl->db) > 0)
        ctl->dirty = true;
    if (store_jobs_stopping(ctl->db, &jobs, &n) < 0)
        return;
    /* A failing attempt with workers on a node whose agent is gone goes on without them. */
    if (n > 0 && ctl->leading && store_jobs_drop_disconnected(ctl->db) > 0)
        ctl->dirty = true;
    double now = util_mono_s();
    for (size_t i = 0; i < n; i++) {
        struct ctl_stop_sent *s = ctl->stops;
        while (s && s->job != jobs[i])
            s = s->next;
        if (s && now - s->at < CTL_STOP_RESEND_S)
            continue;
        if (s == NULL) {
            s = calloc(1, sizeof(*s));
            if (s == NULL)
                continue;
            s->job = jobs[i];
            s->next = ctl->stops;
            ctl->stops = s;
        }
        s->at = now;
        ctl__send_stops(ctl, jobs[i]);
    }
    /* Forget jobs that are no longer stopping. */
    for (struct ctl_stop_sent **p = &ctl->stops; *p;) {
        bool still = false;
        for (size_t i = 0; i < n && !still; i++)
            still = jobs[i] == (*p)->job;
        if (still) {
            p = &(*p)->next;
        } else {
            struct ctl_stop_sent *dead = *p;
            *p = dead->next;
            free(dead);
        }
    }
    free(jobs);
    if (ctl->leading && store_jobs_settle_stopping(ctl->db) > 0)
        ctl->dirty = true;
}

static void handle_event(struct control *ctl, struct hub_event *ev)
{
    if (ev->kind != HUB_MESSAGE) { /* events stay in order */
        ctl__flush_started(ctl);
        ctl__flush_reports(ctl, ev->conn);
        ctl__flush_logs(ctl);
    }
    switch (ev->kind) {
    case HUB_CONNECTED:
        TY_DEBUG("control", "connection %llu from %s", (unsigned long long)ev->conn, ev->peer);
        break;
    case HUB_MESSAGE:
        ctl__on_agent_message(ctl, ev->conn, ev->text, ev->len);
        break;
    case HUB_CLOSED: {
        struct ctl_node *n = ctl__node_by_conn(ctl, ev->conn);
        if (n) {
            TY_INFO("control", "node %s disconnected", n->id);
            n->conn = 0;
            /* Failing attempts stop waiting for its workers (drive_stopping_jobs). */
            if (store_node_disconnected(ctl->db, n->id) < 0)
                TY_WARN("control", "node %s: its disconnection was not stored", n->id);
            ctl->dirty = true;
        }
        break;
    }
    case HUB_DRAINED: /* subscribers only */
        break;
    }
    free(ev->text);
}

/* Removes the artifact store's staged uploads untouched for --upload-stale-s (abandoned code
 * packages and checkpoint parts), looking a few times per that period, at least every 10
 * minutes. Every server does it for its own store. */
static void gc_uploads(struct control *ctl)
{
    int64_t stale = ctl->srv->cfg.upload_stale_s;
    double every = stale / 4.0 < 1 ? 1 : stale / 4.0 > 600 ? 600 : stale / 4.0;
    struct artifact_store *st = ctl->srv->artifacts;
    if (st == NULL || st->ops->gc_staged == NULL || util_mono_s() - ctl->last_upload_gc < every)
        return;
    ctl->last_upload_gc = util_mono_s();
    int64_t removed = 0;
    if (st->ops->gc_staged(st->be, stale, &removed) != 0)
        TY_WARN("artifacts", "cannot look for abandoned uploads in the artifact store");
}

static void *control_thread(void *arg)
{
    struct control *ctl = arg;
    for (;;) {
        pthread_mutex_lock(&ctl->lock);
        if (!ctl->kicked && !ctl->woken && !ctl->stopping && !ctl__reports_in_flight(ctl)) {
            struct timespec until = util_clock_in_ms(CLOCK_REALTIME, CTL_TICK_MS);
            pthread_cond_timedwait(&ctl->cond, &ctl->lock, &until);
        }
        bool kicked = ctl->kicked;
        bool stopping = ctl->stopping;
        ctl->kicked = false;
        ctl->woken = false;
        pthread_mutex_unlock(&ctl->lock);
        if (stopping) {
            /* the batches in flight are committed and acked; the reports still queued are not
             * acked, and their agents send them again to the next server */
            ctl__finish_reports(ctl);
            break;
        }
        if (kicked) {
            ctl->dirty = true;
            send_forgets(ctl);
        }
        if (db_ensure(ctl->db) != 0) {
            ctl__finish_reports(ctl); /* then this thread sleeps until the next tick */
            continue;                 /* events stay queued until the database is back */
        }
        ctl__ha_poll(ctl);
        /* The worker_started messages among these (an agent sends those of a launch together)
         * are committed in one transaction: one commit instead of one per worker; so are the
         * reports among them. At most CTL_DRAIN_S of events per round: a batch of reports is
         * acked as soon as it commits (control_report.c), so under a flood of reports the queue
         * never empties, and an unbounded drain held up the passes and the tick's duties
         * (timeouts, stops, hangs) until the flood ended. The rest
         * waits for the next round, which starts at once. */
        struct hub_event ev;
        double drain_start = util_mono_s();
        bool more = false;
        size_t handled = 0;
        while ((more = hub_next_event(ctl->hub, &ev))) {
            handle_event(ctl, &ev);
            handled++;
            /* a batch done meanwhile is acked and its lane refilled at once, not at the end of
             * the round: its backend would idle until then */
            if (handled % CTL_DRAIN_PUSH_EVERY == 0)
                ctl__push_reports(ctl, false);
            if (util_mono_s() - drain_start >= CTL_DRAIN_S)
                break;
        }
        if (more) {
            pthread_mutex_lock(&ctl->lock);
            ctl->woken = true;
            pthread_mutex_unlock(&ctl->lock);
        }
        ctl__flush_started(ctl);
        /* stored while the next round reads the next messages; a round with none waits for
         * the batches in flight (this loop does not sleep while one is) */
        ctl__push_reports(ctl, handled == 0);
        ctl__flush_logs(ctl);
        /* A submission or stop (a kick) is taken to Slurm at once, not at the next tick. */
        if (kicked && ctl->leading)
            ctl__slurm_tick(ctl, true);
        /* A trial's result is decided on as soon as its report is committed, not at the next
         * tick: ASHA's stop follows the report that completes a rung within milliseconds. */
        if (ctl->leading && ctl->tune_due)
            ctl__tune_results(ctl);
        ctl->tune_due = false;
        if (util_mono_s() - ctl->last_tick >= CTL_TICK_MS / 1000.0) {
            ctl->last_tick = util_mono_s();
            ctl__ha_tick(ctl);
            ctl__server_heard(ctl);
            if (ctl->leading) {
                ctl__check_hangs(ctl);
                ctl__tune_tick(ctl);
                ctl__job_stop_tick(ctl);
            }
            drive_stopping_jobs(ctl);
            if (ctl->leading)
                ctl__slurm_tick(ctl, false);
            if (util_mono_s() - ctl->last_ckpt_deletes >= CTL_CKPT_DELETES_S) {
                ctl->last_ckpt_deletes = util_mono_s();
                ctl__send_ckpt_deletes(ctl);
            }
            gc_uploads(ctl);
        }
        if (!ctl->leading) {
            ctl__ha_forward_kick(ctl);
            continue;
        }
        /* A pass as soon as one is due, but never more than half of this thread's time in
         * passes: under a flood of submissions the passes batch them up. After a pass that
         * placed nothing, at most a fifth: its jobs wait on resources, and what it read (every
         * pending job) grows with the queue, so a flood's passes would otherwise cost more
         * than the submissions (docs/decisions.md, "Scheduling passes under a flood"); unless
         * the cluster gained capacity since (a node registered, resources were freed), which
         * the waiting jobs wait for (a Slurm allocation's last agent). */
        double since = util_mono_s() - ctl->last_pass;
        bool spaced = !ctl->last_pass_placed && !ctl->gained;
        double wait = ctl->last_pass_cost * (spaced ? CTL_IDLE_PASS_SPACING : 1);
        if ((ctl->dirty && since >= wait) || since > CTL_PASS_INTERVAL_S) {
            ctl->dirty = ctl->gained = false;
            ctl->last_pass = util_mono_s();
            /* A trial that just ended makes room for the next one in this very pass. */
            if (ctl->sweeps)
                ctl__tune_tick(ctl);
            ctl->last_pass_placed = ctl__schedule(ctl) > 0;
            ctl->last_pass_cost = util_mono_s() - ctl->last_pass;
            srv_histogram_observe(&ctl->srv->telemetry.sched_pass, ctl->last_pass_cost);
        }
    }
    ctl__finish_reports(ctl);
    return NULL;
}

/* The cluster join token: --cluster-token, else <data-dir>/cluster.token (made on first start). */
static int load_cluster_token(struct control *ctl)
{
    struct srv *srv = ctl->srv;
    if (srv->cfg.auth_mode == SRV_AUTH_NONE)
        return 0;
    char token[256];
    if (srv->cfg.cluster_token && *srv->cfg.cluster_token) {
        snprintf(token, sizeof(token), "%s", srv->cfg.cluster_token);
    } else {
        char path[4096];
        snprintf(path, sizeof(path), "%s/cluster.token", srv->cfg.data_dir);
        char *text = util_read_file(path, NULL);
        if (text) {
            snprintf(token, sizeof(token), "%s", text);
            token[strcspn(token, "\r\n")] = '\0';
            free(text);
        } else {
            if (srv_token_mint("tyc_", token, sizeof(token), NULL) != 0)
                return -1;
            char line[64];
            int len = snprintf(line, sizeof(line), "%s\n", token);
            if (util_write_file_durable(path, line, (size_t)len, 0600) != 0) {
                TY_ERROR("control", "cannot write %s: %s", path, strerror(errno));
                return -1;
            }
            TY_INFO("control", "cluster join token for agents written to %s", path);
        }
    }
    if (srv->cfg.slurm && srv->cfg.slurm[0] && !(ctl->slurm_cluster_token = strdup(token)))
        return -1;
    char hash[65];
    util_sha256_hex(token, strlen(token), hash);
    ctl->cluster_token_hash = strdup(hash);
    return ctl->cluster_token_hash ? 0 : -1;
}

struct control *control_start(struct srv *srv)
{
    struct control *ctl = calloc(1, sizeof(*ctl));
    if (ctl == NULL)
        return NULL;
    ctl->srv = srv;
    pthread_mutex_init(&ctl->lock, NULL);
    pthread_cond_init(&ctl->cond, NULL);
    ctl->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ctl->wake_fd < 0 || load_cluster_token(ctl) != 0 || ctl__slurm_start(ctl) != 0)
        goto fail;
    ctl->db = db_acquire(srv->db);
    if (ctl->db == NULL)
        goto fail;
    ctl->hub = hub_start(srv->cfg.http_host, (int)srv->cfg.ws_port, srv->cfg.tls_cert,
                         srv->cfg.tls_key, (int)srv->cfg.ws_ping_s, wake, ctl);
    if (ctl->hub == NULL)
        goto fail;
    struct hub_limits limits = {
        .preauth_max_bytes = (size_t)srv->cfg.ws_preauth_max_bytes,
        .max_conns = (int)srv->cfg.ws_max_connections,
        .max_preauth_per_ip = (int)srv->cfg.ws_max_preauth_per_ip,
        .auth_timeout_s = (int)srv->cfg.ws_auth_timeout_s,
        .in_queue_max = (size_t)srv->cfg.ws_queue_max,
        .out_queue_max = (size_t)srv->cfg.ws_queue_max,
    };
    hub_set_limits(ctl->hub, &limits);
    if (ctl__ha_start(ctl) != 0 || ctl__report_blocks_start(ctl) != 0 ||
        pthread_create(&ctl->thread, NULL, control_thread, ctl) != 0) {
        ctl__report_blocks_stop(ctl);
        leader_stop(ctl->leader);
        hub_stop(ctl->hub);
        goto fail;
    }
    return ctl;
fail:
    ctl__slurm_stop(ctl);
    db_release(srv->db, ctl->db);
    free(ctl->cluster_token_hash);
    if (ctl->wake_fd >= 0)
        close(ctl->wake_fd);
    pthread_mutex_destroy(&ctl->lock);
    pthread_cond_destroy(&ctl->cond);
    free(ctl);
    return NULL;
}

void control_stop(struct control *ctl)
{
    if (ctl == NULL)
        return;
    pthread_mutex_lock(&ctl->lock);
    ctl->stopping = true;
    ctl__signal_locked(ctl);
    pthread_mutex_unlock(&ctl->lock);
    pthread_join(ctl->thread, NULL);
    ctl__report_blocks_stop(ctl);
    leader_stop(ctl->leader);
    hub_stop(ctl->hub);
    db_release(ctl->srv->db, ctl->db);
    while (ctl->nodes) {
        struct ctl_node *n = ctl->nodes;
        ctl->nodes = n->next;
        free(n->id);
        free(n);
    }
    while (ctl->stops) {
        struct ctl_stop_sent *s = ctl->stops;
        ctl->stops = s->next;
        free(s);
    }
    while (ctl->grows) {
        struct ctl_grow *g = ctl->grows;
        ctl->grows = g->next;
        free(g);
    }
    ctl__specs_free(&ctl->specs);
    report_names_free(ctl->known_names);
    ctl__reports_free(ctl);
    for (int l = 0; l < CTL_LANES; l++) {
        report_names_list_free(&ctl->flights[l].names);
        report_fold_blocks_free(&ctl->flights[l].blocks);
    }
    report_fold_free(ctl->fold);
    ctl__slurm_stop(ctl);
    json_decref(ctl->logs.rows);
    free(ctl->cluster_token_hash);
    close(ctl->wake_fd);
    pthread_mutex_destroy(&ctl->lock);
    pthread_cond_destroy(&ctl->cond);
    free(ctl->forget);
    free(ctl->notes);
    free(ctl->remote_forget);
    free(ctl);
}
