/* Scheduler: the head job's reservation and EASY backfill around it. */
#include "ty_test.h"

#include <string.h>

#include "scheduler/sched.h"
#include "test_sched_fixture.h"

/* One 8-GPU node, half of it held until t=100, and a head job (id 1) that needs all 8. */
static sched_snapshot *half_busy_node_and_head(void)
{
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 100, 100, "n0", 0x0f);
    ts_add_job(s, ts_gpu_job(1, 1, 8));
    return s;
}

static sched_job_desc job_with_timeout(int64_t id, int gpus, int64_t timeout_s)
{
    sched_job_desc j = ts_gpu_job(id, 1, gpus);
    j.timeout_s = timeout_s;
    return j;
}

static void backfill_never_delays_head_job(void **state)
{
    (void)state;
    sched_snapshot *s = half_busy_node_and_head();
    ts_add_job(s, job_with_timeout(2, 4, 1000)); /* would still hold 4 GPUs at t=100 */
    ts_add_job(s, job_with_timeout(3, 4, 0));    /* would hold them forever */
    sched_result *r = ts_pass(s, 0);
    const sched_decision *head = ts_find(r, 1);
    assert_int_equal(head->outcome, SCHED_WAITING);
    assert_true(head->is_head);
    assert_int_equal(head->reserved_start, 100);
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_WAITING);
    assert_non_null(strstr(ts_find(r, 2)->message, "without delaying job 1"));
    assert_int_equal(ts_find(r, 3)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void backfill_starts_short_job_that_ends_before_head_reservation(void **state)
{
    (void)state;
    sched_snapshot *s = half_busy_node_and_head();
    ts_add_job(s, job_with_timeout(2, 4, 100)); /* ends exactly at the reservation */
    sched_result *r = ts_pass(s, 0);
    const sched_decision *d = ts_find(r, 2);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_int_equal(d->num_workers, 1);
    assert_non_null(strstr(d->message, "backfilled"));
    assert_int_equal(ts_find(r, 1)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void job_without_timeout_cannot_backfill_into_reserved_nodes(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_node(s, ts_gpu_node("n1", 8));
    ts_add_running(s, 100, 100, "n0", 0x0f); /* n0 frees up first: the head reserves it */
    ts_add_running(s, 101, 1000, "n1", 0x0f);
    ts_add_job(s, ts_gpu_job(1, 1, 8));
    ts_add_job(s, job_with_timeout(2, 4, 0));
    ts_add_job(s, job_with_timeout(3, 4, 0));
    sched_result *r = ts_pass(s, 0);
    assert_true(ts_find(r, 1)->is_head);
    const sched_decision *d = ts_find(r, 2);
    assert_int_equal(d->outcome, SCHED_PLACED);
    assert_string_equal(d->workers[0].node_id, "n1"); /* n0 would be first otherwise */
    assert_int_equal(ts_find(r, 3)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void long_job_backfills_onto_resources_head_leaves_spare(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 100, 100, "n0", 0x3f); /* 2 free now, 8 at t=100 */
    ts_add_job(s, ts_gpu_job(1, 1, 4));      /* the head takes 4 of those 8 */
    ts_add_job(s, job_with_timeout(2, 2, 0));
    sched_result *r = ts_pass(s, 0);
    assert_true(ts_find(r, 1)->is_head);
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_PLACED);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void short_job_cannot_backfill_when_head_waits_on_job_without_timeout(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 100, SCHED_TIME_NEVER, "n0", 0x0f);
    ts_add_job(s, ts_gpu_job(1, 1, 8));
    ts_add_job(s, job_with_timeout(2, 4, 10));
    sched_result *r = ts_pass(s, 0);
    const sched_decision *head = ts_find(r, 1);
    assert_true(head->is_head);
    assert_int_equal(head->reserved_start, SCHED_TIME_NEVER);
    assert_non_null(strstr(head->message, "without a timeout"));
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_WAITING);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void head_reserved_at_earliest_end_that_frees_enough(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    ts_add_running(s, 100, 300, "n0", 0x0f);
    ts_add_running(s, 101, 200, "n0", 0xf0);
    ts_add_job(s, ts_gpu_job(1, 1, 4));
    sched_result *r = ts_pass(s, 0);
    assert_true(ts_find(r, 1)->is_head);
    assert_int_equal(ts_find(r, 1)->reserved_start, 200);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void reservation_includes_jobs_placed_earlier_in_pass(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    sched_job_desc first = job_with_timeout(1, 8, 50);
    first.priority = 10;
    ts_add_job(s, first);
    ts_add_job(s, ts_gpu_job(2, 1, 8));
    sched_result *r = ts_pass(s, 1000);
    assert_int_equal(ts_find(r, 1)->outcome, SCHED_PLACED);
    assert_true(ts_find(r, 2)->is_head);
    assert_int_equal(ts_find(r, 2)->reserved_start, 1050);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void only_first_blocked_job_gets_reservation(void **state)
{
    (void)state;
    sched_snapshot *s = half_busy_node_and_head();
    ts_add_job(s, ts_gpu_job(2, 1, 6));
    sched_result *r = ts_pass(s, 0);
    assert_true(ts_find(r, 1)->is_head);
    assert_false(ts_find(r, 2)->is_head);
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_WAITING);
    assert_int_equal(ts_find(r, 2)->reserved_start, SCHED_TIME_NEVER);
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static void unschedulable_job_does_not_block_others(void **state)
{
    (void)state;
    sched_snapshot *s = ts_new();
    ts_add_node(s, ts_gpu_node("n0", 8));
    sched_job_desc huge = ts_gpu_job(1, 1, 16);
    huge.priority = 10;
    ts_add_job(s, huge);
    ts_add_job(s, job_with_timeout(2, 8, 0)); /* would be refused if job 1 held a reservation */
    sched_result *r = ts_pass(s, 0);
    assert_int_equal(ts_find(r, 1)->outcome, SCHED_UNSCHEDULABLE);
    assert_false(ts_find(r, 1)->is_head);
    assert_int_equal(ts_find(r, 2)->outcome, SCHED_PLACED);
    assert_null(strstr(ts_find(r, 2)->message, "backfilled"));
    sched_result_destroy(r);
    sched_snapshot_destroy(s);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(backfill_never_delays_head_job),
    cmocka_unit_test(backfill_starts_short_job_that_ends_before_head_reservation),
    cmocka_unit_test(job_without_timeout_cannot_backfill_into_reserved_nodes),
    cmocka_unit_test(long_job_backfills_onto_resources_head_leaves_spare),
    cmocka_unit_test(short_job_cannot_backfill_when_head_waits_on_job_without_timeout),
    cmocka_unit_test(head_reserved_at_earliest_end_that_frees_enough),
    cmocka_unit_test(reservation_includes_jobs_placed_earlier_in_pass),
    cmocka_unit_test(only_first_blocked_job_gets_reservation),
    cmocka_unit_test(unschedulable_job_does_not_block_others),
};

TY_TEST_MAIN(tests)
