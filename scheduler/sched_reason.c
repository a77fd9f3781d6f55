/* "Can this job ever fit?" and, when not, which resource is short.
 *
 * Schedulable nodes are grouped into classes of equal totals (GPU type, GPUs, CPU, memory,
 * custom), so asking whether a job fits the idle cluster costs one step per class rather than per
 * node: real clusters are a few hardware shapes repeated. */
#include "sched_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- classes */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t node_hash(const struct sched__pass *p, size_t i)
{
    const struct sched__node *nd = &p->snap->nodes[i];
    uint64_t h =
        mix(mix(mix(mix(0, (uint64_t)nd->type), (uint64_t)nd->gpus), (uint64_t)nd->cpu_total),
            (uint64_t)nd->mem_total);
    for (size_t k = 0; k < p->ncust; k++)
        h = mix(h, (uint64_t)p->tot_cust[i * p->ncust + k]);
    return h;
}

static bool same_shape(const struct sched__pass *p, size_t a, size_t b)
{
    const struct sched__node *x = &p->snap->nodes[a], *y = &p->snap->nodes[b];
    return x->type == y->type && x->gpus == y->gpus && x->cpu_total == y->cpu_total &&
           x->mem_total == y->mem_total &&
           memcmp(p->tot_cust + a * p->ncust, p->tot_cust + b * p->ncust,
                  p->ncust * sizeof *p->tot_cust) == 0;
}

/* Fills p->tot_cust and groups the schedulable nodes into p->iclass. Returns 0 or SCHED_ENOMEM. */
int sched__idle_build(struct sched__pass *p)
{
    const sched_snapshot *snap = p->snap;
    p->tot_cust = calloc(p->n * p->ncust + 1, sizeof *p->tot_cust);
    if (!p->tot_cust)
        return SCHED_ENOMEM;
    for (size_t i = 0; i < p->n; i++) {
        const struct sched__node *nd = &snap->nodes[i];
        for (uint32_t k = 0; k < nd->ncust; k++) {
            const struct sched__ncust *c = &snap->node_cust[nd->cust_first + k];
            p->tot_cust[i * p->ncust + c->id] = c->total;
        }
    }
    size_t cap = 16;
    while (cap < 2 * p->n)
        cap *= 2;
    int32_t *table = malloc(cap * sizeof *table);
    p->iclass = malloc((p->n + 1) * sizeof *p->iclass);
    if (!table || !p->iclass) {
        free(table);
        return SCHED_ENOMEM;
    }
    memset(table, 0xff, cap * sizeof *table);
    for (size_t i = 0; i < p->n; i++) {
        const struct sched__node *nd = &snap->nodes[i];
        if (!nd->schedulable)
            continue;
        p->nsched++;
        size_t h = node_hash(p, i) & (cap - 1);
        while (table[h] >= 0 && !same_shape(p, p->iclass[table[h]].rep, i))
            h = (h + 1) & (cap - 1);
        if (table[h] < 0) {
            table[h] = (int32_t)p->niclass;
            p->iclass[p->niclass++] = (struct sched__iclass){.type = nd->type,
                                                             .gpus = nd->gpus,
                                                             .cpu = nd->cpu_total,
                                                             .mem = nd->mem_total,
                                                             .rep = i,
                                                             .count = 0};
        }
        p->iclass[table[h]].count++;
    }
    free(table);
    return SCHED_OK;
}

/* Workers of j (at most limit) that one idle node of class c holds. */
static int64_t class_cap(const struct sched__pass *p, const struct sched__iclass *c,
                         const struct sched__job *j, int64_t limit)
{
    const struct sched__amount *qc = sched__job_cust(p, j);
    int64_t n = limit;
    if (j->req.gpus && c->gpus / j->req.gpus < n)
        n = c->gpus / j->req.gpus;
    if (j->req.cpu && c->cpu / j->req.cpu < n)
        n = c->cpu / j->req.cpu;
    if (j->req.mem && c->mem / j->req.mem < n)
        n = c->mem / j->req.mem;
    for (uint32_t i = 0; i < j->req.ncust; i++) {
        int64_t t = p->tot_cust[c->rep * p->ncust + qc[i].id] / qc[i].amount;
        if (t < n)
            n = t;
    }
    return n;
}

