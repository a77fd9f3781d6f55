/* Unit tests for server/control/control_snapshot.c: the scheduler snapshot built from the store's
 * rows. Each test builds rows as store_sched_snapshot would return them, builds the snapshot, runs
 * one scheduler pass and checks the decision: the snapshot itself is opaque. */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_snapshot.h"

#define NOW 1000

struct notes {
    int count, bugs;
    char last[512];
};

static void record_note(void *arg, bool bug, const char *message)
{
    struct notes *n = arg;
    n->count++;
    n->bugs += bug;
    snprintf(n->last, sizeof(n->last), "%s", message);
}

static struct store_sched_node node(const char *id, const char *resources)
{
    return (struct store_sched_node){
        .id = id, .address = "127.0.0.1", .alive = true, .resources_json = resources};
}

static struct store_sched_worker worker(int64_t job, const char *node_id, const char *resources,
                                        const char *gpus)
{
    return (struct store_sched_worker){.job = job,
                                       .node_id = node_id,
                                       .resources_json = resources,
                                       .gpus_json = gpus,
                                       .end_epoch = -1};
}

/* A spec of `n` workers each needing cpu_milli and gpus. */
static struct jobspec spec(int n, int64_t cpu_milli, int gpus)
{
    return (struct jobspec){.num_workers_min = n,
                            .num_workers_max = n,
                            .cpu_milli = cpu_milli,
                            .gpu = gpus,
                            .strategy = JOBSPEC_STRATEGY_PACK};
}

/* Builds the snapshot of `rows` (one spec per pending row), runs a pass at NOW and returns the
 * result; *snap is kept for reading GPU ids back. */
static sched_result *run(const struct store_sched_rows *rows, const struct jobspec *const *specs,
                         struct notes *notes, struct ctl_snapshot *snap)
{
    assert_int_equal(ctl_snapshot_build(rows, specs, record_note, notes, snap), 0);
    sched_result *result = NULL;
    assert_int_equal(sched_run_pass(snap->snap, NOW, &result), 0);
    return result;
}

