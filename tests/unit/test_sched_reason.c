/* Scheduler: "can never fit" versus "waiting", and the messages that say which resource. */
#include "ty_test.h"

#include <string.h>

#include "scheduler/sched.h"
#include "test_sched_fixture.h"

/* Runs a pass over two idle 8-GPU H100 nodes with job j; checks it is unschedulable with
 * exactly `message`. */
static void expect_unschedulable(sched_job_desc j, const char *message)
{
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 8));
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, j.id);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    assert_int_equal(d->num_workers, 0);
    assert_string_equal(d->message, message);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void unschedulable_reason_names_resource(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 2));
    sched_job_desc j = ts_gpu_job(10, 1, 4);
    j.accelerator_type = "H100";
    ts_add_job(s, j);
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    assert_string_equal(d->message,
                        "no node has 4 GPU of type H100 free even when idle (largest: 2)");
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void unschedulable_reason_names_memory(void **state)
{
    (void)state;
    sched_job_desc j = ts_gpu_job(10, 1, 1);
    j.bundle.memory_mb = 600000;
    expect_unschedulable(j, "no node has 600000 memory_mb free even when idle (largest: 524288)");
}

static void unschedulable_reason_names_fractional_cpu(void **state)
{
    (void)state;
    sched_job_desc j = ts_gpu_job(10, 1, 1);
    j.bundle.cpu_milli = 96500;
    expect_unschedulable(j, "no node has 96.5 CPU free even when idle (largest: 64)");
}

static void unschedulable_reason_names_custom_resource(void **state)
{
    (void)state;
    sched_custom fpga = {"fpga", 1000};
    sched_job_desc j = ts_gpu_job(10, 1, 1);
    j.bundle.custom = &fpga;
    j.bundle.ncustom = 1;
    expect_unschedulable(j, "no node has 1 fpga free even when idle (largest: 0)");
}

static void strict_pack_reason_names_per_node_need(void **state)
{
    (void)state;
    sched_job_desc j = ts_gpu_job(10, 4, 4);
    j.strategy = SCHED_STRICT_PACK;
    expect_unschedulable(j, "no node has 16 GPU free even when idle (largest: 8); STRICT_PACK "
                            "puts all 4 workers on one node");
}

static void pack_reason_names_cluster_total(void **state)
{
    (void)state;
    expect_unschedulable(ts_gpu_job(10, 20, 1),
                         "the cluster fits 16 of 20 workers even when idle (limited by GPU)");
}

static void no_schedulable_node_reason(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc n = ts_gpu_node("n0", 8);
    n.draining = true;
    ts_add_node(s, n);
    ts_add_job(s, ts_gpu_job(10, 1, 1));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    assert_string_equal(d->message,
                        "no schedulable node (1 registered, none alive and not draining)");
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

/* A node under disk pressure (issue 23) takes no new workers, like a drained one; when it is the
 * only one left, the reason says so. */
static void disk_pressure_node_is_avoided_and_named(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc full = ts_gpu_node("full", 8);
    full.disk_pressure = true;
    ts_add_node(s, full);
    ts_add_node(s, ts_gpu_node("ok", 8));
    ts_add_job(s, ts_gpu_job(10, 1, 1));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_string_equal(d->workers[0].node_id, "ok");
    sched_result_destroy(r);
    sched_snapshot_destroy(s);

    s = ts_new();
    ts_add_node(s, full);
    ts_add_job(s, ts_gpu_job(10, 1, 1));
    r = ts_pass(s, 0);
    d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_UNSCHEDULABLE);
    assert_string_equal(d->message, "no schedulable node (1 registered; 1 alive and not draining, "
                                    "under disk pressure: its agent's data directory is short of "
                                    "free space)");
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void busy_cluster_job_is_waiting_not_unschedulable(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 1, 100, "n0", 0xff);
    ts_add_job(s, ts_gpu_job(10, 1, 8));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 10);
    assert_int_equal(d->outcome, SCHED_WAITING);
    assert_int_equal(strncmp(d->message, "waiting for resources: 0 of 1 workers fit now", 45), 0);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void placed_job_message_counts_workers_and_nodes(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 8));
    ts_add_job(s, ts_gpu_job(10, 12, 1));
    sched_result *r = ts_pass(s, 0);
    assert_string_equal(ts_find(r, 10)->message, "placed 12 workers on 2 nodes");
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(unschedulable_reason_names_resource),
    cmocka_unit_test(disk_pressure_node_is_avoided_and_named),
    cmocka_unit_test(unschedulable_reason_names_memory),
    cmocka_unit_test(unschedulable_reason_names_fractional_cpu),
    cmocka_unit_test(unschedulable_reason_names_custom_resource),
    cmocka_unit_test(strict_pack_reason_names_per_node_need),
    cmocka_unit_test(pack_reason_names_cluster_total),
    cmocka_unit_test(no_schedulable_node_reason),
    cmocka_unit_test(busy_cluster_job_is_waiting_not_unschedulable),
    cmocka_unit_test(placed_job_message_counts_workers_and_nodes),
};

TY_TEST_MAIN(tests)
