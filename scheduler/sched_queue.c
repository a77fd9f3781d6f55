/* The pass: queue order, then each job in turn placed whole, made the head, backfilled or left
 * waiting (DESIGN §8). */
#include "sched_internal.h"

#include <inttypes.h>
#include <stdlib.h>

/* Priority descending, then submit time, then id: a total order, so the pass is deterministic. */
static int cmp_queue(const void *a, const void *b)
{
    const struct sched__job *x = *(const struct sched__job *const *)a;
    const struct sched__job *y = *(const struct sched__job *const *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Whether job j, started now, ends no later than the head's reservation. */
static bool ends_before_head(const struct sched__pass *p, const struct sched__job *j)
{
    return p->head_start != SCHED_TIME_NEVER && j->timeout > 0 &&
           j->timeout <= p->head_start - p->t_now;
}

/* Applies the placement in p->pl and records the decision. Returns 0 or SCHED_ENOMEM. */
static int place_now(struct sched__pass *p, const struct sched__job *j, bool long_job)
{
    sched_result *r = p->res;
    int rc;
    if ((rc = sched__result_begin(r, j->id, SCHED_PLACED)) ||
        (rc = sched__commit(p, j, &p->pl, long_job)))
        return rc;
    const sched_decision *d = sched_result_decision(r, sched_result_count(r) - 1);
    return sched__result_message(r, "placed %d worker%s on %d node%s%s", d->num_workers,
                                 d->num_workers == 1 ? "" : "s", d->num_nodes,
                                 d->num_nodes == 1 ? "" : "s", p->have_head ? " (backfilled)" : "");
}

/* The first job that cannot start now: reserve for it and say so. */
static int make_head(struct sched__pass *p, const struct sched__job *j, int fit)
{
    int rc;
    if ((rc = sched__result_begin(p->res, j->id, SCHED_WAITING)) ||
        (rc = sched__reserve_head(p, j)))
        return rc;
    sched__result_set_head(p->res, p->head_start);
    if (p->head_start == SCHED_TIME_NEVER)
        return sched__result_message(p->res,
                                     "waiting for resources: %d of %d workers fit now; first in "
                                     "line, waiting for jobs without a timeout to end",
                                     fit, j->min);
    return sched__result_message(p->res,
                                 "waiting for resources: %d of %d workers fit now; first in line, "
                                 "resources reserved in %" PRId64 " s",
                                 fit, j->min, p->head_start - p->t_now);
}

/* Decides one job: unschedulable, placed (whole), head, or waiting. Returns 0 or SCHED_ENOMEM. */
static int schedule_job(struct sched__pass *p, const struct sched__job *j)
{
    char why[384];
    int rc;
    if (!sched__idle_fits(p, j, why, sizeof why)) {
        if ((rc = sched__result_begin(p->res, j->id, SCHED_UNSCHEDULABLE)))
            return rc;
        return sched__result_message(p->res, "%s", why);
    }
    bool long_job = p->have_head && !ends_before_head(p, j);
    const struct sched__shadow *sh = long_job && p->shadow.slot ? &p->shadow : NULL;
    rc = sched__place(p, &p->now, sh, j, j->min, j->max, &p->pl);
    if (rc < 0)
        return rc;
    if (rc == 1)
        return place_now(p, j, long_job);
    int fit = p->pl.fit;
    if (!p->have_head)
        return make_head(p, j, fit);
    if ((rc = sched__result_begin(p->res, j->id, SCHED_WAITING)))
        return rc;
    if (sh)
        return sched__result_message(p->res,
                                     "waiting for resources: %d of %d workers fit now without "
                                     "delaying job %" PRId64,
                                     fit, j->min, p->head_id);
    return sched__result_message(p->res, "waiting for resources: %d of %d workers fit now", fit,
                                 j->min);
}

/* How many workers and GPU indices the result will likely hold, so that it is allocated once
 * rather than grown by copies: no more than every job's maximum, and no more GPUs (nor GPU
 * workers) than are free now. Reserving far more than is used costs page faults on every pass. */
static void estimate_result(const sched_snapshot *snap, size_t *workers, size_t *gpus)
{
    size_t free_gpus = 0, want_gpus = 0, gpu_workers = 0, cpu_workers = 0;
    for (size_t i = 0; i < snap->nnodes; i++) {
        if (snap->nodes[i].schedulable)
            free_gpus += (size_t)__builtin_popcountll(snap->nodes[i].gpu_free);
    }
    for (size_t i = 0; i < snap->njobs; i++) {
        const struct sched__job *j = &snap->jobs[i];
        if (j->req.gpus) {
            gpu_workers += (size_t)j->max;
            want_gpus += (size_t)j->max * (size_t)j->req.gpus;
        } else {
            cpu_workers += (size_t)j->max;
        }
    }
    const size_t cap = (size_t)1 << 18;
    *gpus = want_gpus < free_gpus ? want_gpus : free_gpus;
    *workers =
        (gpu_workers < *gpus ? gpu_workers : *gpus) + (cpu_workers < cap ? cpu_workers : cap);
}

static void pass_free(struct sched__pass *p)
{
    sched__view_free(&p->now);
    free(p->shadow.slot);
    free(p->shadow.cpu);
    free(p->shadow.mem);
    free(p->shadow.gpu);
    free(p->shadow.cust);
    free(p->mark);
    sched__placement_free(&p->pl);
    free(p->iclass);
    free(p->tot_cust);
    free(p->placed);
    free(p->pnodes);
    free(p->gpu_scratch);
    free(p->type_ok);
}

/* type_ok of a pass: which interned GPU type serves which (malloc'd; one byte when none). */
static unsigned char *type_matrix(const sched_snapshot *snap)
{
    size_t n = snap->types.n;
    unsigned char *m = malloc(n * n + 1);
    if (!m)
        return NULL;
    for (size_t w = 0; w < n; w++)
        for (size_t h = 0; h < n; h++)
            m[w * n + h] = sched__type_tokens_match(snap->types.v[w], snap->types.v[h]);
    return m;
}

int sched_run_pass(const sched_snapshot *snap, int64_t now, sched_result **out)
{
    if (!snap || !out)
        return SCHED_EINVAL;
    *out = NULL;
    struct sched__pass p = {
        .snap = snap,
        .t_now = now,
        .n = snap->nnodes,
        .ncust = snap->custom.n,
        .ntypes = snap->types.n,
        .head_start = SCHED_TIME_NEVER,
    };
    size_t workers, gpus;
    estimate_result(snap, &workers, &gpus);
    const struct sched__job **order = malloc((snap->njobs + 1) * sizeof *order);
    p.res = sched__result_new(snap->njobs, snap->nnodes, workers, gpus);
    p.mark = calloc(p.n + 1, sizeof *p.mark);
    p.gpu_scratch = malloc(SCHED_MAX_GPUS_PER_NODE * sizeof *p.gpu_scratch);
    p.type_ok = type_matrix(snap);
    int rc = SCHED_ENOMEM;
    if (!order || !p.res || !p.mark || !p.gpu_scratch || !p.type_ok ||
        sched__view_init_now(&p.now, &p) || sched__idle_build(&p))
        goto done;

    for (size_t i = 0; i < snap->njobs; i++)
        order[i] = &snap->jobs[i];
    qsort(order, snap->njobs, sizeof *order, cmp_queue);
    rc = SCHED_OK;
    for (size_t i = 0; i < snap->njobs && !rc; i++)
        rc = schedule_job(&p, order[i]);
    if (!rc) {
        sched__result_finish(p.res);
        *out = p.res;
        p.res = NULL;
    }
done:
    sched_result_destroy(p.res);
    free(order);
    pass_free(&p);
    return rc;
}
