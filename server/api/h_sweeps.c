/* /api/v1/sweeps (docs/sweeps.md): submit a sweep (its search space resolved here into trial
 * configs by tune/tune_space.c), list, get with its trials, stop. A sweep's trials are jobs the
 * leader's control thread submits (control/control_tune.c). Who may do what follows the jobs:
 * any user submits, a sweep is seen by whoever sees its project, stopped by its owner or an
 * admin. */
#include "agent_proto.h"
#include "auth.h"
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "jobspec.h"
#include "server.h"
#include "store.h"
#include "store_tune.h"
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define SWEEP_LIST_MAX 500

/* ---- validation ---- */

/* A refused field: its dotted name and why. */
struct bad {
    char field[160];
    char why[256];
};

static int refuse(struct bad *b, const char *field, const char *why)
{
    snprintf(b->field, sizeof(b->field), "%s", field);
    snprintf(b->why, sizeof(b->why), "%s", why);
    return -1;
}

/* Refuses any key of `o` not in `allowed` (NULL-terminated); `where` prefixes the field. */
static int only_keys(const json_t *o, const char *where, const char *const *allowed, struct bad *b)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0)
            i++;
        if (allowed[i] == NULL) {
            char field[160];
            snprintf(field, sizeof(field), "%s%s%s", where, where[0] ? "." : "", key);
            return refuse(b, field, "unknown field");
        }
    }
    (void)v;
    return 0;
}

/* A number field of the scheduler: absent gives def; must satisfy min < v (or min <= v). */
static int sched_num(const json_t *s, const char *key, double def, double min, bool inclusive,
                     double *out, struct bad *b)
{
    const json_t *v = json_object_get(s, key);
    char field[96];
    snprintf(field, sizeof(field), "tune_config.scheduler.%s", key);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return refuse(b, field, "must be a number");
    *out = json_number_value(v);
    if (inclusive ? *out < min : *out <= min) {
        char why[64];
        snprintf(why, sizeof(why), "must be %s %g", inclusive ? "at least" : "above", min);
        return refuse(b, field, why);
    }
    return 0;
}

/* Checks tune_config.scheduler; *type gets its type ("fifo" when absent). */
static int check_scheduler(const json_t *s, const char **type, struct bad *b)
{
    *type = "fifo";
    if (s == NULL)
        return 0;
    if (!json_is_object(s))
        return refuse(b, "tune_config.scheduler", "must be an object with a \"type\"");
    *type = json_string_value(json_object_get(s, "type"));
    if (*type == NULL)
        return refuse(b, "tune_config.scheduler.type",
                      "must be one of fifo, asha, median_stopping, pbt");
    const json_t *ta = json_object_get(s, "time_attr");
    if (ta && (!json_is_string(ta) || json_string_length(ta) == 0))
        return refuse(b, "tune_config.scheduler.time_attr", "must be a metric name");
    double x, y;
    if (strcmp(*type, "fifo") == 0) {
        static const char *const keys[] = {"type", NULL};
        return only_keys(s, "tune_config.scheduler", keys, b);
    }
    if (strcmp(*type, "asha") == 0) {
        static const char *const keys[] = {
            "type",         "metric",           "mode", "time_attr", "max_t",
            "grace_period", "reduction_factor", NULL};
        if (only_keys(s, "tune_config.scheduler", keys, b) ||
            sched_num(s, "max_t", 100, 0, false, &x, b) ||
            sched_num(s, "grace_period", 1, 0, false, &y, b))
            return -1;
        double rf;
        if (sched_num(s, "reduction_factor", 4, 1, false, &rf, b))
            return -1;
        if (x < y)
            return refuse(b, "tune_config.scheduler.grace_period", "must not exceed max_t");
        return 0;
    }
    if (strcmp(*type, "median_stopping") == 0) {
        static const char *const keys[] = {
            "type", "metric", "mode", "time_attr", "grace_period", "min_samples_required", NULL};
        return only_keys(s, "tune_config.scheduler", keys, b) ||
                       sched_num(s, "grace_period", 1, 0, true, &x, b) ||
                       sched_num(s, "min_samples_required", 3, 1, true, &y, b)
                   ? -1
                   : 0;
    }
    if (strcmp(*type, "pbt") == 0) {
        static const char *const keys[] = {"type",
                                           "metric",
                                           "mode",
                                           "time_attr",
                                           "perturbation_interval",
                                           "hyperparam_mutations",
                                           "quantile_fraction",
                                           "resample_probability",
                                           NULL};
        if (only_keys(s, "tune_config.scheduler", keys, b) ||
            sched_num(s, "perturbation_interval", 60, 0, false, &x, b) ||
            sched_num(s, "quantile_fraction", 0.25, 0, true, &x, b) ||
            sched_num(s, "resample_probability", 0.25, 0, true, &y, b))
            return -1;
        if (x > 0.5)
            return refuse(b, "tune_config.scheduler.quantile_fraction", "must be at most 0.5");
        const json_t *m = json_object_get(s, "hyperparam_mutations");
        if (!json_is_object(m) || json_object_size(m) == 0)
            return refuse(b, "tune_config.scheduler.hyperparam_mutations",
                          "must be a non-empty object of lists or search domains");
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)m, key, v)
        {
            if ((json_is_array(v) && json_array_size(v) > 0) || tune_is_domain(v))
                continue;
            char field[160];
            snprintf(field, sizeof(field), "tune_config.scheduler.hyperparam_mutations.%s", key);
            return refuse(b, field, "must be a non-empty list or a search domain");
        }
        return 0;
    }
    return refuse(b, "tune_config.scheduler.type",
                  "unknown scheduler: must be one of fifo, asha, median_stopping, pbt");
}

