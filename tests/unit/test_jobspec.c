/* Unit tests for common/jobspec.c: job-spec validation, normalization and the typed view.
 * Specs are written as JSON with ' in place of " so the tables stay readable. */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec.h"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static json_t *parse(const char *text)
{
    char *s = strdup(text);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
    if (!v)
        fail_msg("bad test JSON: %s: %s", s, e.text);
    free(s);
    return v;
}

static void print_errors(const char *spec, const json_t *errors)
{
    char *dump = json_dumps(errors, JSON_COMPACT);
    print_error("spec %s\nerrors %s\n", spec, dump ? dump : "(none)");
    free(dump);
}

/* Validates `in`, which must be accepted; returns the normalized spec (caller frees). */
static json_t *accept_json(const json_t *in, const char *label)
{
    json_t *out = NULL, *errors = NULL;
    int rc = jobspec_validate(in, &out, &errors);
    if (rc != JOBSPEC_OK)
        print_errors(label, errors);
    assert_int_equal(rc, JOBSPEC_OK);
    assert_null(errors);
    assert_non_null(out);
    return out;
}

static json_t *accept(const char *text)
{
    json_t *in = parse(text);
    json_t *out = accept_json(in, text);
    json_decref(in);
    return out;
}

/* Asserts that normalizing `text` yields exactly `expected`. */
static void expect_normalized(const char *text, const char *expected)
{
    json_t *out = accept(text), *want = parse(expected);
    if (!json_equal(out, want)) {
        char *got = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
        print_error("spec %s\ngot  %s\n", text, got);
        free(got);
        fail_msg("normalized spec differs from %s", expected);
    }
    json_decref(out);
    json_decref(want);
}

/* Validates `in`, which must be rejected; returns the error array (caller frees). */
static json_t *reject_json(const json_t *in, const char *label)
{
    json_t *out = NULL, *errors = NULL;
    int rc = jobspec_validate(in, &out, &errors);
    if (rc != JOBSPEC_EINVAL)
        fail_msg("spec accepted (rc %d), expected a rejection: %s", rc, label);
    assert_null(out);
    assert_true(json_is_array(errors));
    assert_true(json_array_size(errors) > 0);
    return errors;
}

static bool has_field(const json_t *errors, const char *field)
{
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e) if (strcmp(json_string_value(json_object_get(e, "field")),
                                                field) == 0) return true;
    return false;
}

/* Asserts exactly one error, naming `field`, whose detail contains `detail` (if non-NULL). */
static void expect_error_json(const json_t *in, const char *label, const char *field,
                              const char *detail)
{
    json_t *errors = reject_json(in, label);
    const json_t *e = json_array_get(errors, 0);
    const char *got = json_string_value(json_object_get(e, "detail"));
    if (json_array_size(errors) != 1 || !has_field(errors, field) ||
        (detail && !strstr(got, detail))) {
        print_errors(label, errors);
        fail_msg("expected one error on '%s' (%s)", field, detail ? detail : "any detail");
    }
    json_decref(errors);
}

static void expect_error(const char *text, const char *field, const char *detail)
{
    json_t *in = parse(text);
    expect_error_json(in, text, field, detail);
    json_decref(in);
}

/* {"entrypoint": "true"} plus `key`: `value` (stolen). */
static json_t *minimal_with(const char *key, json_t *value)
{
    json_t *in = json_pack("{s:s}", "entrypoint", "true");
    assert_non_null(in);
    assert_int_equal(json_object_set_new(in, key, value), 0);
    return in;
}

