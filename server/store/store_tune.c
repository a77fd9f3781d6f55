/* Sweeps (Ray Tune): submission, reads, stop, the leader's driver and the trial schedulers'
 * inputs and decisions. The SQL is in store/sql/ty_sweep_*.sql; see store_tune.h. */
#include "store_tune.h"

#include "db_query.h"
#include "store.h"
#include "util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_sweep_insert(struct db_conn *c, const struct store_sweep_new *in, int64_t *id_out,
                       char **json_out)
{
    static const struct db_stmt st = {
        "sweep_insert",
        "SELECT (ty_sweep_submit($1, $2, $3::jsonb, $4, $5, $6::int, $7::bigint, $8::jsonb)).id", 8,
        false};
    /* A statement of its own: the trials the insert made are not in its snapshot. */
    static const struct db_stmt get = {
        "sweep_insert_json", "SELECT ty_sweep_json(s, true)::text FROM sweeps s WHERE id = $1", 1,
        true};
    char *spec = json_dumps(in->spec, JSON_COMPACT);
    char *configs = json_dumps(in->configs, JSON_COMPACT);
    char conc[32], seed[32];
    STORE_NUM(conc, in->max_concurrent);
    STORE_NUM(seed, in->seed);
    const char *p[] = {in->name, in->owner, spec, in->metric, in->mode, conc, seed, configs};
    char *id = NULL;
    int qs = spec && configs ? db_exec_text(c, &st, p, &id) : DB_HARD_ERROR;
    free(spec);
    free(configs);
    if (qs > 0 && (id == NULL || util_parse_int64(id, 1, INT64_MAX, id_out) != 0))
        qs = DB_HARD_ERROR;
    if (qs > 0) {
        const char *g[] = {id};
        qs = db_exec_text(c, &get, g, json_out);
        if (qs == 0 || (qs > 0 && *json_out == NULL))
            qs = DB_HARD_ERROR;
    }
    free(id);
    return qs;
}

int store_sweep_get(struct db_conn *c, const struct srv_identity *who, int64_t id, char **json_out,
                    char **owner_out)
{
    static const struct db_stmt st = {
        "sweep_get",
        "SELECT ty_sweep_json(s, true)::text AS json, s.owner FROM sweeps s "
        "WHERE s.id = $1 AND ty_project_visible(s.project, $2, $3::boolean)",
        3, true};
    char ids[32];
    STORE_NUM(ids, id);
    const char *p[] = {ids, who->name, who->role == SRV_ROLE_ADMIN ? "t" : "f"};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    const char *json, *owner;
    if (db_col_text(res, 0, "json", &json) != 0 || db_col_text(res, 0, "owner", &owner) != 0 ||
        (*json_out = strdup(json)) == NULL)
        qs = DB_HARD_ERROR;
    else if (owner_out && (*owner_out = strdup(owner)) == NULL) {
        free(*json_out);
        *json_out = NULL;
        qs = DB_HARD_ERROR;
    }
    PQclear(res);
    return qs;
}

int store_sweep_list(struct db_conn *c, const struct srv_identity *who, int limit, char **json_out)
{
    static const struct db_stmt st = {
        "sweep_list",
        "SELECT coalesce(jsonb_agg(ty_sweep_json(s, false) ORDER BY s.id DESC), '[]')::text "
        "FROM (SELECT * FROM sweeps WHERE ty_project_visible(project, $1, $2::boolean) "
        "      ORDER BY id DESC LIMIT $3::int) s",
        3, true};
    char lim[32];
    STORE_NUM(lim, limit);
    const char *p[] = {who->name, who->role == SRV_ROLE_ADMIN ? "t" : "f", lim};
    return db_exec_text(c, &st, p, json_out);
}

int store_sweep_stop(struct db_conn *c, int64_t id, const char *by, char from[16])
{
    static const struct db_stmt st = {"sweep_stop", "SELECT ty_sweep_stop($1, $2)", 2, false};
    char ids[32];
    STORE_NUM(ids, id);
    const char *p[] = {ids, by};
    char *status = NULL;
    int qs = db_exec_text(c, &st, p, &status);
    snprintf(from, 16, "%s", status ? status : "");
    free(status);
    return qs;
}

int store_sweeps_advance(struct db_conn *c)
{
    static const struct db_stmt st = {"sweeps_advance", "SELECT ty_sweeps_advance()", 0, false};
    char *text = NULL;
    int qs = db_exec_text(c, &st, NULL, &text);
    int64_t n = 0;
    if (qs > 0 && (text == NULL || util_parse_int64(text, 0, INT32_MAX, &n) != 0))
        qs = DB_HARD_ERROR;
    free(text);
    return qs < 0 ? qs : (int)n;
}

int store_sweeps_running(struct db_conn *c)
{
    static const struct db_stmt st = {
        "sweeps_running", "SELECT EXISTS (SELECT 1 FROM sweeps WHERE status = 'RUNNING')::int", 0,
        false};
    char *text = NULL;
    int qs = db_exec_text(c, &st, NULL, &text);
    int running = qs > 0 && text != NULL && strcmp(text, "1") == 0;
    free(text);
    return qs < 0 ? qs : running;
}