/* A validated submission. */
struct sweep_in {
    const char *name;
    json_t *spec; /* {"job": validated job spec, "param_space", "tune_config"} */
    const char *metric, *mode;
    int num_samples, max_concurrent;
    int64_t seed;
    json_t *configs;
};

/* metric and mode: tune_config's, else the scheduler's (Ray accepts either, not both
 * different). */
static int metric_mode(const json_t *tc, const json_t *sched, const char *key, const char **out,
                       struct bad *b)
{
    char field[64];
    const json_t *a = json_object_get(tc, key), *s = json_object_get(sched, key);
    snprintf(field, sizeof(field), "tune_config.%s", key);
    if (a && (!json_is_string(a) || json_string_length(a) == 0))
        return refuse(b, field, "must be a non-empty string");
    snprintf(field, sizeof(field), "tune_config.scheduler.%s", key);
    if (s && (!json_is_string(s) || json_string_length(s) == 0))
        return refuse(b, field, "must be a non-empty string");
    if (a && s && !json_equal(a, s))
        return refuse(b, field, "differs from the tune_config's");
    *out = json_string_value(a ? a : s);
    return 0;
}

/* An integer of tune_config in [min, max], def when absent. */
static int tc_int(const json_t *tc, const char *key, json_int_t def, json_int_t min, json_int_t max,
                  json_int_t *out, struct bad *b)
{
    const json_t *v = json_object_get(tc, key);
    char field[64], why[96];
    snprintf(field, sizeof(field), "tune_config.%s", key);
    *out = def;
    if (v == NULL)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        snprintf(why, sizeof(why), "must be an integer from %lld to %lld", (long long)min,
                 (long long)max);
        return refuse(b, field, why);
    }
    *out = json_integer_value(v);
    return 0;
}

/* Searchable scaling_config (Ray's param_space={"scaling_config": ...}): a trial config's
 * "scaling_config" (an object) goes over the job's own, and the job spec that makes is
 * validated as POST /api/v1/jobs would; the trial's config then holds the whole normalized
 * scaling_config, which ty_sweep_trial_submit puts in the trial's job spec instead of its
 * train_loop_config. Errors name param_space.scaling_config.<field>. */
static int trial_scaling(const json_t *job, json_t *configs, struct bad *b)
{
    size_t i;
    json_t *cfg;
    json_array_foreach(configs, i, cfg)
    {
        const json_t *sc = json_object_get(cfg, "scaling_config");
        if (sc == NULL)
            continue;
        if (!json_is_object(sc))
            return refuse(b, "param_space.scaling_config",
                          "must be an object of scaling_config fields (searchable)");
        json_t *j = json_deep_copy(job);
        json_t *merged = json_deep_copy(json_object_get(job, "scaling_config"));
        if (merged == NULL || !json_is_object(merged)) {
            json_decref(merged);
            merged = json_object();
        }
        json_t *valid = NULL, *errors = NULL;
        int rc = JOBSPEC_ENOMEM;
        if (j && merged && json_object_update(merged, (json_t *)sc) == 0 &&
            json_object_set(j, "scaling_config", merged) == 0)
            rc = jobspec_validate(j, &valid, &errors);
        json_decref(j);
        json_decref(merged);
        if (rc != 0) {
            const json_t *e = json_array_get(errors, 0);
            const char *f = json_string_value(json_object_get(e, "field"));
            char field[160];
            snprintf(field, sizeof(field), "param_space.%s", f ? f : "scaling_config");
            const char *d = json_string_value(json_object_get(e, "detail"));
            int r = refuse(b, field, rc == JOBSPEC_ENOMEM ? "out of memory" : d ? d : "invalid");
            json_decref(errors);
            return r;
        }
        json_object_set(cfg, "scaling_config", json_object_get(valid, "scaling_config"));
        json_decref(valid);
    }
    return 0;
}

