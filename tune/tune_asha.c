/* ASHA: asynchronous successive halving with one bracket, the rungs and cutoffs of Ray Tune's
 * AsyncHyperBandScheduler (ray/tune/schedulers/async_hyperband.py). See tune.h. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t tune_asha_rungs(const struct tune_asha *a, double *milestones, size_t cap)
{
    if (!(a->grace_period > 0) || !(a->max_t >= a->grace_period) || !(a->reduction_factor > 1))
        return 0;
    /* Ray: MAX_RUNGS = int(log(max_t / grace_period) / log(rf) + 1); the epsilon keeps an exact
     * power (16 / 1 with rf 4) from losing its rung to rounding. */
    size_t n = (size_t)(log(a->max_t / a->grace_period) / log(a->reduction_factor) + 1 + 1e-9);
    for (size_t k = 0; k < n && k < cap; k++)
        milestones[k] = a->grace_period * pow(a->reduction_factor, (double)(n - 1 - k));
    return n;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The sign that makes a higher number better. */
static double sign(const struct tune_asha *a)
{
    return a->mode_max ? 1.0 : -1.0;
}

bool tune_asha_cutoff(const struct tune_asha *a, const struct tune_rung_rec *recs, size_t n,
                      double milestone, double *cutoff)
{
    double *v = malloc((n ? n : 1) * sizeof(*v));
    size_t m = 0;
    for (size_t i = 0; v && i < n; i++)
        if (recs[i].milestone == milestone && !isnan(recs[i].value))
            v[m++] = sign(a) * recs[i].value;
    if (m == 0) {
        free(v);
        return false;
    }
    qsort(v, m, sizeof(*v), cmp_double);
    /* numpy's percentile, linear interpolation: position q * (m - 1) between order statistics. */
    double pos = (1.0 - 1.0 / a->reduction_factor) * (double)(m - 1);
    size_t lo = (size_t)floor(pos);
    size_t hi = lo + 1 < m ? lo + 1 : lo;
    double c = v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
    free(v);
    *cutoff = sign(a) * c;
    return true;
}

static bool recorded(const struct tune_rung_rec *recs, size_t n, double milestone, int trial)
{
    for (size_t i = 0; i < n; i++)
        if (recs[i].milestone == milestone && recs[i].trial == trial)
            return true;
    return false;
}

enum tune_decision tune_asha_on_result(const struct tune_asha *a, const struct tune_rung_rec *recs,
                                       size_t n, int trial, double t, double value,
                                       double *record_at, char *reason, size_t reasonlen)
{
    *record_at = -1;
    if (reasonlen)
        reason[0] = '\0';
    const char *metric = a->metric ? a->metric : "metric";
    if (t >= a->max_t) {
        snprintf(reason, reasonlen, "ASHA: reached max_t %g", a->max_t);
        return TUNE_STOP;
    }
    double ms[64];
    size_t nr = tune_asha_rungs(a, ms, 64);
    for (size_t i = 0; i < nr && i < 64; i++) {
        bool mine = recorded(recs, n, ms[i], trial);
        if (t >= ms[i] && mine)
            break; /* decided at this rung already; lower rungs are older */
        if (t < ms[i] || mine)
            continue;
        double cutoff;
        enum tune_decision d = TUNE_CONTINUE;
        if (!isnan(value) && tune_asha_cutoff(a, recs, n, ms[i], &cutoff) &&
            sign(a) * value < sign(a) * cutoff) {
            d = TUNE_STOP;
            snprintf(reason, reasonlen, "ASHA rung %zu (t=%g): %s %g %s cutoff %g", nr - 1 - i,
                     ms[i], metric, value, a->mode_max ? "<" : ">", cutoff);
        }
        if (!isnan(value))
            *record_at = ms[i];
        return d;
    }
    return TUNE_CONTINUE;
}
