/* Unit tests for server/store/downsample.c: Largest-Triangle-Three-Buckets metric downsampling. */
#include "ty_test.h"

#include <math.h>
#include <stdlib.h>

#include "downsample.h"

/* A series with x = 0, 1, 2, ... and y from `f`. Caller frees both arrays. */
static void make_series(size_t n, double (*f)(size_t), double **x, double **y)
{
    *x = malloc((n ? n : 1) * sizeof(double));
    *y = malloc((n ? n : 1) * sizeof(double));
    assert_non_null(*x);
    assert_non_null(*y);
    for (size_t i = 0; i < n; i++) {
        (*x)[i] = (double)i;
        (*y)[i] = f(i);
    }
}

static double flat(size_t i)
{
    (void)i;
    return 1.0;
}

static double line(size_t i)
{
    return 0.5 * (double)i;
}

static double noisy(size_t i)
{
    return sin((double)i * 0.37) + 0.01 * (double)(i % 7);
}

/* Checks the universal properties of a result: count, strictly ascending, in range, ends. */
static void check_result(const size_t *idx, size_t got, size_t n, size_t max_points)
{
    size_t want = n < max_points ? n : max_points;
    assert_int_equal(got, want);
    for (size_t i = 0; i < got; i++) {
        assert_true(idx[i] < n);
        if (i > 0)
            assert_true(idx[i] > idx[i - 1]);
    }
    if (got >= 2) {
        assert_int_equal(idx[0], 0);
        assert_int_equal(idx[got - 1], n - 1);
    }
}

static void short_series_is_returned_whole(void **state)
{
    (void)state;
    double *x, *y;
    make_series(5, line, &x, &y);
    size_t idx[10];
    assert_int_equal(srv_downsample_lttb(x, y, 5, 10, idx), 5);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(idx[i], i);
    free(x);
    free(y);
}

static void series_exactly_at_the_limit_is_returned_whole(void **state)
{
    (void)state;
    double *x, *y;
    make_series(7, noisy, &x, &y);
    size_t idx[7];
    assert_int_equal(srv_downsample_lttb(x, y, 7, 7, idx), 7);
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(idx[i], i);
    free(x);
    free(y);
}

static void empty_series_gives_no_points(void **state)
{
    (void)state;
    size_t idx[1] = {42};
    assert_int_equal(srv_downsample_lttb(NULL, NULL, 0, 10, idx), 0);
    assert_int_equal(idx[0], 42);
}

static void zero_max_points_gives_no_points(void **state)
{
    (void)state;
    double *x, *y;
    make_series(10, line, &x, &y);
    size_t idx[1] = {42};
    assert_int_equal(srv_downsample_lttb(x, y, 10, 0, idx), 0);
    assert_int_equal(idx[0], 42);
    free(x);
    free(y);
}

static void one_point_limit_keeps_the_last_point(void **state)
{
    (void)state;
    double *x, *y;
    make_series(100, noisy, &x, &y);
    size_t idx[1];
    assert_int_equal(srv_downsample_lttb(x, y, 100, 1, idx), 1);
    assert_int_equal(idx[0], 99);
    free(x);
    free(y);
}

static void two_point_limit_keeps_first_and_last(void **state)
{
    (void)state;
    double *x, *y;
    make_series(100, noisy, &x, &y);
    size_t idx[2];
    assert_int_equal(srv_downsample_lttb(x, y, 100, 2, idx), 2);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 99);
    free(x);
    free(y);
}

static void long_series_is_cut_to_exactly_max_points_keeping_ends(void **state)
{
    (void)state;
    double *x, *y;
    make_series(10000, noisy, &x, &y);
    size_t idx[500];
    size_t got = srv_downsample_lttb(x, y, 10000, 500, idx);
    check_result(idx, got, 10000, 500);
    free(x);
    free(y);
}

static void every_size_and_limit_gives_ordered_points_within_limit(void **state)
{
    (void)state;
    double *x, *y;
    make_series(300, noisy, &x, &y);
    size_t idx[300];
    for (size_t n = 0; n <= 300; n += (n < 20 ? 1 : 37))
        for (size_t m = 1; m <= 60; m++) {
            size_t got = srv_downsample_lttb(x, y, n, m, idx);
            check_result(idx, got, n, m);
        }
    free(x);
    free(y);
}