/* Validates the body into *in (in->spec and in->configs to be released by the caller). For the
 * job spec's own errors, *job_errors gets jobspec_validate's array with fields under "job.". */
static int validate(const json_t *body, struct sweep_in *in, json_t **job_errors, struct bad *b)
{
    static const char *const top[] = {"name", "job", "param_space", "tune_config", NULL};
    static const char *const tck[] = {"metric",    "mode", "num_samples", "max_concurrent_trials",
                                      "scheduler", "seed", "search_alg",  "stop",
                                      NULL};
    if (only_keys(body, "", top, b))
        return -1;
    const json_t *name = json_object_get(body, "name");
    if (name &&
        (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > 200))
        return refuse(b, "name", "must be a string of 1 to 200 characters");
    const json_t *job = json_object_get(body, "job");
    if (!json_is_object(job))
        return refuse(b, "job", "must be the trials' job spec (an object, as POST /api/v1/jobs)");
    const json_t *tc = json_object_get(body, "tune_config");
    if (tc && !json_is_object(tc))
        return refuse(b, "tune_config", "must be an object");
    if (tc && only_keys(tc, "tune_config", tck, b))
        return -1;
    const json_t *sched = json_object_get(tc, "scheduler");
    const char *type;
    if (check_scheduler(sched, &type, b) || metric_mode(tc, sched, "metric", &in->metric, b) ||
        metric_mode(tc, sched, "mode", &in->mode, b))
        return -1;
    if (in->mode && strcmp(in->mode, "min") != 0 && strcmp(in->mode, "max") != 0)
        return refuse(b, "tune_config.mode", "must be min or max");
    if (in->metric && in->mode == NULL)
        return refuse(b, "tune_config.mode", "must be min or max when a metric is set");
    /* The one unknown metric knowable here: a name no report can carry. The others are a
     * sweep event once trials report without it (ty_sweep_check_metric). */
    if (in->metric && strlen(in->metric) > APROTO_MAX_METRIC_NAME)
        return refuse(b, "tune_config.metric",
                      "no report can carry it: metric names have at most 256 characters");
    if (strcmp(type, "fifo") != 0 && in->metric == NULL)
        return refuse(b, "tune_config.metric", "a trial scheduler needs the metric it compares");
    const json_t *stop = json_object_get(tc, "stop");
    if (stop && (!json_is_object(stop) || json_object_size(stop) == 0))
        return refuse(b, "tune_config.stop",
                      "must be an object of reported numbers' names to the values that stop a "
                      "trial");
    const char *skey;
    const json_t *sval;
    json_object_foreach((json_t *)stop, skey, sval)
    {
        if (json_is_number(sval))
            continue;
        char field[160];
        snprintf(field, sizeof(field), "tune_config.stop.%.100s", skey);
        return refuse(b, field, "must be a number: a trial stops once it reports at least it");
    }
    const json_t *alg = json_object_get(tc, "search_alg");
    if (alg && !(json_is_string(alg) && (strcmp(json_string_value(alg), "basic_variant") == 0 ||
                                         strcmp(json_string_value(alg), "random") == 0)))
        return refuse(b, "tune_config.search_alg",
                      "the server searches with basic_variant (grid and random) only");
    json_int_t samples, seed, conc;
    if (tc_int(tc, "num_samples", 1, 1, TUNE_MAX_TRIALS, &samples, b))
        return -1;
    uint64_t rnd = 0;
    if (json_object_get(tc, "seed") == NULL && getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd = (uint64_t)time(NULL);
    if (tc_int(tc, "seed", (json_int_t)(rnd >> 2), 0, INT64_MAX, &seed, b))
        return -1;
    char field[160], why[256];
    if (tune_space_resolve(json_object_get(body, "param_space"), (int)samples, (uint64_t)seed,
                           &in->configs, field, sizeof(field), why, sizeof(why)) != 0)
        return refuse(b, field, why);
    json_int_t ntrials = (json_int_t)json_array_size(in->configs);
    if (tc_int(tc, "max_concurrent_trials", ntrials, 1, TUNE_MAX_TRIALS, &conc, b))
        return -1;
    in->num_samples = (int)samples;
    in->max_concurrent = (int)conc;
    in->seed = seed;
    /* The job spec as POST /api/v1/jobs validates it; named after the sweep when unnamed. */
    json_t *j = json_deep_copy(job);
    in->name = name ? json_string_value(name)
               : json_is_string(json_object_get(job, "name"))
                   ? json_string_value(json_object_get(job, "name"))
                   : "sweep";
    if (j && json_object_get(j, "name") == NULL)
        json_object_set_new(j, "name", json_string(in->name));
    json_t *valid = NULL, *errors = NULL;
    int rc = j ? jobspec_validate(j, &valid, &errors) : JOBSPEC_ENOMEM;
    if (rc == 0 && trial_scaling(j, in->configs, b) != 0) {
        json_decref(j);
        json_decref(valid);
        return -1;
    }
    json_decref(j);
    if (rc != 0) {
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e)
        {
            char f[200];
            snprintf(f, sizeof(f), "job.%s", json_string_value(json_object_get(e, "field")));
            json_object_set_new(e, "field", json_string(f));
        }
        *job_errors = errors;
        return refuse(b, "job", rc == JOBSPEC_ENOMEM ? "out of memory" : "invalid job spec");
    }
    json_t *tcc = tc ? json_deep_copy(tc) : json_object();
    if (tcc) {
        json_object_set_new(tcc, "seed", json_integer(seed));
        json_object_set_new(tcc, "num_samples", json_integer(samples));
        json_object_set_new(tcc, "max_concurrent_trials", json_integer(conc));
        if (in->metric)
            json_object_set_new(tcc, "metric", json_string(in->metric));
        if (in->mode)
            json_object_set_new(tcc, "mode", json_string(in->mode));
    }
    in->spec = json_pack("{s:o, s:O, s:o*}", "job", valid, "param_space",
                         json_object_get(body, "param_space"), "tune_config", tcc);
    return in->spec ? 0 : refuse(b, "job", "out of memory");
}