static json_t *string_of(size_t n, char c)
{
    char *buf = malloc(n + 1);
    assert_non_null(buf);
    memset(buf, c, n);
    buf[n] = '\0';
    json_t *s = json_stringn(buf, n);
    free(buf);
    assert_non_null(s);
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* Accepted specs and their normalized form                                                     */
/* ------------------------------------------------------------------------------------------ */

#define DEFAULT_SCALING                                                                            \
    "{'num_workers':1,'use_gpu':false,'resources_per_worker':{'CPU':1},"                           \
    "'placement_strategy':'PACK','accelerator_type':null,'elastic_resize_interval_s':60}"
#define DEFAULT_RUN                                                                                \
    "{'storage_path':null,'checkpoint_config':{'num_to_keep':null,"                                \
    "'checkpoint_score_attribute':null,'checkpoint_score_order':'max'},"                           \
    "'failure_config':{'max_failures':0,'hang_warn_s':300,'hang_timeout_s':null,"                  \
    "'preemption_grace_s':0}}"
#define DEFAULTS_FOR(ep)                                                                           \
    "{'name':'job','entrypoint':" ep ",'working_dir':null,'env':{},'backend':'torch',"             \
    "'train_loop_config':{},'scaling_config':" DEFAULT_SCALING ",'run_config':" DEFAULT_RUN        \
    ",'resume_from_checkpoint':null,'priority':0,'timeout_s':null,'metadata':{}}"

#define FULL_SPEC                                                                                  \
    "{'name':'resnet','entrypoint':['python3','train.py','--lr','0.1'],"                           \
    "'working_dir':'/srv/job','env':{'NCCL_DEBUG':'INFO','_X1':''},'backend':'native',"            \
    "'train_loop_config':{'lr':0.1,'layers':[1,2]},"                                               \
    "'scaling_config':{'num_workers':{'min':2,'max':8},'use_gpu':true,"                            \
    "'resources_per_worker':{'CPU':2.5,'memory_mb':8192,'TPU':0.25,'disk.ssd-1':0},"               \
    "'placement_strategy':'STRICT_SPREAD','accelerator_type':'H100',"                              \
    "'elastic_resize_interval_s':5},"                                                              \
    "'run_config':{'storage_path':'s3://bucket/runs','checkpoint_config':{'num_to_keep':3,"        \
    "'checkpoint_score_attribute':'val_loss','checkpoint_score_order':'min'},"                     \
    "'failure_config':{'max_failures':-1,'hang_warn_s':30,'hang_timeout_s':90.5,"                  \
    "'preemption_grace_s':30}},"                                                                   \
    "'resume_from_checkpoint':42,'priority':-7,'timeout_s':3600.5,"                                \
    "'metadata':{'team':'vision','ticket':'ML-12'}}"

static void defaults_filled_for_minimal_spec(void **state)
{
    (void)state;
    expect_normalized("{'entrypoint':'python3 train.py'}", DEFAULTS_FOR("'python3 train.py'"));
}

static void entrypoint_array_kept_as_given(void **state)
{
    (void)state;
    expect_normalized("{'entrypoint':['python3','train.py']}",
                      DEFAULTS_FOR("['python3','train.py']"));
}

static void null_fields_take_defaults(void **state)
{
    (void)state;
    expect_normalized("{'entrypoint':'x','name':null,'working_dir':null,'env':null,"
                      "'backend':null,'train_loop_config':null,'scaling_config':null,"
                      "'run_config':null,'resume_from_checkpoint':null,'priority':null,"
                      "'timeout_s':null,'metadata':null}",
                      DEFAULTS_FOR("'x'"));
}

static void empty_sections_take_defaults(void **state)
{
    (void)state;
    expect_normalized("{'entrypoint':'x','scaling_config':{},'run_config':{'checkpoint_config':{},"
                      "'failure_config':{}}}",
                      DEFAULTS_FOR("'x'"));
}

static void full_spec_normalized(void **state)
{
    (void)state;
    expect_normalized(
        FULL_SPEC,
        "{'name':'resnet','entrypoint':['python3','train.py','--lr','0.1'],"
        "'working_dir':'/srv/job','env':{'NCCL_DEBUG':'INFO','_X1':''},'backend':'native',"
        "'train_loop_config':{'lr':0.1,'layers':[1,2]},"
        "'scaling_config':{'num_workers':{'min':2,'max':8},'use_gpu':true,"
        "'resources_per_worker':{'CPU':2.5,'memory_mb':8192,'TPU':0.25,'disk.ssd-1':0,'GPU':1},"
        "'placement_strategy':'STRICT_SPREAD','accelerator_type':'H100',"
        "'elastic_resize_interval_s':5},"
        "'run_config':{'storage_path':'s3://bucket/runs','checkpoint_config':{'num_to_keep':3,"
        "'checkpoint_score_attribute':'val_loss','checkpoint_score_order':'min'},"
        "'failure_config':{'max_failures':-1,'hang_warn_s':30,'hang_timeout_s':90.5,"
        "'preemption_grace_s':30}},"
        "'resume_from_checkpoint':42,'priority':-7,'timeout_s':3600.5,"
        "'metadata':{'team':'vision','ticket':'ML-12'}}");
}

static void use_gpu_defaults_bundle_to_one_gpu(void **state)
{
    (void)state;
    json_t *out = accept("{'entrypoint':'x','scaling_config':{'use_gpu':true}}");
    json_t *want = parse("{'GPU':1}");
    json_t *sc = json_object_get(out, "scaling_config");
    assert_true(json_equal(json_object_get(sc, "resources_per_worker"), want));
    assert_true(json_is_true(json_object_get(sc, "use_gpu")));
    json_decref(want);
    json_decref(out);
}

static void use_gpu_adds_one_gpu_to_given_bundle(void **state)
{
    (void)state;
    json_t *out = accept(
        "{'entrypoint':'x','scaling_config':{'use_gpu':true,'resources_per_worker':{'CPU':4}}}");
    json_t *want = parse("{'CPU':4,'GPU':1}");
    json_t *sc = json_object_get(out, "scaling_config");
    assert_true(json_equal(json_object_get(sc, "resources_per_worker"), want));
    json_decref(want);
    json_decref(out);
}

static void gpu_in_bundle_implies_use_gpu(void **state)
{
    (void)state;
    json_t *out = accept("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'GPU':2}}}");
    assert_true(json_is_true(json_object_get(json_object_get(out, "scaling_config"), "use_gpu")));
    json_decref(out);
}

static void integral_reals_normalized_to_integers(void **state)
{
    (void)state;
    json_t *out = accept("{'entrypoint':'x','priority':3.0,'timeout_s':60.0,"
                         "'scaling_config':{'num_workers':2.0,"
                         "'resources_per_worker':{'CPU':2.0,'memory_mb':1024.0}}}");
    json_t *sc = json_object_get(out, "scaling_config");
    json_t *res = json_object_get(sc, "resources_per_worker");
    assert_true(json_is_integer(json_object_get(out, "priority")));
    assert_true(json_is_integer(json_object_get(out, "timeout_s")));
    assert_true(json_is_integer(json_object_get(sc, "num_workers")));
    assert_int_equal(json_integer_value(json_object_get(res, "CPU")), 2);
    assert_int_equal(json_integer_value(json_object_get(res, "memory_mb")), 1024);
    json_decref(out);
}

/* Specs at the edges of what is allowed; each must be accepted. */
static void boundary_specs_accepted(void **state)
{
    static const char *const good[] = {
        "{'entrypoint':['a']}",
        "{'entrypoint':'x','name':'a'}",
        "{'entrypoint':'x','name':'r\\u00e9seau \\u2014 run 1'}",
        "{'entrypoint':'x','backend':'tensorflow'}",
        "{'entrypoint':'x','backend':'none'}",
        "{'entrypoint':'x','train_loop_config':[1,'two',null]}",
        "{'entrypoint':'x','train_loop_config':7}",
        "{'entrypoint':'x','scaling_config':{'num_workers':100000}}",
        "{'entrypoint':'x','scaling_config':{'num_workers':{'min':3,'max':3}}}",
        "{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':0.001}}}",
        "{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':0,'memory_mb':1}}}",
        "{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':0.1,'GPU':0}}}",
        "{'entrypoint':'x','scaling_config':{'use_gpu':false,'resources_per_worker':{'GPU':0,"
        "'CPU':1}}}",
        "{'entrypoint':'x','scaling_config':{'placement_strategy':'STRICT_PACK'}}",
        "{'entrypoint':'x','run_config':{'storage_path':'/mnt/ckpt'}}",
        "{'entrypoint':'x','run_config':{'checkpoint_config':{'num_to_keep':null}}}",
        "{'entrypoint':'x','run_config':{'failure_config':{'max_failures':1000000}}}",
        "{'entrypoint':'x','priority':-1000}",
        "{'entrypoint':'x','priority':1000}",
        "{'entrypoint':'x','timeout_s':0.001}",
        "{'entrypoint':'x','timeout_s':315360000}",
        "{'entrypoint':'x','resume_from_checkpoint':9007199254740993}",
        "{'entrypoint':'x','env':{'CUDA_LAUNCH_BLOCKING':'1','NCCL_IB_DISABLE':'1'}}",
        "{'entrypoint':'x','metadata':{'k':''}}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        json_decref(accept(good[i]));
}

static void normalizing_is_idempotent(void **state)
{
    static const char *const specs[] = {
        "{'entrypoint':'x'}",
        "{'entrypoint':'x','scaling_config':{'use_gpu':true,'resources_per_worker':{'CPU':0.3}}}",
        "{'entrypoint':'x','scaling_config':{'resources_per_worker':{'GPU':1}},'timeout_s':2.0}",
        FULL_SPEC,
    };
    (void)state;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        json_t *once = accept(specs[i]);
        json_t *twice = accept_json(once, specs[i]);
        assert_true(json_equal(once, twice));
        json_decref(once);
        json_decref(twice);
    }
}

static void normalized_spec_shares_nothing_with_input(void **state)
{
    (void)state;
    json_t *in = parse(FULL_SPEC);
    json_t *out = accept_json(in, FULL_SPEC);
    json_t *copy = json_deep_copy(out);
    json_object_clear(json_object_get(in, "train_loop_config"));
    json_array_clear(json_object_get(in, "entrypoint"));
    json_object_clear(json_object_get(in, "env"));
    json_decref(in);
    assert_true(json_equal(out, copy));
    json_decref(copy);
    json_decref(out);
}

/* ------------------------------------------------------------------------------------------ */
/* Rejected specs: one behaviour each                                                           */
/* ------------------------------------------------------------------------------------------ */

static void non_object_body_rejected(void **state)
{
    (void)state;
    expect_error("['entrypoint']", "", "must be a JSON object");
    expect_error("'train.py'", "", "must be a JSON object");
}

static void unknown_top_level_field_named(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','num_workers':4}", "num_workers", "unknown field");
}

static void missing_entrypoint_names_entrypoint(void **state)
{
    (void)state;
    expect_error("{'name':'a'}", "entrypoint", "is required");
}

static void empty_entrypoint_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':''}", "entrypoint", "must not be empty");
    expect_error("{'entrypoint':[]}", "entrypoint", "1 to 1024 items");
}

