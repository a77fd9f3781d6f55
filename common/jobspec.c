/* Job-spec validation and normalization (DESIGN.md §2). Pure: no I/O, no globals.
 *
 * Rules, beyond the limits in jobspec.h:
 * - JSON null counts as absent everywhere, so clients may send null for "use the default".
 * - Integer fields take a JSON integer or a real with no fractional part (2.0, normalized to 2).
 * - Amounts of CPU and custom resources are kept in thousandths; finer values are rejected.
 * - env may not set TRAINYARD_* nor the variables Trainyard sets on every worker (§3).
 * - use_gpu absent is inferred from resources_per_worker.GPU; use_gpu true with GPU 0, or false
 *   with GPU > 0, is a contradiction and rejected. accelerator_type needs GPU workers.
 * - Errors: one per offending field, unknown fields first, then in the order of §2's table. */
#include "jobspec.h"
#include "jobspec_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PATH_LEN 320 /* a dotted field path; keys longer than KEY_SHOWN are cut */
#define KEY_SHOWN 256
#define MILLI_TOLERANCE 1e-3

static const char *const top_fields[] = {
    "name",     "entrypoint",        "working_dir",    "env",          "secret_env",
    "backend",  "train_loop_config", "scaling_config", "run_config",   "resume_from_checkpoint",
    "priority", "timeout_s",         "metadata",       "code_package", "resume_from_package"};
static const char *const scaling_fields[] = {"num_workers",          "use_gpu",
                                             "resources_per_worker", "placement_strategy",
                                             "accelerator_type",     "elastic_resize_interval_s"};
static const char *const num_workers_fields[] = {"min", "max"};
static const char *const run_fields[] = {"storage_path", "checkpoint_config", "failure_config"};
static const char *const checkpoint_fields[] = {"num_to_keep", "checkpoint_score_attribute",
                                                "checkpoint_score_order"};
static const char *const failure_fields[] = {"max_failures", "preemption_grace_s", "hang_warn_s",
                                             "hang_timeout_s"};
static const char *const reserved_env[] = {
    "RANK",        "WORLD_SIZE",  "LOCAL_RANK",           "LOCAL_WORLD_SIZE", "NODE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "TF_CONFIG"};

/* ------------------------------------------------------------------------------------------ */
/* Validation context, error list, paths                                                       */
/* ------------------------------------------------------------------------------------------ */

struct vctx {
    json_t *errors; /* array of {"field", "detail"} */
    bool nomem;
};

/* Appends {"field": path, "detail": <formatted>} to the error list. */
static void fail(struct vctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct vctx *c, const char *path, const char *fmt, ...)
{
    char detail[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s, s:s}", "field", path, "detail", detail);
    if (!e || json_array_append_new(c->errors, e) != 0)
        c->nomem = true;
}

/* Flags a failed allocation; returns v. */
static json_t *chk(struct vctx *c, json_t *v)
{
    if (!v)
        c->nomem = true;
    return v;
}

/* Sets obj[key] = v, stealing v. A NULL v (an error already recorded) is skipped. */
static void put(struct vctx *c, json_t *obj, const char *key, json_t *v)
{
    if (v && json_object_set_new(obj, key, v) != 0)
        c->nomem = true;
}

static void append(struct vctx *c, json_t *arr, json_t *v)
{
    if (v && json_array_append_new(arr, v) != 0)
        c->nomem = true;
}

/* buf = "parent.key"; a key over KEY_SHOWN bytes is cut at a UTF-8 boundary and gets "...". */
static void path_key(char *buf, size_t n, const char *parent, const char *key)
{
    size_t len = strlen(key), cut = len;
    if (cut > KEY_SHOWN) {
        cut = KEY_SHOWN;
        while (cut > 0 && ((unsigned char)key[cut] & 0xC0) == 0x80)
            cut--;
    }
    snprintf(buf, n, "%s%s%.*s%s", parent, *parent ? "." : "", (int)cut, key,
             cut < len ? "..." : "");
}

/* obj[key], with JSON null (and a NULL obj) read as absent. */
static const json_t *member(const json_t *obj, const char *key)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    return json_is_null(v) ? NULL : v;
}

