/* EASY backfill: the head job's reservation.
 *
 * The first job in queue order that cannot start now (and could start on the idle cluster) is the
 * head. Starting from what is free now, running jobs (and jobs placed earlier in this pass) are
 * released in order of expected end time until the head fits: that time is its reservation, and
 * the nodes it would take then are reserved. For each reserved node the shadow records what is
 * left at that time after the head has taken its share: a job that would still run then may use at
 * most that much there, so it cannot delay the head. Jobs that end before the reservation may use
 * anything free now. A job without timeout runs "forever": when the head must wait for one, the
 * reservation time is unknown (SCHED_TIME_NEVER) and only the shadow rule applies.
 *
 * Feasibility while releasing is kept incrementally per node (sum, max and count of per-node
 * capacities), so each release costs only the nodes it touches. */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

struct rel {
    int64_t end, id;
    uint32_t idx;
    bool placed; /* from this pass (p->placed) rather than the snapshot */
};

static bool rel_before(const struct rel *a, const struct rel *b)
{
    return a->end != b->end ? a->end < b->end : a->id < b->id;
}

static void sift_down(struct rel *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && rel_before(&h[l], &h[m]))
            m = l;
        if (l + 1 < n && rel_before(&h[l + 1], &h[m]))
            m = l + 1;
        if (m == i)
            return;
        struct rel t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static struct rel heap_pop(struct rel *h, size_t *n)
{
    struct rel top = h[0];
    h[0] = h[--*n];
    sift_down(h, *n, 0);
    return top;
}

/* Per-node capacities for the head on the future view, and their aggregates. */
struct feas {
    const struct sched__job *j;
    int *cap;
    int64_t sum, max, nodes;
};

static bool node_eligible(const struct sched__pass *p, const struct sched__job *j, size_t i)
{
    const struct sched__node *nd = &p->snap->nodes[i];
    return nd->schedulable && sched__type_match(p, j->accel, nd->type);
}

static void feas_update(struct feas *f, const struct sched__pass *p, const struct sched__view *v,
                        size_t i)
{
    if (!node_eligible(p, f->j, i))
        return;
    int old = f->cap[i];
    int c = sched__cap(v, NULL, &f->j->req, sched__job_cust(p, f->j), i, f->j->min);
    f->cap[i] = c;
    f->sum += c - old;
    f->nodes += (c > 0) - (old > 0);
    if (c > f->max)
        f->max = c;
}

static bool feas_ok(const struct feas *f)
{
    switch (f->j->strategy) {
    case SCHED_STRICT_PACK:
        return f->max >= f->j->min;
    case SCHED_STRICT_SPREAD:
        return f->nodes >= f->j->min;
    default:
        return f->sum >= f->j->min;
    }
}

/* Gives back what release r holds to the future view, updating the head's capacities. */
static void release(struct sched__pass *p, struct sched__view *fut, struct feas *f,
                    const struct rel *r)
{
    const sched_snapshot *snap = p->snap;
    if (!r->placed) {
        const struct sched__running *run = &snap->running[r->idx];
        for (uint32_t a = 0; a < run->n; a++) {
            const struct sched__ralloc *ra = &snap->ralloc[run->first + a];
            fut->cpu[ra->node] += ra->cpu;
            fut->mem[ra->node] += ra->mem;
            fut->gpu[ra->node] |= ra->gpus;
            for (uint32_t k = 0; k < ra->ncust; k++) {
                const struct sched__amount *c = &snap->run_cust[ra->cust_first + k];
                fut->cust[ra->node * p->ncust + c->id] += c->amount;
            }
            feas_update(f, p, fut, ra->node);
        }
        return;
    }
    const struct sched__placed *pj = &p->placed[r->idx];
    const struct sched__amount *qc = sched__job_cust(p, pj->job);
    for (uint32_t a = 0; a < pj->n; a++) {
        const struct sched__pnode *pn = &p->pnodes[pj->first + a];
        fut->cpu[pn->node] += pn->count * pj->job->req.cpu;
        fut->mem[pn->node] += pn->count * pj->job->req.mem;
        fut->gpu[pn->node] |= pn->gpus;
        for (uint32_t k = 0; k < pj->job->req.ncust; k++)
            fut->cust[pn->node * p->ncust + qc[k].id] += pn->count * qc[k].amount;
        feas_update(f, p, fut, pn->node);
    }
}

