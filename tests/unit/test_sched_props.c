/* Scheduler: invariants over many random small clusters, checked against a model in this file.
 *
 * For every pass: no node is overcommitted (GPUs, CPU, memory), no GPU is given twice or given
 * while held, placed jobs follow their strategy, type and worker range, ranks follow DESIGN §3,
 * and the head still fits at its reservation time with everything placed in the pass. */
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#include "scheduler/sched.h"

#define MAX_NODES 12
#define MAX_RUN 12
#define MAX_JOBS 16

struct model_node {
    char id[16];
    int gpus;
    bool h100, schedulable;
    int64_t cpu, mem;
};

struct model_run {
    int node;
    uint64_t gpus;
    int64_t cpu, mem, end;
};

struct model {
    int nnodes, nrun, njobs;
    struct model_node node[MAX_NODES];
    struct model_run run[MAX_RUN];
    sched_job_desc job[MAX_JOBS];
};

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int64_t below(uint64_t *s, int64_t n)
{
    return (int64_t)(rnd(s) % (uint64_t)n);
}

/* A random cluster, running set and queue; returns the snapshot built from it. */
static sched_snapshot *make_random(uint64_t *rng, struct model *m)
{
    memset(m, 0, sizeof *m);
    sched_snapshot *s = sched_snapshot_create();
    assert_non_null(s);
    m->nnodes = 1 + (int)below(rng, MAX_NODES);
    for (int i = 0; i < m->nnodes; i++) {
        struct model_node *n = &m->node[i];
        snprintf(n->id, sizeof n->id, "n%d", i);
        n->gpus = (int)below(rng, 9);
        n->h100 = below(rng, 3) != 0;
        n->schedulable = below(rng, 8) != 0;
        n->cpu = 1000 * (4 + below(rng, 29));
        n->mem = 1024 * (8 + below(rng, 57));
        sched_node_desc d = {.id = n->id,
                             .cpu_milli = n->cpu,
                             .memory_mb = n->mem,
                             .gpus = n->gpus,
                             .gpu_type = n->gpus ? (n->h100 ? "H100" : "A100") : NULL,
                             .alive = below(rng, 2) || n->schedulable,
                             .draining = !n->schedulable};
        if (!d.alive)
            d.draining = false;
        assert_int_equal(sched_add_node(s, &d, NULL), SCHED_OK);
    }
    int want_run = (int)below(rng, MAX_RUN + 1);
    uint64_t held[MAX_NODES] = {0};
    int64_t cpu_used[MAX_NODES] = {0}, mem_used[MAX_NODES] = {0};
    for (int r = 0; r < want_run; r++) {
        int nd = (int)below(rng, m->nnodes);
        struct model_node *n = &m->node[nd];
        uint64_t all = n->gpus ? (UINT64_C(1) << n->gpus) - 1 : 0;
        uint64_t mask = rnd(rng) & all & ~held[nd];
        int64_t cpu = below(rng, n->cpu - cpu_used[nd] + 1) / 2;
        int64_t mem = below(rng, n->mem - mem_used[nd] + 1) / 2;
        int64_t end = below(rng, 4) == 0 ? SCHED_TIME_NEVER : 10 + below(rng, 500);
        sched_alloc_desc a = {
            .node_id = n->id, .cpu_milli = cpu, .memory_mb = mem, .gpu_mask = mask};
        assert_int_equal(sched_add_running(s, 1000 + r, end, &a, 1), SCHED_OK);
        held[nd] |= mask;
        cpu_used[nd] += cpu;
        mem_used[nd] += mem;
        m->run[m->nrun++] = (struct model_run){nd, mask, cpu, mem, end};
    }
    m->njobs = 1 + (int)below(rng, MAX_JOBS);
    for (int i = 0; i < m->njobs; i++) {
        int min = 1 + (int)below(rng, 6);
        sched_job_desc j = {
            .id = i + 1,
            .priority = (int)below(rng, 3),
            .submit_time = below(rng, 100),
            .min_workers = min,
            .max_workers = below(rng, 4) == 0 ? min + (int)below(rng, 4) : min,
            .bundle = {.cpu_milli = 500 * below(rng, 5),
                       .memory_mb = 512 * below(rng, 9),
                       .gpus = (int)below(rng, 4)},
            .strategy = (sched_strategy)below(rng, 4),
            .accelerator_type = below(rng, 4) == 0 ? "H100" : NULL,
            .timeout_s = below(rng, 3) == 0 ? 0 : 5 + below(rng, 600),
        };
        if (!j.bundle.cpu_milli && !j.bundle.memory_mb && !j.bundle.gpus)
            j.bundle.cpu_milli = 250;
        m->job[i] = j;
        assert_int_equal(sched_add_pending(s, &j), SCHED_OK);
    }
    return s;
}

