/* The event queue (worker_started, worker_exited, report: each kept until the server acks its
 * seq) and the table of supervised workers. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t agent_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t agent__next_seq(struct agent *a)
{
    return ++a->next_seq;
}

struct agent_event *agent__event_push(struct agent *a, enum agent_event_kind kind, char *text,
                                      int64_t seq, char *spool_path)
{
    struct agent_event *e = calloc(1, sizeof(*e));
    if (!e || !text) {
        TY_ERROR("agent", "out of memory queueing an event (seq %lld)", (long long)seq);
        free(e);
        free(text);
        free(spool_path);
        return NULL;
    }
    e->seq = seq;
    e->kind = kind;
    e->text = text;
    e->spool_path = spool_path;
    a->queued_bytes += (int64_t)strlen(text);
    if (a->events_tail)
        a->events_tail->next = e;
    else
        a->events = e;
    a->events_tail = e;
    TY_DEBUG("ws", "queued event %lld: %s", (long long)seq, text);
    agent__ws_kick(a);
    return e;
}

static void event_free(struct agent_event *e)
{
    free(e->text);
    free(e->spool_path);
    free(e);
}

/* Forgets the exited worker whose worker_exited event had `seq`. */
static void forget_acked_worker(struct agent *a, int64_t seq)
{
    for (struct agent_worker **pp = &a->workers; *pp; pp = &(*pp)->next) {
        struct agent_worker *w = *pp;
        if (w->status == AGENT_WORKER_EXITED && w->exit_seq == seq) {
            if (w->cg_n > 0) { /* agent__isolation_poll frees it once its cgroups are gone */
                w->acked = true;
                return;
            }
            *pp = w->next;
            agent__worker_free(w);
            return;
        }
    }
}

void agent__events_ack(struct agent *a, int64_t seq)
{
    struct agent_event *prev = NULL;
    for (struct agent_event *e = a->events; e; prev = e, e = e->next) {
        if (e->seq != seq)
            continue;
        enum agent_event_kind kind = e->kind;
        if (prev)
            prev->next = e->next;
        else
            a->events = e->next;
        if (a->events_tail == e)
            a->events_tail = prev;
        if (e->spool_path && unlink(e->spool_path) != 0)
            TY_WARN("report", "cannot delete spooled report %s", e->spool_path);
        if (e->kind == AGENT_EV_EXITED)
            forget_acked_worker(a, seq);
        a->queued_bytes -= (int64_t)strlen(e->text);
        event_free(e);
        if (kind == AGENT_EV_LOG)
            agent__tail_acked(a, seq);
        agent__report_queue_drained(a);
        return;
    }
    TY_DEBUG("ws", "ack of unknown or already acked event %lld", (long long)seq);
}

void agent__events_reset_sent(struct agent *a)
{
    for (struct agent_event *e = a->events; e; e = e->next)
        e->sent = false;
}

struct agent_event *agent__events_next_unsent(struct agent *a)
{
    for (struct agent_event *e = a->events; e; e = e->next)
        if (!e->sent)
            return e;
    return NULL;
}

void agent__events_free_all(struct agent *a)
{
    while (a->events) {
        struct agent_event *e = a->events;
        a->events = e->next;
        event_free(e);
    }
    a->events_tail = NULL;
    a->queued_bytes = 0;
}

struct aproto_worker_event *agent__workers_state(const struct agent *a, size_t *n)
{
    size_t count = 0;
    *n = 0;
    for (const struct agent_worker *w = a->workers; w; w = w->next)
        count += !w->acked;
    struct aproto_worker_event *states = count ? calloc(count, sizeof(*states)) : NULL;
    for (const struct agent_worker *w = a->workers; states && w; w = w->next)
        if (!w->acked)
            states[(*n)++] = (struct aproto_worker_event){
                .seq = -1,
                .job_id = w->job_id,
                .attempt = w->attempt,
                .rank = w->rank,
                .pid = w->pid,
                .exited = w->status != AGENT_WORKER_RUNNING,
                .exit_code = w->exit_code,
                .signal = w->signal,
                .error = w->error,
                .reason = w->reason,
            };
    return states;
}

struct agent_worker *agent__worker_find(struct agent *a, const char *job_id, int64_t attempt,
                                        int64_t rank)
{
    for (struct agent_worker *w = a->workers; w; w = w->next)
        if (w->attempt == attempt && w->rank == rank && strcmp(w->job_id, job_id) == 0)
            return w;
    return NULL;
}

size_t agent__workers_running(const struct agent *a)
{
    size_t n = 0;
    for (const struct agent_worker *w = a->workers; w; w = w->next)
        n += w->status == AGENT_WORKER_RUNNING;
    return n;
}

void agent__workers_free_all(struct agent *a)
{
    while (a->workers) {
        struct agent_worker *w = a->workers;
        a->workers = w->next;
        agent__worker_free(w);
    }
}
