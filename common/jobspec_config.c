/* Job-spec validation of the two nested configuration objects (DESIGN.md §2): scaling_config
 * (num_workers, use_gpu, resources_per_worker, placement, accelerator, elastic resize) and
 * run_config (storage_path, checkpoint_config, failure_config with its hang thresholds). Called
 * by jobspec_validate (jobspec.c), whose validation context and typed readers it uses through
 * jobspec_internal.h. Pure: no I/O, no globals. */
#include "jobspec.h"
#include "jobspec_internal.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static const char *const scaling_fields[] = {"num_workers",          "use_gpu",
                                             "resources_per_worker", "placement_strategy",
                                             "accelerator_type",     "elastic_resize_interval_s"};
static const char *const num_workers_fields[] = {"min", "max"};
static const char *const run_fields[] = {"storage_path", "checkpoint_config", "failure_config",
                                         "stop"};
static const char *const checkpoint_fields[] = {"num_to_keep", "checkpoint_score_attribute",
                                                "checkpoint_score_order"};
static const char *const failure_fields[] = {"max_failures", "preemption_grace_s", "hang_warn_s",
                                             "hang_timeout_s"};

/* ------------------------------------------------------------------------------------------ */
/* scaling_config                                                                               */
/* ------------------------------------------------------------------------------------------ */

#define SC "scaling_config"
#define RPW SC ".resources_per_worker"

static json_t *norm_num_workers(struct jobspec__vctx *c, const json_t *v)
{
    const char *path = SC ".num_workers";
    int64_t n, lo, hi;
    if (!v)
        return jobspec__chk(c, json_integer(1));
    if (!json_is_object(v)) {
        if (jobspec__as_int(v, &n) && n >= 1 && n <= JOBSPEC_WORKERS_MAX)
            return jobspec__chk(c, json_integer(n));
        jobspec__fail(c, path, "must be an integer between 1 and %d, or {\"min\": m, \"max\": n}",
                      JOBSPEC_WORKERS_MAX);
        return NULL;
    }
    bool ok =
        jobspec__reject_unknown(c, v, path, num_workers_fields, NELEM(num_workers_fields)) == 0;
    const json_t *jmin = jobspec__member(v, "min"), *jmax = jobspec__member(v, "max");
    if (!jmin)
        jobspec__fail(c, SC ".num_workers.min", "is required");
    if (!jmax)
        jobspec__fail(c, SC ".num_workers.max", "is required");
    ok =
        jmin && jobspec__get_int(c, jmin, SC ".num_workers.min", 1, JOBSPEC_WORKERS_MAX, &lo) && ok;
    ok =
        jmax && jobspec__get_int(c, jmax, SC ".num_workers.max", 1, JOBSPEC_WORKERS_MAX, &hi) && ok;
    if (!ok)
        return NULL;
    if (lo > hi) {
        jobspec__fail(c, path, "min must not exceed max");
        return NULL;
    }
    return jobspec__chk(c, json_pack("{s:I, s:I}", "min", (json_int_t)lo, "max", (json_int_t)hi));
}

/* The error for a key that looks like a built-in resource but is not spelled like one; NULL if
 * the key is not such a look-alike. */
static const char *resource_lookalike(const char *key)
{
    if (strcasecmp(key, "CPU") == 0)
        return "unknown resource; names are case-sensitive: use \"CPU\"";
    if (strcasecmp(key, "GPU") == 0)
        return "unknown resource; names are case-sensitive: use \"GPU\"";
    if (strcasecmp(key, "memory_mb") == 0 || strcasecmp(key, "memory") == 0)
        return "unknown resource; use \"memory_mb\" (megabytes)";
    return NULL;
}

static bool resource_name_valid(const char *k, size_t klen)
{
    return klen >= 1 && klen <= JOBSPEC_RESOURCE_NAME_MAX && klen == strlen(k) &&
           strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == klen;
}

/* One member of resources_per_worker; returns its normalized amount or NULL. use_gpu is -1 when
 * not given. */
