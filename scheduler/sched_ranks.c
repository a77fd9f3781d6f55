/* Rank assignment and applying a placement (DESIGN §3).
 *
 * Nodes are ordered by node index; node rank i is the i-th of them and node rank 0 holds rank 0
 * (MASTER_ADDR). Ranks are contiguous within a node, local ranks count from 0, and each node's
 * workers take its lowest free GPU indices in ascending order, so local rank 0 has the lowest. */
#include "sched_internal.h"

#include <stdlib.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts the placement's (node, count) pairs by node. Returns 0 or SCHED_ENOMEM. */
static int sort_by_node(struct sched__placement *pl)
{
    if (pl->n <= 32) { /* insertion sort: gangs span few nodes */
        for (size_t i = 1; i < pl->n; i++) {
            uint32_t nd = pl->node[i];
            int c = pl->count[i];
            size_t k = i;
            for (; k > 0 && pl->node[k - 1] > nd; k--) {
                pl->node[k] = pl->node[k - 1];
                pl->count[k] = pl->count[k - 1];
            }
            pl->node[k] = nd;
            pl->count[k] = c;
        }
        return SCHED_OK;
    }
    uint64_t *keys = malloc(pl->n * sizeof *keys);
    if (!keys)
        return SCHED_ENOMEM;
    for (size_t i = 0; i < pl->n; i++)
        keys[i] = (uint64_t)pl->node[i] << 32 | (uint32_t)pl->count[i];
    qsort(keys, pl->n, sizeof *keys, cmp_u64);
    for (size_t i = 0; i < pl->n; i++) {
        pl->node[i] = (uint32_t)(keys[i] >> 32);
        pl->count[i] = (int)(uint32_t)keys[i];
    }
    free(keys);
    return SCHED_OK;
}

/* Takes the lowest `k` set bits of *mask, writing their indices ascending to out. Returns them. */
static uint64_t take_lowest_gpus(uint64_t *mask, int k, int *out)
{
    uint64_t taken = 0, m = *mask;
    for (int i = 0; i < k; i++) {
        int bit = __builtin_ctzll(m);
        out[i] = bit;
        taken |= UINT64_C(1) << bit;
        m &= m - 1;
    }
    *mask &= ~taken;
    return taken;
}

/* Subtracts c workers of j from node `nd` of the shadow, when the node is reserved. */
static void take_shadow(struct sched__pass *p, const struct sched__job *j, size_t nd, int64_t c)
{
    int32_t s = p->shadow.slot ? p->shadow.slot[nd] : -1;
    if (s < 0)
        return;
    const struct sched__amount *qc = sched__job_cust(p, j);
    p->shadow.cpu[s] -= c * j->req.cpu;
    p->shadow.mem[s] -= c * j->req.mem;
    p->shadow.gpu[s] -= c * j->req.gpus;
    for (uint32_t i = 0; i < j->req.ncust; i++)
        p->shadow.cust[(size_t)s * p->ncust + qc[i].id] -= c * qc[i].amount;
}

/* Remembers what a job placed before the head will release at its end. */
static int record_placed(struct sched__pass *p, const struct sched__job *j, size_t first)
{
    if (sched__grow(&p->placed, &p->cap_placed, p->nplaced + 1, sizeof *p->placed))
        return SCHED_ENOMEM;
    int64_t end = SCHED_TIME_NEVER;
    if (j->timeout > 0 && j->timeout < SCHED_TIME_NEVER - p->t_now)
        end = p->t_now + j->timeout;
    p->placed[p->nplaced++] = (struct sched__placed){
        .job = j, .end = end, .first = (uint32_t)first, .n = (uint32_t)(p->npnodes - first)};
    return SCHED_OK;
}

int sched__commit(struct sched__pass *p, const struct sched__job *j, struct sched__placement *pl,
                  bool long_job)
{
    if (sort_by_node(pl))
        return SCHED_ENOMEM;
    struct sched__view *v = &p->now;
    const struct sched__amount *qc = sched__job_cust(p, j);
    bool record = !p->have_head;
    size_t first_pnode = p->npnodes;
    if (record && sched__grow(&p->pnodes, &p->cap_pnodes, p->npnodes + pl->n, sizeof *p->pnodes))
        return SCHED_ENOMEM;

    int rank = 0, g = j->req.gpus;
    for (size_t i = 0; i < pl->n; i++) {
        size_t nd = pl->node[i];
        int c = pl->count[i];
        uint64_t taken = take_lowest_gpus(&v->gpu[nd], c * g, p->gpu_scratch);
        v->cpu[nd] -= c * j->req.cpu;
        v->mem[nd] -= c * j->req.mem;
        for (uint32_t k = 0; k < j->req.ncust; k++)
            v->cust[nd * p->ncust + qc[k].id] -= c * qc[k].amount;
        if (long_job)
            take_shadow(p, j, nd, c);
        sched__view_touch(v, p, nd);
        if (record)
            p->pnodes[p->npnodes++] =
                (struct sched__pnode){.node = (uint32_t)nd, .count = c, .gpus = taken};
        for (int local = 0; local < c; local++) {
            sched_worker w = {.rank = rank++,
                              .local_rank = local,
                              .local_world_size = c,
                              .node_rank = (int)i,
                              .node_index = nd,
                              .ngpus = g};
            if (sched__result_worker(p->res, &w, p->gpu_scratch + local * g, p->snap->nodes[nd].id))
                return SCHED_ENOMEM;
        }
    }
    return record ? record_placed(p, j, first_pnode) : SCHED_OK;
}
