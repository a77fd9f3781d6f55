/* Sweeps on the leader (docs/sweeps.md): every tick, every trial result that arrived since is
 * handed to its sweep's trial scheduler (tune/: ASHA, median stopping, PBT), whose decision is
 * committed with the result (store_sweep_record): a stop goes through the job state machine
 * with the reason as the job's event. Then the next trials are submitted as jobs while fewer
 * than max_concurrent_trials are unfinished (store_sweeps_advance). Everything decided from is in
 * the database, so a new leader carries on where the last one stopped. */
#include "control_internal.h"

#include "log.h"
#include "store_tune.h"
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTL_TUNE_BATCH 256 /* results read at once */
#define CTL_TUNE_ROUNDS 8  /* batches per tick at most */

static double num(const json_t *o, const char *key, double def)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

/* ASHA on result r: the decision's reason into `why` ("" to continue), the rung into *rung. */
static void asha(const struct store_sweep_state *s, const json_t *cfg,
                 const struct store_sweep_result *r, double *rung, char *why, size_t len)
{
    struct tune_asha a = {.max_t = num(cfg, "max_t", 100),
                          .grace_period = num(cfg, "grace_period", 1),
                          .reduction_factor = num(cfg, "reduction_factor", 4),
                          .mode_max = s->mode_max,
                          .metric = s->metric};
    struct tune_rung_rec *recs = calloc(s->n ? s->n : 1, sizeof(*recs));
    size_t n = 0;
    for (size_t i = 0; recs && i < s->n; i++)
        if (!isnan(s->rung[i]))
            recs[n++] = (struct tune_rung_rec){s->rung[i], s->trial[i], s->value[i]};
    double at = -1;
    if (recs &&
        tune_asha_on_result(&a, recs, n, r->trial, r->t, r->value, &at, why, len) == TUNE_CONTINUE)
        why[0] = '\0';
    *rung = at >= 0 ? at : NAN;
    free(recs);
}