static void snapshot_gpu_ids_map_to_scheduler_indices(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 4, \"GPU\": [3, 5]}")};
    struct store_sched_pending pending[] = {{.id = 1}};
    struct jobspec js = spec(1, 1000, 2);
    const struct jobspec *specs[] = {&js};
    struct store_sched_rows rows = {.nodes = nodes, .nnodes = 1, .pending = pending, .npending = 1};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(snap.nnodes, 1);
    assert_int_equal(snap.nodes[0].ngpus, 2);
    assert_int_equal(snap.nodes[0].gpu_ids[0], 3);
    assert_int_equal(snap.nodes[0].gpu_ids[1], 5);
    const sched_decision *d = sched_result_find(r, 1);
    assert_non_null(d);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->workers[0].ngpus, 2);
    assert_int_equal(snap.nodes[d->workers[0].node_index].gpu_ids[d->workers[0].gpus[1]], 5);
    assert_int_equal(notes.count, 0);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_running_workers_hold_their_gpus(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 4, \"GPU\": [3, 5]}")};
    struct store_sched_worker workers[] = {worker(9, "a", "{\"CPU\": 1, \"GPU\": 1}", "[5]")};
    /* Job 2 first (priority): job 1 as head would hold back a job without a timeout. */
    struct store_sched_pending pending[] = {{.id = 1}, {.id = 2, .priority = 1}};
    struct jobspec two = spec(1, 1000, 2), one = spec(1, 1000, 1);
    const struct jobspec *specs[] = {&two, &one};
    struct store_sched_rows rows = {.nodes = nodes,
                                    .nnodes = 1,
                                    .workers = workers,
                                    .nworkers = 1,
                                    .pending = pending,
                                    .npending = 2};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(sched_result_find(r, 1)->outcome, SCHED_WAITING);
    const sched_decision *d = sched_result_find(r, 2);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(snap.nodes[0].gpu_ids[d->workers[0].gpus[0]], 3);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_workers_of_a_job_on_one_node_are_summed(void **state)
{
    (void)state;
    /* 3 CPUs, two workers of job 9 hold 1 each: 1 left, so a job needing 2 waits. Counting only
     * one of them would leave 2 and place it. */
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 3}")};
    struct store_sched_worker workers[] = {worker(9, "a", "{\"CPU\": 1}", "[]"),
                                           worker(9, "a", "{\"CPU\": 1}", "[]")};
    struct store_sched_pending pending[] = {{.id = 1}, {.id = 2}};
    struct jobspec big = spec(1, 2000, 0), small = spec(1, 1000, 0);
    const struct jobspec *specs[] = {&big, &small};
    struct store_sched_rows rows = {.nodes = nodes,
                                    .nnodes = 1,
                                    .workers = workers,
                                    .nworkers = 2,
                                    .pending = pending,
                                    .npending = 2};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(sched_result_find(r, 1)->outcome, SCHED_WAITING);
    assert_int_equal(sched_result_find(r, 2)->outcome, SCHED_PLACED);
    assert_int_equal(notes.count, 0);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_custom_resources_and_fractional_cpus_are_read(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 1.5, \"ib\": 2, \"memory_mb\": 64}")};
    struct store_sched_worker workers[] = {worker(9, "a", "{\"ib\": 1.5}", "[]")};
    struct store_sched_pending pending[] = {{.id = 1}, {.id = 2}, {.id = 3}};
    struct jobspec fits = spec(1, 1500, 0), too_much_cpu = spec(1, 1600, 0),
                   too_much_ib = spec(1, 0, 0);
    struct jobspec_resource ib = {.name = (char[]){"ib"}, .amount_milli = 1000};
    too_much_ib.custom = &ib;
    too_much_ib.n_custom = 1;
    const struct jobspec *specs[] = {&too_much_cpu, &too_much_ib, &fits};
    struct store_sched_rows rows = {.nodes = nodes,
                                    .nnodes = 1,
                                    .workers = workers,
                                    .nworkers = 1,
                                    .pending = pending,
                                    .npending = 3};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(sched_result_find(r, 1)->outcome, SCHED_UNSCHEDULABLE);
    assert_int_equal(sched_result_find(r, 2)->outcome, SCHED_WAITING);
    assert_int_equal(sched_result_find(r, 3)->outcome, SCHED_PLACED);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_running_end_time_sets_the_head_reservation(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 1}")};
    struct store_sched_worker workers[] = {worker(9, "a", "{\"CPU\": 1}", "[]")};
    struct store_sched_pending pending[] = {{.id = 1}};
    struct jobspec js = spec(1, 1000, 0);
    const struct jobspec *specs[] = {&js};
    struct store_sched_rows rows = {.nodes = nodes,
                                    .nnodes = 1,
                                    .workers = workers,
                                    .nworkers = 1,
                                    .pending = pending,
                                    .npending = 1};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_true(sched_result_find(r, 1)->is_head);
    assert_true(sched_result_find(r, 1)->reserved_start == SCHED_TIME_NEVER);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);

    workers[0].end_epoch = NOW + 500;
    r = run(&rows, specs, &notes, &snap);
    assert_int_equal(sched_result_find(r, 1)->reserved_start, NOW + 500);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_lost_draining_and_typed_nodes_are_honoured(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("lost", "{\"CPU\": 8}"),
                                       node("drained", "{\"CPU\": 8}"),
                                       node("h100", "{\"CPU\": 1, \"GPU\": [0]}")};
    nodes[0].alive = false;
    nodes[1].draining = true;
    nodes[2].gpu_type = "H100";
    struct store_sched_pending pending[] = {{.id = 1}, {.id = 2}, {.id = 3}};
    struct jobspec cpu4 = spec(1, 4000, 0), a100 = spec(1, 1000, 1), h100 = spec(1, 1000, 1);
    a100.accelerator_type = (char[]){"A100"};
    h100.accelerator_type = (char[]){"h100"};
    const struct jobspec *specs[] = {&cpu4, &a100, &h100};
    struct store_sched_rows rows = {.nodes = nodes, .nnodes = 3, .pending = pending, .npending = 3};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_not_equal(sched_result_find(r, 1)->outcome, SCHED_PLACED);
    assert_int_equal(sched_result_find(r, 2)->outcome, SCHED_UNSCHEDULABLE);
    const sched_decision *d = sched_result_find(r, 3);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_string_equal(d->workers[0].node_id, "h100");
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_pending_rows_give_priority_and_submit_time(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 1}")};
    struct store_sched_pending pending[] = {{.id = 1, .priority = 0, .created_epoch = 10},
                                            {.id = 2, .priority = 5, .created_epoch = 20},
                                            {.id = 3, .priority = 5, .created_epoch = 15}};
    struct jobspec js = spec(1, 1000, 0);
    const struct jobspec *specs[] = {&js, &js, &js};
    struct store_sched_rows rows = {.nodes = nodes, .nnodes = 1, .pending = pending, .npending = 3};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(sched_result_find(r, 3)->outcome, SCHED_PLACED);
    assert_int_not_equal(sched_result_find(r, 2)->outcome, SCHED_PLACED);
    assert_int_not_equal(sched_result_find(r, 1)->outcome, SCHED_PLACED);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_jobs_without_a_spec_are_left_out(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 4}")};
    struct store_sched_pending pending[] = {{.id = 1}, {.id = 2}};
    struct jobspec js = spec(1, 1000, 0);
    const struct jobspec *specs[] = {NULL, &js};
    struct store_sched_rows rows = {.nodes = nodes, .nnodes = 1, .pending = pending, .npending = 2};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(sched_result_count(r), 1);
    assert_null(sched_result_find(r, 1));
    assert_int_equal(sched_result_find(r, 2)->outcome, SCHED_PLACED);
    assert_int_equal(notes.count, 0);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_refused_node_is_noted_and_later_indices_stay_right(void **state)
{
    (void)state;
    /* The second "a" is refused (duplicate id): node "b" becomes scheduler index 1, not 2, and
     * its GPU ids must be found there. */
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 1}"), node("a", "{\"CPU\": 1}"),
                                       node("b", "{\"CPU\": 4, \"GPU\": [7, 8]}")};
    struct store_sched_worker workers[] = {worker(9, "b", "{\"CPU\": 1, \"GPU\": 1}", "[7]")};
    struct store_sched_pending pending[] = {{.id = 1}};
    struct jobspec js = spec(1, 1000, 1);
    const struct jobspec *specs[] = {&js};
    struct store_sched_rows rows = {.nodes = nodes,
                                    .nnodes = 3,
                                    .workers = workers,
                                    .nworkers = 1,
                                    .pending = pending,
                                    .npending = 1};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(notes.count, 1);
    assert_int_equal(notes.bugs, 0);
    assert_non_null(strstr(notes.last, "node a left out"));
    assert_int_equal(snap.nnodes, 2);
    const sched_decision *d = sched_result_find(r, 1);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_string_equal(d->workers[0].node_id, "b");
    assert_int_equal(snap.nodes[d->workers[0].node_index].gpu_ids[d->workers[0].gpus[0]], 8);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_worker_on_an_unknown_node_is_noted_as_a_bug(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 1}")};
    struct store_sched_worker workers[] = {worker(9, "gone", "{\"CPU\": 1}", "[]")};
    struct store_sched_pending pending[] = {{.id = 1}};
    struct jobspec js = spec(1, 1000, 0);
    const struct jobspec *specs[] = {&js};
    struct store_sched_rows rows = {.nodes = nodes,
                                    .nnodes = 1,
                                    .workers = workers,
                                    .nworkers = 1,
                                    .pending = pending,
                                    .npending = 1};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(notes.bugs, 1);
    assert_non_null(strstr(notes.last, "job 9"));
    assert_int_equal(sched_result_find(r, 1)->outcome, SCHED_PLACED);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_job_the_scheduler_refuses_is_noted(void **state)
{
    (void)state;
    struct store_sched_node nodes[] = {node("a", "{\"CPU\": 1}")};
    struct store_sched_pending pending[] = {{.id = 1}};
    struct jobspec js = spec(0, 1000, 0); /* no workers */
    const struct jobspec *specs[] = {&js};
    struct store_sched_rows rows = {.nodes = nodes, .nnodes = 1, .pending = pending, .npending = 1};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, specs, &notes, &snap);
    assert_int_equal(notes.count, 1);
    assert_int_equal(notes.bugs, 0);
    assert_non_null(strstr(notes.last, "job 1 cannot be queued"));
    assert_int_equal(sched_result_count(r), 0);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
}

