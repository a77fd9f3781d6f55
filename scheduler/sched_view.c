/* Views: the free resources of every node at one moment, as plain arrays, and their indexes. */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

static int alloc_arrays(struct sched__view *v, size_t n, size_t ncust)
{
    memset(v, 0, sizeof *v);
    v->n = n;
    v->ncust = ncust;
    v->cpu = malloc((n + 1) * sizeof *v->cpu);
    v->mem = malloc((n + 1) * sizeof *v->mem);
    v->gpu = malloc((n + 1) * sizeof *v->gpu);
    v->cust = calloc(n * ncust + 1, sizeof *v->cust);
    if (!v->cpu || !v->mem || !v->gpu || !v->cust) {
        sched__view_free(v);
        return SCHED_ENOMEM;
    }
    return SCHED_OK;
}

/* Fills v with what the snapshot's running jobs leave free. Returns 0 or SCHED_ENOMEM. */
int sched__view_init_now(struct sched__view *v, const struct sched__pass *p)
{
    const sched_snapshot *snap = p->snap;
    if (alloc_arrays(v, p->n, p->ncust))
        return SCHED_ENOMEM;
    for (size_t i = 0; i < p->n; i++) {
        const struct sched__node *nd = &snap->nodes[i];
        v->cpu[i] = nd->cpu_free;
        v->mem[i] = nd->mem_free;
        v->gpu[i] = nd->gpu_free;
        for (uint32_t k = 0; k < nd->ncust; k++) {
            const struct sched__ncust *c = &snap->node_cust[nd->cust_first + k];
            v->cust[i * p->ncust + c->id] = c->free;
        }
    }
    return SCHED_OK;
}

/* A deep copy of src's arrays, without its indexes. Returns 0 or SCHED_ENOMEM. */
int sched__view_copy(struct sched__view *dst, const struct sched__view *src)
{
    if (alloc_arrays(dst, src->n, src->ncust))
        return SCHED_ENOMEM;
    memcpy(dst->cpu, src->cpu, src->n * sizeof *src->cpu);
    memcpy(dst->mem, src->mem, src->n * sizeof *src->mem);
    memcpy(dst->gpu, src->gpu, src->n * sizeof *src->gpu);
    memcpy(dst->cust, src->cust, src->n * src->ncust * sizeof *src->cust);
    return SCHED_OK;
}

void sched__view_free(struct sched__view *v)
{
    free(v->cpu);
    free(v->mem);
    free(v->gpu);
    free(v->cust);
    for (int k = 0; k < SCHED__IX_KINDS; k++) {
        if (v->built[k])
            sched__index_free(&v->ix[k]);
    }
    memset(v, 0, sizeof *v);
}

static int key_of(const struct sched__view *v, int kind, size_t node)
{
    if (kind == SCHED__IX_GPU)
        return __builtin_popcountll(v->gpu[node]);
    int64_t cpus = v->cpu[node] / 1000;
    return cpus >= SCHED__CPU_KEYS - 1 ? SCHED__CPU_KEYS - 1 : (int)cpus;
}

static int class_of(const struct sched__pass *p, int kind, size_t node)
{
    return kind == SCHED__IX_GPU ? sched__node_class(p, node) : 0;
}

struct sched__index *sched__view_index(struct sched__view *v, const struct sched__pass *p, int kind)
{
    struct sched__index *ix = &v->ix[kind];
    if (v->built[kind])
        return ix;
    int nclass = kind == SCHED__IX_GPU ? (int)p->ntypes + 1 : 1;
    int nkey = kind == SCHED__IX_GPU ? SCHED__GPU_KEYS : SCHED__CPU_KEYS;
    if (sched__index_init(ix, v->n, nclass, nkey))
        return NULL;
    for (size_t i = 0; i < v->n; i++) {
        if (p->snap->nodes[i].schedulable)
            sched__index_set(ix, i, class_of(p, kind, i), key_of(v, kind, i));
    }
    v->built[kind] = true;
    return ix;
}

void sched__view_touch(struct sched__view *v, const struct sched__pass *p, size_t node)
{
    if (!p->snap->nodes[node].schedulable)
        return;
    for (int k = 0; k < SCHED__IX_KINDS; k++) {
        if (v->built[k])
            sched__index_set(&v->ix[k], node, class_of(p, k, node), key_of(v, k, node));
    }
}
