/* Median stopping: Ray Tune's MedianStoppingRule (ray/tune/schedulers/median_stopping_rule.py)
 * without its soft stop (a trial short of samples continues). See tune.h. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The trial's latest time, or -INFINITY when it has no result. */
static double last_t(const struct tune_result *hist, size_t n, int trial)
{
    double t = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (hist[i].trial == trial && hist[i].t > t)
            t = hist[i].t;
    return t;
}

/* Ray's running mean: the mean (sign-adjusted) of the trial's results in [grace_period, t]. */
static double running_mean(const struct tune_median *m, const struct tune_result *hist, size_t n,
                           int trial, double t)
{
    double sum = 0, s = m->mode_max ? 1 : -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (hist[i].trial == trial && hist[i].t >= m->grace_period && hist[i].t <= t) {
            sum += s * hist[i].value;
            k++;
        }
    return k ? sum / (double)k : NAN;
}

enum tune_decision tune_median_on_result(const struct tune_median *m,
                                         const struct tune_result *hist, size_t n, int trial,
                                         double t, char *reason, size_t reasonlen)
{
    if (reasonlen)
        reason[0] = '\0';
    if (t < m->grace_period)
        return TUNE_CONTINUE;
    double s = m->mode_max ? 1 : -1;
    double *means = malloc((n ? n : 1) * sizeof(*means));
    size_t k = 0;
    double best = -INFINITY;
    for (size_t i = 0; means && i < n; i++) {
        if (hist[i].trial == trial) {
            if (s * hist[i].value > best)
                best = s * hist[i].value;
            continue;
        }
        bool first = true; /* each other trial once: at its first result in hist */
        for (size_t j = 0; j < i && first; j++)
            first = hist[j].trial != hist[i].trial;
        if (first && last_t(hist, n, hist[i].trial) >= t) {
            double mean = running_mean(m, hist, n, hist[i].trial, t);
            if (!isnan(mean))
                means[k++] = mean;
        }
    }
    enum tune_decision d = TUNE_CONTINUE;
    if (means && k >= (size_t)(m->min_samples_required > 0 ? m->min_samples_required : 1)) {
        qsort(means, k, sizeof(*means), cmp_double);
        double median = k % 2 ? means[k / 2] : (means[k / 2 - 1] + means[k / 2]) / 2;
        if (best < median) {
            d = TUNE_STOP;
            snprintf(reason, reasonlen,
                     "median stopping (t=%g): best %s %g is worse than the median %g of %zu "
                     "other trials",
                     t, m->metric ? m->metric : "metric", s * best, s * median, k);
        }
    }
    free(means);
    return d;
}
