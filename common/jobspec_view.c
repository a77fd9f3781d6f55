/* The typed view of a normalized job spec (struct jobspec) and the enum names. Pure: no I/O,
 * no globals beyond the constant name tables. */
#include "jobspec.h"
#include "jobspec_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const jobspec__backend_names[JOBSPEC__NBACKENDS] = {
#define BACKEND_NAME(name, text) text,
    JOBSPEC_BACKEND_MAP(BACKEND_NAME)
#undef BACKEND_NAME
};
const char *const jobspec__strategy_names[JOBSPEC__NSTRATEGIES] = {
#define STRATEGY_NAME(name) #name,
    JOBSPEC_STRATEGY_MAP(STRATEGY_NAME)
#undef STRATEGY_NAME
};
const char *const jobspec__score_order_names[JOBSPEC__NSCORE_ORDERS] = {
#define SCORE_ORDER_NAME(name, text) text,
    JOBSPEC_SCORE_ORDER_MAP(SCORE_ORDER_NAME)
#undef SCORE_ORDER_NAME
};

int jobspec__name_index(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Typed view                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* strdup of a JSON string, or NULL for JSON null; *ok cleared on allocation failure. */
static char *dup_opt(const json_t *v, bool *ok)
{
    if (!json_is_string(v))
        return NULL;
    char *s = strdup(json_string_value(v));
    *ok = *ok && s;
    return s;
}

static int64_t milli_of(const json_t *v)
{
    return (int64_t)llround(json_number_value(v) * 1000.0);
}

static bool fill_argv(struct jobspec *s, const json_t *ep)
{
    size_t n = json_is_string(ep) ? 3 : json_array_size(ep);
    s->argv = calloc(n + 1, sizeof *s->argv);
    if (!s->argv)
        return false;
    s->argc = n;
    if (json_is_string(ep)) {
        s->argv[0] = strdup("/bin/sh");
        s->argv[1] = strdup("-c");
        s->argv[2] = strdup(json_string_value(ep));
    } else {
        for (size_t i = 0; i < n; i++)
            s->argv[i] = strdup(json_string_value(json_array_get(ep, i)));
    }
    for (size_t i = 0; i < n; i++)
        if (!s->argv[i])
            return false;
    return true;
}

/* Copies the object of strings `obj` (env or secret_env) into *vars, in its order. */
static bool fill_env(const json_t *obj, struct jobspec_env **vars, size_t *n)
{
    *vars = calloc(json_object_size(obj) + 1, sizeof **vars);
    if (!*vars)
        return false;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        struct jobspec_env *v = &(*vars)[(*n)++];
        v->name = strdup(key);
        v->value = strdup(json_string_value(val) ? json_string_value(val) : "");
        if (!v->name || !v->value)
            return false;
    }
    return true;
}

static void free_env(struct jobspec_env *vars, size_t n)
{
    for (size_t i = 0; vars && i < n; i++) {
        free(vars[i].name);
        free(vars[i].value);
    }
    free(vars);
}

static bool fill_resources(struct jobspec *s, const json_t *res)
{
    s->custom = calloc(json_object_size(res) + 1, sizeof *s->custom);
    if (!s->custom)
        return false;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)res, key, val)
    {
        if (strcmp(key, "CPU") == 0) {
            s->cpu_milli = milli_of(val);
        } else if (strcmp(key, "GPU") == 0) {
            s->gpu = (int32_t)json_integer_value(val);
        } else if (strcmp(key, "memory_mb") == 0) {
            s->memory_mb = json_integer_value(val);
        } else if (milli_of(val) > 0) {
            struct jobspec_resource *r = &s->custom[s->n_custom++];
            r->amount_milli = milli_of(val);
            r->name = strdup(key);
            if (!r->name)
                return false;
        }
    }
    return true;
}

