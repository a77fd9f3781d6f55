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

static void cpus_and_gpus_count_per_owner_with_own_limits(void **state)
{
    (void)state;
    struct quota_limit limits[] = {{"b", {4000, 0}}};
    struct quota_use dflt = {2000, 1};
    const char *running[] = {"a", "b"};
    struct quota_use used[] = {{1000, 1}, {3000, 0}};
    const char *pending[] = {"a", "a", "b", "b"};
    struct quota_use min[] = {{1000, 0}, {500, 0}, {1000, 2}, {500, 0}};
    struct quota_use max[] = {{1000, 0}, {500, 0}, {1000, 2}, {500, 0}};
    bool ok[4];
    assert_int_equal(
        quota_admit_resources(limits, 1, dflt, running, used, 2, pending, min, max, 4, ok), 0);
    assert_true(ok[0]);  /* a: 1 + 1 <= 2 CPUs, no GPU asked */
    assert_false(ok[1]); /* a: 2 + 0.5 > 2 */
    assert_true(ok[2]);  /* b: its own limits, 3 + 1 <= 4 CPUs and no GPU limit */
    assert_false(ok[3]); /* b: 4 + 0.5 > 4 */
}

static void gpus_alone_can_hold_a_job_back(void **state)
{
    (void)state;
    struct quota_use dflt = {0, 2};
    const char *pending[] = {"a", "a"};
    struct quota_use min[] = {{8000, 2}, {0, 1}};
    struct quota_use max[] = {{8000, 2}, {0, 1}};
    bool ok[2];
    assert_int_equal(quota_admit_resources(NULL, 0, dflt, NULL, NULL, 0, pending, min, max, 2, ok),
                     0);
    assert_true(ok[0]);
    assert_false(ok[1]);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(cpus_and_gpus_count_per_owner_with_own_limits),
    cmocka_unit_test(gpus_alone_can_hold_a_job_back),
    cmocka_unit_test(no_quota_admits_everything),
    cmocka_unit_test(running_workers_count_against_their_owner_only),
    cmocka_unit_test(admitted_jobs_count_their_maximum_for_later_ones),
    cmocka_unit_test(a_job_larger_than_the_quota_never_runs),
};

TY_TEST_MAIN(tests)
