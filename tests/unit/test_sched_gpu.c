/* Scheduler, GPU placement: accelerator_type matched by tokens of the NVML name, distinct GPUs
 * per worker and per job, PACK on as few nodes as possible. */
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#include "scheduler/sched.h"
#include "test_sched_fixture.h"

static sched_node_desc named_node(const char *id, int gpus, const char *type)
{
    sched_node_desc d = ts_gpu_node(id, gpus);
    d.gpu_type = type;
    return d;
}

static sched_job_desc typed_job(int64_t id, int workers, const char *type)
{
    sched_job_desc j = ts_gpu_job(id, workers, 1);
    j.accelerator_type = type;
    return j;
}

static void accelerator_type_matches_name_tokens(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, named_node("a100", 4, "NVIDIA A100-SXM4-40GB"));
    ts_add_node(s, named_node("h100", 4, "NVIDIA H100 80GB HBM3"));
    ts_add_job(s, typed_job(10, 2, "H100"));
    ts_add_job(s, typed_job(11, 1, "h100 80gb"));
    ts_add_job(s, typed_job(12, 1, "A100"));
    ts_add_job(s, typed_job(13, 1, "H10")); /* a token, not a prefix */
    ts_add_job(s, typed_job(14, 1, "H100 40GB"));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    for (int i = 0; i < d->num_workers; i++)
        assert_int_equal(d->workers[i].node_index, 1);
    d = ts_find(r, 11);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->workers[0].node_index, 1);
    d = ts_find(r, 12);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->workers[0].node_index, 0);
    d = ts_find(r, 13);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    assert_string_equal(d->message, "no schedulable node has GPU type H10");
    assert_int_equal(ts_find(r, 14)->outcome, SCHED_UNSCHEDULABLE);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void busy_matching_node_keeps_typed_job_waiting(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, named_node("h", 2, "NVIDIA H100 80GB HBM3"));
    ts_add_node(s, named_node("a", 8, "NVIDIA A100-SXM4-40GB"));
    ts_add_running(s, 1, 100, "h", 0x3);
    ts_add_job(s, typed_job(10, 1, "H100"));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_int_equal(d->num_workers, 0);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

/* Every (node, GPU) pair of a result at most once; *used is the bit set per node. */
static void assert_distinct(const sched_result *r, int64_t id, uint64_t used[2])
{
    const sched_decision *d = ts_find(r, id);
    for (int i = 0; i < d->num_workers; i++) {
        const sched_worker *w = &d->workers[i];
        for (int g = 0; g < w->ngpus; g++) {
            uint64_t bit = UINT64_C(1) << w->gpus[g];
            assert_int_equal(used[w->node_index] & bit, 0);
            used[w->node_index] |= bit;
        }
    }
}

static void workers_and_jobs_get_distinct_gpus(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, named_node("a", 2, "H100"));
    ts_add_node(s, named_node("b", 2, "H100"));
    ts_add_job(s, ts_gpu_job(10, 2, 1));
    ts_add_job(s, ts_gpu_job(11, 2, 1));
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 10)->outcome, SCHED_PLACED);
    assert_int_equal(ts_find(r, 11)->outcome, SCHED_PLACED);
    uint64_t used[2] = {0, 0};
    assert_distinct(r, 10, used);
    assert_distinct(r, 11, used);
    assert_int_equal(used[0], 0x3);
    assert_int_equal(used[1], 0x3);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void pack_keeps_gpu_workers_on_one_node_when_it_fits(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, named_node("a", 2, "H100"));
    ts_add_node(s, named_node("b", 2, "H100"));
    ts_add_running(s, 1, 100, "a", 0x1); /* "a" has one GPU left, "b" two */
    ts_add_job(s, ts_gpu_job(10, 2, 1));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_workers, 2);
    assert_int_equal(d->workers[0].node_index, 1);
    assert_int_equal(d->workers[1].node_index, 1);
    assert_int_not_equal(d->workers[0].gpus[0], d->workers[1].gpus[0]);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(accelerator_type_matches_name_tokens),
    cmocka_unit_test(busy_matching_node_keeps_typed_job_waiting),
    cmocka_unit_test(workers_and_jobs_get_distinct_gpus),
    cmocka_unit_test(pack_keeps_gpu_workers_on_one_node_when_it_fits),
};

TY_TEST_MAIN(tests)
