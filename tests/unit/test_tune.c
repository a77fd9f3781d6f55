/* Unit tests for tune/ (tytune): search spaces resolved into trial configs, and the trial
 * schedulers' decisions (ASHA against a recorded sequence with Ray's rungs and cutoffs, median
 * stopping, PBT's exploit and explore). */
#include "ty_test.h"

#include "tune.h"

#include <math.h>
#include <string.h>

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    assert_non_null(v);
    return v;
}

/* ---- search spaces ---- */

static void grid_times_samples_in_order_with_random_domains_in_bounds(void **state)
{
    (void)state;
    json_t *space = parse("{\"lr\": {\"grid_search\": [0.1, 0.01]}, \"opt\": {\"name\": "
                          "{\"grid_search\": [\"sgd\", \"adam\"]}, \"m\": {\"uniform\": [0.5, "
                          "0.9]}}, \"bs\": {\"choice\": [16, 32]}, \"k\": {\"randint\": [1, 4]}, "
                          "\"w\": {\"loguniform\": [1e-4, 1e-1]}, \"q\": {\"quniform\": [0, 10, "
                          "2.5]}, \"const\": 7}");
    json_t *out = NULL;
    char field[128], why[128];
    assert_int_equal(tune_space_resolve(space, 2, 42, &out, field, sizeof(field), why, sizeof(why)),
                     0);
    assert_int_equal(json_array_size(out), 8);
    const double lrs[] = {0.1, 0.1, 0.01, 0.01};
    const char *names[] = {"sgd", "adam", "sgd", "adam"};
    for (size_t i = 0; i < 8; i++) {
        json_t *c = json_array_get(out, i);
        assert_true(json_real_value(json_object_get(c, "lr")) == lrs[i % 4]);
        json_t *opt = json_object_get(c, "opt");
        assert_string_equal(json_string_value(json_object_get(opt, "name")), names[i % 4]);
        double m = json_real_value(json_object_get(opt, "m"));
        assert_true(m >= 0.5 && m < 0.9);
        json_int_t bs = json_integer_value(json_object_get(c, "bs"));
        assert_true(bs == 16 || bs == 32);
        json_int_t k = json_integer_value(json_object_get(c, "k"));
        assert_true(k >= 1 && k < 4);
        double w = json_real_value(json_object_get(c, "w"));
        assert_true(w >= 1e-4 && w <= 1e-1);
        double q = json_real_value(json_object_get(c, "q"));
        assert_true(fmod(q, 2.5) == 0 && q >= 0 && q <= 10);
        assert_int_equal(json_integer_value(json_object_get(c, "const")), 7);
    }
    /* The same seed gives the same sweep. */
    json_t *again = NULL;
    assert_int_equal(
        tune_space_resolve(space, 2, 42, &again, field, sizeof(field), why, sizeof(why)), 0);
    assert_true(json_equal(out, again));
    json_decref(again);
    json_decref(out);
    json_decref(space);
}

