/* Building the scheduler snapshot of a pass from the store's rows; see control_snapshot.h. */
#include "control_snapshot.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CUSTOM 64

static void notef(ctl_snapshot_note_fn note, void *arg, bool bug, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void notef(ctl_snapshot_note_fn note, void *arg, bool bug, const char *fmt, ...)
{
    if (note == NULL)
        return;
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    note(arg, bug, message);
}

/* Resource object {"CPU": 1.5, "memory_mb": 100, "GPU": n|[ids], "<custom>": amount} → amounts.
 * `custom` entries point into `obj` (valid while it lives). */
static void parse_resources(json_t *obj, int64_t *cpu_milli, int64_t *memory_mb,
                            sched_custom *custom, size_t *ncustom)
{
    *cpu_milli = *memory_mb = 0;
    *ncustom = 0;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (strcmp(key, "CPU") == 0)
            *cpu_milli = (int64_t)llround(json_number_value(v) * 1000.0);
        else if (strcmp(key, "memory_mb") == 0)
            *memory_mb = (int64_t)json_number_value(v);
        else if (strcmp(key, "GPU") != 0 && json_is_number(v) && *ncustom < MAX_CUSTOM)
            custom[(*ncustom)++] =
                (sched_custom){key, (int64_t)llround(json_number_value(v) * 1000.0)};
    }
}

static void add_node(struct ctl_snapshot *s, const struct store_sched_node *row,
                     ctl_snapshot_note_fn note, void *arg)
{
    json_t *r = json_loads(row->resources_json, 0, NULL);
    struct ctl_node_gpus gpus = {0};
    size_t k;
    json_t *g;
    json_array_foreach(json_object_get(r, "GPU"), k, g)
    {
        if (gpus.ngpus < SCHED_MAX_GPUS_PER_NODE)
            gpus.gpu_ids[gpus.ngpus++] = (int)json_integer_value(g);
    }
    sched_custom custom[MAX_CUSTOM];
    sched_node_desc d = {.id = row->id,
                         .gpus = gpus.ngpus,
                         .custom = custom,
                         .gpu_type = row->gpu_type,
                         /* a node whose agent is disconnected takes no new workers until
                          * it registers again (issue 23, point 4) */
                         .alive = row->alive && !row->disconnected,
                         .draining = row->draining,
                         .disk_pressure = row->disk_pressure};
    parse_resources(r, &d.cpu_milli, &d.memory_mb, custom, &d.ncustom);
    size_t index;
    int rc = sched_add_node(s->snap, &d, &index);
    json_decref(r);
    if (rc != 0) {
        notef(note, arg, false, "node %s left out of scheduling: %s", row->id, sched_strerror(rc));
        return;
    }
    s->nodes[index] = gpus;
    s->nnodes = index + 1;
}

static int gpu_index(const struct ctl_node_gpus *n, int gpu_id)
{
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpu_ids[i] == gpu_id)
            return i;
    return -1;
}

/* Adds to a's amounts what worker `w` holds; custom names point into `r`. */
static void alloc_add_worker(const struct ctl_snapshot *s, sched_alloc_desc *a, sched_custom *ac,
                             json_t *r, const struct store_sched_worker *w)
{
    int64_t cpu, mem;
    sched_custom c[MAX_CUSTOM];
    size_t nc;
    parse_resources(r, &cpu, &mem, c, &nc);
    a->cpu_milli += cpu;
    a->memory_mb += mem;
    for (size_t k = 0; k < nc; k++) {
        size_t m = 0;
        while (m < a->ncustom && strcmp(ac[m].name, c[k].name) != 0)
            m++;
        if (m == a->ncustom && a->ncustom < MAX_CUSTOM)
            ac[a->ncustom++] = (sched_custom){c[k].name, 0};
        if (m < MAX_CUSTOM)
            ac[m].amount_milli += c[k].amount_milli;
    }
    long idx = sched_find_node(s->snap, w->node_id);
    json_t *gpus = json_loads(w->gpus_json, 0, NULL);
    size_t k;
    json_t *g;
    json_array_foreach(gpus, k, g)
    {
        int bit = idx >= 0 ? gpu_index(&s->nodes[idx], (int)json_integer_value(g)) : -1;
        if (bit >= 0)
            a->gpu_mask |= UINT64_C(1) << bit;
    }
    json_decref(gpus);
}

/* Adds the running job whose worker rows are w[0..n) to the snapshot: one alloc per node (the
 * rows are ordered by job, then node). Returns 0 or -1 when out of memory. */
