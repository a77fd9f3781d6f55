/* Job-spec validation and normalization (DESIGN.md §2): the validation context and typed readers
 * (shared with jobspec_config.c through jobspec_internal.h), the top-level fields and the entry
 * point jobspec_validate. The nested scaling_config and run_config are validated in
 * jobspec_config.c. Pure: no I/O, no globals.
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
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_SHOWN 256
#define MILLI_TOLERANCE 1e-3

static const char *const top_fields[] = {"name",
                                         "entrypoint",
                                         "working_dir",
                                         "env",
                                         "secret_env",
                                         "backend",
                                         "train_loop_config",
                                         "scaling_config",
                                         "run_config",
                                         "resume_from_checkpoint",
                                         "priority",
                                         "timeout_s",
                                         "metadata",
                                         "code_package",
                                         "resume_from_package",
                                         "project",
                                         "tags",
                                         "notes"};
static const char *const reserved_env[] = {
    "RANK",        "WORLD_SIZE",  "LOCAL_RANK",           "LOCAL_WORLD_SIZE", "NODE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "TF_CONFIG"};

/* ------------------------------------------------------------------------------------------ */
/* Validation context, error list, paths                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Appends {"field": path, "detail": <formatted>} to the error list. */
void jobspec__fail(struct jobspec__vctx *c, const char *path, const char *fmt, ...)
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
json_t *jobspec__chk(struct jobspec__vctx *c, json_t *v)
{
    if (!v)
        c->nomem = true;
    return v;
}

/* Sets obj[key] = v, stealing v. A NULL v (an error already recorded) is skipped. */
void jobspec__put(struct jobspec__vctx *c, json_t *obj, const char *key, json_t *v)
{
    if (v && json_object_set_new(obj, key, v) != 0)
        c->nomem = true;
}

static void append(struct jobspec__vctx *c, json_t *arr, json_t *v)
{
    if (v && json_array_append_new(arr, v) != 0)
        c->nomem = true;
}

/* buf = "parent.key"; a key over KEY_SHOWN bytes is cut at a UTF-8 boundary and gets "...". */
void jobspec__path_key(char *buf, size_t n, const char *parent, const char *key)
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
const json_t *jobspec__member(const json_t *obj, const char *key)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    return json_is_null(v) ? NULL : v;
}

/* Records "unknown field" for each key of obj not in allowed. Returns how many. jansson's
 * iterators take a non-const object; they only read it. */
size_t jobspec__reject_unknown(struct jobspec__vctx *c, const json_t *obj, const char *parent,
                               const char *const *allowed, size_t n)
{
    const char *key;
    size_t klen, bad = 0;
    json_t *v;
    char p[JOBSPEC__PATH_LEN];
    json_object_keylen_foreach((json_t *)obj, key, klen, v)
    {
        if (klen == strlen(key) && jobspec__name_index(allowed, n, key) >= 0)
            continue;
        jobspec__path_key(p, sizeof p, parent, key);
        jobspec__fail(c, p, "unknown field");
        bad++;
    }
    (void)v;
    return bad;
}

/* ------------------------------------------------------------------------------------------ */
/* Typed readers: each records one error for `path` and returns false/NULL on a bad value       */
/* ------------------------------------------------------------------------------------------ */

/* An integer: a JSON integer, or a real with no fractional part within ±2^53. */
bool jobspec__as_int(const json_t *v, int64_t *out)
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

bool jobspec__get_int(struct jobspec__vctx *c, const json_t *v, const char *path, int64_t lo,
                      int64_t hi, int64_t *out)
{
    if (jobspec__as_int(v, out) && *out >= lo && *out <= hi)
        return true;
    jobspec__fail(c, path, "must be an integer between %" PRId64 " and %" PRId64, lo, hi);
    return false;
}

/* Optional integer: absent gives def. Returns the normalized JSON integer or NULL. */
json_t *jobspec__norm_int(struct jobspec__vctx *c, const json_t *v, const char *path, int64_t lo,
                          int64_t hi, int64_t def)
{
    int64_t x = def;
    if (v && !jobspec__get_int(c, v, path, lo, hi, &x))
        return NULL;
    return jobspec__chk(c, json_integer(x));
}