static bool eligible(const struct sched__pass *p, const struct sched__iclass *c,
                     const struct sched__job *j)
{
    return sched__type_match(p, j->accel, c->type);
}

/* ------------------------------------------------------------------------- reasons */

/* One resource of a bundle, for naming the short one. */
struct dim {
    const char *name;
    bool milli;
    int64_t need;    /* per worker */
    int64_t largest; /* on one eligible node */
    int64_t workers; /* the idle cluster's total in workers of this resource alone */
};

/* Lists the bundle's resources with the largest node total and the cluster's capacity each.
 * Returns how many were written to d (at most 3 + custom). */
static size_t dims_of(const struct sched__pass *p, const struct sched__job *j, struct dim *d,
                      size_t max, int64_t limit)
{
    const struct sched__amount *qc = sched__job_cust(p, j);
    size_t n = 0;
    if (j->req.gpus)
        d[n++] = (struct dim){"GPU", false, j->req.gpus, 0, 0};
    if (j->req.cpu)
        d[n++] = (struct dim){"CPU", true, j->req.cpu, 0, 0};
    if (j->req.mem)
        d[n++] = (struct dim){"memory_mb", false, j->req.mem, 0, 0};
    for (uint32_t i = 0; i < j->req.ncust && n < max; i++)
        d[n++] = (struct dim){p->snap->custom.v[qc[i].id], true, qc[i].amount, 0, 0};
    for (size_t c = 0; c < p->niclass; c++) {
        const struct sched__iclass *cl = &p->iclass[c];
        if (!eligible(p, cl, j))
            continue;
        size_t k = 0, ci = 0;
        int64_t tot[3] = {cl->gpus, cl->cpu, cl->mem};
        const int64_t need[3] = {j->req.gpus, j->req.cpu, j->req.mem};
        for (int r = 0; r < 3; r++) {
            if (!need[r])
                continue;
            if (tot[r] > d[k].largest)
                d[k].largest = tot[r];
            int64_t w = tot[r] / need[r];
            d[k].workers += cl->count * (w < limit ? w : limit);
            k++;
        }
        for (; k < n; k++, ci++) {
            int64_t t = p->tot_cust[cl->rep * p->ncust + qc[ci].id];
            if (t > d[k].largest)
                d[k].largest = t;
            int64_t w = t / qc[ci].amount;
            d[k].workers += cl->count * (w < limit ? w : limit);
        }
    }
    return n;
}

static const char *amount(char *buf, size_t len, const struct dim *d, int64_t v)
{
    if (d->milli)
        return sched__fmt_milli(buf, len, v);
    snprintf(buf, len, "%" PRId64, v);
    return buf;
}

/* "no node has 4 GPU of type H100 free even when idle (largest: 2)" for the first resource of
 * which `times` workers exceed every node. Returns false when each resource alone would fit. */
static bool name_short_dim(const struct sched__pass *p, const struct sched__job *j,
                           const struct dim *d, size_t nd, int64_t times, char *buf, size_t len)
{
    char a[32], b[32], type[160] = "";
    if (j->accel >= 0 && j->req.gpus)
        snprintf(type, sizeof type, " of type %s", p->snap->types.v[j->accel]);
    for (size_t i = 0; i < nd; i++) {
        if (d[i].need * times > d[i].largest) {
            snprintf(buf, len, "no node has %s %s%s free even when idle (largest: %s)",
                     amount(a, sizeof a, &d[i], d[i].need * times), d[i].name,
                     i == 0 && j->req.gpus ? type : "", /* GPUs, when asked, come first */
                     amount(b, sizeof b, &d[i], d[i].largest));
            return true;
        }
    }
    return false;
}

