/* Scheduling passes: database snapshot → scheduler/ → committed placements → launch orders
 * (control_launch.c); stop orders. */
#include "control_internal.h"

#include "agent_proto.h"
#include "control_snapshot.h"
#include "jobspec.h"
#include "log.h"
#include "quota.h"
#include "scheduler/sched.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The bundle a worker holds, as stored in workers.resources. */
static json_t *bundle_json(const struct jobspec *js)
{
    json_t *b = json_object();
    if (js->cpu_milli)
        json_object_set_new(b, "CPU", json_real((double)js->cpu_milli / 1000.0));
    if (js->gpu)
        json_object_set_new(b, "GPU", json_integer(js->gpu));
    if (js->memory_mb)
        json_object_set_new(b, "memory_mb", json_integer(js->memory_mb));
    for (size_t i = 0; i < js->n_custom; i++)
        json_object_set_new(b, js->custom[i].name,
                            json_real((double)js->custom[i].amount_milli / 1000.0));
    return b;
}

/* Queues pending job `job`'s waiting message for the pass's one write (write_waiting), unless it
 * is the message last written for it. */
static void queue_waiting(struct control *ctl, json_t *waiting, int64_t job, const char *message)
{
    if (ctl__spec_message_changed(&ctl->specs, job, message))
        json_array_append_new(waiting, json_pack("[I, s]", (json_int_t)job, message));
}

/* Writes the waiting messages a pass queued, in one statement: one commit per pass, not one per
 * waiting job. */
static void write_waiting(struct control *ctl, json_t *waiting)
{
    if (json_array_size(waiting) > 0 && store_jobs_set_waiting_messages(ctl->db, waiting) < 0)
        TY_WARN("control", "the waiting messages of %zu jobs were not stored",
                json_array_size(waiting));
}

/* Commits decision `d`: the placement and its launches, or the job's waiting message. Returns 1
 * when it placed the job, else 0. */
static int commit_decision(struct control *ctl, const sched_decision *d,
                           const struct ctl_node_gpus *nodes, json_t *waiting)
{
    if (d->job_id < 0) /* a growth probe (grow_elastic_jobs) */
        return 0;
    if (d->outcome != SCHED_PLACED) {
        if (ctl->slurm == NULL)
            queue_waiting(ctl, waiting, d->job_id, d->message);
        return 0;
    }
    const struct jobspec *js = ctl__spec_get(&ctl->specs, d->job_id);
    if (js == NULL)
        return 0;
    json_t *workers = json_array();
    for (int w = 0; w < d->num_workers; w++) {
        const sched_worker *sw = &d->workers[w];
        json_t *gpus = json_array();
        for (int g = 0; g < sw->ngpus; g++)
            json_array_append_new(gpus, json_integer(nodes[sw->node_index].gpu_ids[sw->gpus[g]]));
        json_array_append_new(workers, json_pack("{s:i, s:i, s:i, s:s, s:o, s:o}", "rank", sw->rank,
                                                 "local_rank", sw->local_rank, "node_rank",
                                                 sw->node_rank, "node_id", sw->node_id, "gpus",
                                                 gpus, "resources", bundle_json(js)));
    }
    int nports = js->backend == JOBSPEC_BACKEND_TENSORFLOW ? d->num_workers : 1;
    char *text = json_dumps(workers, JSON_COMPACT);
    int attempt = 0;
    int qs = text ? store_place(ctl->db, d->job_id, text, nports, &attempt, ctl->instance)
                  : DB_HARD_ERROR;
    free(text);
    json_decref(workers);
    if (qs == 1) {
        TY_INFO("control", "job %lld attempt %d: %d workers placed on %d nodes",
                (long long)d->job_id, attempt, d->num_workers, d->num_nodes);
        ctl__slurm_placed(ctl, d->job_id, attempt);
        ctl__send_launches(ctl, d->job_id, attempt, NULL);
    }
    return qs == 1;
}

/* Fetches and parses the specs of pending jobs not seen by an earlier pass. */
static void load_new_specs(struct control *ctl, const struct store_sched_rows *rows)
{
    int64_t *ids = calloc(rows->npending + 1, sizeof(*ids));
    if (ids == NULL)
        return;
    size_t n = 0;
    for (size_t i = 0; i < rows->npending; i++) {
        int64_t id = rows->pending[i].id < 0 ? -rows->pending[i].id : rows->pending[i].id;
        if (ctl__spec_get(&ctl->specs, id) == NULL)
            ids[n++] = id;
    }
    struct store_job_spec *specs = NULL;
    size_t nspecs = 0;
    if (n > 0 && store_job_specs(ctl->db, ids, n, &specs, &nspecs) > 0)
        for (size_t i = 0; i < nspecs; i++)
            ctl__spec_put(&ctl->specs, specs[i].id, specs[i].spec_json);
    store_job_specs_free(specs, nspecs);
    free(ids);
}