static json_t *norm_resource(struct jobspec__vctx *c, const char *key, size_t klen,
                             const json_t *val, const char *p, int use_gpu, int64_t *gpu, bool *any)
{
    int64_t x = 0;
    json_t *out = NULL;
    if (strcmp(key, "CPU") == 0) {
        out = jobspec__norm_amount(c, val, p, JOBSPEC_CPU_MAX, &x);
    } else if (strcmp(key, "GPU") == 0) {
        if (!jobspec__get_int(c, val, p, 0, JOBSPEC_GPU_MAX, &x))
            return NULL;
        if (use_gpu == 1 && x == 0) {
            jobspec__fail(c, p, "must be at least 1 when use_gpu is true");
            return NULL;
        }
        if (use_gpu == 0 && x > 0) {
            jobspec__fail(c, p, "must be 0 when use_gpu is false");
            return NULL;
        }
        *gpu = x;
        out = jobspec__chk(c, json_integer(x));
    } else if (strcmp(key, "memory_mb") == 0) {
        out = jobspec__norm_int(c, val, p, 0, JOBSPEC_MEMORY_MB_MAX, 0);
        x = out ? json_integer_value(out) : 0;
    } else if (resource_lookalike(key)) {
        jobspec__fail(c, p, "%s", resource_lookalike(key));
    } else if (!resource_name_valid(key, klen)) {
        jobspec__fail(c, p, "is not a valid resource name: [A-Za-z0-9_.-], 1 to %d bytes",
                      JOBSPEC_RESOURCE_NAME_MAX);
    } else {
        out = jobspec__norm_amount(c, val, p, JOBSPEC_CUSTOM_MAX, &x);
    }
    *any = *any || x > 0;
    return out;
}

/* resources_per_worker with its defaults; sets *gpu to the GPUs per worker. NULL on error. */
static json_t *norm_resources(struct jobspec__vctx *c, const json_t *v, int use_gpu, int64_t *gpu)
{
    *gpu = 0;
    if (!v) {
        *gpu = use_gpu == 1;
        return jobspec__chk(c, use_gpu == 1 ? json_pack("{s:i}", "GPU", 1)
                                            : json_pack("{s:i}", "CPU", 1));
    }
    if (!jobspec__check_object(c, v, RPW, JOBSPEC_RESOURCES_MAX))
        return NULL;
    json_t *res = jobspec__chk(c, json_object());
    size_t nerr = json_array_size(c->errors);
    bool any = false;
    const char *key;
    size_t klen;
    json_t *val;
    char p[JOBSPEC__PATH_LEN];
    json_object_keylen_foreach((json_t *)v, key, klen, val)
    {
        jobspec__path_key(p, sizeof p, RPW, key);
        jobspec__put(c, res, key, norm_resource(c, key, klen, val, p, use_gpu, gpu, &any));
    }
    if (use_gpu == 1 && !json_object_get(v, "GPU")) {
        *gpu = 1;
        any = true;
        jobspec__put(c, res, "GPU", jobspec__chk(c, json_integer(1)));
    }
    if (json_array_size(c->errors) == nerr && !any)
        jobspec__fail(c, RPW, "requests no resources");
    if (json_array_size(c->errors) != nerr) {
        json_decref(res);
        return NULL;
    }
    return res;
}