/* ---- POST /api/v1/sweeps ---- */

struct sweep_submit {
    const struct srv_identity *who;
    const struct sweep_in *in;
    const char *project, *code_package;
    bool no_project;
    enum srv_use_access code;
    int64_t id;
    char *json;
};

static int sweep_submit(struct db_conn *c, void *arg)
{
    struct sweep_submit *a = arg;
    int qs = srv_auth_spec_refs(c, a->who, a->code_package, &a->code, a->project, &a->no_project);
    if (qs <= 0)
        return qs;
    struct store_sweep_new n = {.name = a->in->name,
                                .owner = a->who->name,
                                .spec = a->in->spec,
                                .metric = a->in->metric,
                                .mode = a->in->mode,
                                .max_concurrent = a->in->max_concurrent,
                                .seed = a->in->seed,
                                .configs = a->in->configs};
    return store_sweep_insert(c, &n, &a->id, &a->json);
}

enum MHD_Result h_sweeps_submit(struct srv_request *req)
{
    enum MHD_Result ret;
    json_t *body = srv_body_json(req, &ret);
    if (body == NULL)
        return ret;
    struct sweep_in in = {0};
    json_t *job_errors = NULL;
    struct bad b;
    if (validate(body, &in, &job_errors, &b) != 0) {
        json_decref(body);
        json_decref(in.spec);
        json_decref(in.configs);
        if (job_errors) {
            json_t *first = json_array_get(job_errors, 0);
            return srv_reply_problem(req, SRV_P_INVALID_SWEEP, job_errors, "%s: %s",
                                     json_string_value(json_object_get(first, "field")),
                                     json_string_value(json_object_get(first, "detail")));
        }
        return srv_reply_field_problem(req, SRV_P_INVALID_SWEEP, b.field, b.why);
    }
    const json_t *job = json_object_get(in.spec, "job");
    struct sweep_submit a = {
        .who = &req->who,
        .in = &in,
        .project = json_string_value(json_object_get(job, "project")),
        .code_package = json_string_value(json_object_get(job, "code_package")),
        .code = SRV_USE_ALLOWED,
    };
    int qs = db_with_conn(req->srv->db, sweep_submit, &a);
    json_decref(body);
    json_decref(in.spec);
    json_decref(in.configs);
    if (qs >= 0 && a.no_project)
        return srv_reply_field_problem(req, SRV_P_PROJECT_NOT_FOUND, "job.project",
                                       "no such project (or it is private and you are not a "
                                       "member)");
    if (qs >= 0 && a.code != SRV_USE_ALLOWED)
        return srv_reply_field_problem(
            req,
            a.code == SRV_USE_NOT_FOUND ? SRV_P_CODE_PACKAGE_NOT_FOUND : SRV_P_PACKAGE_FORBIDDEN,
            "job.code_package", "no code package of yours by that SHA-256: upload it first");
    if (qs <= 0 || a.json == NULL) {
        free(a.json);
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    }
    char location[64];
    snprintf(location, sizeof(location), "/api/v1/sweeps/%lld", (long long)a.id);
    control_kick(req->srv->control);
    return srv_reply_steal(req, MHD_HTTP_CREATED, "application/json", a.json, strlen(a.json),
                           location);
}

