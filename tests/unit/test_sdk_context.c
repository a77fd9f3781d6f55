/* Context: environment parsing (DESIGN §3), standalone mode with --config, accessors,
 * world-size-1 collectives. */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainyard.h"

static void clear_env(void)
{
    const char *vars[] = {"RANK",
                          "WORLD_SIZE",
                          "LOCAL_RANK",
                          "LOCAL_WORLD_SIZE",
                          "NODE_RANK",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "TRAINYARD_JOB_ID",
                          "TRAINYARD_ATTEMPT",
                          "TRAINYARD_CONFIG",
                          "TRAINYARD_CHECKPOINT_DIR",
                          "TRAINYARD_CHECKPOINT_REQUEST_FILE",
                          "TRAINYARD_REPORT_SOCKET",
                          "TRAINYARD_BACKEND",
                          "TRAINYARD_COLLECTIVE_TIMEOUT_S",
                          "TRAINYARD_REPORT_TIMEOUT_S",
                          "TRAINYARD_HEARTBEAT_S",
                          "TY_TEST_STALL"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static void set_managed(void)
{
    clear_env();
    setenv("RANK", "5", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    setenv("NODE_RANK", "1", 1);
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    setenv("TRAINYARD_JOB_ID", "job-42", 1);
    setenv("TRAINYARD_ATTEMPT", "3", 1);
    setenv("TRAINYARD_CONFIG", "{\"lr\": 0.1, \"layers\": [1, 2]}", 1);
    setenv("TRAINYARD_CHECKPOINT_DIR", "/ckpt/7", 1);
}

static void context_standalone_defaults(void **state)
{
    (void)state;
    clear_env();
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_is_standalone(c), 1);
    assert_int_equal(ty_world_rank(c), 0);
    assert_int_equal(ty_world_size(c), 1);
    assert_int_equal(ty_local_rank(c), 0);
    assert_int_equal(ty_local_world_size(c), 1);
    assert_int_equal(ty_node_rank(c), 0);
    assert_int_equal(ty_attempt(c), 0);
    assert_string_equal(ty_job_id(c), "local");
    assert_null(ty_checkpoint_dir(c));
    assert_true(json_is_object(ty_config(c)));
    assert_int_equal(json_object_size(ty_config(c)), 0);
    assert_int_equal(ty_finish(&c), 0);
    assert_null(c);
    assert_int_equal(ty_finish(&c), 0);
    assert_int_equal(ty_finish(NULL), 0);
}

/* Write text to a temporary file; returns its malloc'd path. */
static char *temp_file(const char *text)
{
    char *path = strdup("/tmp/ty_cfg_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void context_standalone_config_flag_removed_from_argv(void **state)
{
    (void)state;
    clear_env();
    char *path = temp_file("{\"epochs\": 3}");
    char *args[] = {"train", "--lr", "0.1", "--config", path, "extra", NULL};
    int argc = 6;
    char **argv = args;
    ty_ctx *c;
    assert_int_equal(ty_init(&c, &argc, &argv), 0);
    assert_int_equal(argc, 4);
    assert_string_equal(argv[0], "train");
    assert_string_equal(argv[1], "--lr");
    assert_string_equal(argv[2], "0.1");
    assert_string_equal(argv[3], "extra");
    assert_null(argv[4]);
    assert_int_equal(json_integer_value(json_object_get(ty_config(c), "epochs")), 3);
    ty_finish(&c);
    unlink(path);
    free(path);
}

static void context_standalone_config_equals_form(void **state)
{
    (void)state;
    clear_env();
    char *path = temp_file("{\"batch\": 64}");
    char flag[256];
    snprintf(flag, sizeof flag, "--config=%s", path);
    char *args[] = {"train", flag, NULL};
    int argc = 2;
    char **argv = args;
    ty_ctx *c;
    assert_int_equal(ty_init(&c, &argc, &argv), 0);
    assert_int_equal(argc, 1);
    assert_null(argv[1]);
    assert_int_equal(json_integer_value(json_object_get(ty_config(c), "batch")), 64);
    ty_finish(&c);
    unlink(path);
    free(path);
}

static void context_bad_config_file_is_config_error(void **state)
{
    (void)state;
    clear_env();
    char *path = temp_file("{not json");
    char *args[] = {"train", "--config", path, NULL};
    int argc = 3;
    char **argv = args;
    ty_ctx *c = (ty_ctx *)1;
    assert_int_equal(ty_init(&c, &argc, &argv), TY_ECONFIG);
    assert_null(c);
    char *missing[] = {"train", "--config", "/nonexistent/x.json", NULL};
    argc = 3;
    argv = missing;
    assert_int_equal(ty_init(&c, &argc, &argv), TY_ECONFIG);
    char *dangling[] = {"train", "--config", NULL};
    argc = 2;
    argv = dangling;
    assert_int_equal(ty_init(&c, &argc, &argv), TY_ECONFIG);
    unlink(path);
    free(path);
}

static void context_managed_env_parsed(void **state)
{
    (void)state;
    set_managed();
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_is_standalone(c), 0);
    assert_int_equal(ty_world_rank(c), 5);
    assert_int_equal(ty_world_size(c), 8);
    assert_int_equal(ty_local_rank(c), 1);
    assert_int_equal(ty_local_world_size(c), 4);
    assert_int_equal(ty_node_rank(c), 1);
    assert_int_equal(ty_attempt(c), 3);
    assert_string_equal(ty_job_id(c), "job-42");
    assert_string_equal(ty_checkpoint_dir(c), "/ckpt/7");
    assert_true(json_real_value(json_object_get(ty_config(c), "lr")) == 0.1);
    assert_int_equal(json_array_size(json_object_get(ty_config(c), "layers")), 2);
    ty_finish(&c);
}

static void context_managed_env_config_beats_file(void **state)
{
    (void)state;
    set_managed();
    char *path = temp_file("{\"lr\": 9}");
    char *args[] = {"train", "--config", path, NULL};
    int argc = 3;
    char **argv = args;
    ty_ctx *c;
    assert_int_equal(ty_init(&c, &argc, &argv), 0);
    assert_int_equal(argc, 1);
    assert_true(json_real_value(json_object_get(ty_config(c), "lr")) == 0.1);
    ty_finish(&c);
    unlink(path);
    free(path);
}

static void context_rank_only_env_defaults_local_fields(void **state)
{
    (void)state;
    clear_env();
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_is_standalone(c), 0);
    assert_int_equal(ty_local_rank(c), 1);
    assert_int_equal(ty_local_world_size(c), 2);
    assert_string_equal(ty_job_id(c), "local");
    assert_null(ty_checkpoint_dir(c));
    ty_finish(&c);
}

static void context_malformed_env_rejected(void **state)
{
    (void)state;
    const char *bad[][2] = {{"RANK", "abc"},
                            {"RANK", "8"},
                            {"RANK", "-1"},
                            {"WORLD_SIZE", "0"},
                            {"WORLD_SIZE", "3x"},
                            {"MASTER_PORT", "70000"},
                            {"TRAINYARD_ATTEMPT", ""},
                            {"TRAINYARD_CONFIG", "{oops"},
                            {"TRAINYARD_BACKEND", "mpi"},
                            {"TRAINYARD_COLLECTIVE_TIMEOUT_S", "-5"},
                            {"TRAINYARD_HEARTBEAT_S", "-1"},
                            {"TRAINYARD_HEARTBEAT_S", "often"},
                            {"TY_TEST_STALL", "1:0:5"},
                            {"TY_TEST_STALL", "1:2"},
                            {"LOCAL_RANK", "4"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_managed();
        setenv(bad[i][0], bad[i][1], 1);
        ty_ctx *c = NULL;
        int rc = ty_init(&c, NULL, NULL);
        if (strcmp(bad[i][0], "TRAINYARD_ATTEMPT") == 0) {
            /* empty means unset: default 0 */
            assert_int_equal(rc, 0);
            assert_int_equal(ty_attempt(c), 0);
            ty_finish(&c);
            continue;
        }
        if (rc != TY_ECONFIG)
            fail_msg("%s=%s accepted (rc %d)", bad[i][0], bad[i][1], rc);
        assert_null(c);
    }
    set_managed();
    unsetenv("WORLD_SIZE");
    ty_ctx *c = NULL;
    assert_int_equal(ty_init(&c, NULL, NULL), TY_ECONFIG);
}

static void context_world_one_collectives_are_local(void **state)
{
    (void)state;
    clear_env();
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    float v[3] = {1, 2, 3};
    assert_int_equal(ty_allreduce(c, v, 3, TY_FLOAT32, TY_AVG), 0);
    assert_true(v[0] == 1 && v[1] == 2 && v[2] == 3);
    assert_int_equal(ty_allreduce(c, NULL, 0, TY_INT64, TY_MAX), 0);
    assert_int_equal(ty_broadcast(c, v, sizeof v, 0), 0);
    assert_int_equal(ty_broadcast(c, v, sizeof v, 1), TY_EINVAL);
    assert_int_equal(ty_barrier(c), 0);
    int in = 7, out = 0;
    assert_int_equal(ty_allgather(c, &in, &out, sizeof in), 0);
    assert_int_equal(out, 7);
    assert_int_equal(ty_allreduce(c, v, 3, (ty_dtype)99, TY_SUM), TY_EINVAL);
    assert_int_equal(ty_allreduce(c, v, 3, TY_FLOAT32, (ty_op)99), TY_EINVAL);
    assert_int_equal(ty_allreduce(c, NULL, 3, TY_FLOAT32, TY_SUM), TY_EINVAL);
    assert_int_equal(ty_connect(c), 0);
    ty_finish(&c);
}

static void context_backend_none_refuses_collectives(void **state)
{
    (void)state;
    clear_env();
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("TRAINYARD_BACKEND", "none", 1);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    int x = 1;
    assert_int_equal(ty_allreduce(c, &x, 1, TY_INT32, TY_SUM), TY_ENOTSUP);
    ty_finish(&c);
}

static void context_missing_master_port_is_config_error(void **state)
{
    (void)state;
    clear_env();
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_barrier(c), TY_ECONFIG);
    assert_int_equal(ty_barrier(c), TY_ECONFIG); /* sticky */
    ty_finish(&c);
}

static void context_timeouts_validated(void **state)
{
    (void)state;
    clear_env();
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_set_collective_timeout(c, 0.5), 0);
    assert_int_equal(ty_set_collective_timeout(c, 0), TY_EINVAL);
    assert_int_equal(ty_set_collective_timeout(c, -1), TY_EINVAL);
    assert_int_equal(ty_set_report_timeout(c, 10), 0);
    assert_int_equal(ty_set_report_timeout(NULL, 10), TY_EINVAL);
    ty_finish(&c);
}

/* ty_should_checkpoint is the existence of TRAINYARD_CHECKPOINT_REQUEST_FILE (the agent creates
 * it when it stops the worker); never true standalone or without the variable. */
static void context_should_checkpoint_follows_the_request_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/ty-sdk-request-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/trainyard-checkpoint-request", dir);
    set_managed();
    setenv("TRAINYARD_CHECKPOINT_REQUEST_FILE", path, 1);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_should_checkpoint(c), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(ty_should_checkpoint(c), 1);
    assert_int_equal(ty_should_checkpoint(NULL), TY_EINVAL);
    ty_finish(&c);
    unsetenv("TRAINYARD_CHECKPOINT_REQUEST_FILE");
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_should_checkpoint(c), 0);
    ty_finish(&c);
    clear_env();
    setenv("TRAINYARD_CHECKPOINT_REQUEST_FILE", path, 1);
    assert_int_equal(ty_init(&c, NULL, NULL), 0); /* standalone: the variable is not read */
    assert_int_equal(ty_should_checkpoint(c), 0);
    ty_finish(&c);
    clear_env();
    unlink(path);
    rmdir(dir);
}