static void bad_argv_item_names_its_index(void **state)
{
    (void)state;
    expect_error("{'entrypoint':['python3','train.py',7]}", "entrypoint[2]", "must be a string");
    expect_error("{'entrypoint':['python3','']}", "entrypoint[1]", "must not be empty");
}

static void too_many_argv_items_rejected(void **state)
{
    (void)state;
    json_t *argv = json_array();
    for (int i = 0; i < JOBSPEC_ARGV_MAX + 1; i++)
        json_array_append_new(argv, json_string("a"));
    json_t *in = json_pack("{s:o}", "entrypoint", argv);
    expect_error_json(in, "1025 argv items", "entrypoint", "1 to 1024 items");
    json_decref(in);
}

static void oversized_entrypoint_rejected(void **state)
{
    (void)state;
    json_t *in = json_pack("{s:o}", "entrypoint", string_of(JOBSPEC_ENTRYPOINT_MAX + 1, 'a'));
    expect_error_json(in, "64 KiB + 1 entrypoint", "entrypoint", "at most 65536 bytes");
    json_decref(in);
}

static void entrypoint_with_nul_rejected(void **state)
{
    (void)state;
    json_t *in = json_pack("{s:s#}", "entrypoint", "a\0b", (int)3);
    expect_error_json(in, "entrypoint with NUL", "entrypoint", "NUL");
    json_decref(in);
}

static void oversized_name_rejected(void **state)
{
    (void)state;
    json_t *in = minimal_with("name", string_of(JOBSPEC_NAME_MAX + 1, 'n'));
    expect_error_json(in, "129-byte name", "name", "at most 128 bytes");
    json_decref(in);
    in = minimal_with("name", string_of(JOBSPEC_NAME_MAX, 'n'));
    json_decref(accept_json(in, "128-byte name"));
    json_decref(in);
}

static void name_with_control_character_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','name':'a\\nb'}", "name", "control characters");
    expect_error("{'entrypoint':'x','name':''}", "name", "must not be empty");
}

static void code_package_must_be_a_sha256_without_working_dir(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','code_package':'abc'}", "code_package", "SHA-256");
    expect_error("{'entrypoint':'x','code_package':'"
                 "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789'}",
                 "code_package", "SHA-256");
    expect_error("{'entrypoint':'x','working_dir':'/srv','code_package':'"
                 "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789'}",
                 "working_dir", "code_package");
}