int store_sweep_new_results(struct db_conn *c, int limit, struct store_sweep_result **out)
{
    static const struct db_stmt st = {
        "sweep_new_results",
        "SELECT sweep_id, trial_index, attempt, seq, t, value, metrics::text AS metrics "
        "FROM ty_sweep_new_results($1::int)",
        1, true};
    char lim[32];
    STORE_NUM(lim, limit);
    const char *p[] = {lim};
    PGresult *res = NULL;
    *out = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    *out = calloc((size_t)qs, sizeof(**out));
    for (int i = 0; *out && i < qs; i++) {
        struct store_sweep_result *r = &(*out)[i];
        const char *metrics;
        if (db_col_int64(res, i, "sweep_id", &r->sweep) != 0 ||
            db_col_int(res, i, "trial_index", &r->trial) != 0 ||
            db_col_int(res, i, "attempt", &r->attempt) != 0 ||
            db_col_int64(res, i, "seq", &r->seq) != 0 || db_col_double(res, i, "t", &r->t) != 0 ||
            db_col_text(res, i, "metrics", &metrics) != 0 ||
            (r->metrics = json_loads(metrics, 0, NULL)) == NULL) {
            qs = DB_HARD_ERROR;
            break;
        }
        r->value = NAN;
        if (!db_col_is_null(res, i, "value") && db_col_double(res, i, "value", &r->value) != 0) {
            qs = DB_HARD_ERROR;
            break;
        }
    }
    int n = PQntuples(res);
    PQclear(res);
    if (*out == NULL || qs < 0) {
        store_sweep_results_free(*out, n);
        *out = NULL;
        return DB_HARD_ERROR;
    }
    return qs;
}

void store_sweep_results_free(struct store_sweep_result *rs, int n)
{
    for (int i = 0; rs && i < n; i++)
        json_decref(rs[i].metrics);
    free(rs);
}

void store_sweep_state_free(struct store_sweep_state *s)
{
    json_decref(s->spec);
    json_decref(s->configs);
    free(s->metric);
    free(s->trial);
    free(s->t);
    free(s->value);
    free(s->rung);
    free(s->last_value);
    free(s->perturbed_t);
    memset(s, 0, sizeof(*s));
}

/* The sweep's row into s. */
static int read_sweep(struct db_conn *c, const char *ids, struct store_sweep_state *s)
{
    static const struct db_stmt st = {
        "sweep_state", "SELECT spec::text AS spec, metric, mode, seed FROM sweeps WHERE id = $1", 1,
        true};
    const char *p[] = {ids};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    const char *spec, *metric, *mode;
    if (db_col_text(res, 0, "spec", &spec) != 0 ||
        db_col_text_opt(res, 0, "metric", &metric) != 0 ||
        db_col_text_opt(res, 0, "mode", &mode) != 0 || db_col_int64(res, 0, "seed", &s->seed) != 0)
        qs = DB_HARD_ERROR;
    else {
        s->spec = json_loads(spec, 0, NULL);
        s->metric = metric ? strdup(metric) : NULL;
        s->mode_max = mode == NULL || strcmp(mode, "max") == 0;
        if (s->spec == NULL || (metric && s->metric == NULL))
            qs = DB_HARD_ERROR;
    }
    PQclear(res);
    return qs;
}

/* Every result read so far into s; with `rungs_only`, those recorded at an ASHA rung. */
static int read_results(struct db_conn *c, const char *ids, bool rungs_only,
                        struct store_sweep_state *s)
{
    static const struct db_stmt st = {
        "sweep_state_results",
        "SELECT trial_index, t, value, coalesce(rung, 'NaN') AS rung FROM sweep_results "
        "WHERE sweep_id = $1 AND (NOT $2::bool OR rung IS NOT NULL) ORDER BY id",
        2, true};
    const char *p[] = {ids, rungs_only ? "t" : "f"};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    size_t n = (size_t)qs;
    s->trial = calloc(n, sizeof(*s->trial));
    s->t = calloc(n, sizeof(*s->t));
    s->value = calloc(n, sizeof(*s->value));
    s->rung = calloc(n, sizeof(*s->rung));
    if (!s->trial || !s->t || !s->value || !s->rung)
        qs = DB_HARD_ERROR;
    for (size_t i = 0; qs >= 0 && i < n; i++) {
        const char *rung;
        if (db_col_int(res, (int)i, "trial_index", &s->trial[i]) != 0 ||
            db_col_double(res, (int)i, "t", &s->t[i]) != 0 ||
            db_col_double(res, (int)i, "value", &s->value[i]) != 0 ||
            db_col_text(res, (int)i, "rung", &rung) != 0)
            qs = DB_HARD_ERROR;
        else
            s->rung[i] = strcmp(rung, "NaN") == 0 ? NAN : strtod(rung, NULL);
    }
    s->n = qs >= 0 ? n : 0;
    PQclear(res);
    return qs;
}

