/* Population Based Training: Ray Tune's PopulationBasedTraining
 * (ray/tune/schedulers/pbt.py): its quantiles, exploit and explore. See tune.h. */
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_score(const void *x, const void *y)
{
    const struct tune_pbt_trial *a = *(const struct tune_pbt_trial *const *)x;
    const struct tune_pbt_trial *b = *(const struct tune_pbt_trial *const *)y;
    return a->score < b->score   ? -1
           : a->score > b->score ? 1
                                 : (a->trial > b->trial) - (a->trial < b->trial);
}

int tune_pbt_exploit(const struct tune_pbt *p, const struct tune_pbt_trial *trials, size_t n,
                     int trial, struct tune_rng *r)
{
    const struct tune_pbt_trial **sorted = malloc((n ? n : 1) * sizeof(*sorted));
    if (sorted == NULL)
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (trials[i].scored && !isnan(trials[i].score))
            sorted[m++] = &trials[i];
    int donor = -1;
    if (m > 1) {
        /* Worst first: ascending scores for max, descending for min. */
        qsort(sorted, m, sizeof(*sorted), cmp_score);
        if (!p->mode_max)
            for (size_t i = 0; i < m / 2; i++) {
                const struct tune_pbt_trial *t = sorted[i];
                sorted[i] = sorted[m - 1 - i];
                sorted[m - 1 - i] = t;
            }
        /* Ray: ceil(m * quantile_fraction), at most floor(m / 2). */
        size_t q = (size_t)ceil((double)m * p->quantile_fraction);
        if (q > m / 2)
            q = m / 2;
        bool bottom = false;
        for (size_t i = 0; i < q; i++)
            bottom = bottom || sorted[i]->trial == trial;
        if (bottom && q > 0) {
            size_t pick = m - q + (size_t)(tune_rng_unit(r) * (double)q);
            if (pick >= m)
                pick = m - 1;
            donor = (int)(sorted[pick] - trials);
        }
    }
    free(sorted);
    return donor;
}

/* The mutated value of one key (a new reference), Ray's _explore for one hyperparameter. */
static json_t *explore_one(const struct tune_pbt *p, const json_t *spec, const json_t *cur,
                           struct tune_rng *r)
{
    bool resample = tune_rng_unit(r) < p->resample_probability;
    if (json_is_array(spec)) {
        size_t n = json_array_size(spec), at = n;
        for (size_t i = 0; i < n && at == n; i++)
            if (cur && json_equal(json_array_get(spec, i), cur))
                at = i;
        if (n == 0)
            return cur ? json_deep_copy(cur) : json_null();
        if (resample || at == n) {
            size_t i = (size_t)(tune_rng_unit(r) * (double)n);
            return json_deep_copy(json_array_get(spec, i < n ? i : n - 1));
        }
        bool up = tune_rng_unit(r) < 0.5;
        size_t i = up ? (at + 1 < n ? at + 1 : at) : (at > 0 ? at - 1 : 0);
        return json_deep_copy(json_array_get(spec, i));
    }
    if (resample || !json_is_number(cur))
        return tune_domain_sample(spec, r);
    double factor = tune_rng_unit(r) < 0.5 ? 1.2 : 0.8;
    if (json_is_integer(cur))
        return json_integer((json_int_t)llround((double)json_integer_value(cur) * factor));
    return json_real(json_number_value(cur) * factor);
}

json_t *tune_pbt_explore(const struct tune_pbt *p, const json_t *config, struct tune_rng *r)
{
    json_t *out = json_deep_copy(config);
    if (out == NULL || !json_is_object(p->mutations))
        return out;
    const char *key;
    const json_t *spec;
    json_object_foreach((json_t *)p->mutations, key, spec)
    {
        json_t *v = explore_one(p, spec, json_object_get(config, key), r);
        if (v == NULL || json_object_set_new(out, key, v) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}