json_t *jobspec__norm_scaling_config(struct jobspec__vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        jobspec__fail(c, SC, "must be an object");
        return NULL;
    }
    json_t *sc = jobspec__chk(c, json_object());
    if (v)
        jobspec__reject_unknown(c, v, SC, scaling_fields, NELEM(scaling_fields));
    jobspec__put(c, sc, "num_workers", norm_num_workers(c, jobspec__member(v, "num_workers")));

    const json_t *jgpu = jobspec__member(v, "use_gpu");
    int use_gpu = -1;
    if (jgpu && json_is_boolean(jgpu))
        use_gpu = json_is_true(jgpu);
    else if (jgpu)
        jobspec__fail(c, SC ".use_gpu", "must be a boolean");
    int64_t gpu = 0;
    json_t *res = norm_resources(c, jobspec__member(v, "resources_per_worker"), use_gpu, &gpu);
    if (res)
        jobspec__put(c, sc, "use_gpu", json_boolean(gpu > 0));
    jobspec__put(c, sc, "resources_per_worker", res);
    jobspec__put(c, sc, "placement_strategy",
                 jobspec__norm_enum(c, jobspec__member(v, "placement_strategy"),
                                    SC ".placement_strategy", jobspec__strategy_names,
                                    NELEM(jobspec__strategy_names),
                                    jobspec__strategy_names[JOBSPEC_STRATEGY_PACK]));

    json_t *acc = jobspec__norm_opt_string(c, jobspec__member(v, "accelerator_type"),
                                           SC ".accelerator_type", JOBSPEC_ACCELERATOR_MAX, true);
    if (acc && !json_is_null(acc) && res && gpu == 0) {
        jobspec__fail(c, SC ".accelerator_type",
                      "requires GPU workers: set use_gpu or resources_per_worker.GPU");
        json_decref(acc);
        acc = NULL;
    }
    jobspec__put(c, sc, "accelerator_type", acc);
    jobspec__put(c, sc, "elastic_resize_interval_s",
                 jobspec__norm_int(c, jobspec__member(v, "elastic_resize_interval_s"),
                                   SC ".elastic_resize_interval_s", 1, JOBSPEC_RESIZE_INTERVAL_MAX,
                                   JOBSPEC_RESIZE_INTERVAL_DEFAULT));
    return sc;
}

/* ------------------------------------------------------------------------------------------ */
/* run_config                                                                                   */
/* ------------------------------------------------------------------------------------------ */

#define RC "run_config"
#define CKPT RC ".checkpoint_config"