/* Every trial's latest value, perturbation time and config into s. */
static int read_trials(struct db_conn *c, const char *ids, struct store_sweep_state *s)
{
    static const struct db_stmt st = {
        "sweep_state_trials",
        "SELECT trial_index, coalesce(last_value, 'NaN') AS last_value, perturbed_t, "
        "config::text AS config FROM sweep_trials WHERE sweep_id = $1 ORDER BY trial_index",
        1, true};
    const char *p[] = {ids};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    s->configs = json_array();
    if (qs <= 0)
        return s->configs ? qs : DB_HARD_ERROR;
    size_t n = (size_t)qs;
    s->last_value = calloc(n, sizeof(*s->last_value));
    s->perturbed_t = calloc(n, sizeof(*s->perturbed_t));
    if (!s->last_value || !s->perturbed_t || !s->configs)
        qs = DB_HARD_ERROR;
    for (size_t i = 0; qs >= 0 && i < n; i++) {
        const char *last, *config;
        if (db_col_text(res, (int)i, "last_value", &last) != 0 ||
            db_col_double(res, (int)i, "perturbed_t", &s->perturbed_t[i]) != 0 ||
            db_col_text(res, (int)i, "config", &config) != 0 ||
            json_array_append_new(s->configs, json_loads(config, 0, NULL)) != 0)
            qs = DB_HARD_ERROR;
        else
            s->last_value[i] = strcmp(last, "NaN") == 0 ? NAN : strtod(last, NULL);
    }
    s->ntrials = qs >= 0 ? n : 0;
    PQclear(res);
    return qs;
}

int store_sweep_state(struct db_conn *c, int64_t sweep, struct store_sweep_state *out)
{
    memset(out, 0, sizeof(*out));
    char ids[32];
    STORE_NUM(ids, sweep);
    int qs = read_sweep(c, ids, out);
    /* Only what the sweep's scheduler decides from: reading every trial's config for each
     * result made a decision cost O(trials) JSON parses. */
    const char *type = json_string_value(json_object_get(
        json_object_get(json_object_get(out->spec, "tune_config"), "scheduler"), "type"));
    bool asha = type && strcmp(type, "asha") == 0, pbt = type && strcmp(type, "pbt") == 0;
    if (qs > 0 && read_results(c, ids, asha, out) < 0)
        qs = DB_HARD_ERROR;
    if (qs > 0 && (pbt ? read_trials(c, ids, out) < 0 : (out->configs = json_array()) == NULL))
        qs = DB_HARD_ERROR;
    if (qs <= 0)
        store_sweep_state_free(out);
    return qs;
}

/* A double as a statement parameter; NaN as SQL NULL (NULL returned). */
static const char *dbl(char *buf, size_t len, double v)
{
    if (isnan(v))
        return NULL;
    snprintf(buf, len, "%.17g", v);
    return buf;
}

int store_sweep_record(struct db_conn *c, const struct store_sweep_result *r, double rung,
                       double perturbed_t, const char *stop)
{
    static const struct db_stmt st = {
        "sweep_record",
        "SELECT ty_sweep_record($1, $2::int, $3::int, $4, $5::float8, $6::float8, $7::float8, "
        "$8::float8, $9)",
        9, false};
    char sweep[32], trial[32], attempt[32], seq[32], t[32], value[32], rg[32], pt[32];
    STORE_NUM(sweep, r->sweep);
    STORE_NUM(trial, r->trial);
    STORE_NUM(attempt, r->attempt);
    STORE_NUM(seq, r->seq);
    const char *p[] = {sweep,
                       trial,
                       attempt,
                       seq,
                       dbl(t, sizeof(t), r->t),
                       dbl(value, sizeof(value), r->value),
                       dbl(rg, sizeof(rg), rung),
                       dbl(pt, sizeof(pt), perturbed_t),
                       stop};
    return db_exec(c, &st, p, NULL);
}

int store_sweep_exploit(struct db_conn *c, int64_t sweep, int trial, int donor,
                        const json_t *config, double t, const char *reason)
{
    static const struct db_stmt st = {
        "sweep_exploit",
        "SELECT ty_sweep_trial_exploit($1, $2::int, $3::int, $4::jsonb, $5::float8, $6)", 6, false};
    char sw[32], tr[32], dn[32], tt[32];
    STORE_NUM(sw, sweep);
    STORE_NUM(tr, trial);
    STORE_NUM(dn, donor);
    char *cfg = json_dumps(config, JSON_COMPACT);
    const char *p[] = {sw, tr, dn, cfg, dbl(tt, sizeof(tt), t), reason};
    char *out = NULL;
    int qs = cfg ? db_exec_text(c, &st, p, &out) : DB_HARD_ERROR;
    free(cfg);
    int restarted = out && strcmp(out, "t") == 0;
    free(out);
    return qs < 0 ? qs : restarted;
}