static void code_package_kept_when_given(void **state)
{
    (void)state;
    json_t *in = json_pack("{s:s, s:s}", "entrypoint", "x", "code_package",
                           "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
    json_t *out = NULL, *errors = NULL;
    assert_int_equal(jobspec_validate(in, &out, &errors), JOBSPEC_OK);
    assert_string_equal(json_string_value(json_object_get(out, "code_package")),
                        "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
    json_decref(in);
    json_decref(out);
}

static void tags_and_notes_are_checked_and_kept_only_when_given(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','tags':'a'}", "tags", "array");
    expect_error("{'entrypoint':'x','tags':['a b']}", "tags", "letters");
    expect_error("{'entrypoint':'x','tags':['']}", "tags", "1 to 64");
    expect_error("{'entrypoint':'x','tags':[7]}", "tags", "array");
    expect_error("{'entrypoint':'x','notes':7}", "notes", "string");
    json_t *out = accept("{'entrypoint':'x','tags':['exp-1','lr:0.1'],'notes':'first try'}");
    assert_string_equal(json_string_value(json_array_get(json_object_get(out, "tags"), 1)),
                        "lr:0.1");
    assert_string_equal(json_string_value(json_object_get(out, "notes")), "first try");
    json_decref(out);
    out = accept("{'entrypoint':'x'}");
    assert_null(json_object_get(out, "tags"));
    json_decref(out);
}

static void project_is_a_valid_name_kept_only_when_given(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','project':'Lab'}", "project", "lowercase");
    expect_error("{'entrypoint':'x','project':'-lab'}", "project", "start with");
    expect_error("{'entrypoint':'x','project':''}", "project", "1 to 64");
    expect_error("{'entrypoint':'x','project':7}", "project", "string");
    json_t *in = json_pack("{s:s, s:s}", "entrypoint", "x", "project", "team-a.v2_x");
    json_t *out = NULL, *errors = NULL;
    assert_int_equal(jobspec_validate(in, &out, &errors), JOBSPEC_OK);
    assert_string_equal(json_string_value(json_object_get(out, "project")), "team-a.v2_x");
    json_decref(in);
    json_decref(out);
    in = json_pack("{s:s}", "entrypoint", "x");
    assert_int_equal(jobspec_validate(in, &out, &errors), JOBSPEC_OK);
    assert_null(json_object_get(out, "project")); /* "default", left to the server */
    json_decref(in);
    json_decref(out);
    assert_null(jobspec_project_name_problem("default"));
    assert_non_null(jobspec_project_name_problem(
        "a234567890123456789012345678901234567890123456789012345678901234x"));
}

static void relative_working_dir_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','working_dir':'src/job'}", "working_dir", "absolute path");
}

static void invalid_env_name_names_env_key(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','env':{'1FOO':'v'}}", "env.1FOO", "valid variable name");
    expect_error("{'entrypoint':'x','env':{'A-B':'v'}}", "env.A-B", "valid variable name");
}

static void secret_env_kept_apart_and_checked_like_env(void **state)
{
    (void)state;
    json_t *out = accept("{'entrypoint':'x','secret_env':{'API_KEY':'k'}}");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(out, "secret_env"), "API_KEY")), "k");
    assert_int_equal(json_object_size(json_object_get(out, "env")), 0);
    json_decref(out);
    out = accept("{'entrypoint':'x'}");
    assert_null(json_object_get(out, "secret_env"));
    json_decref(out);
    expect_error("{'entrypoint':'x','secret_env':{'RANK':'0'}}", "secret_env.RANK", "reserved");
    expect_error("{'entrypoint':'x','secret_env':{'A':1}}", "secret_env.A", "string");
}

static void reserved_env_name_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','env':{'TRAINYARD_JOB_ID':'1'}}", "env.TRAINYARD_JOB_ID",
                 "reserved");
    expect_error("{'entrypoint':'x','env':{'RANK':'0'}}", "env.RANK", "reserved");
    expect_error("{'entrypoint':'x','env':{'CUDA_VISIBLE_DEVICES':'0'}}",
                 "env.CUDA_VISIBLE_DEVICES", "reserved");
}

static void non_string_env_value_names_env_key(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','env':{'FOO':1}}", "env.FOO", "must be a string");
}

static void oversized_env_value_rejected(void **state)
{
    (void)state;
    json_t *env = json_pack("{s:o}", "BIG", string_of(JOBSPEC_ENV_VALUE_MAX + 1, 'v'));
    json_t *in = minimal_with("env", env);
    expect_error_json(in, "oversized env value", "env.BIG", "at most 65536 bytes");
    json_decref(in);
}

static void long_key_shortened_in_field_path(void **state)
{
    (void)state;
    json_t *key = string_of(1000, 'K');
    json_t *env = json_object();
    json_object_set_new(env, json_string_value(key), json_string("v"));
    json_t *in = minimal_with("env", env);
    json_t *errors = reject_json(in, "1000-byte env name");
    const char *field = json_string_value(json_object_get(json_array_get(errors, 0), "field"));
    assert_true(strlen(field) < 300);
    assert_non_null(strstr(field, "..."));
    assert_int_equal(strncmp(field, "env.KKK", 7), 0);
    json_decref(errors);
    json_decref(in);
    json_decref(key);
}

static void unknown_backend_lists_allowed_values(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','backend':'jax'}", "backend",
                 "must be one of torch, tensorflow, native, none");
}

static void oversized_train_loop_config_rejected(void **state)
{
    (void)state;
    json_t *cfg = json_pack("{s:o}", "blob", string_of(JOBSPEC_CONFIG_MAX, 'z'));
    json_t *in = minimal_with("train_loop_config", cfg);
    expect_error_json(in, "1 MiB config", "train_loop_config", "at most 1048576 bytes");
    json_decref(in);
}

static void zero_workers_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'num_workers':0}}",
                 "scaling_config.num_workers", "between 1 and 100000");
}

static void too_many_workers_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'num_workers':100001}}",
                 "scaling_config.num_workers", "between 1 and 100000");
}

static void fractional_workers_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'num_workers':2.5}}",
                 "scaling_config.num_workers", "must be an integer");
}

static void min_greater_than_max_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'num_workers':{'min':4,'max':2}}}",
                 "scaling_config.num_workers", "min must not exceed max");
}

static void elastic_workers_need_min_and_max(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'num_workers':{'min':2}}}",
                 "scaling_config.num_workers.max", "is required");
}

static void unknown_num_workers_key_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'num_workers':{'min':1,'max':2,'step':1}}}",
                 "scaling_config.num_workers.step", "unknown field");
}

