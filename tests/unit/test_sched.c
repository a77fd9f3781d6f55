/* Scheduler: gang placement, strategies, filters, ranks and queue order. */
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#include "scheduler/sched.h"
#include "test_sched_fixture.h"

/* Workers of decision d on node `node`. */
static int workers_on(const sched_decision *d, size_t node)
{
    int n = 0;
    for (int i = 0; i < d->num_workers; i++)
        n += d->workers[i].node_index == node;
    return n;
}

/* ------------------------------------------------------------------------- gang */

static void gang_job_waits_until_all_workers_fit(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("a", 4));
    ts_add_node(s, ts_gpu_node("b", 4));
    ts_add_running(s, 1, 100, "b", 0x1);
    ts_add_job(s, ts_gpu_job(10, 8, 1));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_int_equal(d->num_workers, 0);
    assert_null(d->workers);
    assert_non_null(strstr(d->message, "waiting for resources: 7 of 8 workers fit now"));
    size_t placed_workers = 1;
    sched_result_totals(r, NULL, &placed_workers);
    assert_int_equal(placed_workers, 0);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);

    s = ts_new(); /* all GPUs free, but CPUs held on "b" leave room for 3 workers there */
    ts_add_node(s, ts_gpu_node("a", 4));
    ts_add_node(s, ts_gpu_node("b", 4));
    sched_alloc_desc cpus = {.node_id = "b", .cpu_milli = 16000};
    assert_int_equal(sched_add_running(s, 1, 100, &cpus, 1), SCHED_OK);
    sched_job_desc j = ts_gpu_job(10, 8, 1);
    j.bundle.cpu_milli = 16000;
    ts_add_job(s, j);
    r = ts_pass(s, 0);
    d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_null(d->workers);
    assert_non_null(strstr(d->message, "waiting for resources: 7 of 8 workers fit now"));
    sched_result_destroy(r);
    sched_snapshot_destroy(s);

    s = ts_new(); /* the same cluster with the GPU released: all 8 go */
    ts_add_node(s, ts_gpu_node("a", 4));
    ts_add_node(s, ts_gpu_node("b", 4));
    ts_add_job(s, ts_gpu_job(10, 8, 1));
    r = ts_pass(s, 0);
    d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_workers, 8);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void fragmented_cluster_does_not_fit_gang(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    const char *ids[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) { /* 2 GPUs free on each: 8 free in all, never 4 together */
        ts_add_node(s, ts_gpu_node(ids[i], 8));
        ts_add_running(s, 100 + i, 1000, ids[i], 0x3f);
    }
    ts_add_job(s, ts_gpu_job(10, 1, 4));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_int_equal(d->num_workers, 0);
    assert_non_null(strstr(d->message, "0 of 1 workers fit now"));
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void placements_apply_within_one_pass(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("a", 8));
    ts_add_job(s, ts_gpu_job(1, 1, 3));
    ts_add_job(s, ts_gpu_job(2, 1, 3));
    ts_add_job(s, ts_gpu_job(3, 1, 3));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d1 = ts_find(r, 1), *d2 = ts_find(r, 2), *d3 = ts_find(r, 3);
    assert_int_equal(d1->outcome, SCHED_PLACED);
    assert_int_equal(d2->outcome, SCHED_PLACED);
    assert_int_equal(d3->outcome, SCHED_WAITING);
    for (int i = 0; i < 3; i++) { /* no GPU given twice */
        for (int k = 0; k < 3; k++)
            assert_int_not_equal(d1->workers[0].gpus[i], d2->workers[0].gpus[k]);
    }
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

/* ------------------------------------------------------------------------- strategies */

static void pack_uses_fewest_nodes(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 2));
    ts_add_node(s, ts_gpu_node("n1", 4));
    ts_add_node(s, ts_gpu_node("n2", 8));
    ts_add_node(s, ts_gpu_node("n3", 3));
    ts_add_job(s, ts_gpu_job(10, 12, 1));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_nodes, 2); /* 8 + 4, not 8 + 3 + 2 */
    assert_int_equal(workers_on(d, 2), 8);
    assert_int_equal(workers_on(d, 1), 4);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void pack_puts_small_job_on_tightest_node(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 4));
    ts_add_node(s, ts_gpu_node("n2", 2));
    ts_add_job(s, ts_gpu_job(10, 2, 1));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(workers_on(d, 2), 2); /* the 8-GPU node stays whole */
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void pack_gpu_workers_on_one_node_when_they_fit(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    for (int i = 0; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        ts_add_node(s, ts_gpu_node(id, 8));
    }
    ts_add_running(s, 1, 100, "n0", 0x1); /* n0 has 7 free: 4 workers x 2 GPUs need a full one */
    ts_add_job(s, ts_gpu_job(10, 4, 2));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_nodes, 1);
    assert_int_equal(workers_on(d, 1), 4);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void spread_uses_distinct_nodes(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    for (int i = 0; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        ts_add_node(s, ts_gpu_node(id, 8));
    }
    sched_job_desc j = ts_gpu_job(10, 4, 1);
    j.strategy = SCHED_SPREAD;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_nodes, 4);
    for (size_t n = 0; n < 4; n++)
        assert_int_equal(workers_on(d, n), 1);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void spread_round_robins_when_workers_exceed_nodes(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 8));
    sched_job_desc j = ts_gpu_job(10, 5, 1);
    j.strategy = SCHED_SPREAD;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(workers_on(d, 0), 3);
    assert_int_equal(workers_on(d, 1), 2);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void strict_pack_refuses_split(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 8));
    ts_add_running(s, 1, 100, "n0", 0x0f);
    ts_add_running(s, 2, 100, "n1", 0x0f);
    sched_job_desc j = ts_gpu_job(10, 6, 1); /* 4 + 4 free: PACK would split */
    j.strategy = SCHED_STRICT_PACK;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_int_equal(d->num_workers, 0);
    assert_non_null(strstr(d->message, "4 of 6 workers fit now"));
    sched_result_destroy(r);
    sched_snapshot_destroy(s);

    s = ts_new(); /* CPU-bound: GPUs are free on both nodes, 48 CPUs (3 workers) on each */
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 8));
    sched_alloc_desc cpus = {.node_id = "n0", .cpu_milli = 16000};
    assert_int_equal(sched_add_running(s, 1, 100, &cpus, 1), SCHED_OK);
    cpus.node_id = "n1";
    assert_int_equal(sched_add_running(s, 2, 100, &cpus, 1), SCHED_OK);
    j = ts_gpu_job(10, 4, 1);
    j.bundle.cpu_milli = 16000;
    j.strategy = SCHED_STRICT_PACK;
    ts_add_job(s, j);
    r = ts_pass(s, 0);
    d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_non_null(strstr(d->message, "3 of 4 workers fit now"));
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void strict_spread_places_one_worker_per_node(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        ts_add_node(s, ts_gpu_node(id, 8));
    }
    sched_job_desc j = ts_gpu_job(10, 3, 2);
    j.strategy = SCHED_STRICT_SPREAD;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_nodes, 3);
    for (size_t n = 0; n < 3; n++)
        assert_int_equal(workers_on(d, n), 1);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void strict_spread_needs_enough_nodes(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 8));
    sched_job_desc j = ts_gpu_job(10, 3, 1);
    j.strategy = SCHED_STRICT_SPREAD;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    assert_int_equal(d->num_workers, 0);
    assert_string_equal(d->message, "needs 3 nodes for STRICT_SPREAD, 2 schedulable");
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