static void median(const struct store_sweep_state *s, const json_t *cfg,
                   const struct store_sweep_result *r, char *why, size_t len)
{
    struct tune_median m = {.grace_period = num(cfg, "grace_period", 1),
                            .min_samples_required = (int)num(cfg, "min_samples_required", 3),
                            .mode_max = s->mode_max,
                            .metric = s->metric};
    struct tune_result *hist = calloc(s->n + 1, sizeof(*hist));
    if (hist == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        hist[i] = (struct tune_result){s->trial[i], s->t[i], s->value[i]};
    hist[s->n] = (struct tune_result){r->trial, r->t, r->value};
    if (tune_median_on_result(&m, hist, s->n + 1, r->trial, r->t, why, len) == TUNE_CONTINUE)
        why[0] = '\0';
    free(hist);
}

/* Whether PBT is due to look at trial r's standing (Ray: once per perturbation_interval). */
static bool pbt_due(const struct store_sweep_state *s, const json_t *cfg,
                    const struct store_sweep_result *r)
{
    return (size_t)r->trial < s->ntrials &&
           r->t - s->perturbed_t[r->trial] >= num(cfg, "perturbation_interval", 60);
}

/* PBT on result r (already recorded, and due): exploit and explore when the trial is in the
 * bottom quantile. */
static void pbt(struct control *ctl, const struct store_sweep_state *s, const json_t *cfg,
                const struct store_sweep_result *r)
{
    struct tune_pbt p = {.perturbation_interval = num(cfg, "perturbation_interval", 60),
                         .quantile_fraction = num(cfg, "quantile_fraction", 0.25),
                         .resample_probability = num(cfg, "resample_probability", 0.25),
                         .mutations = json_object_get(cfg, "hyperparam_mutations"),
                         .mode_max = s->mode_max,
                         .metric = s->metric};
    struct tune_pbt_trial *trials = calloc(s->ntrials, sizeof(*trials));
    if (trials == NULL)
        return;
    for (size_t i = 0; i < s->ntrials; i++) {
        double v = (int)i == r->trial ? r->value : s->last_value[i];
        trials[i] = (struct tune_pbt_trial){(int)i, !isnan(v), v};
    }
    /* Deterministic: the sweep's seed and the number of results read so far. */
    struct tune_rng rng = {(uint64_t)s->seed ^ ((uint64_t)s->n * 0x9e3779b97f4a7c15ULL)};
    int donor = tune_pbt_exploit(&p, trials, s->ntrials, r->trial, &rng);
    json_t *config =
        donor >= 0 ? tune_pbt_explore(&p, json_array_get(s->configs, (size_t)donor), &rng) : NULL;
    char why[256];
    snprintf(why, sizeof(why),
             "PBT (t=%g): %s %g in the bottom quantile; restarting from trial %d "
             "(%s %g) with an explored config",
             r->t, s->metric, r->value, donor, s->metric, donor >= 0 ? trials[donor].score : 0.0);
    free(trials);
    if (config == NULL)
        return;
    int qs = store_sweep_exploit(ctl->db, r->sweep, r->trial, donor, config, r->t, why);
    json_decref(config);
    if (qs > 0) {
        TY_INFO("control", "sweep %lld trial %d: %s", (long long)r->sweep, r->trial, why);
        ctl->dirty = true;
    }
}

/* Hands result r to its sweep's trial scheduler and commits the decision. */
static void decide(struct control *ctl, const struct store_sweep_result *r)
{
    struct store_sweep_state s;
    if (store_sweep_state(ctl->db, r->sweep, &s) <= 0)
        return;
    const json_t *cfg = json_object_get(json_object_get(s.spec, "tune_config"), "scheduler");
    const char *type = json_string_value(json_object_get(cfg, "type"));
    char why[256] = "";
    double rung = NAN;
    bool scored = !isnan(r->value);
    if (scored && type && strcmp(type, "asha") == 0)
        asha(&s, cfg, r, &rung, why, sizeof(why));
    else if (scored && type && strcmp(type, "median_stopping") == 0)
        median(&s, cfg, r, why, sizeof(why));
    const json_t *stop = json_object_get(json_object_get(s.spec, "tune_config"), "stop");
    if (why[0] == '\0' && json_is_object(stop))
        tune_stop_check(stop, r->metrics, (double)r->seq, why, sizeof(why));
    bool due = scored && type && strcmp(type, "pbt") == 0 && pbt_due(&s, cfg, r);
    if (store_sweep_record(ctl->db, r, rung, due ? r->t : NAN, why[0] ? why : NULL) >= 0) {
        if (why[0]) {
            TY_INFO("control", "sweep %lld trial %d stopped: %s", (long long)r->sweep, r->trial,
                    why);
            ctl->dirty = true;
        } else if (due)
            pbt(ctl, &s, cfg, r);
    }
    store_sweep_state_free(&s);
}

/* Reads and decides on the new results; returns the size of the last batch read (below
 * CTL_TUNE_BATCH: every result was read), or -1. */
static int read_results(struct control *ctl)
{
    int n = CTL_TUNE_BATCH;
    for (int round = 0; n == CTL_TUNE_BATCH && round < CTL_TUNE_ROUNDS; round++) {
        struct store_sweep_result *rs = NULL;
        n = store_sweep_new_results(ctl->db, CTL_TUNE_BATCH, &rs);
        for (int i = 0; i < n; i++)
            decide(ctl, &rs[i]);
        store_sweep_results_free(rs, n);
    }
    return n;
}

void ctl__tune_results(struct control *ctl)
{
    if (ctl->sweeps)
        read_results(ctl);
}

void ctl__tune_tick(struct control *ctl)
{
    /* Results first: a sweep whose last trial just finished is finished by the advance only
     * once that trial's last results were read (ty_sweep_new_results reads RUNNING sweeps). */
    int n = read_results(ctl);
    if (n >= 0 && n < CTL_TUNE_BATCH && store_sweeps_advance(ctl->db) > 0)
        ctl->dirty = true;
    /* Reports are read as they are committed only while a sweep runs: no query per report
     * batch on a cluster without sweeps. */
    ctl->sweeps = store_sweeps_running(ctl->db) > 0;
}
