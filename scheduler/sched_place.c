/* Placement strategies: which nodes get how many workers of one gang job.
 *
 * Candidates come from a bucket index over the view: GPU jobs scan nodes by free GPUs (within the
 * job's accelerator type), other jobs by free whole CPUs. The key bounds each node's capacity
 * from above, so a scan starts at the smallest key that could hold what is asked; the exact
 * capacity (every resource, and the head's reservation for long backfill jobs) is then checked
 * node by node. Ties go to the lowest node index.
 *
 *   PACK          fewest nodes: while no single node can take the rest, take the node that fits
 *                 the most workers; then put the rest on the node that fits it most tightly
 *                 (best fit), which keeps whole nodes free for larger gangs.
 *   STRICT_PACK   the best-fitting single node.
 *   SPREAD        one worker on each of as many nodes as possible (tightest fits first), then
 *                 round-robin over them for the rest.
 *   STRICT_SPREAD one worker on each of `n` distinct nodes.
 *
 * With elastic jobs (need < want) the most workers up to `want` are placed. */
#include "sched_internal.h"

#include <stdlib.h>

/* How a job's candidates are scanned. */
struct cand {
    struct sched__index *ix;
    int kind;
    int cls_lo, cls_hi;
    int type; /* >= 0: nodes must have a GPU type that serves this accelerator type */
};

/* The smallest index key of a node that can hold r workers of j. */
static int lower_key(const struct sched__job *j, int kind, int64_t r)
{
    if (kind == SCHED__IX_GPU) {
        int64_t k = r * j->req.gpus;
        return k >= SCHED__GPU_KEYS ? SCHED__GPU_KEYS : (int)k;
    }
    int64_t k = r * j->req.cpu / 1000;
    return k >= SCHED__CPU_KEYS - 1 ? SCHED__CPU_KEYS - 1 : (int)k;
}

/* Most workers of j that a node in bucket `key` could hold (an upper bound), at most `limit`. */
static int64_t key_bound(const struct sched__job *j, int kind, int key, int64_t limit)
{
    int64_t b;
    if (kind == SCHED__IX_GPU)
        b = key / j->req.gpus;
    else if (j->req.cpu == 0 || key >= SCHED__CPU_KEYS - 1)
        b = limit;
    else
        b = ((int64_t)key * 1000 + 999) / j->req.cpu;
    return b < limit ? b : limit;
}

static void scan_keys(struct sched__scan *s, const struct cand *c, int from, int to)
{
    sched__scan_init(s, c->ix, c->cls_lo, c->cls_hi, from, to);
}

/* Next unchosen candidate of the right type, or -1. */
static long next_free(struct sched__pass *p, const struct cand *c, struct sched__scan *s)
{
    long nd;
    while ((nd = sched__scan_next(s)) >= 0) {
        if (p->mark[nd] == p->epoch)
            continue;
        if (c->type >= 0 && !sched__type_match(p, c->type, p->snap->nodes[nd].type))
            continue;
        return nd;
    }
    return -1;
}

static int pl_add(struct sched__pass *p, struct sched__placement *pl, long node, int count,
                  int limit)
{
    if (pl->n >= pl->cap) {
        size_t cap = pl->cap, cap2 = pl->cap, cap3 = pl->cap;
        if (sched__grow(&pl->node, &cap, pl->n + 1, sizeof *pl->node) ||
            sched__grow(&pl->count, &cap2, pl->n + 1, sizeof *pl->count) ||
            sched__grow(&pl->limit, &cap3, pl->n + 1, sizeof *pl->limit))
            return SCHED_ENOMEM;
        pl->cap = cap < cap2 ? (cap < cap3 ? cap : cap3) : (cap2 < cap3 ? cap2 : cap3);
    }
    pl->node[pl->n] = (uint32_t)node;
    pl->count[pl->n] = count;
    pl->limit[pl->n] = limit;
    pl->n++;
    p->mark[node] = p->epoch;
    return SCHED_OK;
}

/* An upper bound on what the strategy can place, from bucket counts alone (no node visited). */
static int64_t upper_bound(const struct sched__pass *p, const struct sched__job *j,
                           const struct cand *c, int64_t want)
{
    int64_t ub = 0;
    int lo = lower_key(j, c->kind, 1);
    for (int key = c->ix->nkey - 1; key >= lo && ub < want; key--) {
        int64_t per = key_bound(j, c->kind, key, want);
        for (int cls = c->cls_lo; cls <= c->cls_hi && ub < want; cls++) {
            if (c->kind == SCHED__IX_GPU && !sched__type_match(p, c->type, cls))
                continue;
            int64_t cnt = sched__index_count(c->ix, cls, key);
            if (!cnt)
                continue;
            if (j->strategy == SCHED_STRICT_PACK)
                ub = per > ub ? per : ub;
            else if (j->strategy == SCHED_STRICT_SPREAD)
                ub += cnt;
            else
                ub += cnt * per;
        }
    }
    return ub < want ? ub : want;
}