/* Records "unknown field" for each key of obj not in allowed. Returns how many. jansson's
 * iterators take a non-const object; they only read it. */
static size_t reject_unknown(struct vctx *c, const json_t *obj, const char *parent,
                             const char *const *allowed, size_t n)
{
    const char *key;
    size_t klen, bad = 0;
    json_t *v;
    char p[PATH_LEN];
    json_object_keylen_foreach((json_t *)obj, key, klen, v)
    {
        if (klen == strlen(key) && jobspec__name_index(allowed, n, key) >= 0)
            continue;
        path_key(p, sizeof p, parent, key);
        fail(c, p, "unknown field");
        bad++;
    }
    (void)v;
    return bad;
}

/* ------------------------------------------------------------------------------------------ */
/* Typed readers: each records one error for `path` and returns false/NULL on a bad value       */
/* ------------------------------------------------------------------------------------------ */

/* An integer: a JSON integer, or a real with no fractional part within ±2^53. */
static bool as_int(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0) {
            *out = (int64_t)d;
            return true;
        }
    }
    return false;
}

static bool get_int(struct vctx *c, const json_t *v, const char *path, int64_t lo, int64_t hi,
                    int64_t *out)
{
    if (as_int(v, out) && *out >= lo && *out <= hi)
        return true;
    fail(c, path, "must be an integer between %" PRId64 " and %" PRId64, lo, hi);
    return false;
}

/* Optional integer: absent gives def. Returns the normalized JSON integer or NULL. */
static json_t *norm_int(struct vctx *c, const json_t *v, const char *path, int64_t lo, int64_t hi,
                        int64_t def)
{
    int64_t x = def;
    if (v && !get_int(c, v, path, lo, hi, &x))
        return NULL;
    return chk(c, json_integer(x));
}

/* A number with an integral value becomes a JSON integer, others a real. */
static json_t *number_json(struct vctx *c, double d)
{
    if (d == floor(d) && fabs(d) <= 9007199254740992.0)
        return chk(c, json_integer((json_int_t)d));
    return chk(c, json_real(d));
}

/* A resource amount in [0, max], in thousandths. Returns the normalized number or NULL. */
static json_t *norm_amount(struct vctx *c, const json_t *v, const char *path, double max,
                           int64_t *milli)
{
    double d = json_is_number(v) ? json_number_value(v) : -1.0;
    if (!isfinite(d) || d < 0 || d > max) {
        fail(c, path, "must be a number between 0 and %.0f", max);
        return NULL;
    }
    double m = d * 1000.0, r = round(m);
    if (fabs(m - r) > MILLI_TOLERANCE) {
        fail(c, path, "must be a multiple of 0.001");
        return NULL;
    }
    *milli = (int64_t)r;
    return *milli % 1000 == 0 ? chk(c, json_integer(*milli / 1000))
                              : chk(c, json_real((double)*milli / 1000.0));
}

/* A string of min..max bytes; `printable` also rejects control characters, otherwise only
 * NUL bytes are rejected. */
static bool check_string(struct vctx *c, const json_t *v, const char *path, size_t min, size_t max,
                         bool printable)
{
    if (!json_is_string(v)) {
        fail(c, path, "must be a string");
        return false;
    }
    const unsigned char *s = (const unsigned char *)json_string_value(v);
    size_t n = json_string_length(v);
    if (n < min) {
        fail(c, path, "must not be empty");
        return false;
    }
    if (n > max) {
        fail(c, path, "must be at most %zu bytes", max);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (printable && (s[i] < 0x20 || s[i] == 0x7f)) {
            fail(c, path, "must not contain control characters");
            return false;
        }
        if (s[i] == 0) {
            fail(c, path, "must not contain NUL bytes");
            return false;
        }
    }
    return true;
}

