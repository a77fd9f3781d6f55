/* The snapshot: nodes, running jobs and the pending queue, copied in by the caller. */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

sched_snapshot *sched_snapshot_create(void)
{
    sched_snapshot *snap = calloc(1, sizeof *snap);
    if (!snap)
        return NULL;
    /* The custom-amount pools are never NULL, so `pool + first` is always a valid pointer. */
    if (sched__grow(&snap->node_cust, &snap->cap_node_cust, 1, sizeof *snap->node_cust) ||
        sched__grow(&snap->run_cust, &snap->cap_run_cust, 1, sizeof *snap->run_cust) ||
        sched__grow(&snap->job_cust, &snap->cap_job_cust, 1, sizeof *snap->job_cust)) {
        sched_snapshot_destroy(snap);
        return NULL;
    }
    return snap;
}

void sched_snapshot_destroy(sched_snapshot *snap)
{
    if (!snap)
        return;
    for (size_t i = 0; i < snap->nnodes; i++)
        free(snap->nodes[i].id);
    free(snap->nodes);
    free(snap->node_hash);
    free(snap->node_cust);
    sched__names_free(&snap->types);
    sched__names_free(&snap->custom);
    free(snap->running);
    free(snap->ralloc);
    free(snap->run_cust);
    free(snap->jobs);
    free(snap->job_cust);
    free(snap->id_set);
    free(snap->id_used);
    free(snap);
}

/* ------------------------------------------------------------------------- node id hash */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static long node_hash_find(const sched_snapshot *snap, const char *id)
{
    if (!snap->node_hash_cap)
        return -1;
    size_t mask = snap->node_hash_cap - 1;
    for (size_t i = hash_str(id) & mask;; i = (i + 1) & mask) {
        int32_t v = snap->node_hash[i];
        if (v < 0)
            return -1;
        if (strcmp(snap->nodes[v].id, id) == 0)
            return v;
    }
}

/* Makes room for one more node id, rehashing into a table twice the node count or more.
 * Returns 0 or SCHED_ENOMEM (the old table is kept). */
static int node_hash_reserve(sched_snapshot *snap)
{
    if ((snap->nnodes + 1) * 2 <= snap->node_hash_cap)
        return SCHED_OK;
    size_t cap = snap->node_hash_cap ? snap->node_hash_cap * 2 : 64;
    int32_t *t = malloc(cap * sizeof *t);
    if (!t)
        return SCHED_ENOMEM;
    memset(t, 0xff, cap * sizeof *t);
    for (size_t n = 0; n < snap->nnodes; n++) {
        size_t i = hash_str(snap->nodes[n].id) & (cap - 1);
        while (t[i] >= 0)
            i = (i + 1) & (cap - 1);
        t[i] = (int32_t)n;
    }
    free(snap->node_hash);
    snap->node_hash = t;
    snap->node_hash_cap = cap;
    return SCHED_OK;
}

long sched_find_node(const sched_snapshot *snap, const char *node_id)
{
    if (!snap || !node_id)
        return -1;
    return node_hash_find(snap, node_id);
}

/* ------------------------------------------------------------------------- job id set */