/* ---- GET /api/v1/sweeps, GET /api/v1/sweeps/{id} ---- */

struct sweep_read {
    const struct srv_identity *who;
    int64_t id;
    int limit;
    char *json, *owner;
};

static int sweep_list(struct db_conn *c, void *arg)
{
    struct sweep_read *a = arg;
    return store_sweep_list(c, a->who, a->limit, &a->json);
}

enum MHD_Result h_sweeps_list(struct srv_request *req)
{
    struct sweep_read a = {.who = &req->who, .limit = 100};
    const char *limit = srv_query(req, "limit");
    if (limit) {
        char *end;
        long v = strtol(limit, &end, 10);
        if (*limit == '\0' || *end != '\0' || v < 1 || v > SWEEP_LIST_MAX)
            return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "limit",
                                           "must be an integer from 1 to 500");
        a.limit = (int)v;
    }
    int qs = db_with_conn(req->srv->db, sweep_list, &a);
    if (qs <= 0 || a.json == NULL) {
        free(a.json);
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    }
    return srv_reply_wrapped(req, "sweeps", a.json);
}

static int sweep_get(struct db_conn *c, void *arg)
{
    struct sweep_read *a = arg;
    return store_sweep_get(c, a->who, a->id, &a->json, &a->owner);
}

enum MHD_Result h_sweeps_get(struct srv_request *req)
{
    struct sweep_read a = {.who = &req->who};
    if (srv_arg_id(req, 0, &a.id) != 0)
        return srv_reply_problem(req, SRV_P_SWEEP_NOT_FOUND, NULL, "no such sweep");
    int qs = db_with_conn(req->srv->db, sweep_get, &a);
    free(a.owner);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_SWEEP_NOT_FOUND, NULL, "there is no sweep %lld",
                                 (long long)a.id);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", a.json, strlen(a.json), NULL);
}

/* ---- POST /api/v1/sweeps/{id}/stop ---- */

struct sweep_stop {
    const struct srv_identity *who;
    int64_t id;
    bool found, forbidden;
    char from[16];
    char *json;
};

static int sweep_stop(struct db_conn *c, void *arg)
{
    struct sweep_stop *a = arg;
    char *owner = NULL, *json = NULL;
    int qs = store_sweep_get(c, a->who, a->id, &json, &owner);
    free(json);
    a->found = qs > 0;
    a->forbidden = qs > 0 && !srv_auth_may_modify(a->who, owner);
    free(owner);
    if (qs <= 0 || a->forbidden)
        return qs;
    qs = store_sweep_stop(c, a->id, a->who->name, a->from);
    if (qs < 0)
        return qs;
    return store_sweep_get(c, a->who, a->id, &a->json, NULL);
}

enum MHD_Result h_sweeps_stop(struct srv_request *req)
{
    struct sweep_stop a = {.who = &req->who};
    if (srv_arg_id(req, 0, &a.id) != 0)
        return srv_reply_problem(req, SRV_P_SWEEP_NOT_FOUND, NULL, "no such sweep");
    int qs = db_with_conn(req->srv->db, sweep_stop, &a);
    if (qs < 0) {
        free(a.json);
        return srv_reply_db_error(req, qs);
    }
    if (!a.found)
        return srv_reply_problem(req, SRV_P_SWEEP_NOT_FOUND, NULL, "there is no sweep %lld",
                                 (long long)a.id);
    if (a.forbidden)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "sweep %lld belongs to another user; '%s' may stop only its own "
                                 "sweeps",
                                 (long long)a.id, req->who.name);
    if (strcmp(a.from, "RUNNING") != 0) {
        free(a.json);
        return srv_reply_problem(req, SRV_P_SWEEP_FINISHED, NULL, "sweep %lld has already finished",
                                 (long long)a.id);
    }
    if (a.json == NULL)
        return srv_reply_db_error(req, DB_HARD_ERROR);
    control_kick(req->srv->control);
    return srv_reply_steal(req, MHD_HTTP_ACCEPTED, "application/json", a.json, strlen(a.json),
                           NULL);
}