/* A number with an integral value becomes a JSON integer, others a real. */
json_t *jobspec__number_json(struct jobspec__vctx *c, double d)
{
    if (d == floor(d) && fabs(d) <= 9007199254740992.0)
        return jobspec__chk(c, json_integer((json_int_t)d));
    return jobspec__chk(c, json_real(d));
}

/* A resource amount in [0, max], in thousandths. Returns the normalized number or NULL. */
json_t *jobspec__norm_amount(struct jobspec__vctx *c, const json_t *v, const char *path, double max,
                             int64_t *milli)
{
    double d = json_is_number(v) ? json_number_value(v) : -1.0;
    if (!isfinite(d) || d < 0 || d > max) {
        jobspec__fail(c, path, "must be a number between 0 and %.0f", max);
        return NULL;
    }
    double m = d * 1000.0, r = round(m);
    if (fabs(m - r) > MILLI_TOLERANCE) {
        jobspec__fail(c, path, "must be a multiple of 0.001");
        return NULL;
    }
    *milli = (int64_t)r;
    return *milli % 1000 == 0 ? jobspec__chk(c, json_integer(*milli / 1000))
                              : jobspec__chk(c, json_real((double)*milli / 1000.0));
}

/* A string of min..max bytes; `printable` also rejects control characters, otherwise only
 * NUL bytes are rejected. */
static bool check_string(struct jobspec__vctx *c, const json_t *v, const char *path, size_t min,
                         size_t max, bool printable)
{
    if (!json_is_string(v)) {
        jobspec__fail(c, path, "must be a string");
        return false;
    }
    const unsigned char *s = (const unsigned char *)json_string_value(v);
    size_t n = json_string_length(v);
    if (n < min) {
        jobspec__fail(c, path, "must not be empty");
        return false;
    }
    if (n > max) {
        jobspec__fail(c, path, "must be at most %zu bytes", max);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (printable && (s[i] < 0x20 || s[i] == 0x7f)) {
            jobspec__fail(c, path, "must not contain control characters");
            return false;
        }
        if (s[i] == 0) {
            jobspec__fail(c, path, "must not contain NUL bytes");
            return false;
        }
    }
    return true;
}

static json_t *copy_string(struct jobspec__vctx *c, const json_t *v)
{
    return jobspec__chk(c, json_stringn(json_string_value(v), json_string_length(v)));
}

/* Optional string: absent gives JSON null. */
json_t *jobspec__norm_opt_string(struct jobspec__vctx *c, const json_t *v, const char *path,
                                 size_t max, bool printable)
{
    if (!v)
        return json_null();
    return check_string(c, v, path, 1, max, printable) ? copy_string(c, v) : NULL;
}

/* One of names (exact match); absent gives def. */
json_t *jobspec__norm_enum(struct jobspec__vctx *c, const json_t *v, const char *path,
                           const char *const *names, size_t n, const char *def)
{
    if (!v)
        return jobspec__chk(c, json_string(def));
    if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v)) {
        int i = jobspec__name_index(names, n, json_string_value(v));
        if (i >= 0)
            return jobspec__chk(c, json_string(names[i]));
    }
    char list[128] = "";
    size_t used = 0;
    for (size_t i = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    jobspec__fail(c, path, "must be one of %s", list);
    return NULL;
}

/* An object that is checked member by member; NULL (after an error) if v is not an object. */
bool jobspec__check_object(struct jobspec__vctx *c, const json_t *v, const char *path,
                           size_t max_entries)
{
    if (!json_is_object(v)) {
        jobspec__fail(c, path, "must be an object");
        return false;
    }
    if (json_object_size(v) > max_entries) {
        jobspec__fail(c, path, "must have at most %zu entries", max_entries);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Top-level fields                                                                             */
/* ------------------------------------------------------------------------------------------ */

static json_t *norm_name(struct jobspec__vctx *c, const json_t *v)
{
    if (!v)
        return jobspec__chk(c, json_string("job"));
    return check_string(c, v, "name", 1, JOBSPEC_NAME_MAX, true) ? copy_string(c, v) : NULL;
}

const char *jobspec_project_name_problem(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > JOBSPEC_PROJECT_MAX)
        return "must be 1 to 64 characters";
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (i == 0 && !alnum)
            return "must start with a lowercase letter or a digit";
        if (!alnum && ch != '.' && ch != '_' && ch != '-')
            return "may hold only lowercase letters, digits, '.', '_' and '-'";
    }
    return NULL;
}