static void negative_gpu_names_resources_field(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'GPU':-1}}}",
                 "scaling_config.resources_per_worker.GPU", "between 0 and 1024");
}

static void fractional_gpu_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'GPU':0.5}}}",
                 "scaling_config.resources_per_worker.GPU", "must be an integer");
}

static void negative_cpu_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':-0.5}}}",
                 "scaling_config.resources_per_worker.CPU", "between 0 and 1000000");
}

static void cpu_finer_than_thousandth_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':0.0005}}}",
                 "scaling_config.resources_per_worker.CPU", "multiple of 0.001");
}

static void negative_custom_resource_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'TPU':-2}}}",
                 "scaling_config.resources_per_worker.TPU", "between 0 and");
}

static void lowercase_gpu_key_suggests_gpu(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'gpu':1}}}",
                 "scaling_config.resources_per_worker.gpu", "use \"GPU\"");
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'memory':1}}}",
                 "scaling_config.resources_per_worker.memory", "use \"memory_mb\"");
}

static void invalid_custom_resource_name_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'a b':1}}}",
                 "scaling_config.resources_per_worker.a b", "valid resource name");
}

static void bundle_of_zeros_requests_no_resources(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':0,'GPU':0}}}",
                 "scaling_config.resources_per_worker", "requests no resources");
    expect_error("{'entrypoint':'x','scaling_config':{'resources_per_worker':{}}}",
                 "scaling_config.resources_per_worker", "requests no resources");
}

static void use_gpu_with_zero_gpus_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'use_gpu':true,"
                 "'resources_per_worker':{'GPU':0}}}",
                 "scaling_config.resources_per_worker.GPU", "when use_gpu is true");
}

static void gpus_without_use_gpu_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'use_gpu':false,"
                 "'resources_per_worker':{'GPU':2}}}",
                 "scaling_config.resources_per_worker.GPU", "when use_gpu is false");
}

static void unknown_strategy_lists_allowed_values(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'placement_strategy':'pack'}}",
                 "scaling_config.placement_strategy",
                 "must be one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD");
}

static void accelerator_type_without_gpu_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','scaling_config':{'accelerator_type':'H100'}}",
                 "scaling_config.accelerator_type", "requires GPU workers");
}

static void oversized_accelerator_type_rejected(void **state)
{
    (void)state;
    json_t *sc = json_pack("{s:b, s:o}", "use_gpu", 1, "accelerator_type",
                           string_of(JOBSPEC_ACCELERATOR_MAX + 1, 'A'));
    json_t *in = minimal_with("scaling_config", sc);
    expect_error_json(in, "65-byte accelerator", "scaling_config.accelerator_type",
                      "at most 64 bytes");
    json_decref(in);
}

static void unknown_run_config_field_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','run_config':{'name':'r'}}", "run_config.name",
                 "unknown field");
}

static void relative_storage_path_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','run_config':{'storage_path':'ckpt'}}",
                 "run_config.storage_path", "absolute path or a URI");
}

static void num_to_keep_zero_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','run_config':{'checkpoint_config':{'num_to_keep':0}}}",
                 "run_config.checkpoint_config.num_to_keep", "between 1 and");
}

static void unknown_score_order_lists_allowed_values(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','run_config':{'checkpoint_config':"
                 "{'checkpoint_score_order':'asc'}}}",
                 "run_config.checkpoint_config.checkpoint_score_order", "must be one of max, min");
}

static void max_failures_below_unlimited_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','run_config':{'failure_config':{'max_failures':-2}}}",
                 "run_config.failure_config.max_failures", "between -1 and");
}

static void hang_settings_out_of_range_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','run_config':{'failure_config':{'hang_warn_s':0}}}",
                 "run_config.failure_config.hang_warn_s", "greater than 0");
    expect_error("{'entrypoint':'x','run_config':{'failure_config':{'hang_warn_s':'5'}}}",
                 "run_config.failure_config.hang_warn_s", "number of seconds");
    expect_error("{'entrypoint':'x','run_config':{'failure_config':{'hang_warn_s':60,"
                 "'hang_timeout_s':30}}}",
                 "run_config.failure_config.hang_timeout_s", "at least hang_warn_s (60)");
}

static void string_checkpoint_id_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','resume_from_checkpoint':'42'}", "resume_from_checkpoint",
                 "integer checkpoint id");
    expect_error("{'entrypoint':'x','resume_from_checkpoint':0}", "resume_from_checkpoint",
                 "integer checkpoint id");
}

static void priority_out_of_range_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','priority':1001}", "priority", "between -1000 and 1000");
}

static void non_positive_timeout_rejected(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','timeout_s':0}", "timeout_s", "greater than 0");
    expect_error("{'entrypoint':'x','timeout_s':315360001}", "timeout_s", "at most 315360000");
}

static void too_many_metadata_entries_rejected(void **state)
{
    (void)state;
    json_t *md = json_object();
    char key[16];
    for (int i = 0; i < JOBSPEC_METADATA_MAX + 1; i++) {
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(md, key, json_string("v"));
    }
    json_t *in = minimal_with("metadata", md);
    expect_error_json(in, "65 metadata entries", "metadata", "at most 64 entries");
    json_decref(in);
}

static void non_string_metadata_value_names_key(void **state)
{
    (void)state;
    expect_error("{'entrypoint':'x','metadata':{'team':['a']}}", "metadata.team",
                 "must be a string");
}