/* ------------------------------------------------------------------------- filters */

static void accelerator_type_filters_nodes(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc a100 = ts_gpu_node("a100", 8);
    a100.gpu_type = "A100";
    ts_add_node(s, a100);
    ts_add_node(s, ts_gpu_node("h100", 8));
    sched_job_desc j = ts_gpu_job(10, 2, 1);
    j.accelerator_type = "h100"; /* case does not matter */
    ts_add_job(s, j);
    sched_job_desc k = ts_gpu_job(11, 1, 1);
    k.accelerator_type = "A10G";
    ts_add_job(s, k);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(workers_on(d, 1), 2);
    d = ts_find(r, 11);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    assert_string_equal(d->message, "no schedulable node has GPU type A10G");
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void drained_node_gets_no_workers(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc dn = ts_gpu_node("drained", 8);
    dn.draining = true;
    ts_add_node(s, dn);
    ts_add_node(s, ts_gpu_node("ok", 8));
    ts_add_job(s, ts_gpu_job(10, 8, 1));
    ts_add_job(s, ts_gpu_job(11, 1, 1));
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 10)->outcome, SCHED_PLACED);
    assert_int_equal(workers_on(ts_find(r, 10), 1), 8);
    assert_int_equal(ts_find(r, 11)->outcome, SCHED_WAITING); /* not on the drained node */
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void lost_node_gets_no_workers(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc lost = ts_gpu_node("lost", 8);
    lost.alive = false;
    ts_add_node(s, lost);
    ts_add_node(s, ts_gpu_node("ok", 4));
    ts_add_job(s, ts_gpu_job(10, 2, 1));
    ts_add_job(s, ts_gpu_job(11, 1, 8));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(workers_on(d, 1), 2);
    d = ts_find(r, 11);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void memory_respected(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc small = ts_gpu_node("small", 8);
    small.memory_mb = 16000;
    ts_add_node(s, small);
    ts_add_node(s, ts_gpu_node("big", 8));
    sched_job_desc j = ts_gpu_job(10, 1, 1);
    j.bundle.memory_mb = 32000;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 10)->outcome, SCHED_PLACED);
    assert_int_equal(workers_on(ts_find(r, 10), 1), 1); /* "small" comes first otherwise */
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void cpu_milli_units_respected(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc cpu = {.id = "cpu", .cpu_milli = 1500, .memory_mb = 4096, .alive = true};
    ts_add_node(s, cpu);
    sched_job_desc j = {.id = 1, .min_workers = 3, .max_workers = 3, .bundle = {.cpu_milli = 500}};
    ts_add_job(s, j);
    j.id = 2;
    j.submit_time = 1;
    j.min_workers = j.max_workers = 1;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 1)->outcome, SCHED_PLACED);
    assert_int_equal(ts_find(r, 1)->num_workers, 3);
    assert_int_equal(ts_find(r, 1)->workers[0].ngpus, 0);
    assert_null(ts_find(r, 1)->workers[0].gpus);
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void custom_resource_respected(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("plain", 8));
    sched_custom ib = {"infiniband", 1000};
    sched_node_desc fast = ts_gpu_node("fast", 8);
    fast.custom = &ib;
    fast.ncustom = 1;
    ts_add_node(s, fast);
    sched_custom need = {"infiniband", 1000};
    sched_job_desc j = ts_gpu_job(10, 1, 1);
    j.bundle.custom = &need;
    j.bundle.ncustom = 1;
    ts_add_job(s, j);
    j.id = 11; /* the only unit is taken by job 10 */
    j.submit_time = 11;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 10)->outcome, SCHED_PLACED);
    assert_string_equal(ts_find(r, 10)->workers[0].node_id, "fast");
    assert_int_equal(ts_find(r, 11)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void running_job_custom_resources_count_as_used(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_custom ib = {"infiniband", 2000};
    sched_node_desc fast = ts_gpu_node("fast", 8);
    fast.custom = &ib;
    fast.ncustom = 1;
    ts_add_node(s, fast);
    sched_custom held = {"infiniband", 1500};
    sched_alloc_desc a = {.node_id = "fast", .cpu_milli = 1000, .custom = &held, .ncustom = 1};
    assert_int_equal(sched_add_running(s, 1, 100, &a, 1), SCHED_OK);
    sched_custom need = {"infiniband", 1000};
    sched_job_desc j = ts_gpu_job(10, 1, 1);
    j.bundle.custom = &need;
    j.bundle.ncustom = 1;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 10)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

/* ------------------------------------------------------------------------- elastic */

static void elastic_job_takes_largest_fitting_count(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 1, 100, "n0", 0x7);
    sched_job_desc j = ts_gpu_job(10, 2, 1);
    j.max_workers = 8;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_workers, 5);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void elastic_job_waits_below_its_minimum(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 1, 100, "n0", 0x7);
    sched_job_desc j = ts_gpu_job(10, 6, 1);
    j.max_workers = 8;
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_non_null(strstr(d->message, "5 of 6 workers fit now"));
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