static uint64_t hash_id(int64_t id)
{
    uint64_t z = (uint64_t)id + 0x9e3779b97f4a7c15ULL; /* splitmix64 finaliser */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static bool id_set_has(const sched_snapshot *snap, int64_t id)
{
    if (!snap->id_set_cap)
        return false;
    size_t mask = snap->id_set_cap - 1;
    for (size_t i = hash_id(id) & mask; snap->id_used[i]; i = (i + 1) & mask) {
        if (snap->id_set[i] == id)
            return true;
    }
    return false;
}

static void id_set_put(int64_t *set, uint8_t *used, size_t cap, int64_t id)
{
    size_t i = hash_id(id) & (cap - 1);
    while (used[i])
        i = (i + 1) & (cap - 1);
    used[i] = 1;
    set[i] = id;
}

/* Makes room for one more id. Returns 0 or SCHED_ENOMEM (the old set is kept). */
static int id_set_reserve(sched_snapshot *snap)
{
    if ((snap->id_set_n + 1) * 2 <= snap->id_set_cap)
        return SCHED_OK;
    size_t cap = snap->id_set_cap ? snap->id_set_cap * 2 : 64;
    int64_t *set = malloc(cap * sizeof *set);
    uint8_t *used = calloc(cap, 1);
    if (!set || !used) {
        free(set);
        free(used);
        return SCHED_ENOMEM;
    }
    for (size_t i = 0; i < snap->id_set_cap; i++) {
        if (snap->id_used[i])
            id_set_put(set, used, cap, snap->id_set[i]);
    }
    free(snap->id_set);
    free(snap->id_used);
    snap->id_set = set;
    snap->id_used = used;
    snap->id_set_cap = cap;
    return SCHED_OK;
}

/* ------------------------------------------------------------------------- validation */

static bool amount_ok(int64_t v)
{
    return v >= 0 && v <= SCHED_MAX_AMOUNT;
}

/* Names non-empty, amounts in range, no name twice. */
static bool custom_list_ok(const sched_custom *c, size_t n)
{
    if (n && !c)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!c[i].name || !c[i].name[0] || !amount_ok(c[i].amount_milli))
            return false;
        for (size_t k = 0; k < i; k++) {
            if (strcmp(c[k].name, c[i].name) == 0)
                return false;
        }
    }
    return true;
}

/* ------------------------------------------------------------------------- nodes */

int sched_add_node(sched_snapshot *snap, const sched_node_desc *d, size_t *index_out)
{
    if (!snap || !d || !d->id || !d->id[0] || !amount_ok(d->cpu_milli) ||
        !amount_ok(d->memory_mb) || d->gpus < 0 || d->gpus > SCHED_MAX_GPUS_PER_NODE ||
        !custom_list_ok(d->custom, d->ncustom) || snap->nnodes >= INT32_MAX)
        return SCHED_EINVAL;
    if (node_hash_find(snap, d->id) >= 0)
        return SCHED_EEXIST;
    if (node_hash_reserve(snap) ||
        sched__grow(&snap->nodes, &snap->cap_nodes, snap->nnodes + 1, sizeof *snap->nodes) ||
        sched__grow(&snap->node_cust, &snap->cap_node_cust, snap->nnode_cust + d->ncustom,
                    sizeof *snap->node_cust))
        return SCHED_ENOMEM;

    struct sched__node nd = {
        .type = -1,
        .schedulable = d->alive && !d->draining && !d->disk_pressure,
        .disk_pressure = d->alive && !d->draining && d->disk_pressure,
        .gpus = d->gpus,
        .cpu_total = d->cpu_milli,
        .mem_total = d->memory_mb,
        .cpu_free = d->cpu_milli,
        .mem_free = d->memory_mb,
        .gpu_free = d->gpus == 64 ? ~UINT64_C(0) : (UINT64_C(1) << d->gpus) - 1,
        .cust_first = (uint32_t)snap->nnode_cust,
    };
    if (d->gpu_type && d->gpu_type[0]) {
        nd.type = sched__names_intern(&snap->types, d->gpu_type, true);
        if (nd.type < 0)
            return SCHED_ENOMEM;
    }
    for (size_t i = 0; i < d->ncustom; i++) {
        int id = sched__names_intern(&snap->custom, d->custom[i].name, false);
        if (id < 0)
            return SCHED_ENOMEM;
        snap->node_cust[nd.cust_first + i] =
            (struct sched__ncust){.id = (uint32_t)id,
                                  .total = d->custom[i].amount_milli,
                                  .free = d->custom[i].amount_milli};
    }
    nd.id = strdup(d->id);
    if (!nd.id)
        return SCHED_ENOMEM;
    nd.ncust = (uint32_t)d->ncustom;
    snap->nnode_cust += d->ncustom;

    size_t idx = snap->nnodes++;
    snap->nodes[idx] = nd;
    size_t mask = snap->node_hash_cap - 1, h = hash_str(nd.id) & mask;
    while (snap->node_hash[h] >= 0)
        h = (h + 1) & mask;
    snap->node_hash[h] = (int32_t)idx;
    if (index_out)
        *index_out = idx;
    return SCHED_OK;
}

