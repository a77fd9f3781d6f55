/* tytune: sweeps' searches and trial schedulers (Ray Tune's), a pure library: no I/O, no
 * globals, no clock. The server resolves a sweep's search space into its trials' configs at
 * submission (tune_space_resolve) and, as each trial's reports arrive, asks the sweep's trial
 * scheduler what to do (tune_asha_on_result, tune_median_on_result, tune_pbt_on_result); it
 * persists the inputs and the decisions (server/store/store_tune.c, migrations/0037_sweeps.sql).
 * docs/sweeps.md describes the JSON encodings. */
#ifndef TUNE_H
#define TUNE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- random numbers (tune_space.c) ---- */

/* A splitmix64 generator: the same seed gives the same sweep on every server. */
struct tune_rng {
    uint64_t s;
};
uint64_t tune_rng_next(struct tune_rng *r);
/* Uniform in [0, 1). */
double tune_rng_unit(struct tune_rng *r);

/* ---- search spaces (tune_space.c) ---- */

/* The most trials one sweep may have. */
#define TUNE_MAX_TRIALS 10000

/* Resolves a Ray Tune param_space into the configs of its trials: every combination of its
 * grid_search values (the last key varying fastest), repeated num_samples times, each with its
 * random domains (choice, uniform, quniform, loguniform, qloguniform, randint, randn) sampled
 * from `seed`. A domain is an object of exactly one of those keys (docs/sweeps.md); any other
 * object is a nested dict, resolved key by key; anything else is a constant. On success
 * returns 0 and stores a new array of configs in *out. On invalid input returns -1 with the
 * dotted path of the offending field in `field` ("param_space.lr.uniform") and what is wrong
 * in `why`. */
int tune_space_resolve(const json_t *space, int num_samples, uint64_t seed, json_t **out,
                       char *field, size_t fieldlen, char *why, size_t whylen);
/* Samples one domain object (as above; a grid_search is sampled like a choice). Returns a new
 * value, or NULL when `domain` is not a valid domain. */
json_t *tune_domain_sample(const json_t *domain, struct tune_rng *r);
/* Whether `v` is a domain object (its one key names a domain). */
bool tune_is_domain(const json_t *v);

/* ---- trial schedulers ---- */

enum tune_decision { TUNE_CONTINUE = 0, TUNE_STOP = 1 };

/* A result recorded at an ASHA rung: trial `trial` had `value` (as reported) at `milestone`. */
struct tune_rung_rec {
    double milestone;
    int trial;
    double value;
};

/* ASHAScheduler(max_t, grace_period, reduction_factor), one bracket, as Ray's
 * AsyncHyperBandScheduler. */
struct tune_asha {
    double max_t, grace_period, reduction_factor;
    bool mode_max;
    const char *metric; /* for the reason */
};

/* The rungs' milestones, highest first: grace_period * rf^k for k = 0 .. floor(log(max_t /
 * grace_period) / log(rf)). Returns how many (at most cap are written). */
size_t tune_asha_rungs(const struct tune_asha *a, double *milestones, size_t cap);
/* Ray's cutoff of a rung: the (1 - 1/rf) quantile (linear interpolation, numpy's default) of
 * the values recorded there, sign-adjusted for the mode (so a higher number is better) and
 * returned in the reported sign. Returns false when nothing is recorded. */
bool tune_asha_cutoff(const struct tune_asha *a, const struct tune_rung_rec *recs, size_t n,
                      double milestone, double *cutoff);
/* Decides on trial `trial`'s result `value` at time `t`, given everything recorded so far
 * (`recs`, any order): at the highest rung whose milestone t reached and where the trial has no
 * record yet, the result is recorded (*record_at = that milestone, else -1) and the trial stops
 * when it is worse than the rung's cutoff; a trial at or past max_t stops too. `reason` gets
 * why it stops ("ASHA rung 2 (t=4): acc 0.31 < cutoff 0.42"). */
enum tune_decision tune_asha_on_result(const struct tune_asha *a, const struct tune_rung_rec *recs,
                                       size_t n, int trial, double t, double value,
                                       double *record_at, char *reason, size_t reasonlen);

/* One result of one trial, for median stopping and PBT. */
struct tune_result {
    int trial;
    double t, value;
};

/* MedianStoppingRule(grace_period, min_samples_required), as Ray's: once t >= grace_period, a
 * trial stops when its best result is worse than the median, over the other trials that have
 * reached t, of their mean result in [grace_period, t]. */
struct tune_median {
    double grace_period;
    int min_samples_required;
    bool mode_max;
    const char *metric;
};
/* `hist` holds every result recorded so far, this one included. */
enum tune_decision tune_median_on_result(const struct tune_median *m,
                                         const struct tune_result *hist, size_t n, int trial,
                                         double t, char *reason, size_t reasonlen);

/* PopulationBasedTraining(perturbation_interval, hyperparam_mutations, quantile_fraction,
 * resample_probability), as Ray's. */
struct tune_pbt {
    double perturbation_interval, quantile_fraction, resample_probability;
    const json_t *mutations; /* key -> list of values, or a domain object */
    bool mode_max;
    const char *metric;
};
/* A trial as PBT sees it: its latest score and whether it has one. */
struct tune_pbt_trial {
    int trial;
    bool scored;
    double score;
};
/* Exploit: when `trial` is in the bottom quantile of the scored trials, returns the index (in
 * `trials`) of a trial of the top quantile, drawn from `r`, to copy from; else -1. */
int tune_pbt_exploit(const struct tune_pbt *p, const struct tune_pbt_trial *trials, size_t n,
                     int trial, struct tune_rng *r);
/* Explore: a new config from the donor's `config`: each mutated key resampled with
 * resample_probability (or when its value is not one of the list's), else a list value moved
 * to a neighbour and a number multiplied by 1.2 or 0.8 (integers rounded). Returns a new
 * object, or NULL when out of memory. */
json_t *tune_pbt_explore(const struct tune_pbt *p, const json_t *config, struct tune_rng *r);

/* ---- stopping criteria (tune_stop.c) ---- */

/* Ray's RunConfig(stop={"name": value, ...}): whether a result meets one criterion, a reported
 * number (in `metrics`) at or above its value; "training_iteration" may also be the result's
 * `iteration` when the report has no such number. Writes the reason ("stop: acc 0.95 >= 0.9")
 * and returns TUNE_STOP on the first criterion met, else TUNE_CONTINUE. */
enum tune_decision tune_stop_check(const json_t *stop, const json_t *metrics, double iteration,
                                   char *reason, size_t reasonlen);

#endif