/* A CUDA stream set for device buffers leaves host buffers on the native path (no GPU here:
 * CUDA_VISIBLE_DEVICES unset, so CUDA is never loaded). */
static void context_cuda_stream_leaves_host_buffers_alone(void **state)
{
    (void)state;
    clear_env();
    unsetenv("CUDA_VISIBLE_DEVICES");
    assert_int_equal(ty_set_cuda_stream(NULL, NULL), TY_EINVAL);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    int rc = ty_set_cuda_stream(c, (void *)&rc);
    assert_true(rc == 0 || rc == TY_ENOTSUP); /* TY_ENOTSUP: built without NCCL */
    int32_t v[3] = {4, 5, 6}, all[3] = {0};
    assert_int_equal(ty_allreduce(c, v, 3, TY_INT32, TY_SUM), 0);
    assert_int_equal(v[0] + v[1] + v[2], 15);
    assert_int_equal(ty_allgather(c, v, all, sizeof(v)), 0);
    assert_memory_equal(all, v, sizeof(v));
    assert_int_equal(ty_set_cuda_stream(c, NULL), rc);
    ty_finish(&c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(context_standalone_defaults),
    cmocka_unit_test(context_standalone_config_flag_removed_from_argv),
    cmocka_unit_test(context_standalone_config_equals_form),
    cmocka_unit_test(context_bad_config_file_is_config_error),
    cmocka_unit_test(context_managed_env_parsed),
    cmocka_unit_test(context_managed_env_config_beats_file),
    cmocka_unit_test(context_rank_only_env_defaults_local_fields),
    cmocka_unit_test(context_malformed_env_rejected),
    cmocka_unit_test(context_world_one_collectives_are_local),
    cmocka_unit_test(context_backend_none_refuses_collectives),
    cmocka_unit_test(context_missing_master_port_is_config_error),
    cmocka_unit_test(context_timeouts_validated),
    cmocka_unit_test(context_should_checkpoint_follows_the_request_file),
    cmocka_unit_test(context_cuda_stream_leaves_host_buffers_alone),
};
TY_TEST_MAIN(tests)