/* ------------------------------------------------------------------------- running jobs */

static struct sched__ncust *node_custom(sched_snapshot *snap, struct sched__node *nd, int id)
{
    for (uint32_t i = 0; i < nd->ncust; i++) {
        if ((int)snap->node_cust[nd->cust_first + i].id == id)
            return &snap->node_cust[nd->cust_first + i];
    }
    return NULL;
}

/* Adds (sign +1) or removes (-1) an allocation's custom amounts from a node's free amounts. */
static void apply_custom(sched_snapshot *snap, struct sched__node *nd,
                         const struct sched__amount *c, uint32_t n, int sign)
{
    for (uint32_t i = 0; i < n; i++)
        node_custom(snap, nd, (int)c[i].id)->free += sign * c[i].amount;
}

/* Takes allocation `a` from its node, recording custom amounts in snap->run_cust.
 * Returns 0, SCHED_ENOENT, SCHED_ERANGE or SCHED_ENOMEM with nothing taken. */
static int take_alloc(sched_snapshot *snap, const sched_alloc_desc *a, struct sched__ralloc *out)
{
    long n = a->node_id ? node_hash_find(snap, a->node_id) : -1;
    if (n < 0)
        return SCHED_ENOENT;
    struct sched__node *nd = &snap->nodes[n];
    if (a->cpu_milli > nd->cpu_free || a->memory_mb > nd->mem_free || (a->gpu_mask & ~nd->gpu_free))
        return SCHED_ERANGE;
    if (sched__grow(&snap->run_cust, &snap->cap_run_cust, snap->nrun_cust + a->ncustom,
                    sizeof *snap->run_cust))
        return SCHED_ENOMEM;
    *out = (struct sched__ralloc){.node = (uint32_t)n,
                                  .cpu = a->cpu_milli,
                                  .mem = a->memory_mb,
                                  .gpus = a->gpu_mask,
                                  .cust_first = (uint32_t)snap->nrun_cust};
    for (size_t i = 0; i < a->ncustom; i++) {
        if (a->custom[i].amount_milli == 0)
            continue;
        int id = sched__names_find(&snap->custom, a->custom[i].name, false);
        struct sched__ncust *nc = id < 0 ? NULL : node_custom(snap, nd, id);
        if (!nc || nc->free < a->custom[i].amount_milli)
            return SCHED_ERANGE;
        snap->run_cust[out->cust_first + out->ncust++] =
            (struct sched__amount){.id = (uint32_t)id, .amount = a->custom[i].amount_milli};
    }
    nd->cpu_free -= a->cpu_milli;
    nd->mem_free -= a->memory_mb;
    nd->gpu_free &= ~a->gpu_mask;
    apply_custom(snap, nd, snap->run_cust + out->cust_first, out->ncust, -1);
    snap->nrun_cust += out->ncust;
    return SCHED_OK;
}

