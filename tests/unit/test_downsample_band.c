/* Unit tests for min/max band downsampling (server/store/downsample_band.c): buckets tile the
 * series in order, each names its first, last, smallest and largest point. */
#include "ty_test.h"

#include <math.h>
#include <stdlib.h>

#include "downsample.h"

static void band_of_short_series_is_one_bucket_per_point(void **state)
{
    (void)state;
    const double y[] = {3, 1, 2};
    struct srv_band out[8];
    assert_int_equal(srv_downsample_band(y, 3, 8, out), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(out[i].first, i);
        assert_int_equal(out[i].last, i);
        assert_int_equal(out[i].min, i);
        assert_int_equal(out[i].max, i);
        assert_int_equal(out[i].count, 1);
    }
}

static void band_of_nothing_is_empty(void **state)
{
    (void)state;
    const double y[] = {1};
    struct srv_band out[1];
    assert_int_equal(srv_downsample_band(NULL, 0, 4, out), 0);
    assert_int_equal(srv_downsample_band(y, 1, 0, out), 0);
}

static void band_buckets_tile_the_series_in_order(void **state)
{
    (void)state;
    double y[1000];
    struct srv_band out[64];
    for (size_t i = 0; i < 1000; i++)
        y[i] = (double)(i % 17);
    for (size_t n = 1; n <= 1000; n += 37) {
        for (size_t buckets = 1; buckets <= 64; buckets += 7) {
            size_t nb = srv_downsample_band(y, n, buckets, out);
            assert_int_equal(nb, n < buckets ? n : buckets);
            size_t next = 0, total = 0;
            for (size_t b = 0; b < nb; b++) {
                assert_int_equal(out[b].first, next);
                assert_true(out[b].last >= out[b].first);
                assert_int_equal(out[b].count, out[b].last - out[b].first + 1);
                assert_true(out[b].min >= out[b].first && out[b].min <= out[b].last);
                assert_true(out[b].max >= out[b].first && out[b].max <= out[b].last);
                for (size_t i = out[b].first; i <= out[b].last; i++) {
                    assert_true(y[i] >= y[out[b].min]);
                    assert_true(y[i] <= y[out[b].max]);
                }
                next = out[b].last + 1;
                total += out[b].count;
            }
            assert_int_equal(next, n);
            assert_int_equal(total, n);
        }
    }
}

static void band_keeps_a_spike_and_a_dip(void **state)
{
    (void)state;
    double y[100];
    for (size_t i = 0; i < 100; i++)
        y[i] = 1.0;
    y[37] = 100.0;
    y[38] = -5.0;
    struct srv_band out[4];
    assert_int_equal(srv_downsample_band(y, 100, 4, out), 4);
    assert_int_equal(out[1].first, 25);
    assert_int_equal(out[1].last, 49);
    assert_int_equal(out[1].max, 37);
    assert_int_equal(out[1].min, 38);
    assert_int_equal(out[0].first, 0);
    assert_int_equal(out[3].last, 99);
}

static void band_ignores_non_finite_values(void **state)
{
    (void)state;
    const double y[] = {NAN, 2, INFINITY, -1, NAN, NAN};
    struct srv_band out[2];
    assert_int_equal(srv_downsample_band(y, 6, 2, out), 2);
    assert_int_equal(out[0].min, 1);
    assert_int_equal(out[0].max, 1);
    assert_int_equal(out[1].min, 3);
    assert_int_equal(out[1].max, 3);
    const double all_nan[] = {NAN, NAN};
    assert_int_equal(srv_downsample_band(all_nan, 2, 1, out), 1);
    assert_int_equal(out[0].min, 0);
    assert_int_equal(out[0].max, 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(band_of_short_series_is_one_bucket_per_point),
    cmocka_unit_test(band_of_nothing_is_empty),
    cmocka_unit_test(band_buckets_tile_the_series_in_order),
    cmocka_unit_test(band_keeps_a_spike_and_a_dip),
    cmocka_unit_test(band_ignores_non_finite_values),
};

TY_TEST_MAIN(tests)