/* Wrong JSON types: each spec has one, and the error names exactly that field. */
static void wrong_types_name_each_field(void **state)
{
    static const struct {
        const char *spec, *field;
    } cases[] = {
        {"{'entrypoint':'x','name':7}", "name"},
        {"{'entrypoint':{'argv':['a']}}", "entrypoint"},
        {"{'entrypoint':'x','working_dir':1}", "working_dir"},
        {"{'entrypoint':'x','env':['A=1']}", "env"},
        {"{'entrypoint':'x','backend':1}", "backend"},
        {"{'entrypoint':'x','scaling_config':[]}", "scaling_config"},
        {"{'entrypoint':'x','scaling_config':{'num_workers':'4'}}", "scaling_config.num_workers"},
        {"{'entrypoint':'x','scaling_config':{'num_workers':true}}", "scaling_config.num_workers"},
        {"{'entrypoint':'x','scaling_config':{'num_workers':{'min':'1','max':2}}}",
         "scaling_config.num_workers.min"},
        {"{'entrypoint':'x','scaling_config':{'use_gpu':'yes'}}", "scaling_config.use_gpu"},
        {"{'entrypoint':'x','scaling_config':{'resources_per_worker':4}}",
         "scaling_config.resources_per_worker"},
        {"{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':'2'}}}",
         "scaling_config.resources_per_worker.CPU"},
        {"{'entrypoint':'x','scaling_config':{'resources_per_worker':{'CPU':1,'memory_mb':1.5}}}",
         "scaling_config.resources_per_worker.memory_mb"},
        {"{'entrypoint':'x','scaling_config':{'placement_strategy':0}}",
         "scaling_config.placement_strategy"},
        {"{'entrypoint':'x','scaling_config':{'use_gpu':true,'accelerator_type':100}}",
         "scaling_config.accelerator_type"},
        {"{'entrypoint':'x','run_config':'fast'}", "run_config"},
        {"{'entrypoint':'x','run_config':{'storage_path':false}}", "run_config.storage_path"},
        {"{'entrypoint':'x','run_config':{'checkpoint_config':3}}", "run_config.checkpoint_config"},
        {"{'entrypoint':'x','run_config':{'checkpoint_config':{'checkpoint_score_attribute':1}}}",
         "run_config.checkpoint_config.checkpoint_score_attribute"},
        {"{'entrypoint':'x','run_config':{'failure_config':{'max_failures':'3'}}}",
         "run_config.failure_config.max_failures"},
        {"{'entrypoint':'x','scaling_config':{'elastic_resize_interval_s':0}}",
         "scaling_config.elastic_resize_interval_s"},
        {"{'entrypoint':'x','run_config':{'failure_config':{'preemption_grace_s':-1}}}",
         "run_config.failure_config.preemption_grace_s"},
        {"{'entrypoint':'x','run_config':{'failure_config':{'preemption_grace_s':86401}}}",
         "run_config.failure_config.preemption_grace_s"},
        {"{'entrypoint':'x','run_config':{'failure_config':[]}}", "run_config.failure_config"},
        {"{'entrypoint':'x','priority':'high'}", "priority"},
        {"{'entrypoint':'x','timeout_s':'1h'}", "timeout_s"},
        {"{'entrypoint':'x','metadata':'team=a'}", "metadata"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_error(cases[i].spec, cases[i].field, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Several errors at once                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void every_offending_field_reported(void **state)
{
    static const char *const spec =
        "{'nme':'a','backend':'jax','scaling_config':{'num_workers':0,"
        "'resources_per_worker':{'GPU':-1}},'run_config':{'failure_config':{'max_failures':-5}},"
        "'env':{'1X':'a','OK':2},'priority':5000}";
    static const char *const fields[] = {
        "nme",
        "entrypoint",
        "env.1X",
        "env.OK",
        "backend",
        "scaling_config.num_workers",
        "scaling_config.resources_per_worker.GPU",
        "run_config.failure_config.max_failures",
        "priority",
    };
    (void)state;
    json_t *in = parse(spec);
    json_t *errors = reject_json(in, spec);
    if (json_array_size(errors) != sizeof fields / sizeof fields[0])
        print_errors(spec, errors);
    assert_int_equal(json_array_size(errors), sizeof fields / sizeof fields[0]);
    /* Unknown fields first, then §2's order. */
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(errors, i), "field")),
                            fields[i]);
    json_decref(errors);
    json_decref(in);
}

static void one_error_per_field(void **state)
{
    (void)state;
    /* Bad name and bad value on the same key, and a too-long string of control characters. */
    expect_error("{'entrypoint':'x','env':{'9':7}}", "env.9", "valid variable name");
    json_t *in = minimal_with("name", string_of(JOBSPEC_NAME_MAX + 1, '\n'));
    expect_error_json(in, "long control name", "name", NULL);
    json_decref(in);
}

static void error_entries_have_field_and_detail_only(void **state)
{
    (void)state;
    json_t *in = parse("{'entrypoint':7}");
    json_t *errors = reject_json(in, "entrypoint 7");
    const json_t *e = json_array_get(errors, 0);
    assert_int_equal(json_object_size(e), 2);
    assert_true(json_is_string(json_object_get(e, "field")));
    assert_true(json_is_string(json_object_get(e, "detail")));
    json_decref(errors);
    json_decref(in);
}

/* ------------------------------------------------------------------------------------------ */
/* Typed view                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void from_text(const char *text, struct jobspec *spec)
{
    char err[256];
    json_t *in = parse(text);
    int rc = jobspec_from_json(in, spec, err, sizeof err);
    if (rc != JOBSPEC_OK)
        fail_msg("jobspec_from_json: %s", err);
    json_decref(in);
}

static void typed_view_of_minimal_spec_has_defaults(void **state)
{
    struct jobspec s;
    (void)state;
    from_text("{'entrypoint':'python3 train.py'}", &s);
    assert_string_equal(s.name, "job");
    assert_int_equal(s.argc, 3);
    assert_string_equal(s.argv[0], "/bin/sh");
    assert_string_equal(s.argv[1], "-c");
    assert_string_equal(s.argv[2], "python3 train.py");
    assert_null(s.argv[3]);
    assert_null(s.working_dir);
    assert_int_equal(s.backend, JOBSPEC_BACKEND_TORCH);
    assert_int_equal(s.num_workers_min, 1);
    assert_int_equal(s.num_workers_max, 1);
    assert_false(s.use_gpu);
    assert_int_equal(s.cpu_milli, 1000);
    assert_int_equal(s.gpu, 0);
    assert_int_equal(s.memory_mb, 0);
    assert_int_equal(s.n_custom, 0);
    assert_int_equal(s.strategy, JOBSPEC_STRATEGY_PACK);
    assert_null(s.accelerator_type);
    assert_null(s.storage_path);
    assert_int_equal(s.num_to_keep, 0);
    assert_null(s.checkpoint_score_attribute);
    assert_int_equal(s.score_order, JOBSPEC_SCORE_MAX);
    assert_int_equal(s.max_failures, 0);
    assert_int_equal(s.resume_from_checkpoint, 0);
    assert_int_equal(s.priority, 0);
    assert_true(s.timeout_s == 0.0);
    jobspec_clear(&s);
}

static void typed_view_of_full_spec(void **state)
{
    struct jobspec s;
    (void)state;
    from_text(FULL_SPEC, &s);
    assert_string_equal(s.name, "resnet");
    assert_int_equal(s.argc, 4);
    assert_string_equal(s.argv[3], "0.1");
    assert_null(s.argv[4]);
    assert_string_equal(s.working_dir, "/srv/job");
    assert_int_equal(s.backend, JOBSPEC_BACKEND_NATIVE);
    assert_int_equal(s.num_workers_min, 2);
    assert_int_equal(s.num_workers_max, 8);
    assert_true(s.use_gpu);
    assert_int_equal(s.cpu_milli, 2500);
    assert_int_equal(s.gpu, 1);
    assert_int_equal(s.memory_mb, 8192);
    assert_int_equal(s.n_custom, 1); /* disk.ssd-1 asks for 0 and is left out */
    assert_string_equal(s.custom[0].name, "TPU");
    assert_int_equal(s.custom[0].amount_milli, 250);
    assert_int_equal(s.strategy, JOBSPEC_STRATEGY_STRICT_SPREAD);
    assert_string_equal(s.accelerator_type, "H100");
    assert_string_equal(s.storage_path, "s3://bucket/runs");
    assert_int_equal(s.num_to_keep, 3);
    assert_string_equal(s.checkpoint_score_attribute, "val_loss");
    assert_int_equal(s.score_order, JOBSPEC_SCORE_MIN);
    assert_int_equal(s.max_failures, -1);
    assert_int_equal(s.resume_from_checkpoint, 42);
    assert_int_equal(s.priority, -7);
    assert_true(s.timeout_s == 3600.5);
    jobspec_clear(&s);
}