static json_t *copy_string(struct vctx *c, const json_t *v)
{
    return chk(c, json_stringn(json_string_value(v), json_string_length(v)));
}

/* Optional string: absent gives JSON null. */
static json_t *norm_opt_string(struct vctx *c, const json_t *v, const char *path, size_t max,
                               bool printable)
{
    if (!v)
        return json_null();
    return check_string(c, v, path, 1, max, printable) ? copy_string(c, v) : NULL;
}

/* One of names (exact match); absent gives def. */
static json_t *norm_enum(struct vctx *c, const json_t *v, const char *path,
                         const char *const *names, size_t n, const char *def)
{
    if (!v)
        return chk(c, json_string(def));
    if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v)) {
        int i = jobspec__name_index(names, n, json_string_value(v));
        if (i >= 0)
            return chk(c, json_string(names[i]));
    }
    char list[128] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    fail(c, path, "must be one of %s", list);
    return NULL;
}

/* An object that is checked member by member; NULL (after an error) if v is not an object. */
static bool check_object(struct vctx *c, const json_t *v, const char *path, size_t max_entries)
{
    if (!json_is_object(v)) {
        fail(c, path, "must be an object");
        return false;
    }
    if (json_object_size(v) > max_entries) {
        fail(c, path, "must have at most %zu entries", max_entries);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Top-level fields                                                                             */
/* ------------------------------------------------------------------------------------------ */

static json_t *norm_name(struct vctx *c, const json_t *v)
{
    if (!v)
        return chk(c, json_string("job"));
    return check_string(c, v, "name", 1, JOBSPEC_NAME_MAX, true) ? copy_string(c, v) : NULL;
}

static json_t *norm_entrypoint(struct vctx *c, const json_t *v)
{
    if (!v) {
        fail(c, "entrypoint", "is required");
        return NULL;
    }
    if (json_is_string(v))
        return check_string(c, v, "entrypoint", 1, JOBSPEC_ENTRYPOINT_MAX, false)
                   ? copy_string(c, v)
                   : NULL;
    if (!json_is_array(v)) {
        fail(c, "entrypoint", "must be a string or an array of strings");
        return NULL;
    }
    size_t n = json_array_size(v);
    if (n == 0 || n > JOBSPEC_ARGV_MAX) {
        fail(c, "entrypoint", "must have 1 to %d items", JOBSPEC_ARGV_MAX);
        return NULL;
    }
    json_t *argv = chk(c, json_array());
    char p[PATH_LEN];
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(v, i);
        snprintf(p, sizeof p, "entrypoint[%zu]", i);
        if (check_string(c, item, p, 1, JOBSPEC_ENTRYPOINT_MAX, false))
            append(c, argv, copy_string(c, item));
    }
    return argv;
}

static json_t *norm_working_dir(struct vctx *c, const json_t *v)
{
    if (!v)
        return json_null();
    if (!check_string(c, v, "working_dir", 1, JOBSPEC_PATH_MAX, false))
        return NULL;
    if (json_string_value(v)[0] != '/') {
        fail(c, "working_dir", "must be an absolute path");
        return NULL;
    }
    return copy_string(c, v);
}

/* Whether v, a string, is a SHA-256 (64 lowercase hex digits); else fails `field`. */
static bool check_sha256(struct vctx *c, const json_t *v, const char *field)
{
    if (!check_string(c, v, field, 1, 64, false))
        return false;
    const char *s = json_string_value(v);
    for (size_t i = 0; i < 64; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) { /* NUL: short */
            fail(c, field, "must be a SHA-256: 64 lowercase hex digits");
            return false;
        }
    }
    return true;
}

/* code_package: the SHA-256 of an uploaded code package (issue 15); the workers then run in a
 * private copy of it, so working_dir may not be given with it. */