/* Records what the reservation `pl` leaves over on its nodes at its start (view fut).
 * Returns 0 or SCHED_ENOMEM. */
static int fill_shadow(struct sched__pass *p, const struct sched__job *j,
                       const struct sched__view *fut, const struct sched__placement *pl)
{
    struct sched__shadow *sh = &p->shadow;
    size_t n = pl->n, nc = p->ncust;
    sh->slot = malloc((p->n + 1) * sizeof *sh->slot);
    sh->cpu = malloc((n + 1) * sizeof *sh->cpu);
    sh->mem = malloc((n + 1) * sizeof *sh->mem);
    sh->gpu = malloc((n + 1) * sizeof *sh->gpu);
    sh->cust = calloc(n * nc + 1, sizeof *sh->cust);
    if (!sh->slot || !sh->cpu || !sh->mem || !sh->gpu || !sh->cust)
        return SCHED_ENOMEM;
    memset(sh->slot, 0xff, (p->n + 1) * sizeof *sh->slot);
    const struct sched__amount *qc = sched__job_cust(p, j);
    for (size_t s = 0; s < n; s++) {
        size_t nd = pl->node[s];
        int64_t c = pl->count[s];
        sh->slot[nd] = (int32_t)s;
        sh->cpu[s] = fut->cpu[nd] - c * j->req.cpu;
        sh->mem[s] = fut->mem[nd] - c * j->req.mem;
        sh->gpu[s] = __builtin_popcountll(fut->gpu[nd]) - c * j->req.gpus;
        memcpy(sh->cust + s * nc, fut->cust + nd * nc, nc * sizeof *sh->cust);
        for (uint32_t k = 0; k < j->req.ncust; k++)
            sh->cust[s * nc + qc[k].id] -= c * qc[k].amount;
    }
    sh->nslot = n;
    return SCHED_OK;
}

int sched__reserve_head(struct sched__pass *p, const struct sched__job *j)
{
    const sched_snapshot *snap = p->snap;
    p->have_head = true;
    p->head_id = j->id;
    p->head_start = SCHED_TIME_NEVER;

    struct sched__view fut;
    struct feas f = {.j = j};
    size_t nh = snap->nrunning + p->nplaced;
    struct rel *heap = malloc((nh + 1) * sizeof *heap);
    f.cap = calloc(p->n + 1, sizeof *f.cap);
    if (!heap || !f.cap || sched__view_copy(&fut, &p->now)) {
        free(heap);
        free(f.cap);
        return SCHED_ENOMEM;
    }
    for (size_t i = 0; i < snap->nrunning; i++)
        heap[i] = (struct rel){snap->running[i].end, snap->running[i].id, (uint32_t)i, false};
    for (size_t i = 0; i < p->nplaced; i++)
        heap[snap->nrunning + i] =
            (struct rel){p->placed[i].end, p->placed[i].job->id, (uint32_t)i, true};
    for (size_t i = nh / 2; i-- > 0;)
        sift_down(heap, nh, i);
    for (size_t i = 0; i < p->n; i++)
        feas_update(&f, p, &fut, i);

    bool ok = feas_ok(&f);
    int64_t t = p->t_now;
    while (!ok && nh) {
        t = heap[0].end;
        while (nh && heap[0].end == t) {
            struct rel r = heap_pop(heap, &nh);
            release(p, &fut, &f, &r);
        }
        ok = feas_ok(&f);
    }
    int rc = SCHED_OK;
    if (ok) {
        p->head_start = t < p->t_now ? p->t_now : t;
        int placed = sched__place(p, &fut, NULL, j, j->min, j->min, &p->pl);
        if (placed < 0)
            rc = placed;
        else if (placed > 0)
            rc = fill_shadow(p, j, &fut, &p->pl);
    }
    sched__view_free(&fut);
    free(heap);
    free(f.cap);
    return rc;
}