static void typed_view_of_invalid_spec_reports_first_error(void **state)
{
    struct jobspec s;
    char err[128];
    (void)state;
    json_t *in = parse("{'name':'a','priority':'x'}");
    assert_int_equal(jobspec_from_json(in, &s, err, sizeof err), JOBSPEC_EINVAL);
    assert_string_equal(err, "entrypoint: is required");
    assert_null(s.name);
    assert_null(s.argv);
    json_decref(in);
    in = parse("[]");
    assert_int_equal(jobspec_from_json(in, &s, err, sizeof err), JOBSPEC_EINVAL);
    assert_string_equal(err, "must be a JSON object");
    json_decref(in);
}

static void clear_is_safe_twice(void **state)
{
    struct jobspec s;
    (void)state;
    from_text("{'entrypoint':['a','b']}", &s);
    jobspec_clear(&s);
    jobspec_clear(&s);
    assert_null(s.argv);
    assert_int_equal(s.argc, 0);
}

static void enum_names_round_trip(void **state)
{
    (void)state;
    for (int i = JOBSPEC_BACKEND_TORCH; i <= JOBSPEC_BACKEND_NONE; i++) {
        enum jobspec_backend b;
        assert_int_equal(jobspec_backend_from_string(jobspec_backend_name(i), &b), 0);
        assert_int_equal(b, i);
    }
    for (int i = JOBSPEC_STRATEGY_PACK; i <= JOBSPEC_STRATEGY_STRICT_SPREAD; i++) {
        enum jobspec_strategy st;
        assert_int_equal(jobspec_strategy_from_string(jobspec_strategy_name(i), &st), 0);
        assert_int_equal(st, i);
    }
    for (int i = JOBSPEC_SCORE_MAX; i <= JOBSPEC_SCORE_MIN; i++) {
        enum jobspec_score_order o;
        assert_int_equal(jobspec_score_order_from_string(jobspec_score_order_name(i), &o), 0);
        assert_int_equal(o, i);
    }
}

static void unknown_enum_names_rejected(void **state)
{
    enum jobspec_strategy st = JOBSPEC_STRATEGY_SPREAD;
    enum jobspec_backend b;
    enum jobspec_score_order o;
    (void)state;
    assert_int_equal(jobspec_strategy_from_string("pack", &st), -1);
    assert_int_equal(st, JOBSPEC_STRATEGY_SPREAD);
    assert_int_equal(jobspec_strategy_from_string(NULL, &st), -1);
    assert_int_equal(jobspec_backend_from_string("jax", &b), -1);
    assert_int_equal(jobspec_score_order_from_string("MAX", &o), -1);
    assert_null(jobspec_strategy_name((enum jobspec_strategy)99));
    assert_null(jobspec_backend_name((enum jobspec_backend) - 1));
}

/* ------------------------------------------------------------------------------------------ */
/* Allocation failures                                                                          */
/* ------------------------------------------------------------------------------------------ */

static long allocs_left; /* test-only: jansson's allocator is process-wide */

static void *failing_malloc(size_t n)
{
    return allocs_left-- > 0 ? malloc(n) : NULL;
}

/* Fails the n-th jansson allocation for n = 0, 1, ... until validation completes; every run must
 * give `final_rc` or JOBSPEC_ENOMEM and free everything (ASan checks). */
static void run_with_failing_allocations(const json_t *in, int final_rc)
{
    for (long n = 0;; n++) {
        json_t *out = NULL, *errors = NULL;
        allocs_left = n;
        json_set_alloc_funcs(failing_malloc, free);
        int rc = jobspec_validate(in, &out, &errors);
        json_set_alloc_funcs(malloc, free);
        if (rc == JOBSPEC_ENOMEM) {
            assert_null(out);
            assert_null(errors);
            continue;
        }
        assert_int_equal(rc, final_rc);
        json_decref(out);
        json_decref(errors);
        assert_true(n > 10);
        return;
    }
}

