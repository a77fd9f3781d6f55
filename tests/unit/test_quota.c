/* Unit tests for server/control/quota.c: the per-user quota of running workers. */
#include "ty_test.h"

#include "quota.h"

static void no_quota_admits_everything(void **state)
{
    (void)state;
    const char *running[] = {"a", "a", "a"};
    const char *pending[] = {"a", "a"};
    int mins[] = {5, 5}, maxs[] = {5, 5};
    bool ok[2] = {false, false};
    assert_int_equal(quota_admit(0, running, 3, pending, mins, maxs, 2, ok), 0);
    assert_true(ok[0]);
    assert_true(ok[1]);
}

static void running_workers_count_against_their_owner_only(void **state)
{
    (void)state;
    const char *running[] = {"a", "a", "a", "b"};
    const char *pending[] = {"a", "b", "a"};
    int mins[] = {2, 2, 1}, maxs[] = {2, 2, 1};
    bool ok[3];
    assert_int_equal(quota_admit(4, running, 4, pending, mins, maxs, 3, ok), 0);
    assert_false(ok[0]); /* 3 running + 2 > 4 */
    assert_true(ok[1]);  /* b: 1 + 2 <= 4 */
    assert_true(ok[2]);  /* a: 3 + 1 <= 4 (the refused job does not count) */
}

static void admitted_jobs_count_their_maximum_for_later_ones(void **state)
{
    (void)state;
    const char *pending[] = {"a", "a"};
    int mins[] = {1, 1}, maxs[] = {3, 1};
    bool ok[2];
    assert_int_equal(quota_admit(3, NULL, 0, pending, mins, maxs, 2, ok), 0);
    assert_true(ok[0]);
    assert_false(ok[1]); /* 3 (the first job's maximum) + 1 > 3 */
}

static void a_job_larger_than_the_quota_never_runs(void **state)
{
    (void)state;
    const char *pending[] = {"a"};
    int mins[] = {5}, maxs[] = {5};
    bool ok[1];
    assert_int_equal(quota_admit(4, NULL, 0, pending, mins, maxs, 1, ok), 0);
    assert_false(ok[0]);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(no_quota_admits_everything),
    cmocka_unit_test(running_workers_count_against_their_owner_only),
    cmocka_unit_test(admitted_jobs_count_their_maximum_for_later_ones),
    cmocka_unit_test(a_job_larger_than_the_quota_never_runs),
};

TY_TEST_MAIN(tests)
