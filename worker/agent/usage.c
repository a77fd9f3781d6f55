/* Workers' resource usage (issue 22): about once a second the agent reads each running worker's
 * cgroup (CPU time, memory charged now and at most) and sends the server one `usage` message
 * (docs/agent-protocol.md); once more when a worker exited, marked final, so that a finished
 * worker keeps its totals. Workers without a cgroup (--cgroups off, or none could be made) have
 * no usage. Lossy like `progress`: a sample missed while the server is away is replaced by the
 * next (a final one is not: the server keeps the last sample it got). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <stdlib.h>

#define AGENT_USAGE_INTERVAL_MS 1000

/* Reads w's cgroup into *u. False when it has none or it cannot be read. */
static bool sample(const struct agent *a, struct agent_worker *w, struct aproto_usage *u)
{
    int64_t cpu, mem, peak;
    if (w->cg_n == 0 || agent__cgroup_usage(a, w, &cpu, &mem, &peak) != 0)
        return false;
    /* The cgroup's own peak catches what happened between samples; without one (cgroup v2
     * before Linux 5.19), the largest sample. */
    if (mem > w->memory_peak)
        w->memory_peak = mem;
    if (peak > w->memory_peak)
        w->memory_peak = peak;
    *u = (struct aproto_usage){
        .job_id = w->job_id,
        .attempt = w->attempt,
        .rank = w->rank,
        .cpu_usec = cpu,
        .memory_bytes = mem,
        .memory_peak_bytes = w->memory_peak,
    };
    return true;
}

void agent__usage_tick(struct agent *a)
{
    int64_t now = util_mono_ms();
    if (!a->registered || now - a->usage_sent_ms < AGENT_USAGE_INTERVAL_MS)
        return;
    a->usage_sent_ms = now;
    size_t n = 0;
    for (const struct agent_worker *w = a->workers; w; w = w->next)
        n += w->status == AGENT_WORKER_RUNNING && w->cg_n > 0;
    if (n == 0)
        return;
    struct aproto_usage *rows = calloc(n, sizeof(*rows));
    if (!rows) {
        TY_ERROR("usage", "out of memory");
        return;
    }
    size_t i = 0;
    for (struct agent_worker *w = a->workers; w && i < n; w = w->next)
        if (w->status == AGENT_WORKER_RUNNING && sample(a, w, &rows[i]))
            i++;
    if (i > 0)
        agent__ws_send_ctl(a, aproto_msg_usage(rows, i));
    free(rows);
}

void agent__usage_final(struct agent *a, struct agent_worker *w)
{
    struct aproto_usage u;
    if (!a->registered || !sample(a, w, &u))
        return;
    u.final = true;
    agent__ws_send_ctl(a, aproto_msg_usage(&u, 1));
}