static void invalid_spaces_name_the_field(void **state)
{
    (void)state;
    struct {
        const char *space;
        int samples;
        const char *field;
    } cases[] = {
        {"{}", 1, "param_space"},
        {"{\"lr\": {\"uniform\": [1, 0]}}", 1, "param_space.lr.uniform"},
        {"{\"a\": {\"b\": {\"choice\": []}}}", 1, "param_space.a.b.choice"},
        {"{\"w\": {\"loguniform\": [0, 1]}}", 1, "param_space.w.loguniform"},
        {"{\"k\": {\"randint\": [0.5, 3]}}", 1, "param_space.k.randint"},
        {"{\"q\": {\"quniform\": [0, 1]}}", 1, "param_space.q.quniform"},
        {"{\"x\": 1}", 0, "tune_config.num_samples"},
        {"{\"x\": {\"grid_search\": [1,2,3,4,5,6,7,8,9,10]}, \"y\": {\"grid_search\": "
         "[1,2,3,4,5,6,7,8,9,10]}}",
         101, "tune_config.num_samples"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *space = parse(cases[i].space);
        json_t *out = NULL;
        char field[128] = "", why[128] = "";
        assert_int_equal(tune_space_resolve(space, cases[i].samples, 1, &out, field, sizeof(field),
                                            why, sizeof(why)),
                         -1);
        assert_null(out);
        assert_string_equal(field, cases[i].field);
        assert_true(why[0] != '\0');
        json_decref(space);
    }
}

/* ---- ASHA ---- */

static void asha_rungs_as_ray_computes_them(void **state)
{
    (void)state;
    double ms[8];
    struct tune_asha a = {.max_t = 100, .grace_period = 1, .reduction_factor = 4};
    assert_int_equal(tune_asha_rungs(&a, ms, 8), 4);
    assert_true(ms[0] == 64 && ms[1] == 16 && ms[2] == 4 && ms[3] == 1);
    struct tune_asha b = {.max_t = 100, .grace_period = 10, .reduction_factor = 3};
    assert_int_equal(tune_asha_rungs(&b, ms, 8), 3);
    assert_true(ms[0] == 90 && ms[1] == 30 && ms[2] == 10);
    struct tune_asha c = {.max_t = 16, .grace_period = 1, .reduction_factor = 4};
    assert_int_equal(tune_asha_rungs(&c, ms, 8), 3);
    assert_true(ms[0] == 16 && ms[1] == 4 && ms[2] == 1);
}

/* Feeds one result through ASHA and records it where ASHA says, as the server does. */
static enum tune_decision feed(const struct tune_asha *a, struct tune_rung_rec *recs, size_t *n,
                               int trial, double t, double v, char *reason)
{
    double at;
    enum tune_decision d = tune_asha_on_result(a, recs, *n, trial, t, v, &at, reason, 128);
    if (at >= 0)
        recs[(*n)++] = (struct tune_rung_rec){at, trial, v};
    return d;
}

static void asha_stops_below_the_rung_cutoff_on_a_recorded_sequence(void **state)
{
    (void)state;
    struct tune_asha a = {
        .max_t = 16, .grace_period = 1, .reduction_factor = 4, .mode_max = true, .metric = "acc"};
    struct tune_rung_rec recs[16] = {{0, 0, 0}};
    size_t n = 0;
    char why[128];
    assert_int_equal(feed(&a, recs, &n, 0, 1, 0.5, why), TUNE_CONTINUE); /* first: no cutoff */
    assert_int_equal(feed(&a, recs, &n, 1, 1, 0.3, why), TUNE_STOP);     /* cutoff 0.5 */
    assert_string_equal(why, "ASHA rung 0 (t=1): acc 0.3 < cutoff 0.5");
    /* [0.3, 0.5]: the 0.75 quantile is 0.45. */
    assert_int_equal(feed(&a, recs, &n, 2, 1, 0.6, why), TUNE_CONTINUE);
    /* [0.3, 0.5, 0.6]: 0.55. */
    assert_int_equal(feed(&a, recs, &n, 3, 1, 0.4, why), TUNE_STOP);
    assert_string_equal(why, "ASHA rung 0 (t=1): acc 0.4 < cutoff 0.55");
    assert_int_equal(n, 4);
    /* Between rungs nothing is recorded or decided. */
    assert_int_equal(feed(&a, recs, &n, 0, 2, 0.1, why), TUNE_CONTINUE);
    assert_int_equal(n, 4);
    assert_int_equal(feed(&a, recs, &n, 0, 4, 0.7, why), TUNE_CONTINUE);
    assert_int_equal(feed(&a, recs, &n, 2, 4, 0.65, why), TUNE_STOP);
    assert_string_equal(why, "ASHA rung 1 (t=4): acc 0.65 < cutoff 0.7");
    /* A trial that jumps past a rung is judged at the highest rung it reached. */
    assert_int_equal(feed(&a, recs, &n, 5, 5, 0.9, why), TUNE_CONTINUE);
    assert_true(recs[n - 1].milestone == 4 && recs[n - 1].trial == 5);
    assert_int_equal(feed(&a, recs, &n, 0, 16, 0.8, why), TUNE_STOP);
    assert_string_equal(why, "ASHA: reached max_t 16");
    double cutoff;
    assert_true(tune_asha_cutoff(&a, recs, n, 1, &cutoff));
    assert_true(fabs(cutoff - 0.525) < 1e-12); /* [0.3, 0.4, 0.5, 0.6] */
    assert_false(tune_asha_cutoff(&a, recs, n, 16, &cutoff));
}

static void asha_in_min_mode_stops_above_the_cutoff(void **state)
{
    (void)state;
    struct tune_asha a = {
        .max_t = 16, .grace_period = 1, .reduction_factor = 4, .mode_max = false, .metric = "loss"};
    struct tune_rung_rec recs[8] = {{0, 0, 0}};
    size_t n = 0;
    char why[128];
    assert_int_equal(feed(&a, recs, &n, 0, 1, 0.5, why), TUNE_CONTINUE);
    assert_int_equal(feed(&a, recs, &n, 1, 1, 0.3, why), TUNE_CONTINUE);
    /* Signed [-0.5, -0.3]: the quantile -0.35, a loss cutoff of 0.35. */
    assert_int_equal(feed(&a, recs, &n, 2, 1, 0.4, why), TUNE_STOP);
    assert_string_equal(why, "ASHA rung 0 (t=1): loss 0.4 > cutoff 0.35");
}

/* ---- median stopping ---- */

static void median_stops_a_trial_worse_than_the_median_of_running_means(void **state)
{
    (void)state;
    struct tune_median m = {
        .grace_period = 2, .min_samples_required = 2, .mode_max = true, .metric = "acc"};
    struct tune_result h[] = {{0, 1, 0.0}, {0, 2, 0.4}, {0, 3, 0.6}, {1, 1, 0.0}, {1, 2, 0.2},
                              {1, 3, 0.4}, {2, 1, 0.9}, {2, 2, 0.1}, {2, 3, 0.2}};
    char why[160];
    /* Before the grace period: never. */
    assert_int_equal(tune_median_on_result(&m, h, 7, 2, 1, why, sizeof(why)), TUNE_CONTINUE);
    /* At t=3 the others' means over [2, 3] are 0.5 and 0.3, median 0.4; trial 2's best is 0.9
     * (its t=1 result counts for its best, as in Ray). */
    assert_int_equal(tune_median_on_result(&m, h, 9, 2, 3, why, sizeof(why)), TUNE_CONTINUE);
    h[6].value = 0.3;
    assert_int_equal(tune_median_on_result(&m, h, 9, 2, 3, why, sizeof(why)), TUNE_STOP);
    assert_non_null(strstr(why, "median 0.4 of 2 other trials"));
    /* Too few other trials at that time: continue. */
    m.min_samples_required = 3;
    assert_int_equal(tune_median_on_result(&m, h, 9, 2, 3, why, sizeof(why)), TUNE_CONTINUE);
}

/* ---- PBT ---- */

static void pbt_exploit_copies_from_the_top_quantile(void **state)
{
    (void)state;
    struct tune_pbt p = {.perturbation_interval = 2, .quantile_fraction = 0.25, .mode_max = true};
    struct tune_pbt_trial t[] = {
        {0, true, 0.1}, {1, true, 0.5}, {2, true, 0.9}, {3, true, 0.3}, {4, false, 0}};
    struct tune_rng r = {7};
    assert_int_equal(tune_pbt_exploit(&p, t, 5, 0, &r), 2);
    assert_int_equal(tune_pbt_exploit(&p, t, 5, 1, &r), -1);
    assert_int_equal(tune_pbt_exploit(&p, t, 5, 2, &r), -1);
    assert_int_equal(tune_pbt_exploit(&p, t, 5, 4, &r), -1); /* no score yet */
    p.mode_max = false;
    assert_int_equal(tune_pbt_exploit(&p, t, 5, 2, &r), 0);
    assert_int_equal(tune_pbt_exploit(&p, t, 5, 0, &r), -1);
    /* One scored trial: nobody to copy from. */
    assert_int_equal(tune_pbt_exploit(&p, t, 1, 0, &r), -1);
    /* Half of the population at most: with 4 trials and 0.75, the bottom 2. */
    p.quantile_fraction = 0.75;
    p.mode_max = true;
    int d = tune_pbt_exploit(&p, t, 4, 3, &r);
    assert_true(d == 1 || d == 2);
}

static void pbt_explore_perturbs_or_resamples_the_donor_config(void **state)
{
    (void)state;
    json_t *mut = parse("{\"lr\": {\"uniform\": [0.001, 0.1]}, \"bs\": [16, 32, 64], \"n\": "
                        "{\"randint\": [1, 100]}}");
    json_t *cfg = parse("{\"lr\": 0.01, \"bs\": 32, \"n\": 10, \"other\": \"x\"}");
    struct tune_pbt p = {.resample_probability = 0, .mutations = mut};
    struct tune_rng r = {3};
    for (int i = 0; i < 20; i++) {
        json_t *out = tune_pbt_explore(&p, cfg, &r);
        double lr = json_real_value(json_object_get(out, "lr"));
        assert_true(fabs(lr - 0.012) < 1e-12 || fabs(lr - 0.008) < 1e-12);
        json_int_t bs = json_integer_value(json_object_get(out, "bs"));
        assert_true(bs == 16 || bs == 64);
        json_int_t n = json_integer_value(json_object_get(out, "n"));
        assert_true(n == 12 || n == 8);
        assert_string_equal(json_string_value(json_object_get(out, "other")), "x");
        json_decref(out);
    }
    p.resample_probability = 1;
    for (int i = 0; i < 20; i++) {
        json_t *out = tune_pbt_explore(&p, cfg, &r);
        double lr = json_real_value(json_object_get(out, "lr"));
        assert_true(lr >= 0.001 && lr < 0.1);
        json_int_t bs = json_integer_value(json_object_get(out, "bs"));
        assert_true(bs == 16 || bs == 32 || bs == 64);
        json_decref(out);
    }
    json_decref(cfg);
    json_decref(mut);
}

/* ---- stopping criteria ---- */

static void stop_criteria_stop_at_or_above_their_bound(void **state)
{
    (void)state;
    json_t *stop = parse("{\"acc\": 0.9, \"training_iteration\": 10}");
    json_t *m = parse("{\"acc\": 0.5}");
    char why[128];
    assert_int_equal(tune_stop_check(stop, m, 3, why, sizeof(why)), TUNE_CONTINUE);
    assert_string_equal(why, "");
    assert_int_equal(tune_stop_check(stop, m, 10, why, sizeof(why)), TUNE_STOP);
    assert_string_equal(why, "stop: training_iteration 10 >= 10");
    json_object_set_new(m, "acc", json_real(0.95));
    assert_int_equal(tune_stop_check(stop, m, 1, why, sizeof(why)), TUNE_STOP);
    assert_string_equal(why, "stop: acc 0.95 >= 0.9");
    json_decref(m);
    json_decref(stop);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(grid_times_samples_in_order_with_random_domains_in_bounds),
    cmocka_unit_test(invalid_spaces_name_the_field),
    cmocka_unit_test(asha_rungs_as_ray_computes_them),
    cmocka_unit_test(asha_stops_below_the_rung_cutoff_on_a_recorded_sequence),
    cmocka_unit_test(asha_in_min_mode_stops_above_the_cutoff),
    cmocka_unit_test(median_stops_a_trial_worse_than_the_median_of_running_means),
    cmocka_unit_test(pbt_exploit_copies_from_the_top_quantile),
    cmocka_unit_test(pbt_explore_perturbs_or_resamples_the_donor_config),
    cmocka_unit_test(stop_criteria_stop_at_or_above_their_bound),
};

TY_TEST_MAIN(tests)