static const sched_job_desc *job_of(const struct model *m, int64_t id)
{
    return &m->job[id - 1];
}

/* Resources free on every node: totals less the running jobs whose end is after t_run and less
 * the placements of decisions [from, to) whose end (placed at now = 0) is after t_placed. */
static void free_at(const struct model *m, const sched_result *r, size_t from, size_t to,
                    int64_t t_run, int64_t t_placed, int64_t gpu[], int64_t cpu[], int64_t mem[])
{
    for (int i = 0; i < m->nnodes; i++) {
        gpu[i] = m->node[i].gpus;
        cpu[i] = m->node[i].cpu;
        mem[i] = m->node[i].mem;
    }
    for (int k = 0; k < m->nrun; k++) {
        if (m->run[k].end <= t_run)
            continue;
        gpu[m->run[k].node] -= __builtin_popcountll(m->run[k].gpus);
        cpu[m->run[k].node] -= m->run[k].cpu;
        mem[m->run[k].node] -= m->run[k].mem;
    }
    for (size_t i = from; i < to; i++) {
        const sched_decision *d = sched_result_decision(r, i);
        const sched_job_desc *j = job_of(m, d->job_id);
        int64_t end = j->timeout_s ? j->timeout_s : SCHED_TIME_NEVER;
        if (end <= t_placed)
            continue;
        for (int w = 0; w < d->num_workers; w++) {
            size_t nd = d->workers[w].node_index;
            gpu[nd] -= j->bundle.gpus;
            cpu[nd] -= j->bundle.cpu_milli;
            mem[nd] -= j->bundle.memory_mb;
        }
    }
}

static int64_t model_cap(const sched_job_desc *j, int64_t gpu, int64_t cpu, int64_t mem)
{
    int64_t c = 1 << 20;
    if (j->bundle.gpus && gpu / j->bundle.gpus < c)
        c = gpu / j->bundle.gpus;
    if (j->bundle.cpu_milli && cpu / j->bundle.cpu_milli < c)
        c = cpu / j->bundle.cpu_milli;
    if (j->bundle.memory_mb && mem / j->bundle.memory_mb < c)
        c = mem / j->bundle.memory_mb;
    return c;
}

static bool node_ok_for(const struct model *m, const sched_job_desc *j, int nd)
{
    return m->node[nd].schedulable &&
           (!j->accelerator_type || (m->node[nd].gpus && m->node[nd].h100));
}

/* Whether j's minimum fits the given free resources, by its strategy. */
static bool model_fits(const struct model *m, const sched_job_desc *j, const int64_t gpu[],
                       const int64_t cpu[], const int64_t mem[])
{
    int64_t sum = 0, best = 0, nodes = 0;
    for (int i = 0; i < m->nnodes; i++) {
        if (!node_ok_for(m, j, i))
            continue;
        int64_t c = model_cap(j, gpu[i], cpu[i], mem[i]);
        sum += c;
        best = c > best ? c : best;
        nodes += c > 0;
    }
    switch (j->strategy) {
    case SCHED_STRICT_PACK:
        return best >= j->min_workers;
    case SCHED_STRICT_SPREAD:
        return nodes >= j->min_workers;
    default:
        return sum >= j->min_workers;
    }
}