/* project: the project the job belongs to (issue 22); absent means "default". */
static json_t *norm_project(struct jobspec__vctx *c, const json_t *v)
{
    if (!json_is_string(v)) {
        jobspec__fail(c, "project", "must be a string");
        return NULL;
    }
    const char *why = jobspec_project_name_problem(json_string_value(v));
    if (why) {
        jobspec__fail(c, "project", "%s", why);
        return NULL;
    }
    return copy_string(c, v);
}

static json_t *norm_entrypoint(struct jobspec__vctx *c, const json_t *v)
{
    if (!v) {
        jobspec__fail(c, "entrypoint", "is required");
        return NULL;
    }
    if (json_is_string(v))
        return check_string(c, v, "entrypoint", 1, JOBSPEC_ENTRYPOINT_MAX, false)
                   ? copy_string(c, v)
                   : NULL;
    if (!json_is_array(v)) {
        jobspec__fail(c, "entrypoint", "must be a string or an array of strings");
        return NULL;
    }
    size_t n = json_array_size(v);
    if (n == 0 || n > JOBSPEC_ARGV_MAX) {
        jobspec__fail(c, "entrypoint", "must have 1 to %d items", JOBSPEC_ARGV_MAX);
        return NULL;
    }
    json_t *argv = jobspec__chk(c, json_array());
    char p[JOBSPEC__PATH_LEN];
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(v, i);
        snprintf(p, sizeof p, "entrypoint[%zu]", i);
        if (check_string(c, item, p, 1, JOBSPEC_ENTRYPOINT_MAX, false))
            append(c, argv, copy_string(c, item));
    }
    return argv;
}

static json_t *norm_working_dir(struct jobspec__vctx *c, const json_t *v)
{
    if (!v)
        return json_null();
    if (!check_string(c, v, "working_dir", 1, JOBSPEC_PATH_MAX, false))
        return NULL;
    if (json_string_value(v)[0] != '/') {
        jobspec__fail(c, "working_dir", "must be an absolute path");
        return NULL;
    }
    return copy_string(c, v);
}

/* Whether v, a string, is a SHA-256 (64 lowercase hex digits); else fails `field`. */
static bool check_sha256(struct jobspec__vctx *c, const json_t *v, const char *field)
{
    if (!check_string(c, v, field, 1, 64, false))
        return false;
    const char *s = json_string_value(v);
    for (size_t i = 0; i < 64; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) { /* NUL: short */
            jobspec__fail(c, field, "must be a SHA-256: 64 lowercase hex digits");
            return false;
        }
    }
    return true;
}

/* code_package: the SHA-256 of an uploaded code package (issue 15); the workers then run in a
 * private copy of it, so working_dir may not be given with it. */