int sched_add_running(sched_snapshot *snap, int64_t job_id, int64_t end_time,
                      const sched_alloc_desc *allocs, size_t nallocs)
{
    if (!snap || (nallocs && !allocs) || nallocs > UINT32_MAX)
        return SCHED_EINVAL;
    for (size_t i = 0; i < nallocs; i++) {
        if (!amount_ok(allocs[i].cpu_milli) || !amount_ok(allocs[i].memory_mb) ||
            !custom_list_ok(allocs[i].custom, allocs[i].ncustom))
            return SCHED_EINVAL;
    }
    if (id_set_has(snap, job_id))
        return SCHED_EEXIST;
    if (id_set_reserve(snap) ||
        sched__grow(&snap->running, &snap->cap_running, snap->nrunning + 1,
                    sizeof *snap->running) ||
        sched__grow(&snap->ralloc, &snap->cap_ralloc, snap->nralloc + nallocs,
                    sizeof *snap->ralloc))
        return SCHED_ENOMEM;

    size_t first = snap->nralloc, done = 0;
    int rc = SCHED_OK;
    for (; done < nallocs; done++) {
        rc = take_alloc(snap, &allocs[done], &snap->ralloc[first + done]);
        if (rc)
            break;
    }
    if (rc) { /* give back what was taken, newest first */
        while (done-- > 0) {
            struct sched__ralloc *ra = &snap->ralloc[first + done];
            struct sched__node *nd = &snap->nodes[ra->node];
            nd->cpu_free += ra->cpu;
            nd->mem_free += ra->mem;
            nd->gpu_free |= ra->gpus;
            apply_custom(snap, nd, snap->run_cust + ra->cust_first, ra->ncust, +1);
            snap->nrun_cust = ra->cust_first;
        }
        return rc;
    }
    snap->nralloc += nallocs;
    snap->running[snap->nrunning++] = (struct sched__running){
        .id = job_id, .end = end_time, .first = (uint32_t)first, .n = (uint32_t)nallocs};
    id_set_put(snap->id_set, snap->id_used, snap->id_set_cap, job_id);
    snap->id_set_n++;
    return SCHED_OK;
}

/* ------------------------------------------------------------------------- pending jobs */

int sched_add_pending(sched_snapshot *snap, const sched_job_desc *d)
{
    if (!snap || !d || d->min_workers < 1 || d->max_workers < d->min_workers ||
        d->max_workers > SCHED_MAX_WORKERS || (unsigned)d->strategy > SCHED_STRICT_SPREAD ||
        d->timeout_s < 0)
        return SCHED_EINVAL;
    const sched_bundle *b = &d->bundle;
    if (!amount_ok(b->cpu_milli) || !amount_ok(b->memory_mb) || b->gpus < 0 ||
        b->gpus > SCHED_MAX_WORKERS || !custom_list_ok(b->custom, b->ncustom))
        return SCHED_EINVAL;
    bool any = b->cpu_milli > 0 || b->memory_mb > 0 || b->gpus > 0;
    for (size_t i = 0; i < b->ncustom; i++)
        any = any || b->custom[i].amount_milli > 0;
    if (!any)
        return SCHED_EINVAL;
    if (id_set_has(snap, d->id))
        return SCHED_EEXIST;
    if (id_set_reserve(snap) ||
        sched__grow(&snap->jobs, &snap->cap_jobs, snap->njobs + 1, sizeof *snap->jobs) ||
        sched__grow(&snap->job_cust, &snap->cap_job_cust, snap->njob_cust + b->ncustom,
                    sizeof *snap->job_cust))
        return SCHED_ENOMEM;

    struct sched__job j = {
        .id = d->id,
        .priority = d->priority,
        .submit = d->submit_time,
        .min = d->min_workers,
        .max = d->max_workers,
        .req = {.cpu = b->cpu_milli,
                .mem = b->memory_mb,
                .gpus = b->gpus,
                .cust_first = (uint32_t)snap->njob_cust},
        .strategy = d->strategy,
        .accel = -1,
        .timeout = d->timeout_s,
    };
    if (d->accelerator_type && d->accelerator_type[0]) {
        j.accel = sched__names_intern(&snap->types, d->accelerator_type, true);
        if (j.accel < 0)
            return SCHED_ENOMEM;
    }
    for (size_t i = 0; i < b->ncustom; i++) {
        if (b->custom[i].amount_milli == 0)
            continue;
        int id = sched__names_intern(&snap->custom, b->custom[i].name, false);
        if (id < 0)
            return SCHED_ENOMEM;
        snap->job_cust[j.req.cust_first + j.req.ncust++] =
            (struct sched__amount){.id = (uint32_t)id, .amount = b->custom[i].amount_milli};
    }
    snap->njob_cust += j.req.ncust;
    snap->jobs[snap->njobs++] = j;
    id_set_put(snap->id_set, snap->id_used, snap->id_set_cap, d->id);
    snap->id_set_n++;
    return SCHED_OK;
}
