/* Unit tests for the Prometheus text writer (server/http/prom.c) and the telemetry histograms
 * (server/telemetry.c): families, samples with escaped labels, cumulative histogram buckets. */
#include "ty_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"

static void prom_family_and_samples_in_text_format(void **state)
{
    (void)state;
    struct prom_buf b;
    prom_init(&b);
    prom_family(&b, "ty_jobs", "gauge", "Jobs by status.\nSecond line \\ here.");
    const char *l[] = {"status", "RUNNING", NULL};
    prom_sample(&b, "ty_jobs", l, 3);
    prom_sample(&b, "ty_plain", NULL, 0.25);
    prom_sample(&b, "ty_third", NULL, 1.0 / 3);
    prom_sample(&b, "ty_big", NULL, 12345678901234.0);
    prom_sample(&b, "ty_nan", NULL, NAN);
    prom_sample(&b, "ty_inf", NULL, -INFINITY);
    assert_non_null(b.text);
    assert_string_equal(b.text, "# HELP ty_jobs Jobs by status.\\nSecond line \\\\ here.\n"
                                "# TYPE ty_jobs gauge\n"
                                "ty_jobs{status=\"RUNNING\"} 3\n"
                                "ty_plain 0.25\n"
                                "ty_third 0.33333333333333331\n"
                                "ty_big 12345678901234\n"
                                "ty_nan NaN\n"
                                "ty_inf -Inf\n");
    assert_int_equal(b.len, strlen(b.text));
    free(b.text);
}

static void prom_label_values_are_escaped(void **state)
{
    (void)state;
    struct prom_buf b;
    prom_init(&b);
    const char *l[] = {"route", "/a/{id}", "x", "say \"hi\"\\\n", NULL};
    prom_sample(&b, "m", l, 1);
    assert_string_equal(b.text, "m{route=\"/a/{id}\",x=\"say \\\"hi\\\"\\\\\\n\"} 1\n");
    free(b.text);
}

static void prom_histogram_buckets_are_cumulative_and_agree_with_count(void **state)
{
    (void)state;
    struct srv_histogram h;
    memset(&h, 0, sizeof(h));
    srv_histogram_observe(&h, 0.0001); /* <= 0.0005 */
    srv_histogram_observe(&h, 0.0005); /* on the bound: in it */
    srv_histogram_observe(&h, 0.003);  /* <= 0.005 */
    srv_histogram_observe(&h, 60);     /* +Inf */
    struct prom_buf b;
    prom_init(&b);
    const char *l[] = {"route", "/r", NULL};
    prom_histogram(&b, "lat", l, &h);
    assert_non_null(strstr(b.text, "lat_bucket{route=\"/r\",le=\"0.0005\"} 2\n"));
    assert_non_null(strstr(b.text, "lat_bucket{route=\"/r\",le=\"0.001\"} 2\n"));
    assert_non_null(strstr(b.text, "lat_bucket{route=\"/r\",le=\"0.0025\"} 2\n"));
    assert_non_null(strstr(b.text, "lat_bucket{route=\"/r\",le=\"0.005\"} 3\n"));
    assert_non_null(strstr(b.text, "lat_bucket{route=\"/r\",le=\"10\"} 3\n"));
    assert_non_null(strstr(b.text, "lat_bucket{route=\"/r\",le=\"+Inf\"} 4\n"));
    assert_non_null(strstr(b.text, "lat_sum{route=\"/r\"} 60.0036\n"));
    assert_non_null(strstr(b.text, "lat_count{route=\"/r\"} 4\n"));
    free(b.text);
}

static void prom_histogram_without_labels(void **state)
{
    (void)state;
    struct srv_histogram h;
    memset(&h, 0, sizeof(h));
    struct prom_buf b;
    prom_init(&b);
    prom_histogram(&b, "pass", NULL, &h);
    assert_non_null(strstr(b.text, "pass_bucket{le=\"+Inf\"} 0\npass_sum 0\npass_count 0\n"));
    free(b.text);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(prom_family_and_samples_in_text_format),
    cmocka_unit_test(prom_label_values_are_escaped),
    cmocka_unit_test(prom_histogram_buckets_are_cumulative_and_agree_with_count),
    cmocka_unit_test(prom_histogram_without_labels),
};

TY_TEST_MAIN(tests)
