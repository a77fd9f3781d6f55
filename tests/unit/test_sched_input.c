/* Scheduler: the snapshot API refuses bad input and leaves the snapshot unchanged. */
#include "ty_test.h"

#include <string.h>

#include "scheduler/sched.h"
#include "test_sched_fixture.h"

static void add_node_rejects_duplicate_id(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc d = ts_gpu_node("n0", 8);
    assert_int_equal(sched_add_node(s, &d, NULL), SCHED_OK);
    assert_int_equal(sched_add_node(s, &d, NULL), SCHED_EEXIST);
    assert_int_equal(sched_find_node(s, "n0"), 0);
    assert_int_equal(sched_find_node(s, "n1"), -1);
    sched_snapshot_destroy(s);
}

static void add_node_rejects_bad_resources(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_node_desc d = ts_gpu_node("n0", 65);
    assert_int_equal(sched_add_node(s, &d, NULL), SCHED_EINVAL);
    d = ts_gpu_node("n0", 8);
    d.cpu_milli = -1;
    assert_int_equal(sched_add_node(s, &d, NULL), SCHED_EINVAL);
    d = ts_gpu_node("", 8);
    assert_int_equal(sched_add_node(s, &d, NULL), SCHED_EINVAL);
    sched_custom twice[2] = {{"x", 1000}, {"x", 1000}};
    d = ts_gpu_node("n0", 8);
    d.custom = twice;
    d.ncustom = 2;
    assert_int_equal(sched_add_node(s, &d, NULL), SCHED_EINVAL);
    assert_int_equal(sched_find_node(s, "n0"), -1);
    sched_snapshot_destroy(s);
}

static void add_running_rejects_unknown_node(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_alloc_desc a = {.node_id = "ghost", .gpu_mask = 1};
    assert_int_equal(sched_add_running(s, 1, 100, &a, 1), SCHED_ENOENT);
    sched_snapshot_destroy(s);
}

static void add_running_rejects_gpu_already_held_and_rolls_back(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 1, 100, "n0", 0x1);
    sched_alloc_desc a[2] = {{.node_id = "n0", .gpu_mask = 0x2},
                             {.node_id = "n0", .gpu_mask = 0x1}};
    assert_int_equal(sched_add_running(s, 2, 100, a, 2), SCHED_ERANGE);
    sched_alloc_desc beyond = {.node_id = "n0", .gpu_mask = 0x100}; /* GPU 8 of 0..7 */
    assert_int_equal(sched_add_running(s, 3, 100, &beyond, 1), SCHED_ERANGE);
    ts_add_job(s, ts_gpu_job(10, 1, 7)); /* GPU 1 was given back: 7 free */
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 10)->outcome, SCHED_PLACED);
    assert_null(sched_result_find(r, 2));
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void add_running_rejects_more_cpu_than_free(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    sched_alloc_desc a = {.node_id = "n0", .cpu_milli = 64001};
    assert_int_equal(sched_add_running(s, 1, 100, &a, 1), SCHED_ERANGE);
    sched_snapshot_destroy(s);
}

static void add_pending_rejects_bad_worker_counts(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_job_desc j = ts_gpu_job(1, 0, 1);
    assert_int_equal(sched_add_pending(s, &j), SCHED_EINVAL);
    j = ts_gpu_job(1, 4, 1);
    j.max_workers = 2;
    assert_int_equal(sched_add_pending(s, &j), SCHED_EINVAL);
    j = ts_gpu_job(1, 4, 1);
    j.timeout_s = -1;
    assert_int_equal(sched_add_pending(s, &j), SCHED_EINVAL);
    j = ts_gpu_job(1, 4, 1);
    j.strategy = (sched_strategy)7;
    assert_int_equal(sched_add_pending(s, &j), SCHED_EINVAL);
    sched_snapshot_destroy(s);
}

static void add_pending_rejects_empty_bundle(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_job_desc j = {.id = 1, .min_workers = 1, .max_workers = 1};
    assert_int_equal(sched_add_pending(s, &j), SCHED_EINVAL);
    sched_snapshot_destroy(s);
}

static void add_pending_rejects_duplicate_job_id(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 7, 100, "n0", 0x1);
    sched_job_desc j = ts_gpu_job(7, 1, 1);
    assert_int_equal(sched_add_pending(s, &j), SCHED_EEXIST);
    j.id = 8;
    assert_int_equal(sched_add_pending(s, &j), SCHED_OK);
    assert_int_equal(sched_add_pending(s, &j), SCHED_EEXIST);
    sched_snapshot_destroy(s);
}

static void strategy_names_round_trip(void **state)
{
    (void)state;
    for (int i = SCHED_PACK; i <= SCHED_STRICT_SPREAD; i++) {
        sched_strategy st;
        assert_int_equal(sched_strategy_from_string(sched_strategy_name((sched_strategy)i), &st),
                         SCHED_OK);
        assert_int_equal(st, i);
    }
    sched_strategy st;
    assert_int_equal(sched_strategy_from_string("pack", &st), SCHED_EINVAL);
    assert_string_equal(sched_strategy_name((sched_strategy)9), "?");
}

static void strerror_describes_codes(void **state)
{
    (void)state;
    assert_string_equal(sched_strerror(SCHED_OK), "success");
    assert_string_equal(sched_strerror(SCHED_EEXIST), "duplicate id");
    assert_string_equal(sched_strerror(-999), "unknown error");
}

static void empty_snapshot_gives_empty_result(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(sched_result_count(r), 0);
    assert_null(sched_result_decision(r, 0));
    size_t jobs = 9, workers = 9;
    sched_result_totals(r, &jobs, &workers);
    assert_int_equal(jobs, 0);
    assert_int_equal(workers, 0);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void null_arguments_rejected(void **state)
{
    (void)state;
    sched_result *r = (sched_result *)&r;
    assert_int_equal(sched_run_pass(NULL, 0, &r), SCHED_EINVAL);
    assert_int_equal(sched_add_node(NULL, NULL, NULL), SCHED_EINVAL);
    assert_int_equal(sched_add_pending(NULL, NULL), SCHED_EINVAL);
    sched_snapshot_destroy(NULL);
    sched_result_destroy(NULL);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(add_node_rejects_duplicate_id),
    cmocka_unit_test(add_node_rejects_bad_resources),
    cmocka_unit_test(add_running_rejects_unknown_node),
    cmocka_unit_test(add_running_rejects_gpu_already_held_and_rolls_back),
    cmocka_unit_test(add_running_rejects_more_cpu_than_free),
    cmocka_unit_test(add_pending_rejects_bad_worker_counts),
    cmocka_unit_test(add_pending_rejects_empty_bundle),
    cmocka_unit_test(add_pending_rejects_duplicate_job_id),
    cmocka_unit_test(strategy_names_round_trip),
    cmocka_unit_test(strerror_describes_codes),
    cmocka_unit_test(empty_snapshot_gives_empty_result),
    cmocka_unit_test(null_arguments_rejected),
};

TY_TEST_MAIN(tests)
