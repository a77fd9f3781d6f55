/* Workers' heartbeats (`progress` frames on the report socket, docs/report-protocol.md): each is
 * kept on its worker, and every AGENT_PROGRESS_INTERVAL_MS the running workers' last heartbeats
 * go to the server in one `progress` message (docs/agent-protocol.md). Lossy on purpose: a
 * message missed while the server is away is replaced by the next one. */
#include "agent.h"

#include "log.h"
#include "report_proto.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGENT_PROGRESS_INTERVAL_MS 1000

void agent__progress_note(struct agent_worker *w, const struct rproto_progress *p)
{
    struct agent_worker_progress *s = &w->progress;
    int64_t now = util_mono_ms();
    const char *op = p->op ? p->op : "";
    bool changed = !s->known || s->coll_seq != p->coll_seq ||
                   s->in_collective != p->in_collective || s->report_seq != p->report_seq ||
                   strcmp(s->op, op) != 0;
    if (changed) {
        snprintf(s->op, sizeof(s->op), "%s", op);
        s->coll_seq = p->coll_seq;
        s->in_collective = p->in_collective;
        s->report_seq = p->report_seq;
        s->changed_ms = now;
    }
    /* The SDK samples its state every 100 ms and says how old it is: more exact than our
     * receive time, which lags by up to a heartbeat interval. */
    if (p->progress_age_ms >= 0)
        s->changed_ms = now - p->progress_age_ms;
    s->known = true;
    s->heartbeat_ms = now;
}

void agent__progress_tick(struct agent *a)
{
    int64_t now = util_mono_ms();
    if (!a->registered || now - a->progress_sent_ms < AGENT_PROGRESS_INTERVAL_MS)
        return;
    a->progress_sent_ms = now;
    size_t n = 0;
    for (const struct agent_worker *w = a->workers; w; w = w->next)
        n += w->status == AGENT_WORKER_RUNNING && w->progress.known;
    if (n == 0)
        return;
    struct aproto_progress *rows = calloc(n, sizeof(*rows));
    if (!rows) {
        TY_ERROR("progress", "out of memory");
        return;
    }
    size_t i = 0;
    for (const struct agent_worker *w = a->workers; w && i < n; w = w->next) {
        const struct agent_worker_progress *s = &w->progress;
        if (w->status != AGENT_WORKER_RUNNING || !s->known)
            continue;
        rows[i++] = (struct aproto_progress){
            .job_id = w->job_id,
            .attempt = w->attempt,
            .rank = w->rank,
            .op = s->op[0] ? s->op : NULL,
            .coll_seq = s->coll_seq,
            .in_collective = s->in_collective,
            .report_seq = s->report_seq,
            .heartbeat_age_ms = now - s->heartbeat_ms,
            .progress_age_ms = now - s->changed_ms,
        };
    }
    agent__ws_send_ctl(a, aproto_msg_progress(rows, i));
    free(rows);
}