/* "scheme://rest": scheme is [A-Za-z][A-Za-z0-9+.-]*, rest non-empty. */
static bool looks_like_uri(const char *s)
{
    size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-");
    bool alpha = (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z');
    return n > 0 && alpha && strncmp(s + n, "://", 3) == 0 && s[n + 3] != '\0';
}

static json_t *norm_storage_path(struct jobspec__vctx *c, const json_t *v)
{
    json_t *out = jobspec__norm_opt_string(c, v, RC ".storage_path", JOBSPEC_PATH_MAX, true);
    if (out && json_is_string(out) && json_string_value(out)[0] != '/' &&
        !looks_like_uri(json_string_value(out))) {
        jobspec__fail(c, RC ".storage_path",
                      "must be an absolute path or a URI such as s3://bucket/dir");
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *norm_checkpoint_config(struct jobspec__vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        jobspec__fail(c, CKPT, "must be an object");
        return NULL;
    }
    json_t *ck = jobspec__chk(c, json_object());
    if (v)
        jobspec__reject_unknown(c, v, CKPT, checkpoint_fields, NELEM(checkpoint_fields));
    const json_t *keep = jobspec__member(v, "num_to_keep");
    jobspec__put(
        c, ck, "num_to_keep",
        keep ? jobspec__norm_int(c, keep, CKPT ".num_to_keep", 1, JOBSPEC_NUM_TO_KEEP_MAX, 0)
             : json_null());
    jobspec__put(c, ck, "checkpoint_score_attribute",
                 jobspec__norm_opt_string(c, jobspec__member(v, "checkpoint_score_attribute"),
                                          CKPT ".checkpoint_score_attribute",
                                          JOBSPEC_SCORE_ATTR_MAX, true));
    jobspec__put(c, ck, "checkpoint_score_order",
                 jobspec__norm_enum(c, jobspec__member(v, "checkpoint_score_order"),
                                    CKPT ".checkpoint_score_order", jobspec__score_order_names,
                                    NELEM(jobspec__score_order_names),
                                    jobspec__score_order_names[JOBSPEC_SCORE_MAX]));
    return ck;
}

/* A number of seconds in (0, JOBSPEC_TIMEOUT_MAX] at `path` into *d; false (recorded) if not. */
static bool get_seconds(struct jobspec__vctx *c, const json_t *v, const char *path, double *d)
{
    *d = json_is_number(v) ? json_number_value(v) : -1.0;
    if (isfinite(*d) && *d > 0 && *d <= JOBSPEC_TIMEOUT_MAX)
        return true;
    jobspec__fail(c, path, "must be a number of seconds greater than 0 and at most %d",
                  JOBSPEC_TIMEOUT_MAX);
    return false;
}

/* failure_config's hang_warn_s (default JOBSPEC_HANG_WARN_DEFAULT) and hang_timeout_s (null:
 * never; else at least hang_warn_s) into fc. */
static void norm_hang_config(struct jobspec__vctx *c, json_t *fc, const json_t *v)
{
    const json_t *warn = jobspec__member(v, "hang_warn_s"),
                 *timeout = jobspec__member(v, "hang_timeout_s");
    double w = JOBSPEC_HANG_WARN_DEFAULT, t = 0;
    if (warn && !get_seconds(c, warn, RC ".failure_config.hang_warn_s", &w))
        return;
    jobspec__put(c, fc, "hang_warn_s", jobspec__number_json(c, w));
    if (!timeout) {
        jobspec__put(c, fc, "hang_timeout_s", json_null());
        return;
    }
    if (!get_seconds(c, timeout, RC ".failure_config.hang_timeout_s", &t))
        return;
    if (t < w) {
        jobspec__fail(c, RC ".failure_config.hang_timeout_s", "must be at least hang_warn_s (%g)",
                      w);
        return;
    }
    jobspec__put(c, fc, "hang_timeout_s", jobspec__number_json(c, t));
}

static json_t *norm_failure_config(struct jobspec__vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        jobspec__fail(c, RC ".failure_config", "must be an object");
        return NULL;
    }
    json_t *fc = jobspec__chk(c, json_object());
    if (v)
        jobspec__reject_unknown(c, v, RC ".failure_config", failure_fields, NELEM(failure_fields));
    jobspec__put(c, fc, "max_failures",
                 jobspec__norm_int(c, jobspec__member(v, "max_failures"),
                                   RC ".failure_config.max_failures", -1, JOBSPEC_MAX_FAILURES_MAX,
                                   0));
    norm_hang_config(c, fc, v);
    jobspec__put(c, fc, "preemption_grace_s",
                 jobspec__norm_int(c, jobspec__member(v, "preemption_grace_s"),
                                   RC ".failure_config.preemption_grace_s", 0,
                                   JOBSPEC_PREEMPTION_GRACE_MAX, 0));
    return fc;
}

/* stop (Ray's RunConfig(stop={"acc": 0.9})): a non-empty object of reported names to numbers;
 * the job stops once a rank-0 report has a number at or above one (the server's control thread,
 * tune_stop_check). Absent stays absent. */
static json_t *norm_stop(struct jobspec__vctx *c, const json_t *v)
{
    if (v == NULL)
        return NULL;
    if (!json_is_object(v) || json_object_size(v) == 0) {
        jobspec__fail(c, RC ".stop",
                      "must be an object of reported numbers' names to the values that stop "
                      "the job");
        return NULL;
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (!json_is_number(val) || !isfinite(json_number_value(val))) {
            char path[JOBSPEC__PATH_LEN];
            jobspec__path_key(path, sizeof path, RC ".stop", key);
            jobspec__fail(c, path, "must be a number: the job stops once it reports at least it");
            return NULL;
        }
    }
    return jobspec__chk(c, json_deep_copy(v));
}

json_t *jobspec__norm_run_config(struct jobspec__vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        jobspec__fail(c, RC, "must be an object");
        return NULL;
    }
    json_t *rc = jobspec__chk(c, json_object());
    if (v)
        jobspec__reject_unknown(c, v, RC, run_fields, NELEM(run_fields));
    jobspec__put(c, rc, "storage_path", norm_storage_path(c, jobspec__member(v, "storage_path")));
    jobspec__put(c, rc, "checkpoint_config",
                 norm_checkpoint_config(c, jobspec__member(v, "checkpoint_config")));
    jobspec__put(c, rc, "failure_config",
                 norm_failure_config(c, jobspec__member(v, "failure_config")));
    jobspec__put(c, rc, "stop", norm_stop(c, jobspec__member(v, "stop")));
    return rc;
}

/* resume_from_package: the SHA-256 of a checkpoint directory uploaded as a package (the code
 * package endpoint); the workers start from a private copy of it, so it excludes
 * resume_from_checkpoint. */