static void each_bucket_contributes_one_point(void **state)
{
    (void)state;
    /* 1 + 8 * 3 + 1 points and 10 kept: each of the 8 buckets holds exactly 3 interior points,
     * so the k-th kept interior point must come from [1 + 3k, 4 + 3k). */
    double *x, *y;
    make_series(26, noisy, &x, &y);
    size_t idx[10];
    assert_int_equal(srv_downsample_lttb(x, y, 26, 10, idx), 10);
    for (size_t k = 0; k < 8; k++) {
        assert_true(idx[k + 1] >= 1 + 3 * k);
        assert_true(idx[k + 1] < 4 + 3 * k);
    }
    free(x);
    free(y);
}

static void a_spike_in_a_flat_series_is_kept(void **state)
{
    (void)state;
    double *x, *y;
    make_series(1000, flat, &x, &y);
    y[613] = 50.0; /* a loss blow-up that every-k-th-point thinning would likely miss */
    y[271] = -20.0;
    size_t idx[20];
    size_t got = srv_downsample_lttb(x, y, 1000, 20, idx);
    check_result(idx, got, 1000, 20);
    int seen_high = 0, seen_low = 0;
    for (size_t i = 0; i < got; i++) {
        seen_high |= idx[i] == 613;
        seen_low |= idx[i] == 271;
    }
    assert_true(seen_high);
    assert_true(seen_low);
    free(x);
    free(y);
}

static void linear_series_keeps_points_on_the_line(void **state)
{
    (void)state;
    double *x, *y;
    make_series(1001, line, &x, &y);
    size_t idx[11];
    size_t got = srv_downsample_lttb(x, y, 1001, 11, idx);
    check_result(idx, got, 1001, 11);
    for (size_t i = 0; i < got; i++)
        assert_true(fabs(y[idx[i]] - 0.5 * x[idx[i]]) < 1e-12);
    free(x);
    free(y);
}

static void identical_x_values_are_handled(void **state)
{
    (void)state;
    /* Reports in the same microsecond share a time. */
    double *x, *y;
    make_series(50, noisy, &x, &y);
    for (size_t i = 0; i < 50; i++)
        x[i] = (double)(i / 10);
    size_t idx[8];
    size_t got = srv_downsample_lttb(x, y, 50, 8, idx);
    check_result(idx, got, 50, 8);
    free(x);
    free(y);
}

static void nan_values_do_not_break_the_selection(void **state)
{
    (void)state;
    double *x, *y;
    make_series(100, noisy, &x, &y);
    for (size_t i = 10; i < 30; i++)
        y[i] = NAN;
    x[50] = NAN;
    size_t idx[12];
    size_t got = srv_downsample_lttb(x, y, 100, 12, idx);
    check_result(idx, got, 100, 12);
    free(x);
    free(y);
}

static void large_series_does_not_overflow_bucket_arithmetic(void **state)
{
    (void)state;
    size_t n = 2000000;
    double *x, *y;
    make_series(n, noisy, &x, &y);
    size_t *idx = malloc(10000 * sizeof(size_t));
    assert_non_null(idx);
    size_t got = srv_downsample_lttb(x, y, n, 10000, idx);
    check_result(idx, got, n, 10000);
    free(idx);
    free(x);
    free(y);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(short_series_is_returned_whole),
    cmocka_unit_test(series_exactly_at_the_limit_is_returned_whole),
    cmocka_unit_test(empty_series_gives_no_points),
    cmocka_unit_test(zero_max_points_gives_no_points),
    cmocka_unit_test(one_point_limit_keeps_the_last_point),
    cmocka_unit_test(two_point_limit_keeps_first_and_last),
    cmocka_unit_test(long_series_is_cut_to_exactly_max_points_keeping_ends),
    cmocka_unit_test(every_size_and_limit_gives_ordered_points_within_limit),
    cmocka_unit_test(each_bucket_contributes_one_point),
    cmocka_unit_test(a_spike_in_a_flat_series_is_kept),
    cmocka_unit_test(linear_series_keeps_points_on_the_line),
    cmocka_unit_test(identical_x_values_are_handled),
    cmocka_unit_test(nan_values_do_not_break_the_selection),
    cmocka_unit_test(large_series_does_not_overflow_bucket_arithmetic),
};

TY_TEST_MAIN(tests)
