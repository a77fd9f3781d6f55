/* Several servers on one database: the control thread's side of leadership (leader.h). Every
 * server applies the messages of the agents connected to it, sends them stops, and writes when
 * it last heard from them; only the leader runs scheduling passes, timeouts and node-loss
 * detection. A placement reaches the agents of the other servers as a notification
 * (store_place). See docs/high-availability.md. */
#include "control_internal.h"

#include "agent_proto.h"
#include "leader.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTL_HEARD_EVERY_S 0.5 /* a node's last_heartbeat_at is rewritten at most this often */

static void wake_locked(struct control *ctl)
{
    ctl->woken = true;
    ctl__signal_locked(ctl);
}

static void on_changed(void *arg)
{
    struct control *ctl = arg;
    pthread_mutex_lock(&ctl->lock);
    wake_locked(ctl);
    pthread_mutex_unlock(&ctl->lock);
}

/* Queues a launch note (the lock held). Out of memory: dropped, logged; the agent gets the launch
 * when it registers again. */
static void queue_note(struct control *ctl, int64_t job, int attempt)
{
    if (ctl->nnotes == ctl->notes_cap) {
        size_t cap = ctl->notes_cap ? ctl->notes_cap * 2 : 16;
        struct ctl_launch_note *grown = realloc(ctl->notes, cap * sizeof(*grown));
        if (grown == NULL) {
            TY_ERROR("control", "out of memory queueing the launch of job %lld", (long long)job);
            return;
        }
        ctl->notes = grown;
        ctl->notes_cap = cap;
    }
    ctl->notes[ctl->nnotes++] = (struct ctl_launch_note){.job = job, .attempt = attempt};
}

/* Queues a job deleted through another server (the lock held); out of memory: dropped, logged
 * (the agents keep its checkpoint staging). */
static void queue_remote_forget(struct control *ctl, int64_t job)
{
    if (ctl->nremote_forget == ctl->remote_forget_cap) {
        size_t cap = ctl->remote_forget_cap ? ctl->remote_forget_cap * 2 : 16;
        int64_t *grown = realloc(ctl->remote_forget, cap * sizeof(*grown));
        if (grown == NULL) {
            TY_ERROR("control", "out of memory queueing the forget of job %lld", (long long)job);
            return;
        }
        ctl->remote_forget = grown;
        ctl->remote_forget_cap = cap;
    }
    ctl->remote_forget[ctl->nremote_forget++] = job;
}

/* The leadership thread's notifications: a pass asked for by a follower, or a placement. */
static void on_notified(void *arg, const char *channel, const char *payload)
{
    struct control *ctl = arg;
    pthread_mutex_lock(&ctl->lock);
    if (strcmp(channel, LEADER_CHANNEL_KICK) == 0) {
        ctl->remote_kick = true;
        wake_locked(ctl);
    } else if (strcmp(channel, LEADER_CHANNEL_LAUNCH) == 0) {
        long long job = 0;
        int attempt = 0;
        char origin[sizeof(ctl->instance)];
        if (sscanf(payload, "%lld %d %39s", &job, &attempt, origin) != 3 || job <= 0)
            TY_BUG("control", "malformed launch notification '%s'", payload);
        else if (strcmp(origin, ctl->instance) != 0) {
            queue_note(ctl, job, attempt);
            wake_locked(ctl);
        }
    } else if (strcmp(channel, LEADER_CHANNEL_FORGET) == 0) {
        long long job = 0;
        char origin[sizeof(ctl->instance)];
        if (sscanf(payload, "%lld %39s", &job, origin) != 2 || job <= 0)
            TY_BUG("control", "malformed forget notification '%s'", payload);
        else if (strcmp(origin, ctl->instance) != 0) {
            queue_remote_forget(ctl, job);
            wake_locked(ctl);
        }
    }
    pthread_mutex_unlock(&ctl->lock);
}

static void on_listening(void *arg)
{
    struct control *ctl = arg;
    pthread_mutex_lock(&ctl->lock);
    ctl->resync = true;
    wake_locked(ctl);
    pthread_mutex_unlock(&ctl->lock);
}

int ctl__ha_start(struct control *ctl)
{
    unsigned char rnd[8];
    if (util_random_bytes(rnd, sizeof(rnd)) != 0)
        return -1;
    uint64_t id = 0;
    for (size_t i = 0; i < sizeof(rnd); i++)
        id = id << 8 | rnd[i];
    snprintf(ctl->instance, sizeof(ctl->instance), "%016" PRIx64, id);
    struct leader_hooks hooks = {
        .arg = ctl,
        .changed = on_changed,
        .notified = on_notified,
        .listening = on_listening,
    };
    ctl->leader = leader_start(db_conninfo(ctl->srv->db), &hooks);
    return ctl->leader ? 0 : -1;
}

bool control_is_leader(struct control *ctl)
{
    return ctl != NULL && leader_is_leader(ctl->leader);
}