static void log_snapshot_note(void *arg, bool bug, const char *message)
{
    (void)arg;
    if (bug)
        TY_BUG("control", "%s", message);
    else
        TY_WARN("control", "%s", message);
}

/* What a live worker holds: its bundle's CPUs and the GPUs it was given. */
static struct quota_use worker_use(const struct store_sched_worker *w)
{
    struct quota_use u = {0, 0};
    json_t *r = json_loads(w->resources_json, 0, NULL);
    json_t *g = json_loads(w->gpus_json, 0, NULL);
    if (json_is_number(json_object_get(r, "CPU")))
        u.cpu_milli = (int64_t)(json_number_value(json_object_get(r, "CPU")) * 1000 + 0.5);
    u.gpus = (int64_t)json_array_size(g);
    json_decref(r);
    json_decref(g);
    return u;
}

/* The CPU and GPU limits per subject of `kind`: each row of the quotas table of that kind, a
 * field it leaves NULL taking the default. *limits (n entries, subjects borrowed from *rows) are
 * freed with free(); *rows with store_quota_rows_free. Returns 0, or -1 (no such limits this
 * pass). */
static int subject_limits(struct control *ctl, enum store_quota_kind kind, struct quota_use dflt,
                          struct store_quota_row **rows, size_t *n, struct quota_limit **limits)
{
    *limits = NULL;
    if (store_quota_rows(ctl->db, kind, rows, n) < 0)
        return -1;
    if (*n == 0)
        return 0;
    *limits = calloc(*n, sizeof(**limits));
    if (*limits == NULL)
        return -1;
    for (size_t i = 0; i < *n; i++) {
        const struct store_quota_row *q = &(*rows)[i];
        (*limits)[i] = (struct quota_limit){
            q->subject,
            {q->cpus >= 0 ? q->cpus * 1000 : dflt.cpu_milli, q->gpus >= 0 ? q->gpus : dflt.gpus}};
    }
    return 0;
}

/* Leaves out of this pass the pending jobs whose subject's live workers hold their quota of CPUs
 * or GPUs, with a waiting message saying so. The subject is the job's owner
 * (--max-cpus-per-user, --max-gpus-per-user, or the owner's row of the quotas table) or its
 * project (the project's row only: projects have no default limit). */
static void apply_resource_quota(struct control *ctl, const struct store_sched_rows *rows,
                                 const struct jobspec **specs, enum store_quota_kind kind,
                                 json_t *waiting)
{
    bool project = kind == STORE_QUOTA_PROJECT;
    struct quota_use dflt = {0, 0};
    if (!project)
        dflt = (struct quota_use){ctl->srv->cfg.max_cpus_per_user * 1000,
                                  ctl->srv->cfg.max_gpus_per_user};
    struct store_quota_row *qrows = NULL;
    size_t nq = 0, np = rows->npending, nr = rows->nworkers;
    struct quota_limit *limits = NULL;
    if (subject_limits(ctl, kind, dflt, &qrows, &nq, &limits) != 0 ||
        (nq == 0 && dflt.cpu_milli <= 0 && dflt.gpus <= 0) || np == 0) {
        free(limits);
        store_quota_rows_free(qrows, nq);
        return;
    }
    const char **running = calloc(nr + 1, sizeof(*running));
    struct quota_use *used = calloc(nr + 1, sizeof(*used));
    const char **subjects = calloc(np, sizeof(*subjects));
    struct quota_use *mins = calloc(np, sizeof(*mins)), *maxs = calloc(np, sizeof(*maxs));
    bool *ok = calloc(np, sizeof(*ok));
    if (running && used && subjects && mins && maxs && ok) {
        for (size_t i = 0; i < nr; i++) {
            running[i] = project ? rows->workers[i].project : rows->workers[i].owner;
            used[i] = worker_use(&rows->workers[i]);
        }
        for (size_t i = 0; i < np; i++) {
            const struct jobspec *sp = specs[i];
            subjects[i] = project ? rows->pending[i].project : rows->pending[i].owner;
            if (sp == NULL)
                continue;
            mins[i] = (struct quota_use){sp->cpu_milli * sp->num_workers_min,
                                         (int64_t)sp->gpu * sp->num_workers_min};
            maxs[i] = (struct quota_use){sp->cpu_milli * sp->num_workers_max,
                                         (int64_t)sp->gpu * sp->num_workers_max};
        }
        if (quota_admit_resources(limits, nq, dflt, running, used, nr, subjects, mins, maxs, np,
                                  ok) == 0) {
            for (size_t i = 0; i < np; i++) {
                if (ok[i] || specs[i] == NULL)
                    continue;
                specs[i] = NULL;
                if (rows->pending[i].id < 0)
                    continue; /* a growth probe: the job runs, it just does not grow */
                char msg[240];
                if (project)
                    snprintf(msg, sizeof(msg),
                             "waiting: project %s's running workers are at the project's quota "
                             "of CPUs or GPUs (PUT /api/v1/quotas/projects/%s)",
                             subjects[i], subjects[i]);
                else
                    snprintf(msg, sizeof(msg),
                             "waiting: %s's running workers are at their quota of CPUs or GPUs "
                             "(--max-cpus-per-user, --max-gpus-per-user, or the user's quota)",
                             subjects[i]);
                queue_waiting(ctl, waiting, rows->pending[i].id, msg);
            }
        }
    }
    free(running);
    free(used);
    free(subjects);
    free(mins);
    free(maxs);
    free(ok);
    free(limits);
    store_quota_rows_free(qrows, nq);
}