static int add_running_job(struct ctl_snapshot *s, const struct store_sched_worker *w, size_t n,
                           ctl_snapshot_note_fn note, void *arg)
{
    sched_alloc_desc *allocs = calloc(n, sizeof(*allocs));
    sched_custom *customs = calloc(n * MAX_CUSTOM, sizeof(*customs));
    json_t **held = calloc(n, sizeof(*held)); /* resource objects the custom names point into */
    int rc = -1;
    if (allocs == NULL || customs == NULL || held == NULL)
        goto out;
    size_t nallocs = 0;
    for (size_t i = 0; i < n; i++) {
        if (nallocs == 0 || strcmp(allocs[nallocs - 1].node_id, w[i].node_id) != 0) {
            allocs[nallocs] = (sched_alloc_desc){.node_id = w[i].node_id,
                                                 .custom = &customs[nallocs * MAX_CUSTOM]};
            nallocs++;
        }
        held[i] = json_loads(w[i].resources_json, 0, NULL);
        alloc_add_worker(s, &allocs[nallocs - 1], &customs[(nallocs - 1) * MAX_CUSTOM], held[i],
                         &w[i]);
    }
    int64_t end = w[0].end_epoch < 0 ? SCHED_TIME_NEVER : w[0].end_epoch;
    int err = sched_add_running(s->snap, w[0].job, end, allocs, nallocs);
    if (err == SCHED_ENOMEM)
        goto out;
    if (err != 0)
        notef(note, arg, true, "job %lld's allocation does not fit the snapshot: %s",
              (long long)w[0].job, sched_strerror(err));
    rc = 0;
out:
    for (size_t i = 0; held && i < n; i++)
        json_decref(held[i]);
    free(held);
    free(customs);
    free(allocs);
    return rc;
}

static sched_strategy strategy_of(enum jobspec_strategy s)
{
    switch (s) {
    case JOBSPEC_STRATEGY_SPREAD:
        return SCHED_SPREAD;
    case JOBSPEC_STRATEGY_STRICT_PACK:
        return SCHED_STRICT_PACK;
    case JOBSPEC_STRATEGY_STRICT_SPREAD:
        return SCHED_STRICT_SPREAD;
    default:
        return SCHED_PACK;
    }
}

static int add_pending(struct ctl_snapshot *s, const struct store_sched_pending *row,
                       const struct jobspec *js, ctl_snapshot_note_fn note, void *arg)
{
    sched_custom custom[MAX_CUSTOM];
    size_t nc = js->n_custom < MAX_CUSTOM ? js->n_custom : MAX_CUSTOM;
    for (size_t k = 0; k < nc; k++)
        custom[k] = (sched_custom){js->custom[k].name, js->custom[k].amount_milli};
    sched_job_desc d = {
        .id = row->id,
        .priority = row->priority,
        .submit_time = row->created_epoch,
        .min_workers = js->num_workers_min,
        .max_workers = js->num_workers_max,
        .bundle = {js->cpu_milli, js->memory_mb, js->gpu, custom, nc},
        .strategy = strategy_of(js->strategy),
        .accelerator_type = js->accelerator_type,
        .timeout_s = (int64_t)ceil(js->timeout_s),
    };
    int rc = sched_add_pending(s->snap, &d);
    if (rc == SCHED_ENOMEM)
        return -1;
    if (rc != 0)
        notef(note, arg, false, "job %lld cannot be queued: %s", (long long)d.id,
              sched_strerror(rc));
    return 0;
}

int ctl_snapshot_build(const struct store_sched_rows *rows, const struct jobspec *const *specs,
                       ctl_snapshot_note_fn note, void *arg, struct ctl_snapshot *out)
{
    memset(out, 0, sizeof(*out));
    out->snap = sched_snapshot_create();
    out->nodes = calloc(rows->nnodes + 1, sizeof(*out->nodes));
    if (out->snap == NULL || out->nodes == NULL)
        goto oom;
    for (size_t i = 0; i < rows->nnodes; i++)
        add_node(out, &rows->nodes[i], note, arg);
    for (size_t i = 0; i < rows->nworkers;) {
        size_t j = i + 1;
        while (j < rows->nworkers && rows->workers[j].job == rows->workers[i].job)
            j++;
        if (add_running_job(out, &rows->workers[i], j - i, note, arg) != 0)
            goto oom;
        i = j;
    }
    for (size_t i = 0; i < rows->npending; i++)
        if (specs[i] && add_pending(out, &rows->pending[i], specs[i], note, arg) != 0)
            goto oom;
    return 0;
oom:
    ctl_snapshot_free(out);
    return -1;
}

void ctl_snapshot_free(struct ctl_snapshot *s)
{
    sched_snapshot_destroy(s->snap);
    free(s->nodes);
    memset(s, 0, sizeof(*s));
}
