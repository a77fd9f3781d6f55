/* Sweeps (Ray Tune) in the store: migrations/0037_sweeps.sql, the functions ty_sweep_* of
 * store/sql/, docs/sweeps.md. Same conventions as store.h: each returns a db_qs; JSON text is
 * malloc'd and owned by the caller. */
#ifndef SRV_STORE_TUNE_H
#define SRV_STORE_TUNE_H

#include "db.h"
#include "identity.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A validated submission (api/h_sweeps.c) with its resolved trial configs. */
struct store_sweep_new {
    const char *name, *owner;
    const json_t *spec; /* {"job", "param_space", "tune_config"} */
    const char *metric; /* NULL: none */
    const char *mode;   /* "min", "max" or NULL */
    int max_concurrent; /* >= 1 */
    int64_t seed;
    const json_t *configs; /* array, one per trial */
};
/* Inserts the sweep and its trials; *json_out gets the sweep object (ty_sweep_json). */
int store_sweep_insert(struct db_conn *c, const struct store_sweep_new *in, int64_t *id_out,
                       char **json_out);
/* The sweep object with its trials, when `who` may see its project; 0 rows: no such sweep (or
 * hidden). *owner_out (may be NULL) gets its owner. */
int store_sweep_get(struct db_conn *c, const struct srv_identity *who, int64_t id, char **json_out,
                    char **owner_out);
/* The sweeps `who` may see, newest first, at most `limit`, as a JSON array (no trials). */
int store_sweep_list(struct db_conn *c, const struct srv_identity *who, int limit, char **json_out);
/* Stops a RUNNING sweep and its unfinished trials (ty_sweep_stop). from[16] gets its status
 * before, "" when there is no such sweep. */
int store_sweep_stop(struct db_conn *c, int64_t id, const char *by, char from[16]);

/* The leader's driver: submits trials, finishes sweeps (ty_sweeps_advance). Returns the number
 * of changes or an error. */
int store_sweeps_advance(struct db_conn *c);
/* Whether any sweep is RUNNING: 1 or 0, or a negative DB_* code. */
int store_sweeps_running(struct db_conn *c);

/* A result not yet read by its sweep's trial scheduler (ty_sweep_new_results). */
struct store_sweep_result {
    int64_t sweep;
    int trial;
    int attempt;
    int64_t seq;
    double t, value; /* value NaN: the report lacks the metric (stopping criteria only) */
    json_t *metrics; /* the report's numbers (owned) */
};
/* At most `limit` of them, oldest first, into a malloc'd *out (free with
 * store_sweep_results_free). Returns how many or an error. */
int store_sweep_new_results(struct db_conn *c, int limit, struct store_sweep_result **out);
void store_sweep_results_free(struct store_sweep_result *rs, int n);

/* What the trial scheduler of one sweep decides from. Owned by the struct; free with
 * store_sweep_state_free. */
struct store_sweep_state {
    json_t *spec; /* the sweep's spec */
    char *metric; /* may be NULL */
    bool mode_max;
    int64_t seed;
    /* Every result read so far, in order: trial, t, value, and the ASHA rung (NaN: none); for
     * ASHA only those recorded at a rung. */
    size_t n;
    int *trial;
    double *t, *value, *rung;
    /* PBT only (else ntrials 0, configs empty): every trial's latest value (NaN: none), its
     * last perturbation time, its config. */
    size_t ntrials;
    double *last_value, *perturbed_t;
    json_t *configs; /* array by trial index */
};
int store_sweep_state(struct db_conn *c, int64_t sweep, struct store_sweep_state *out);
void store_sweep_state_free(struct store_sweep_state *s);

/* Records a result and the decision on it (ty_sweep_record): rung NaN for none, perturbed_t
 * (PBT's perturbation time) NaN for unchanged, stop NULL to continue, else the reason the trial
 * stops. */
int store_sweep_record(struct db_conn *c, const struct store_sweep_result *r, double rung,
                       double perturbed_t, const char *stop);
/* PBT: trial `trial` of `sweep` restarts from the latest committed checkpoint of trial `donor`
 * with `config` (ty_sweep_trial_exploit): its job is stopped with `reason` and a new job of the
 * trial submitted. Returns 1 when it was, 0 when the donor has no checkpoint yet, or an error. */
int store_sweep_exploit(struct db_conn *c, int64_t sweep, int trial, int donor,
                        const json_t *config, double t, const char *reason);

#endif