/* Writes why job j (its minimum of workers) cannot fit the idle cluster. */
static void explain(const struct sched__pass *p, const struct sched__job *j, int64_t elig_nodes,
                    int64_t fit, bool one_fits, char *buf, size_t len)
{
    const char *tname = j->accel >= 0 ? p->snap->types.v[j->accel] : NULL;
    if (p->nsched == 0) {
        size_t full = 0;
        for (size_t i = 0; i < p->n; i++)
            full += p->snap->nodes[i].disk_pressure;
        if (full > 0)
            snprintf(buf, len,
                     "no schedulable node (%zu registered; %zu alive and not draining, under disk "
                     "pressure: its agent's data directory is short of free space)",
                     p->n, full);
        else
            snprintf(buf, len, "no schedulable node (%zu registered, none alive and not draining)",
                     p->n);
        return;
    }
    if (elig_nodes == 0) {
        snprintf(buf, len, "no schedulable node has GPU type %s", tname);
        return;
    }
    struct dim d[16];
    size_t nd = dims_of(p, j, d, sizeof d / sizeof d[0], j->min);
    if (!one_fits) {
        if (!name_short_dim(p, j, d, nd, 1, buf, len))
            snprintf(buf, len,
                     "no node fits one worker even when idle (each resource fits "
                     "some node, but not all on the same one)");
        return;
    }
    switch (j->strategy) {
    case SCHED_STRICT_PACK: {
        char tail[160];
        if (name_short_dim(p, j, d, nd, j->min, buf, len)) {
            snprintf(tail, sizeof tail, "; STRICT_PACK puts all %d workers on one node", j->min);
            size_t used = strlen(buf);
            snprintf(buf + used, len - used, "%s", tail);
        } else {
            snprintf(buf, len,
                     "no node fits %d workers even when idle (largest fits %" PRId64
                     "); STRICT_PACK puts all workers on one node",
                     j->min, fit);
        }
        return;
    }
    case SCHED_STRICT_SPREAD:
        snprintf(buf, len, "needs %d nodes%s%s for STRICT_SPREAD, %" PRId64 " schedulable", j->min,
                 tname ? " of type " : "", tname ? tname : "", fit);
        return;
    default: {
        const char *by = "the combination of resources per node";
        int64_t least = INT64_MAX;
        for (size_t i = 0; i < nd; i++) {
            if (d[i].workers < least && d[i].workers < j->min) {
                least = d[i].workers;
                by = d[i].name;
            }
        }
        snprintf(buf, len,
                 "the cluster fits %" PRId64 " of %d workers even when idle (limited by %s)", fit,
                 j->min, by);
        return;
    }
    }
}

bool sched__idle_fits(const struct sched__pass *p, const struct sched__job *j, char *buf,
                      size_t len)
{
    int64_t k = j->min, sum = 0, best = 0, nodes = 0, elig = 0;
    for (size_t c = 0; c < p->niclass; c++) {
        const struct sched__iclass *cl = &p->iclass[c];
        if (!eligible(p, cl, j))
            continue;
        elig += cl->count;
        int64_t cap = class_cap(p, cl, j, k);
        if (cap <= 0)
            continue;
        nodes += cl->count;
        sum += cl->count * cap;
        if (cap > best)
            best = cap;
        if (sum >= k && j->strategy != SCHED_STRICT_PACK && j->strategy != SCHED_STRICT_SPREAD)
            return true;
    }
    int64_t fit;
    switch (j->strategy) {
    case SCHED_STRICT_PACK:
        fit = best;
        break;
    case SCHED_STRICT_SPREAD:
        fit = nodes;
        break;
    default:
        fit = sum;
        break;
    }
    if (fit >= k)
        return true;
    explain(p, j, elig, fit, best > 0, buf, len);
    return false;
}