/* Leaves out of this pass (specs[i] = NULL) the pending jobs whose owner is at the quota of
 * running workers (--max-workers-per-user, quota.h), with a waiting message saying so. */
static void apply_quota(struct control *ctl, const struct store_sched_rows *rows,
                        const struct jobspec **specs, json_t *waiting)
{
    int64_t quota = ctl->srv->cfg.max_workers_per_user;
    size_t np = rows->npending, nr = rows->nworkers;
    if (quota <= 0)
        return;
    const char **running = calloc(nr + 1, sizeof(*running));
    const char **owners = calloc(np, sizeof(*owners));
    int *mins = calloc(np, sizeof(*mins));
    int *maxs = calloc(np, sizeof(*maxs));
    bool *ok = calloc(np, sizeof(*ok));
    if (running && owners && mins && maxs && ok) {
        for (size_t i = 0; i < nr; i++)
            running[i] = rows->workers[i].owner;
        for (size_t i = 0; i < np; i++) {
            owners[i] = rows->pending[i].owner;
            mins[i] = specs[i] ? specs[i]->num_workers_min : 0;
            maxs[i] = specs[i] ? specs[i]->num_workers_max : 0;
        }
        if (quota_admit(quota, running, nr, owners, mins, maxs, np, ok) == 0) {
            for (size_t i = 0; i < np; i++) {
                if (ok[i] || specs[i] == NULL)
                    continue;
                specs[i] = NULL;
                char msg[160];
                snprintf(msg, sizeof(msg),
                         "waiting: %s is at the quota of %lld running workers per user", owners[i],
                         (long long)quota);
                queue_waiting(ctl, waiting, rows->pending[i].id, msg);
            }
        }
    }
    free(running);
    free(owners);
    free(mins);
    free(maxs);
    free(ok);
}

/* The spec a growth probe is placed with: the job's, asking for 1 to (max - grow_from) more
 * workers. Returns probe, or NULL when it can grow by none. */
static const struct jobspec *probe_spec(const struct jobspec *js, int grow_from,
                                        struct jobspec *probe)
{
    if (js == NULL || js->num_workers_max - grow_from < 1)
        return NULL;
    *probe = *js;
    probe->num_workers_min = 1;
    probe->num_workers_max = js->num_workers_max - grow_from;
    return probe;
}

/* After a pass: the elastic jobs whose probe was placed have room to grow; one that has had room
 * for its elastic_resize_interval_s is restarted to grow (store_job_resize). ctl->grows keeps,
 * for the probes placed in this pass only, since when. */