static void snapshot_of_empty_rows_is_empty(void **state)
{
    (void)state;
    struct store_sched_rows rows = {0};
    struct notes notes = {0};
    struct ctl_snapshot snap;
    sched_result *r = run(&rows, NULL, &notes, &snap);
    assert_int_equal(sched_result_count(r), 0);
    assert_int_equal(snap.nnodes, 0);
    sched_result_destroy(r);
    ctl_snapshot_free(&snap);
    ctl_snapshot_free(&snap); /* freeing twice is safe: it zeroes */
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(snapshot_gpu_ids_map_to_scheduler_indices),
    cmocka_unit_test(snapshot_running_workers_hold_their_gpus),
    cmocka_unit_test(snapshot_workers_of_a_job_on_one_node_are_summed),
    cmocka_unit_test(snapshot_custom_resources_and_fractional_cpus_are_read),
    cmocka_unit_test(snapshot_running_end_time_sets_the_head_reservation),
    cmocka_unit_test(snapshot_lost_draining_and_typed_nodes_are_honoured),
    cmocka_unit_test(snapshot_pending_rows_give_priority_and_submit_time),
    cmocka_unit_test(snapshot_jobs_without_a_spec_are_left_out),
    cmocka_unit_test(snapshot_refused_node_is_noted_and_later_indices_stay_right),
    cmocka_unit_test(snapshot_worker_on_an_unknown_node_is_noted_as_a_bug),
    cmocka_unit_test(snapshot_job_the_scheduler_refuses_is_noted),
    cmocka_unit_test(snapshot_of_empty_rows_is_empty),
};

TY_TEST_MAIN(tests)