/* Fills s from a normalized spec n. Returns false on allocation failure. */
static bool fill(struct jobspec *s, const json_t *n)
{
    const json_t *sc = json_object_get(n, "scaling_config");
    const json_t *rc = json_object_get(n, "run_config");
    const json_t *ck = json_object_get(rc, "checkpoint_config");
    const json_t *nw = json_object_get(sc, "num_workers");
    const json_t *timeout = json_object_get(n, "timeout_s");
    enum jobspec_backend backend = JOBSPEC_BACKEND_TORCH;
    enum jobspec_strategy strategy = JOBSPEC_STRATEGY_PACK;
    enum jobspec_score_order order = JOBSPEC_SCORE_MAX;
    bool ok = true;

    s->name = dup_opt(json_object_get(n, "name"), &ok);
    s->working_dir = dup_opt(json_object_get(n, "working_dir"), &ok);
    jobspec_backend_from_string(json_string_value(json_object_get(n, "backend")), &backend);
    s->backend = backend;
    if (json_is_integer(nw)) {
        s->num_workers_min = s->num_workers_max = (int32_t)json_integer_value(nw);
    } else {
        s->num_workers_min = (int32_t)json_integer_value(json_object_get(nw, "min"));
        s->num_workers_max = (int32_t)json_integer_value(json_object_get(nw, "max"));
    }
    s->use_gpu = json_is_true(json_object_get(sc, "use_gpu"));
    jobspec_strategy_from_string(json_string_value(json_object_get(sc, "placement_strategy")),
                                 &strategy);
    s->strategy = strategy;
    s->accelerator_type = dup_opt(json_object_get(sc, "accelerator_type"), &ok);
    s->storage_path = dup_opt(json_object_get(rc, "storage_path"), &ok);
    s->num_to_keep = (int32_t)json_integer_value(json_object_get(ck, "num_to_keep"));
    s->checkpoint_score_attribute = dup_opt(json_object_get(ck, "checkpoint_score_attribute"), &ok);
    jobspec_score_order_from_string(
        json_string_value(json_object_get(ck, "checkpoint_score_order")), &order);
    s->score_order = order;
    s->max_failures = (int32_t)json_integer_value(
        json_object_get(json_object_get(rc, "failure_config"), "max_failures"));
    s->resume_from_checkpoint = json_integer_value(json_object_get(n, "resume_from_checkpoint"));
    s->priority = (int32_t)json_integer_value(json_object_get(n, "priority"));
    s->timeout_s = json_is_number(timeout) ? json_number_value(timeout) : 0.0;
    s->code_package = dup_opt(json_object_get(n, "code_package"), &ok);
    s->resume_from_package = dup_opt(json_object_get(n, "resume_from_package"), &ok);
    s->train_loop_config = json_deep_copy(json_object_get(n, "train_loop_config"));
    ok = ok && (s->train_loop_config || !json_object_get(n, "train_loop_config"));
    ok = fill_env(json_object_get(n, "env"), &s->env, &s->n_env) && ok;
    ok = fill_env(json_object_get(n, "secret_env"), &s->secret_env, &s->n_secret_env) && ok;
    s->entrypoint_is_string = json_is_string(json_object_get(n, "entrypoint"));
    ok = fill_argv(s, json_object_get(n, "entrypoint")) && ok;
    return fill_resources(s, json_object_get(sc, "resources_per_worker")) && ok;
}

int jobspec_from_json(const json_t *json, struct jobspec *spec, char *err, size_t errlen)
{
    json_t *norm = NULL, *errors = NULL;
    memset(spec, 0, sizeof *spec);
    int rc = jobspec_validate(json, &norm, &errors);
    if (rc == JOBSPEC_EINVAL) {
        const json_t *first = json_array_get(errors, 0);
        const char *field = json_string_value(json_object_get(first, "field"));
        const char *detail = json_string_value(json_object_get(first, "detail"));
        if (errlen > 0)
            snprintf(err, errlen, "%s%s%s", field, *field ? ": " : "", detail);
        json_decref(errors);
        return rc;
    }
    if (rc == JOBSPEC_OK && !fill(spec, norm)) {
        jobspec_clear(spec);
        rc = JOBSPEC_ENOMEM;
    }
    json_decref(norm);
    if (rc == JOBSPEC_ENOMEM && errlen > 0)
        snprintf(err, errlen, "out of memory");
    return rc;
}

void jobspec_clear(struct jobspec *spec)
{
    free(spec->name);
    for (size_t i = 0; spec->argv && i < spec->argc; i++)
        free(spec->argv[i]);
    free(spec->argv);
    free(spec->working_dir);
    free_env(spec->env, spec->n_env);
    free_env(spec->secret_env, spec->n_secret_env);
    json_decref(spec->train_loop_config);
    free(spec->code_package);
    free(spec->resume_from_package);
    for (size_t i = 0; i < spec->n_custom; i++)
        free(spec->custom[i].name);
    free(spec->custom);
    free(spec->accelerator_type);
    free(spec->storage_path);
    free(spec->checkpoint_score_attribute);
    memset(spec, 0, sizeof *spec);
}

/* ------------------------------------------------------------------------------------------ */
/* Enum names                                                                                   */
/* ------------------------------------------------------------------------------------------ */

#define ENUM_NAME(table, v) ((size_t)(v) < NELEM(table) ? (table)[(v)] : NULL)

const char *jobspec_backend_name(enum jobspec_backend backend)
{
    return ENUM_NAME(jobspec__backend_names, backend);
}

const char *jobspec_strategy_name(enum jobspec_strategy strategy)
{
    return ENUM_NAME(jobspec__strategy_names, strategy);
}

const char *jobspec_score_order_name(enum jobspec_score_order order)
{
    return ENUM_NAME(jobspec__score_order_names, order);
}

static int parse_name(const char *const *names, size_t n, const char *s)
{
    return s ? jobspec__name_index(names, n, s) : -1;
}

int jobspec_backend_from_string(const char *s, enum jobspec_backend *out)
{
    int i = parse_name(jobspec__backend_names, NELEM(jobspec__backend_names), s);
    if (i >= 0)
        *out = (enum jobspec_backend)i;
    return i >= 0 ? 0 : -1;
}

int jobspec_strategy_from_string(const char *s, enum jobspec_strategy *out)
{
    int i = parse_name(jobspec__strategy_names, NELEM(jobspec__strategy_names), s);
    if (i >= 0)
        *out = (enum jobspec_strategy)i;
    return i >= 0 ? 0 : -1;
}

int jobspec_score_order_from_string(const char *s, enum jobspec_score_order *out)
{
    int i = parse_name(jobspec__score_order_names, NELEM(jobspec__score_order_names), s);
    if (i >= 0)
        *out = (enum jobspec_score_order)i;
    return i >= 0 ? 0 : -1;
}