/* ------------------------------------------------------------------------- ranks */

static void ranks_grouped_by_node_contiguous(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 4));
    ts_add_node(s, ts_gpu_node("n1", 8));
    ts_add_job(s, ts_gpu_job(10, 12, 1));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_workers, 12);
    assert_int_equal(d->num_nodes, 2);
    for (int i = 0; i < 12; i++) {
        const sched_worker *w = &d->workers[i];
        bool first = i < 4; /* node rank 0 is n0: ranks 0..3 */
        assert_int_equal(w->rank, i);
        assert_int_equal(w->node_rank, first ? 0 : 1);
        assert_int_equal(w->node_index, first ? 0 : 1);
        assert_string_equal(w->node_id, first ? "n0" : "n1");
        assert_int_equal(w->local_rank, first ? i : i - 4);
        assert_int_equal(w->local_world_size, first ? 4 : 8);
    }
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void gpu_indices_ascending_per_worker(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 1, 100, "n0", (1u << 1) | (1u << 4));
    ts_add_job(s, ts_gpu_job(10, 2, 3));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    const int want[2][3] = {{0, 2, 3}, {5, 6, 7}};
    for (int w = 0; w < 2; w++) {
        assert_int_equal(d->workers[w].ngpus, 3);
        for (int g = 0; g < 3; g++)
            assert_int_equal(d->workers[w].gpus[g], want[w][g]);
    }
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