static void allocation_failure_while_normalizing_is_nomem(void **state)
{
    (void)state;
    json_t *in = parse(FULL_SPEC);
    run_with_failing_allocations(in, JOBSPEC_OK);
    json_decref(in);
}

static void allocation_failure_while_reporting_is_nomem(void **state)
{
    (void)state;
    json_t *in = parse("{'nme':1,'env':{'1X':'a'},'scaling_config':{'num_workers':0},"
                       "'priority':5000}");
    run_with_failing_allocations(in, JOBSPEC_EINVAL);
    json_decref(in);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(defaults_filled_for_minimal_spec),
    cmocka_unit_test(tags_and_notes_are_checked_and_kept_only_when_given),
    cmocka_unit_test(secret_env_kept_apart_and_checked_like_env),
    cmocka_unit_test(entrypoint_array_kept_as_given),
    cmocka_unit_test(null_fields_take_defaults),
    cmocka_unit_test(empty_sections_take_defaults),
    cmocka_unit_test(full_spec_normalized),
    cmocka_unit_test(use_gpu_defaults_bundle_to_one_gpu),
    cmocka_unit_test(use_gpu_adds_one_gpu_to_given_bundle),
    cmocka_unit_test(gpu_in_bundle_implies_use_gpu),
    cmocka_unit_test(integral_reals_normalized_to_integers),
    cmocka_unit_test(boundary_specs_accepted),
    cmocka_unit_test(normalizing_is_idempotent),
    cmocka_unit_test(normalized_spec_shares_nothing_with_input),
    cmocka_unit_test(non_object_body_rejected),
    cmocka_unit_test(unknown_top_level_field_named),
    cmocka_unit_test(missing_entrypoint_names_entrypoint),
    cmocka_unit_test(empty_entrypoint_rejected),
    cmocka_unit_test(bad_argv_item_names_its_index),
    cmocka_unit_test(too_many_argv_items_rejected),
    cmocka_unit_test(oversized_entrypoint_rejected),
    cmocka_unit_test(entrypoint_with_nul_rejected),
    cmocka_unit_test(oversized_name_rejected),
    cmocka_unit_test(name_with_control_character_rejected),
    cmocka_unit_test(relative_working_dir_rejected),
    cmocka_unit_test(code_package_must_be_a_sha256_without_working_dir),
    cmocka_unit_test(project_is_a_valid_name_kept_only_when_given),
    cmocka_unit_test(code_package_kept_when_given),
    cmocka_unit_test(invalid_env_name_names_env_key),
    cmocka_unit_test(reserved_env_name_rejected),
    cmocka_unit_test(non_string_env_value_names_env_key),
    cmocka_unit_test(oversized_env_value_rejected),
    cmocka_unit_test(long_key_shortened_in_field_path),
    cmocka_unit_test(unknown_backend_lists_allowed_values),
    cmocka_unit_test(oversized_train_loop_config_rejected),
    cmocka_unit_test(zero_workers_rejected),
    cmocka_unit_test(too_many_workers_rejected),
    cmocka_unit_test(fractional_workers_rejected),
    cmocka_unit_test(min_greater_than_max_rejected),
    cmocka_unit_test(elastic_workers_need_min_and_max),
    cmocka_unit_test(unknown_num_workers_key_rejected),
    cmocka_unit_test(negative_gpu_names_resources_field),
    cmocka_unit_test(fractional_gpu_rejected),
    cmocka_unit_test(negative_cpu_rejected),
    cmocka_unit_test(cpu_finer_than_thousandth_rejected),
    cmocka_unit_test(negative_custom_resource_rejected),
    cmocka_unit_test(lowercase_gpu_key_suggests_gpu),
    cmocka_unit_test(invalid_custom_resource_name_rejected),
    cmocka_unit_test(bundle_of_zeros_requests_no_resources),
    cmocka_unit_test(use_gpu_with_zero_gpus_rejected),
    cmocka_unit_test(gpus_without_use_gpu_rejected),
    cmocka_unit_test(unknown_strategy_lists_allowed_values),
    cmocka_unit_test(accelerator_type_without_gpu_rejected),
    cmocka_unit_test(oversized_accelerator_type_rejected),
    cmocka_unit_test(unknown_run_config_field_rejected),
    cmocka_unit_test(relative_storage_path_rejected),
    cmocka_unit_test(num_to_keep_zero_rejected),
    cmocka_unit_test(unknown_score_order_lists_allowed_values),
    cmocka_unit_test(max_failures_below_unlimited_rejected),
    cmocka_unit_test(hang_settings_out_of_range_rejected),
    cmocka_unit_test(string_checkpoint_id_rejected),
    cmocka_unit_test(priority_out_of_range_rejected),
    cmocka_unit_test(non_positive_timeout_rejected),
    cmocka_unit_test(too_many_metadata_entries_rejected),
    cmocka_unit_test(non_string_metadata_value_names_key),
    cmocka_unit_test(wrong_types_name_each_field),
    cmocka_unit_test(every_offending_field_reported),
    cmocka_unit_test(one_error_per_field),
    cmocka_unit_test(error_entries_have_field_and_detail_only),
    cmocka_unit_test(typed_view_of_minimal_spec_has_defaults),
    cmocka_unit_test(typed_view_of_full_spec),
    cmocka_unit_test(typed_view_of_invalid_spec_reports_first_error),
    cmocka_unit_test(clear_is_safe_twice),
    cmocka_unit_test(enum_names_round_trip),
    cmocka_unit_test(unknown_enum_names_rejected),
    cmocka_unit_test(allocation_failure_while_normalizing_is_nomem),
    cmocka_unit_test(allocation_failure_while_reporting_is_nomem),
};

TY_TEST_MAIN(tests)