static int place_pack(struct sched__pass *p, struct sched__view *v, const struct sched__shadow *sh,
                      const struct sched__job *j, const struct cand *c, int want,
                      struct sched__placement *pl)
{
    const struct sched__amount *qc = sched__job_cust(p, j);
    struct sched__scan big;
    bool big_started = false;
    int nkey = c->ix->nkey;
    long nd;
    while (pl->placed < want) {
        int r = want - pl->placed;
        struct sched__scan s;
        scan_keys(&s, c, lower_key(j, c->kind, r), nkey - 1);
        while ((nd = next_free(p, c, &s)) >= 0) {
            if (sched__cap(v, sh, &j->req, qc, (size_t)nd, r) >= r)
                break;
        }
        if (nd >= 0) {
            if (pl_add(p, pl, nd, r, r))
                return SCHED_ENOMEM;
            pl->placed = want;
            break;
        }
        if (!big_started) {
            scan_keys(&big, c, nkey - 1, lower_key(j, c->kind, 1));
            big_started = true;
        }
        int got = 0;
        while ((nd = next_free(p, c, &big)) >= 0) {
            got = sched__cap(v, sh, &j->req, qc, (size_t)nd, r);
            if (got >= 1)
                break;
        }
        if (nd < 0)
            break;
        if (pl_add(p, pl, nd, got, got))
            return SCHED_ENOMEM;
        pl->placed += got;
    }
    return SCHED_OK;
}

static int place_strict_pack(struct sched__pass *p, struct sched__view *v,
                             const struct sched__shadow *sh, const struct sched__job *j,
                             const struct cand *c, int need, int want, struct sched__placement *pl)
{
    const struct sched__amount *qc = sched__job_cust(p, j);
    struct sched__scan s;
    long nd, best = -1;
    int best_cap = 0;
    scan_keys(&s, c, lower_key(j, c->kind, want), c->ix->nkey - 1);
    while ((nd = next_free(p, c, &s)) >= 0) {
        if (sched__cap(v, sh, &j->req, qc, (size_t)nd, want) >= want) {
            best = nd;
            best_cap = want;
            break;
        }
    }
    if (best < 0) { /* the largest fit: wanted for elastic jobs and for the message */
        scan_keys(&s, c, c->ix->nkey - 1, lower_key(j, c->kind, best_cap + 1));
        while ((nd = next_free(p, c, &s)) >= 0) {
            int got = sched__cap(v, sh, &j->req, qc, (size_t)nd, want);
            if (got > best_cap) {
                best = nd;
                best_cap = got;
                if (best_cap == want - 1)
                    break;
            }
        }
    }
    if (best < 0 || best_cap < need) {
        pl->fit = best_cap;
        return SCHED_OK;
    }
    pl->placed = best_cap;
    return pl_add(p, pl, best, best_cap, best_cap);
}

static int place_spread(struct sched__pass *p, struct sched__view *v,
                        const struct sched__shadow *sh, const struct sched__job *j,
                        const struct cand *c, int want, struct sched__placement *pl)
{
    const struct sched__amount *qc = sched__job_cust(p, j);
    struct sched__scan s;
    long nd;
    scan_keys(&s, c, lower_key(j, c->kind, 1), c->ix->nkey - 1);
    while (pl->n < (size_t)want && (nd = next_free(p, c, &s)) >= 0) {
        int got = sched__cap(v, sh, &j->req, qc, (size_t)nd, want);
        if (got >= 1 && pl_add(p, pl, nd, 1, got))
            return SCHED_ENOMEM;
    }
    pl->placed = (int)pl->n;
    if (j->strategy == SCHED_STRICT_SPREAD)
        return SCHED_OK;
    bool progress = true;
    while (pl->placed < want && progress) {
        progress = false;
        for (size_t i = 0; i < pl->n && pl->placed < want; i++) {
            if (pl->count[i] < pl->limit[i]) {
                pl->count[i]++;
                pl->placed++;
                progress = true;
            }
        }
    }
    return SCHED_OK;
}

int sched__place(struct sched__pass *p, struct sched__view *v, const struct sched__shadow *sh,
                 const struct sched__job *j, int need, int want, struct sched__placement *pl)
{
    pl->n = 0;
    pl->placed = 0;
    pl->fit = 0;
    if (++p->epoch == 0) { /* wrapped: forget every old mark */
        for (size_t i = 0; i < p->n; i++)
            p->mark[i] = 0;
        p->epoch = 1;
    }
    struct cand c = {.kind = j->req.gpus ? SCHED__IX_GPU : SCHED__IX_CPU, .type = -1};
    c.ix = sched__view_index(v, p, c.kind);
    if (!c.ix)
        return SCHED_ENOMEM;
    c.type = j->accel; /* an accelerator type matches node types by tokens: scan every class */
    if (c.kind == SCHED__IX_GPU) {
        c.cls_lo = 0;
        c.cls_hi = j->accel >= 0 ? (int)p->ntypes - 1 : (int)p->ntypes;
    }

    int64_t ub = upper_bound(p, j, &c, want);
    if (ub < need) {
        pl->fit = (int)ub;
        return 0;
    }
    int rc;
    switch (j->strategy) {
    case SCHED_STRICT_PACK:
        rc = place_strict_pack(p, v, sh, j, &c, need, want, pl);
        break;
    case SCHED_SPREAD:
    case SCHED_STRICT_SPREAD:
        rc = place_spread(p, v, sh, j, &c, want, pl);
        break;
    case SCHED_PACK:
    default:
        rc = place_pack(p, v, sh, j, &c, want, pl);
        break;
    }
    if (rc)
        return rc;
    if (j->strategy != SCHED_STRICT_PACK && pl->placed < need) {
        pl->fit = pl->placed;
        pl->placed = 0;
        pl->n = 0;
        return 0;
    }
    return pl->placed >= need ? 1 : 0;
}

void sched__placement_free(struct sched__placement *pl)
{
    free(pl->node);
    free(pl->count);
    free(pl->limit);
    pl->node = NULL;
    pl->count = NULL;
    pl->limit = NULL;
    pl->n = pl->cap = 0;
}