static void grow_elastic_jobs(struct control *ctl, const struct store_sched_rows *rows,
                              const sched_result *result)
{
    struct ctl_grow *kept = NULL;
    double now = util_mono_s();
    for (size_t i = 0; i < rows->npending; i++) {
        const struct store_sched_pending *p = &rows->pending[i];
        if (p->id >= 0)
            continue;
        const sched_decision *d = result ? sched_result_find(result, p->id) : NULL;
        if (d == NULL || d->outcome != SCHED_PLACED)
            continue;
        struct ctl_grow **g = &ctl->grows;
        while (*g && (*g)->job != -p->id)
            g = &(*g)->next;
        struct ctl_grow *entry = *g;
        if (entry) {
            *g = entry->next;
        } else if ((entry = calloc(1, sizeof(*entry))) != NULL) {
            entry->job = -p->id;
            entry->since = now;
        } else {
            continue;
        }
        if (now - entry->since >= p->resize_interval_s) {
            char msg[200];
            snprintf(msg, sizeof(msg),
                     "room for %d more workers has been free for %d s (elastic_resize_interval_s)",
                     d->num_workers, p->resize_interval_s);
            TY_INFO("control", "job %lld: %s; restarting it to grow", (long long)entry->job, msg);
            if (store_job_resize(ctl->db, entry->job, msg) >= 0)
                ctl->dirty = true;
            free(entry);
            continue;
        }
        entry->next = kept;
        kept = entry;
    }
    while (ctl->grows) {
        struct ctl_grow *g = ctl->grows;
        ctl->grows = g->next;
        free(g);
    }
    ctl->grows = kept;
}

int ctl__schedule(struct control *ctl)
{
    struct store_sched_rows rows;
    int placed = 0;
    if (store_sched_snapshot(ctl->db, &rows) < 0) {
        store_sched_rows_free(&rows);
        return 0;
    }
    ctl__specs_next_pass(&ctl->specs);
    if (rows.npending == 0) {
        store_sched_rows_free(&rows);
        return 0;
    }
    load_new_specs(ctl, &rows);
    const struct jobspec **specs = calloc(rows.npending, sizeof(*specs));
    struct jobspec *probes = calloc(rows.npending, sizeof(*probes));
    struct ctl_snapshot snap = {0};
    sched_result *result = NULL;
    json_t *waiting = json_array();
    if (specs == NULL || probes == NULL || waiting == NULL)
        goto out;
    for (size_t i = 0; i < rows.npending; i++) {
        int64_t id = rows.pending[i].id;
        specs[i] = ctl__spec_get(&ctl->specs, id < 0 ? -id : id);
        if (id < 0)
            specs[i] = probe_spec(specs[i], rows.pending[i].grow_from, &probes[i]);
    }
    if (ctl->slurm) {
        int64_t *ids = calloc(rows.npending, sizeof(*ids));
        for (size_t i = 0; ids && i < rows.npending; i++)
            ids[i] = rows.pending[i].id;
        if (ids == NULL)
            goto out;
        ctl__slurm_filter(ctl, ids, rows.npending, specs);
        free(ids);
    }
    apply_quota(ctl, &rows, specs, waiting);
    apply_resource_quota(ctl, &rows, specs, STORE_QUOTA_USER, waiting);
    apply_resource_quota(ctl, &rows, specs, STORE_QUOTA_PROJECT, waiting);
    if (ctl_snapshot_build(&rows, specs, log_snapshot_note, NULL, &snap) != 0)
        goto out;
    if (sched_run_pass(snap.snap, (int64_t)time(NULL), &result) != 0)
        goto out;
    for (size_t k = 0; k < sched_result_count(result); k++)
        placed += commit_decision(ctl, sched_result_decision(result, k), snap.nodes, waiting);
    grow_elastic_jobs(ctl, &rows, result);
out:
    write_waiting(ctl, waiting);
    json_decref(waiting);
    sched_result_destroy(result);
    ctl_snapshot_free(&snap);
    free(probes);
    free(specs);
    store_sched_rows_free(&rows);
    return placed;
}

void ctl__send_stops(struct control *ctl, int64_t job)
{
    struct store_stop_target *targets = NULL;
    size_t n = 0;
    if (store_stop_targets(ctl->db, job, &targets, &n) <= 0)
        return;
    char job_text[32];
    snprintf(job_text, sizeof(job_text), "%lld", (long long)job);
    for (size_t i = 0; i < n; i++) {
        struct ctl_node *node = ctl__node_by_id(ctl, targets[i].node_id);
        if (node == NULL || node->conn == 0)
            continue;
        ctl__send_text(ctl, node->conn,
                       aproto_msg_stop(job_text, targets[i].attempt, ctl->srv->cfg.stop_grace_s,
                                       targets[i].notice_s));
    }
    store_stop_targets_free(targets, n);
}