static json_t *norm_code_package(struct vctx *c, const json_t *v, const json_t *working_dir)
{
    if (!check_sha256(c, v, "code_package"))
        return NULL;
    if (working_dir && !json_is_null(working_dir)) {
        fail(c, "working_dir",
             "cannot be given with code_package: the workers run in a private copy of the "
             "package");
        return NULL;
    }
    return copy_string(c, v);
}

static bool env_name_valid(const char *k, size_t klen)
{
    if (klen == 0 || klen > JOBSPEC_ENV_NAME_MAX || klen != strlen(k))
        return false;
    if (!(k[0] == '_' || (k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z')))
        return false;
    return strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == klen;
}

static bool env_name_reserved(const char *k)
{
    return strncmp(k, "TRAINYARD_", 10) == 0 ||
           jobspec__name_index(reserved_env, NELEM(reserved_env), k) >= 0;
}

/* `env` or `secret_env` (field): an object of variable names to strings. */
static json_t *norm_env(struct vctx *c, const json_t *v, const char *field)
{
    if (!v)
        return chk(c, json_object());
    if (!check_object(c, v, field, JOBSPEC_ENV_MAX))
        return NULL;
    json_t *env = chk(c, json_object());
    const char *key;
    size_t klen;
    json_t *val;
    char p[PATH_LEN];
    json_object_keylen_foreach((json_t *)v, key, klen, val)
    {
        path_key(p, sizeof p, field, key);
        if (!env_name_valid(key, klen))
            fail(c, p, "is not a valid variable name: [A-Za-z_][A-Za-z0-9_]*, at most %d bytes",
                 JOBSPEC_ENV_NAME_MAX);
        else if (env_name_reserved(key))
            fail(c, p, "is reserved: Trainyard sets it on every worker");
        else if (check_string(c, val, p, 0, JOBSPEC_ENV_VALUE_MAX, false))
            put(c, env, key, copy_string(c, val));
    }
    return env;
}

static int count_bytes(const char *buffer, size_t size, void *data)
{
    size_t *total = data;
    (void)buffer;
    *total += size;
    return *total > JOBSPEC_CONFIG_MAX ? -1 : 0;
}

static json_t *norm_train_loop_config(struct vctx *c, const json_t *v)
{
    if (!v)
        return chk(c, json_object());
    size_t total = 0;
    if (json_dump_callback(v, count_bytes, &total, JSON_COMPACT | JSON_ENCODE_ANY) != 0) {
        if (total > JOBSPEC_CONFIG_MAX)
            fail(c, "train_loop_config", "must be at most %d bytes when serialized",
                 JOBSPEC_CONFIG_MAX);
        else
            c->nomem = true;
        return NULL;
    }
    return chk(c, json_deep_copy(v));
}

/* ------------------------------------------------------------------------------------------ */
/* scaling_config                                                                               */
/* ------------------------------------------------------------------------------------------ */

#define SC "scaling_config"
#define RPW SC ".resources_per_worker"

static json_t *norm_num_workers(struct vctx *c, const json_t *v)
{
    const char *path = SC ".num_workers";
    int64_t n, lo, hi;
    if (!v)
        return chk(c, json_integer(1));
    if (!json_is_object(v)) {
        if (as_int(v, &n) && n >= 1 && n <= JOBSPEC_WORKERS_MAX)
            return chk(c, json_integer(n));
        fail(c, path, "must be an integer between 1 and %d, or {\"min\": m, \"max\": n}",
             JOBSPEC_WORKERS_MAX);
        return NULL;
    }
    bool ok = reject_unknown(c, v, path, num_workers_fields, NELEM(num_workers_fields)) == 0;
    const json_t *jmin = member(v, "min"), *jmax = member(v, "max");
    if (!jmin)
        fail(c, SC ".num_workers.min", "is required");
    if (!jmax)
        fail(c, SC ".num_workers.max", "is required");
    ok = jmin && get_int(c, jmin, SC ".num_workers.min", 1, JOBSPEC_WORKERS_MAX, &lo) && ok;
    ok = jmax && get_int(c, jmax, SC ".num_workers.max", 1, JOBSPEC_WORKERS_MAX, &hi) && ok;
    if (!ok)
        return NULL;
    if (lo > hi) {
        fail(c, path, "min must not exceed max");
        return NULL;
    }
    return chk(c, json_pack("{s:I, s:I}", "min", (json_int_t)lo, "max", (json_int_t)hi));
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
static json_t *norm_resource(struct vctx *c, const char *key, size_t klen, const json_t *val,
                             const char *p, int use_gpu, int64_t *gpu, bool *any)
{
    int64_t x = 0;
    json_t *out = NULL;
    if (strcmp(key, "CPU") == 0) {
        out = norm_amount(c, val, p, JOBSPEC_CPU_MAX, &x);
    } else if (strcmp(key, "GPU") == 0) {
        if (!get_int(c, val, p, 0, JOBSPEC_GPU_MAX, &x))
            return NULL;
        if (use_gpu == 1 && x == 0) {
            fail(c, p, "must be at least 1 when use_gpu is true");
            return NULL;
        }
        if (use_gpu == 0 && x > 0) {
            fail(c, p, "must be 0 when use_gpu is false");
            return NULL;
        }
        *gpu = x;
        out = chk(c, json_integer(x));
    } else if (strcmp(key, "memory_mb") == 0) {
        out = norm_int(c, val, p, 0, JOBSPEC_MEMORY_MB_MAX, 0);
        x = out ? json_integer_value(out) : 0;
    } else if (resource_lookalike(key)) {
        fail(c, p, "%s", resource_lookalike(key));
    } else if (!resource_name_valid(key, klen)) {
        fail(c, p, "is not a valid resource name: [A-Za-z0-9_.-], 1 to %d bytes",
             JOBSPEC_RESOURCE_NAME_MAX);
    } else {
        out = norm_amount(c, val, p, JOBSPEC_CUSTOM_MAX, &x);
    }
    *any = *any || x > 0;
    return out;
}

/* resources_per_worker with its defaults; sets *gpu to the GPUs per worker. NULL on error. */
static json_t *norm_resources(struct vctx *c, const json_t *v, int use_gpu, int64_t *gpu)
{
    *gpu = 0;
    if (!v) {
        *gpu = use_gpu == 1;
        return chk(c, use_gpu == 1 ? json_pack("{s:i}", "GPU", 1) : json_pack("{s:i}", "CPU", 1));
    }
    if (!check_object(c, v, RPW, JOBSPEC_RESOURCES_MAX))
        return NULL;
    json_t *res = chk(c, json_object());
    size_t nerr = json_array_size(c->errors);
    bool any = false;
    const char *key;
    size_t klen;
    json_t *val;
    char p[PATH_LEN];
    json_object_keylen_foreach((json_t *)v, key, klen, val)
    {
        path_key(p, sizeof p, RPW, key);
        put(c, res, key, norm_resource(c, key, klen, val, p, use_gpu, gpu, &any));
    }
    if (use_gpu == 1 && !json_object_get(v, "GPU")) {
        *gpu = 1;
        any = true;
        put(c, res, "GPU", chk(c, json_integer(1)));
    }
    if (json_array_size(c->errors) == nerr && !any)
        fail(c, RPW, "requests no resources");
    if (json_array_size(c->errors) != nerr) {
        json_decref(res);
        return NULL;
    }
    return res;
}

static json_t *norm_scaling_config(struct vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        fail(c, SC, "must be an object");
        return NULL;
    }
    json_t *sc = chk(c, json_object());
    if (v)
        reject_unknown(c, v, SC, scaling_fields, NELEM(scaling_fields));
    put(c, sc, "num_workers", norm_num_workers(c, member(v, "num_workers")));

    const json_t *jgpu = member(v, "use_gpu");
    int use_gpu = -1;
    if (jgpu && json_is_boolean(jgpu))
        use_gpu = json_is_true(jgpu);
    else if (jgpu)
        fail(c, SC ".use_gpu", "must be a boolean");
    int64_t gpu = 0;
    json_t *res = norm_resources(c, member(v, "resources_per_worker"), use_gpu, &gpu);
    if (res)
        put(c, sc, "use_gpu", json_boolean(gpu > 0));
    put(c, sc, "resources_per_worker", res);
    put(c, sc, "placement_strategy",
        norm_enum(c, member(v, "placement_strategy"), SC ".placement_strategy",
                  jobspec__strategy_names, NELEM(jobspec__strategy_names), "PACK"));

    json_t *acc = norm_opt_string(c, member(v, "accelerator_type"), SC ".accelerator_type",
                                  JOBSPEC_ACCELERATOR_MAX, true);
    if (acc && !json_is_null(acc) && res && gpu == 0) {
        fail(c, SC ".accelerator_type",
             "requires GPU workers: set use_gpu or resources_per_worker.GPU");
        json_decref(acc);
        acc = NULL;
    }
    put(c, sc, "accelerator_type", acc);
    put(c, sc, "elastic_resize_interval_s",
        norm_int(c, member(v, "elastic_resize_interval_s"), SC ".elastic_resize_interval_s", 1,
                 JOBSPEC_RESIZE_INTERVAL_MAX, JOBSPEC_RESIZE_INTERVAL_DEFAULT));
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

static json_t *norm_storage_path(struct vctx *c, const json_t *v)
{
    json_t *out = norm_opt_string(c, v, RC ".storage_path", JOBSPEC_PATH_MAX, true);
    if (out && json_is_string(out) && json_string_value(out)[0] != '/' &&
        !looks_like_uri(json_string_value(out))) {
        fail(c, RC ".storage_path", "must be an absolute path or a URI such as s3://bucket/dir");
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *norm_checkpoint_config(struct vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        fail(c, CKPT, "must be an object");
        return NULL;
    }
    json_t *ck = chk(c, json_object());
    if (v)
        reject_unknown(c, v, CKPT, checkpoint_fields, NELEM(checkpoint_fields));
    const json_t *keep = member(v, "num_to_keep");
    put(c, ck, "num_to_keep",
        keep ? norm_int(c, keep, CKPT ".num_to_keep", 1, JOBSPEC_NUM_TO_KEEP_MAX, 0) : json_null());
    put(c, ck, "checkpoint_score_attribute",
        norm_opt_string(c, member(v, "checkpoint_score_attribute"),
                        CKPT ".checkpoint_score_attribute", JOBSPEC_SCORE_ATTR_MAX, true));
    put(c, ck, "checkpoint_score_order",
        norm_enum(c, member(v, "checkpoint_score_order"), CKPT ".checkpoint_score_order",
                  jobspec__score_order_names, NELEM(jobspec__score_order_names), "max"));
    return ck;
}

/* A number of seconds in (0, JOBSPEC_TIMEOUT_MAX] at `path` into *d; false (recorded) if not. */
static bool get_seconds(struct vctx *c, const json_t *v, const char *path, double *d)
{
    *d = json_is_number(v) ? json_number_value(v) : -1.0;
    if (isfinite(*d) && *d > 0 && *d <= JOBSPEC_TIMEOUT_MAX)
        return true;
    fail(c, path, "must be a number of seconds greater than 0 and at most %d", JOBSPEC_TIMEOUT_MAX);
    return false;
}

/* failure_config's hang_warn_s (default JOBSPEC_HANG_WARN_DEFAULT) and hang_timeout_s (null:
 * never; else at least hang_warn_s) into fc. */
static void norm_hang_config(struct vctx *c, json_t *fc, const json_t *v)
{
    const json_t *warn = member(v, "hang_warn_s"), *timeout = member(v, "hang_timeout_s");
    double w = JOBSPEC_HANG_WARN_DEFAULT, t = 0;
    if (warn && !get_seconds(c, warn, RC ".failure_config.hang_warn_s", &w))
        return;
    put(c, fc, "hang_warn_s", number_json(c, w));
    if (!timeout) {
        put(c, fc, "hang_timeout_s", json_null());
        return;
    }
    if (!get_seconds(c, timeout, RC ".failure_config.hang_timeout_s", &t))
        return;
    if (t < w) {
        fail(c, RC ".failure_config.hang_timeout_s", "must be at least hang_warn_s (%g)", w);
        return;
    }
    put(c, fc, "hang_timeout_s", number_json(c, t));
}

static json_t *norm_failure_config(struct vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        fail(c, RC ".failure_config", "must be an object");
        return NULL;
    }
    json_t *fc = chk(c, json_object());
    if (v)
        reject_unknown(c, v, RC ".failure_config", failure_fields, NELEM(failure_fields));
    put(c, fc, "max_failures",
        norm_int(c, member(v, "max_failures"), RC ".failure_config.max_failures", -1,
                 JOBSPEC_MAX_FAILURES_MAX, 0));
    norm_hang_config(c, fc, v);
    put(c, fc, "preemption_grace_s",
        norm_int(c, member(v, "preemption_grace_s"), RC ".failure_config.preemption_grace_s", 0,
                 JOBSPEC_PREEMPTION_GRACE_MAX, 0));
    return fc;
}

static json_t *norm_run_config(struct vctx *c, const json_t *v)
{
    if (v && !json_is_object(v)) {
        fail(c, RC, "must be an object");
        return NULL;
    }
    json_t *rc = chk(c, json_object());
    if (v)
        reject_unknown(c, v, RC, run_fields, NELEM(run_fields));
    put(c, rc, "storage_path", norm_storage_path(c, member(v, "storage_path")));
    put(c, rc, "checkpoint_config", norm_checkpoint_config(c, member(v, "checkpoint_config")));
    put(c, rc, "failure_config", norm_failure_config(c, member(v, "failure_config")));
    return rc;
}

/* resume_from_package: the SHA-256 of a checkpoint directory uploaded as a package (the code
 * package endpoint); the workers start from a private copy of it, so it excludes
 * resume_from_checkpoint. */
static json_t *norm_resume_package(struct vctx *c, const json_t *v, const json_t *resume)
{
    if (!check_sha256(c, v, "resume_from_package"))
        return NULL;
    if (resume && !json_is_null(resume)) {
        fail(c, "resume_from_package",
             "cannot be given with resume_from_checkpoint: a job resumes from one checkpoint");
        return NULL;
    }
    return copy_string(c, v);
}

/* ------------------------------------------------------------------------------------------ */
/* The remaining top-level fields and the entry point                                           */
/* ------------------------------------------------------------------------------------------ */

static json_t *norm_resume(struct vctx *c, const json_t *v)
{
    int64_t id;
    if (!v)
        return json_null();
    if (as_int(v, &id) && id >= 1)
        return chk(c, json_integer(id));
    fail(c, "resume_from_checkpoint", "must be an integer checkpoint id >= 1");
    return NULL;
}

static json_t *norm_timeout(struct vctx *c, const json_t *v)
{
    if (!v)
        return json_null();
    double d = json_is_number(v) ? json_number_value(v) : -1.0;
    if (isfinite(d) && d > 0 && d <= JOBSPEC_TIMEOUT_MAX)
        return number_json(c, d);
    fail(c, "timeout_s", "must be a number of seconds greater than 0 and at most %d",
         JOBSPEC_TIMEOUT_MAX);
    return NULL;
}

static json_t *norm_metadata(struct vctx *c, const json_t *v)
{
    if (!v)
        return chk(c, json_object());
    if (!check_object(c, v, "metadata", JOBSPEC_METADATA_MAX))
        return NULL;
    json_t *md = chk(c, json_object());
    const char *key;
    size_t klen;
    json_t *val;
    char p[PATH_LEN];
    json_object_keylen_foreach((json_t *)v, key, klen, val)
    {
        path_key(p, sizeof p, "metadata", key);
        bool key_ok = klen >= 1 && klen <= JOBSPEC_METADATA_KEY_MAX && klen == strlen(key);
        for (size_t i = 0; key_ok && i < klen; i++)
            key_ok = (unsigned char)key[i] >= 0x20 && key[i] != 0x7f;
        if (!key_ok)
            fail(c, p, "key must be 1 to %d bytes without control characters",
                 JOBSPEC_METADATA_KEY_MAX);
        else if (check_string(c, val, p, 0, JOBSPEC_METADATA_VALUE_MAX, false))
            put(c, md, key, copy_string(c, val));
    }
    return md;
}

static json_t *norm_spec(struct vctx *c, const json_t *in)
{
    json_t *o = chk(c, json_object());
    reject_unknown(c, in, "", top_fields, NELEM(top_fields));
    put(c, o, "name", norm_name(c, member(in, "name")));
    put(c, o, "entrypoint", norm_entrypoint(c, member(in, "entrypoint")));
    put(c, o, "working_dir", norm_working_dir(c, member(in, "working_dir")));
    put(c, o, "env", norm_env(c, member(in, "env"), "env"));
    /* Only when given, so that specs without a package normalise as before. */
    if (member(in, "code_package"))
        put(c, o, "code_package",
            norm_code_package(c, member(in, "code_package"), member(in, "working_dir")));
    /* Only when given, so that specs without secrets normalise as before. The API never returns
     * its values (ty_spec_public, migrations/0011). */
    if (member(in, "secret_env"))
        put(c, o, "secret_env", norm_env(c, member(in, "secret_env"), "secret_env"));
    put(c, o, "backend",
        norm_enum(c, member(in, "backend"), "backend", jobspec__backend_names,
                  NELEM(jobspec__backend_names), "torch"));
    put(c, o, "train_loop_config", norm_train_loop_config(c, member(in, "train_loop_config")));
    put(c, o, "scaling_config", norm_scaling_config(c, member(in, "scaling_config")));
    put(c, o, "run_config", norm_run_config(c, member(in, "run_config")));
    put(c, o, "resume_from_checkpoint", norm_resume(c, member(in, "resume_from_checkpoint")));
    if (member(in, "resume_from_package")) /* only when given, as code_package */
        put(c, o, "resume_from_package",
            norm_resume_package(c, member(in, "resume_from_package"),
                                member(in, "resume_from_checkpoint")));
    put(c, o, "priority",
        norm_int(c, member(in, "priority"), "priority", JOBSPEC_PRIORITY_MIN, JOBSPEC_PRIORITY_MAX,
                 0));
    put(c, o, "timeout_s", norm_timeout(c, member(in, "timeout_s")));
    put(c, o, "metadata", norm_metadata(c, member(in, "metadata")));
    return o;
}

int jobspec_validate(const json_t *in, json_t **out, json_t **errors)
{
    struct vctx c = {.errors = json_array(), .nomem = false};
    json_t *spec = NULL;
    *out = NULL;
    *errors = NULL;
    if (!c.errors)
        return JOBSPEC_ENOMEM;
    if (json_is_object(in))
        spec = norm_spec(&c, in);
    else
        fail(&c, "", "must be a JSON object");
    if (c.nomem) {
        json_decref(spec);
        json_decref(c.errors);
        return JOBSPEC_ENOMEM;
    }
    if (json_array_size(c.errors) > 0) {
        json_decref(spec);
        *errors = c.errors;
        return JOBSPEC_EINVAL;
    }
    json_decref(c.errors);
    *out = spec;
    return JOBSPEC_OK;
}