/* ------------------------------------------------------------------------- queue order */

static void priority_orders_queue(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_job(s, ts_gpu_job(1, 8, 1)); /* submitted first, priority 0 */
    sched_job_desc urgent = ts_gpu_job(2, 8, 1);
    urgent.priority = 10;
    ts_add_job(s, urgent);
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_PLACED);
    assert_int_equal(ts_find(r, 1)->outcome, SCHED_WAITING);
    assert_int_equal(sched_result_decision(r, 0)->job_id, 2); /* decisions in queue order */
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void submit_time_breaks_priority_ties(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    sched_job_desc late = ts_gpu_job(1, 8, 1);
    late.submit_time = 50;
    ts_add_job(s, late);
    sched_job_desc early = ts_gpu_job(2, 8, 1);
    early.submit_time = 40;
    ts_add_job(s, early);
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_PLACED);
    assert_int_equal(ts_find(r, 1)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void pass_is_deterministic(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    for (int i = 0; i < 6; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        ts_add_node(s, ts_gpu_node(id, 8));
    }
    for (int i = 0; i < 12; i++) {
        sched_job_desc j = ts_gpu_job(i, 1 + i % 5, 1 + i % 3);
        j.strategy = (sched_strategy)(i % 4);
        ts_add_job(s, j);
    }
    sched_result *a = ts_pass(s, 0), *b = ts_pass(s, 0); /* the snapshot is not consumed */
    assert_int_equal(sched_result_count(a), 12);
    assert_int_equal(sched_result_count(b), 12);
    for (size_t i = 0; i < 12; i++) {
        const sched_decision *x = sched_result_decision(a, i), *y = sched_result_decision(b, i);
        assert_int_equal(x->job_id, y->job_id);
        assert_int_equal(x->outcome, y->outcome);
        assert_int_equal(x->num_workers, y->num_workers);
        assert_string_equal(x->message, y->message);
        for (int w = 0; w < x->num_workers; w++) {
            assert_int_equal(x->workers[w].node_index, y->workers[w].node_index);
            for (int g = 0; g < x->workers[w].ngpus; g++)
                assert_int_equal(x->workers[w].gpus[g], y->workers[w].gpus[g]);
        }
    }
    sched_result_destroy(a);
    sched_result_destroy(b);
    sched_snapshot_destroy(s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(gang_job_waits_until_all_workers_fit),
    cmocka_unit_test(fragmented_cluster_does_not_fit_gang),
    cmocka_unit_test(placements_apply_within_one_pass),
    cmocka_unit_test(pack_uses_fewest_nodes),
    cmocka_unit_test(pack_puts_small_job_on_tightest_node),
    cmocka_unit_test(pack_gpu_workers_on_one_node_when_they_fit),
    cmocka_unit_test(spread_uses_distinct_nodes),
    cmocka_unit_test(spread_round_robins_when_workers_exceed_nodes),
    cmocka_unit_test(strict_pack_refuses_split),
    cmocka_unit_test(strict_spread_places_one_worker_per_node),
    cmocka_unit_test(strict_spread_needs_enough_nodes),
    cmocka_unit_test(accelerator_type_filters_nodes),
    cmocka_unit_test(drained_node_gets_no_workers),
    cmocka_unit_test(lost_node_gets_no_workers),
    cmocka_unit_test(memory_respected),
    cmocka_unit_test(cpu_milli_units_respected),
    cmocka_unit_test(custom_resource_respected),
    cmocka_unit_test(running_job_custom_resources_count_as_used),
    cmocka_unit_test(elastic_job_takes_largest_fitting_count),
    cmocka_unit_test(elastic_job_waits_below_its_minimum),
    cmocka_unit_test(ranks_grouped_by_node_contiguous),
    cmocka_unit_test(gpu_indices_ascending_per_worker),
    cmocka_unit_test(priority_orders_queue),
    cmocka_unit_test(submit_time_breaks_priority_ties),
    cmocka_unit_test(pass_is_deterministic),
};

TY_TEST_MAIN(tests)