static json_t *norm_code_package(struct jobspec__vctx *c, const json_t *v,
                                 const json_t *working_dir)
{
    if (!check_sha256(c, v, "code_package"))
        return NULL;
    if (working_dir && !json_is_null(working_dir)) {
        jobspec__fail(c, "working_dir",
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
static json_t *norm_env(struct jobspec__vctx *c, const json_t *v, const char *field)
{
    if (!v)
        return jobspec__chk(c, json_object());
    if (!jobspec__check_object(c, v, field, JOBSPEC_ENV_MAX))
        return NULL;
    json_t *env = jobspec__chk(c, json_object());
    const char *key;
    size_t klen;
    json_t *val;
    char p[JOBSPEC__PATH_LEN];
    json_object_keylen_foreach((json_t *)v, key, klen, val)
    {
        jobspec__path_key(p, sizeof p, field, key);
        if (!env_name_valid(key, klen))
            jobspec__fail(c, p,
                          "is not a valid variable name: [A-Za-z_][A-Za-z0-9_]*, at most %d bytes",
                          JOBSPEC_ENV_NAME_MAX);
        else if (env_name_reserved(key))
            jobspec__fail(c, p, "is reserved: Trainyard sets it on every worker");
        else if (check_string(c, val, p, 0, JOBSPEC_ENV_VALUE_MAX, false))
            jobspec__put(c, env, key, copy_string(c, val));
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

static json_t *norm_train_loop_config(struct jobspec__vctx *c, const json_t *v)
{
    if (!v)
        return jobspec__chk(c, json_object());
    size_t total = 0;
    if (json_dump_callback(v, count_bytes, &total, JSON_COMPACT | JSON_ENCODE_ANY) != 0) {
        if (total > JOBSPEC_CONFIG_MAX)
            jobspec__fail(c, "train_loop_config", "must be at most %d bytes when serialized",
                          JOBSPEC_CONFIG_MAX);
        else
            c->nomem = true;
        return NULL;
    }
    return jobspec__chk(c, json_deep_copy(v));
}

static json_t *norm_resume_package(struct jobspec__vctx *c, const json_t *v, const json_t *resume)
{
    if (!check_sha256(c, v, "resume_from_package"))
        return NULL;
    if (resume && !json_is_null(resume)) {
        jobspec__fail(
            c, "resume_from_package",
            "cannot be given with resume_from_checkpoint: a job resumes from one checkpoint");
        return NULL;
    }
    return copy_string(c, v);
}

/* ------------------------------------------------------------------------------------------ */
/* The remaining top-level fields and the entry point                                           */
/* ------------------------------------------------------------------------------------------ */

static json_t *norm_resume(struct jobspec__vctx *c, const json_t *v)
{
    int64_t id;
    if (!v)
        return json_null();
    if (jobspec__as_int(v, &id) && id >= 1)
        return jobspec__chk(c, json_integer(id));
    jobspec__fail(c, "resume_from_checkpoint", "must be an integer checkpoint id >= 1");
    return NULL;
}

static json_t *norm_timeout(struct jobspec__vctx *c, const json_t *v)
{
    if (!v)
        return json_null();
    double d = json_is_number(v) ? json_number_value(v) : -1.0;
    if (isfinite(d) && d > 0 && d <= JOBSPEC_TIMEOUT_MAX)
        return jobspec__number_json(c, d);
    jobspec__fail(c, "timeout_s", "must be a number of seconds greater than 0 and at most %d",
                  JOBSPEC_TIMEOUT_MAX);
    return NULL;
}

static json_t *norm_metadata(struct jobspec__vctx *c, const json_t *v)
{
    if (!v)
        return jobspec__chk(c, json_object());
    if (!jobspec__check_object(c, v, "metadata", JOBSPEC_METADATA_MAX))
        return NULL;
    json_t *md = jobspec__chk(c, json_object());
    const char *key;
    size_t klen;
    json_t *val;
    char p[JOBSPEC__PATH_LEN];
    json_object_keylen_foreach((json_t *)v, key, klen, val)
    {
        jobspec__path_key(p, sizeof p, "metadata", key);
        bool key_ok = klen >= 1 && klen <= JOBSPEC_METADATA_KEY_MAX && klen == strlen(key);
        for (size_t i = 0; key_ok && i < klen; i++)
            key_ok = (unsigned char)key[i] >= 0x20 && key[i] != 0x7f;
        if (!key_ok)
            jobspec__fail(c, p, "key must be 1 to %d bytes without control characters",
                          JOBSPEC_METADATA_KEY_MAX);
        else if (check_string(c, val, p, 0, JOBSPEC_METADATA_VALUE_MAX, false))
            jobspec__put(c, md, key, copy_string(c, val));
    }
    return md;
}

const char *jobspec_tags_problem(const json_t *v)
{
    static const char words[] = "must be an array of at most 32 tags, each 1 to 64 letters, "
                                "digits or -_.:/=+@";
    _Static_assert(JOBSPEC_TAGS_MAX == 32 && JOBSPEC_TAG_MAX == 64, "words above");
    if (!json_is_array(v) || json_array_size(v) > JOBSPEC_TAGS_MAX)
        return words;
    size_t i;
    const json_t *t;
    json_array_foreach(v, i, t)
    {
        const char *s = json_string_value(t);
        size_t n = s ? json_string_length(t) : 0;
        if (n < 1 || n > JOBSPEC_TAG_MAX)
            return words;
        for (size_t k = 0; k < n; k++)
            if (!isalnum((unsigned char)s[k]) && !strchr("-_.:/=+@", s[k]))
                return words;
    }
    return NULL;
}

const char *jobspec_notes_problem(const json_t *v)
{
    if (!json_is_string(v) || json_string_length(v) > JOBSPEC_NOTES_MAX ||
        strlen(json_string_value(v)) != json_string_length(v))
        return "must be a string of at most 16384 bytes without NUL";
    return NULL;
}

/* tags and notes: copied when valid (only when given, so that other specs normalise as before). */
static void norm_tags_notes(struct jobspec__vctx *c, json_t *o, const json_t *in)
{
    static const char *const names[] = {"tags", "notes"};
    for (size_t i = 0; i < NELEM(names); i++) {
        const json_t *v = jobspec__member(in, names[i]);
        if (!v)
            continue;
        const char *problem = i == 0 ? jobspec_tags_problem(v) : jobspec_notes_problem(v);
        if (problem)
            jobspec__fail(c, names[i], "%s", problem);
        else
            jobspec__put(c, o, names[i], jobspec__chk(c, json_deep_copy(v)));
    }
}

static json_t *norm_spec(struct jobspec__vctx *c, const json_t *in)
{
    json_t *o = jobspec__chk(c, json_object());
    jobspec__reject_unknown(c, in, "", top_fields, NELEM(top_fields));
    jobspec__put(c, o, "name", norm_name(c, jobspec__member(in, "name")));
    jobspec__put(c, o, "entrypoint", norm_entrypoint(c, jobspec__member(in, "entrypoint")));
    jobspec__put(c, o, "working_dir", norm_working_dir(c, jobspec__member(in, "working_dir")));
    jobspec__put(c, o, "env", norm_env(c, jobspec__member(in, "env"), "env"));
    /* Only when given, so that specs without a package normalise as before. */
    if (jobspec__member(in, "code_package"))
        jobspec__put(c, o, "code_package",
                     norm_code_package(c, jobspec__member(in, "code_package"),
                                       jobspec__member(in, "working_dir")));
    /* Only when given, so that specs without secrets normalise as before. The API never returns
     * its values (server/store/sql/ty_spec_public.sql). */
    if (jobspec__member(in, "secret_env"))
        jobspec__put(c, o, "secret_env",
                     norm_env(c, jobspec__member(in, "secret_env"), "secret_env"));
    jobspec__put(c, o, "backend",
                 jobspec__norm_enum(c, jobspec__member(in, "backend"), "backend",
                                    jobspec__backend_names, NELEM(jobspec__backend_names),
                                    jobspec__backend_names[JOBSPEC_BACKEND_TORCH]));
    jobspec__put(c, o, "train_loop_config",
                 norm_train_loop_config(c, jobspec__member(in, "train_loop_config")));
    jobspec__put(c, o, "scaling_config",
                 jobspec__norm_scaling_config(c, jobspec__member(in, "scaling_config")));
    jobspec__put(c, o, "run_config",
                 jobspec__norm_run_config(c, jobspec__member(in, "run_config")));
    jobspec__put(c, o, "resume_from_checkpoint",
                 norm_resume(c, jobspec__member(in, "resume_from_checkpoint")));
    if (jobspec__member(in, "resume_from_package")) /* only when given, as code_package */
        jobspec__put(c, o, "resume_from_package",
                     norm_resume_package(c, jobspec__member(in, "resume_from_package"),
                                         jobspec__member(in, "resume_from_checkpoint")));
    jobspec__put(c, o, "priority",
                 jobspec__norm_int(c, jobspec__member(in, "priority"), "priority",
                                   JOBSPEC_PRIORITY_MIN, JOBSPEC_PRIORITY_MAX, 0));
    jobspec__put(c, o, "timeout_s", norm_timeout(c, jobspec__member(in, "timeout_s")));
    jobspec__put(c, o, "metadata", norm_metadata(c, jobspec__member(in, "metadata")));
    if (jobspec__member(in, "project")) /* only when given: "default" otherwise */
        jobspec__put(c, o, "project", norm_project(c, jobspec__member(in, "project")));
    norm_tags_notes(c, o, in);
    return o;
}

int jobspec_validate(const json_t *in, json_t **out, json_t **errors)
{
    struct jobspec__vctx c = {.errors = json_array(), .nomem = false};
    json_t *spec = NULL;
    *out = NULL;
    *errors = NULL;
    if (!c.errors)
        return JOBSPEC_ENOMEM;
    if (json_is_object(in))
        spec = norm_spec(&c, in);
    else
        jobspec__fail(&c, "", "must be a JSON object");
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