static void check_placement(const struct model *m, const sched_decision *d)
{
    const sched_job_desc *j = job_of(m, d->job_id);
    if (d->outcome != SCHED_PLACED) {
        assert_int_equal(d->num_workers, 0);
        return;
    }
    assert_in_range(d->num_workers, j->min_workers, j->max_workers);
    if (j->strategy == SCHED_STRICT_PACK)
        assert_int_equal(d->num_nodes, 1);
    if (j->strategy == SCHED_STRICT_SPREAD)
        assert_int_equal(d->num_nodes, d->num_workers);
    int node_rank = 0, local = 0;
    for (int w = 0; w < d->num_workers; w++) {
        const sched_worker *x = &d->workers[w];
        assert_true(node_ok_for(m, j, (int)x->node_index));
        assert_int_equal(x->rank, w);
        if (w > 0 && x->node_index != d->workers[w - 1].node_index) {
            assert_true(x->node_index > d->workers[w - 1].node_index); /* node order, no return */
            node_rank++;
            local = 0;
        }
        assert_int_equal(x->node_rank, node_rank);
        assert_int_equal(x->local_rank, local++);
        assert_int_equal(x->ngpus, j->bundle.gpus);
        for (int g = 1; g < x->ngpus; g++)
            assert_true(x->gpus[g] > x->gpus[g - 1]);
    }
    assert_int_equal(node_rank + 1, d->num_nodes);
}

static void random_passes_keep_invariants(void **state)
{
    (void)state;
    uint64_t rng = 12345;
    int heads = 0, backfilled = 0;
    for (int iter = 0; iter < 3000; iter++) {
        struct model m;
        sched_snapshot *s = make_random(&rng, &m);
        sched_result *r = NULL;
        assert_int_equal(sched_run_pass(s, 0, &r), SCHED_OK);
        assert_int_equal(sched_result_count(r), m.njobs);

        uint64_t gpus_taken[MAX_NODES] = {0};
        for (int k = 0; k < m.nrun; k++)
            gpus_taken[m.run[k].node] |= m.run[k].gpus;
        size_t head = SIZE_MAX;
        for (size_t i = 0; i < sched_result_count(r); i++) {
            const sched_decision *d = sched_result_decision(r, i);
            check_placement(&m, d);
            if (d->is_head) {
                assert_int_equal(head, SIZE_MAX);
                head = i;
            }
            backfilled += head != SIZE_MAX && d->outcome == SCHED_PLACED;
            for (int w = 0; w < d->num_workers; w++) { /* no GPU given twice or while held */
                const sched_worker *x = &d->workers[w];
                for (int g = 0; g < x->ngpus; g++) {
                    assert_in_range(x->gpus[g], 0, m.node[x->node_index].gpus - 1);
                    uint64_t bit = UINT64_C(1) << x->gpus[g];
                    assert_false(gpus_taken[x->node_index] & bit);
                    gpus_taken[x->node_index] |= bit;
                }
            }
        }
        int64_t gpu[MAX_NODES], cpu[MAX_NODES], mem[MAX_NODES];
        free_at(&m, r, 0, m.njobs, -1, -1, gpu, cpu, mem); /* now: nothing overcommitted */
        for (int i = 0; i < m.nnodes; i++) {
            assert_true(gpu[i] >= 0);
            assert_true(cpu[i] >= 0);
            assert_true(mem[i] >= 0);
        }
        if (head != SIZE_MAX) { /* the head still fits when its reservation starts */
            heads++;
            const sched_decision *h = sched_result_decision(r, head);
            const sched_job_desc *hj = job_of(&m, h->job_id);
            int64_t t = h->reserved_start;
            if (t != SCHED_TIME_NEVER)
                free_at(&m, r, 0, m.njobs, t, t, gpu, cpu, mem);
            else /* start unknown: once every earlier job is gone, only backfills may remain */
                free_at(&m, r, head, m.njobs, SCHED_TIME_NEVER, -1, gpu, cpu, mem);
            if (!model_fits(&m, hj, gpu, cpu, mem))
                fail_msg("iteration %d: head job %lld no longer fits at %lld", iter,
                         (long long)h->job_id, (long long)h->reserved_start);
        }
        sched_result_destroy(r);
        sched_snapshot_destroy(s);
    }
    assert_true(heads > 100); /* the generator exercises the backfill path */
    assert_true(backfilled > 100);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(random_passes_keep_invariants),
};

TY_TEST_MAIN(tests)