void ctl__ha_poll(struct control *ctl)
{
    bool leading = leader_is_leader(ctl->leader);
    if (leading && !ctl->leading) {
        ctl->lead_since = util_mono_s();
        ctl->dirty = true;
    }
    ctl->leading = leading;
    pthread_mutex_lock(&ctl->lock);
    struct ctl_launch_note *notes = ctl->notes;
    size_t n = ctl->nnotes;
    bool resync = ctl->resync, remote_kick = ctl->remote_kick;
    ctl->notes = NULL;
    ctl->nnotes = ctl->notes_cap = 0;
    int64_t *forget = ctl->remote_forget;
    size_t nforget = ctl->nremote_forget;
    ctl->remote_forget = NULL;
    ctl->nremote_forget = ctl->remote_forget_cap = 0;
    ctl->resync = ctl->remote_kick = false;
    pthread_mutex_unlock(&ctl->lock);
    if (remote_kick && leading)
        ctl->dirty = true;
    if (resync)
        ctl__launch_placed_here(ctl);
    for (size_t i = 0; i < n && !resync; i++)
        ctl__send_launches_here(ctl, notes[i].job, notes[i].attempt);
    free(notes);
    for (size_t i = 0; i < nforget; i++) {
        char job[32];
        snprintf(job, sizeof(job), "%lld", (long long)forget[i]);
        for (struct ctl_node *node = ctl->nodes; node; node = node->next)
            if (node->conn != 0)
                ctl__send_text(ctl, node->conn, aproto_msg_forget(job));
    }
    free(forget);
}

/* Writes last_heartbeat_at of the nodes connected here heard from since the last write. */
static void flush_heard(struct control *ctl)
{
    double now = util_mono_s();
    json_t *heard = json_array();
    for (struct ctl_node *n = ctl->nodes; heard && n; n = n->next)
        if (n->conn != 0 && n->last_seen - n->flushed >= CTL_HEARD_EVERY_S)
            json_array_append_new(heard,
                                  json_pack("{s:s, s:f}", "id", n->id, "age", now - n->last_seen));
    if (heard == NULL || json_array_size(heard) == 0) {
        json_decref(heard);
        return;
    }
    char *text = json_dumps(heard, JSON_COMPACT);
    char **alive = NULL;
    size_t nalive = 0;
    int qs = text ? store_nodes_heard(ctl->db, text, &alive, &nalive) : DB_HARD_ERROR;
    free(text);
    json_decref(heard);
    if (qs < 0)
        return;
    for (struct ctl_node *n = ctl->nodes; n; n = n->next) {
        if (n->conn == 0 || n->last_seen - n->flushed < CTL_HEARD_EVERY_S)
            continue;
        bool still = false;
        for (size_t i = 0; i < nalive && !still; i++)
            still = strcmp(alive[i], n->id) == 0;
        n->flushed = n->last_seen;
        if (!still) { /* marked LOST by the leader: it registers again */
            TY_WARN("control", "node %s was marked LOST; closing its connection", n->id);
            hub_close(ctl->hub, n->conn);
            n->conn = 0;
            n->alive = false;
        }
    }
    for (size_t i = 0; i < nalive; i++)
        free(alive[i]);
    free(alive);
}

/* The leader: marks LOST the nodes no server heard from within the timeout. */
static void mark_silent_lost(struct control *ctl)
{
    int64_t timeout = ctl->srv->cfg.heartbeat_timeout_s;
    if (util_mono_s() - ctl->lead_since <= (double)timeout)
        return;
    char **ids = NULL;
    size_t n = 0;
    if (store_nodes_silent(ctl->db, timeout, &ids, &n) <= 0)
        return;
    for (size_t i = 0; i < n; i++) {
        TY_WARN("control", "node %s: no heartbeat for over %lld s; marking it LOST", ids[i],
                (long long)timeout);
        if (store_node_lost_if_silent(ctl->db, ids[i], timeout) >= 0) {
            struct ctl_node *node = ctl__node_by_id(ctl, ids[i]);
            if (node && node->conn) {
                hub_close(ctl->hub, node->conn);
                node->conn = 0;
            }
            if (node)
                node->alive = false;
            ctl->dirty = true;
        }
        free(ids[i]);
    }
    free(ids);
}

void ctl__ha_tick(struct control *ctl)
{
    flush_heard(ctl);
    if (ctl->leading)
        mark_silent_lost(ctl);
}

void ctl__ha_forward_kick(struct control *ctl)
{
    if (ctl->leading || !ctl->dirty)
        return;
    if (store_notify(ctl->db, LEADER_CHANNEL_KICK, "") >= 0)
        ctl->dirty = false;
}

void ctl__ha_announce_forget(struct control *ctl, int64_t id)
{
    char payload[96];
    snprintf(payload, sizeof(payload), "%lld %s", (long long)id, ctl->instance);
    if (store_notify(ctl->db, LEADER_CHANNEL_FORGET, payload) < 0)
        TY_WARN("control", "could not tell the other servers that job %lld was deleted",
                (long long)id);
}
