/* Unit tests for worker/agent/env.c: the environment of a worker process (DESIGN §3). Launches are
 * parsed by common/agent_proto.c, as the agent does. */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* A launch message as the server sends it; `extra` is spliced into the object. */
static struct aproto_server_msg parse_launch(const char *extra)
{
    char text[4096];
    snprintf(text, sizeof(text),
             "{\"type\":\"launch\",\"job_id\":\"j-7\",\"attempt\":2,\"entrypoint\":[\"python3\","
             "\"train.py\"],\"working_dir\":null,\"config\":{\"lr\":0.5},\"world_size\":4,"
             "\"num_nodes\":2,\"node_rank\":1,\"local_world_size\":2,\"master_addr\":\"10.0.0.1\","
             "\"master_port\":29500,\"checkpoint_dir\":null,"
             "\"workers\":[{\"rank\":2,\"local_rank\":0,\"gpus\":[1,3]},{\"rank\":3,"
             "\"local_rank\":1,\"gpus\":[]}]%s%s}",
             extra && *extra ? "," : "", extra ? extra : "");
    struct aproto_server_msg m;
    char err[256] = "";
    int rc = aproto_server_msg_parse(text, strlen(text), &m, err, sizeof(err));
    if (rc != 0)
        fail_msg("launch refused: %s", err);
    assert_int_equal(m.type, APROTO_MSG_LAUNCH);
    return m;
}

static char **build_ifname(struct aproto_server_msg *m, size_t worker, char *const *base,
                           const char *ifname)
{
    char **env = agent_env_build(base, &m->launch, &m->launch.workers[worker], "/opt/ty/python",
                                 "/data/report.sock", ifname, NULL);
    assert_non_null(env);
    return env;
}

static char **build(struct aproto_server_msg *m, size_t worker, char *const *base)
{
    return build_ifname(m, worker, base, NULL);
}

static void expect(char **env, const char *name, const char *value)
{
    const char *got = agent_env_get(env, name);
    if (!got)
        fail_msg("%s is not set", name);
    if (strcmp(got, value) != 0)
        fail_msg("%s='%s', expected '%s'", name, got, value);
}

static void agent_worker_gets_torch_distributed_variables(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    char **env = build(&m, 0, NULL);
    expect(env, "RANK", "2");
    expect(env, "WORLD_SIZE", "4");
    expect(env, "LOCAL_RANK", "0");
    expect(env, "LOCAL_WORLD_SIZE", "2");
    expect(env, "NODE_RANK", "1");
    expect(env, "MASTER_ADDR", "10.0.0.1");
    expect(env, "MASTER_PORT", "29500");
    assert_null(agent_env_get(env, "TF_CONFIG"));
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_worker_gets_trainyard_variables(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    char **env = build(&m, 1, NULL);
    expect(env, "TRAINYARD_JOB_ID", "j-7");
    expect(env, "TRAINYARD_ATTEMPT", "2");
    expect(env, "TRAINYARD_CONFIG", "{\"lr\":0.5}");
    expect(env, "TRAINYARD_CHECKPOINT_DIR", "");
    expect(env, "TRAINYARD_REPORT_SOCKET", "/data/report.sock");
    expect(env, "TRAINYARD_BACKEND", "torch");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_checkpoint_dir_is_passed_when_resuming(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    aproto_server_msg_free(&m);
    m = parse_launch("\"checkpoint_dir\":\"/ck/3\"");
    char **env = build(&m, 0, NULL);
    expect(env, "TRAINYARD_CHECKPOINT_DIR", "/ck/3");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_cuda_visible_devices_lists_the_worker_gpus(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    char **env = build(&m, 0, NULL);
    expect(env, "CUDA_VISIBLE_DEVICES", "1,3");
    agent_env_free(env);
    env = build(&m, 1, NULL);
    expect(env, "CUDA_VISIBLE_DEVICES", "");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_cuda_visible_devices_of_the_agent_is_replaced(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    char *base[] = {"CUDA_VISIBLE_DEVICES=0,1,2,3", "HOME=/root", NULL};
    char **env = build(&m, 0, base);
    expect(env, "CUDA_VISIBLE_DEVICES", "1,3");
    expect(env, "HOME", "/root");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_cuda_visible_devices_names_nvml_uuids(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    struct agent_gpu gpus[4] = {{.index = 0, .uuid = "GPU-aaaa"},
                                {.index = 1, .uuid = "GPU-bbbb"},
                                {.index = 2, .uuid = "GPU-cccc"},
                                {.index = 3, .uuid = ""}};
    struct agent_env_private priv = {.gpus = gpus, .n_gpus = 4};
    char **env = agent_env_build(NULL, &m.launch, &m.launch.workers[0], "/opt/ty/python",
                                 "/data/report.sock", NULL, &priv);
    assert_non_null(env);
    expect(env, "CUDA_VISIBLE_DEVICES", "GPU-bbbb,3"); /* GPU 3's UUID is unknown: its index */
    agent_env_free(env);
    env = agent_env_build(NULL, &m.launch, &m.launch.workers[1], "/opt/ty/python",
                          "/data/report.sock", NULL, &priv);
    assert_non_null(env);
    expect(env, "CUDA_VISIBLE_DEVICES", "");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_tensorflow_backend_gets_tf_config(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch("\"backend\":\"tensorflow\"");
    char **env = build(&m, 1, NULL);
    const char *tf = agent_env_get(env, "TF_CONFIG");
    assert_non_null(tf);
    json_t *got = json_loads(tf, 0, NULL);
    json_t *want = json_loads("{\"cluster\":{\"worker\":[\"10.0.0.1:29500\",\"10.0.0.1:29501\","
                              "\"10.0.0.1:29502\",\"10.0.0.1:29503\"]},"
                              "\"task\":{\"type\":\"worker\",\"index\":3}}",
                              0, NULL);
    assert_non_null(got);
    assert_true(json_equal(got, want));
    expect(env, "TRAINYARD_BACKEND", "tensorflow");
    json_decref(got);
    json_decref(want);
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_tf_config_uses_rank_addresses_when_given(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(
        "\"backend\":\"tensorflow\",\"rank_addresses\":[\"a\",\"a\",\"b\",\"fe80::1\"]");
    char *tf = agent_tf_config(&m.launch, 0);
    assert_non_null(tf);
    assert_string_equal(tf, "{\"cluster\":{\"worker\":[\"a:29500\",\"a:29501\",\"b:29502\","
                            "\"[fe80::1]:29503\"]},\"task\":{\"type\":\"worker\",\"index\":0}}");
    free(tf);
    aproto_server_msg_free(&m);
}

static void agent_job_env_is_applied_last(void **state)
{
    (void)state;
    struct aproto_server_msg m =
        parse_launch("\"env\":{\"FOO\":\"bar\",\"HOME\":\"/job\",\"NCCL_DEBUG\":\"INFO\"}");
    char *base[] = {"HOME=/root", "FOO=agent", NULL};
    char **env = build(&m, 0, base);
    expect(env, "FOO", "bar");
    expect(env, "HOME", "/job");
    expect(env, "NCCL_DEBUG", "INFO");
    size_t homes = 0;
    for (size_t i = 0; env[i]; i++)
        homes += strncmp(env[i], "HOME=", 5) == 0;
    assert_int_equal(homes, 1);
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_environment_is_scrubbed(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    char *base[] = {"TRAINYARD_CLUSTER_TOKEN=tyc_secret",
                    "TRAINYARD_TOKEN=ty_admin",
                    "AWS_SECRET_ACCESS_KEY=x",
                    "SSH_AUTH_SOCK=/tmp/agent",
                    "PATH=/usr/bin",
                    "LC_ALL=C.UTF-8",
                    "NCCL_IB_HCA=mlx5",
                    NULL};
    char **env = build(&m, 0, base);
    assert_null(agent_env_get(env, "TRAINYARD_CLUSTER_TOKEN"));
    assert_null(agent_env_get(env, "TRAINYARD_TOKEN"));
    assert_null(agent_env_get(env, "AWS_SECRET_ACCESS_KEY"));
    assert_null(agent_env_get(env, "SSH_AUTH_SOCK"));
    expect(env, "PATH", "/usr/bin");
    expect(env, "LC_ALL", "C.UTF-8");
    expect(env, "NCCL_IB_HCA", "mlx5");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_private_variables_are_set(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch("\"rendezvous_secret\":\"rv-1\"");
    char *base[] = {"HOME=/root", "USER=root", NULL};
    struct agent_env_private priv = {.report_secret = "rep-1",
                                     .tmp_dir = "/tmp/trainyard-j-7.2.2-abc",
                                     .user = "trainyard-2000000001"};
    char **env = agent_env_build(base, &m.launch, &m.launch.workers[0], "/opt/ty/python",
                                 "/data/report.sock", NULL, &priv);
    assert_non_null(env);
    expect(env, "TRAINYARD_REPORT_SECRET", "rep-1");
    expect(env, "TRAINYARD_RENDEZVOUS_SECRET", "rv-1");
    expect(env, "TMPDIR", "/tmp/trainyard-j-7.2.2-abc");
    expect(env, "TRAINYARD_CHECKPOINT_REQUEST_FILE",
           "/tmp/trainyard-j-7.2.2-abc/trainyard-checkpoint-request");
    expect(env, "HOME", "/tmp/trainyard-j-7.2.2-abc");
    expect(env, "USER", "trainyard-2000000001");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_pythonpath_starts_with_the_sdk_directory(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    char **env = build(&m, 0, NULL);
    expect(env, "PYTHONPATH", "/opt/ty/python");
    agent_env_free(env);
    char *base[] = {"PYTHONPATH=/usr/lib/extra", NULL};
    env = build(&m, 0, base);
    expect(env, "PYTHONPATH", "/opt/ty/python:/usr/lib/extra");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_pythonpath_of_the_job_keeps_the_sdk_first(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch("\"env\":{\"PYTHONPATH\":\"/job/src\"}");
    char *base[] = {"PYTHONPATH=/agent/lib", NULL};
    char **env = build(&m, 0, base);
    expect(env, "PYTHONPATH", "/opt/ty/python:/job/src");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_absent_config_is_json_null(void **state)
{
    (void)state;
    const char *text =
        "{\"type\":\"launch\",\"job_id\":\"j\",\"attempt\":0,\"entrypoint\":\"true\","
        "\"world_size\":1,\"num_nodes\":1,\"node_rank\":0,\"local_world_size\":1,"
        "\"master_addr\":\"h\",\"master_port\":1,\"workers\":[{\"rank\":0,\"local_rank\":0}]}";
    struct aproto_server_msg m;
    char err[256];
    assert_int_equal(aproto_server_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    char **env = build(&m, 0, NULL);
    expect(env, "TRAINYARD_CONFIG", "null");
    expect(env, "CUDA_VISIBLE_DEVICES", "");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_socket_ifname_is_set_for_gloo_and_nccl(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    char *base[] = {"HOME=/root", NULL};
    char **env = build_ifname(&m, 0, base, "eth1");
    expect(env, "GLOO_SOCKET_IFNAME", "eth1");
    expect(env, "NCCL_SOCKET_IFNAME", "eth1");
    agent_env_free(env);
    env = build(&m, 0, base);
    assert_null(agent_env_get(env, "GLOO_SOCKET_IFNAME"));
    assert_null(agent_env_get(env, "NCCL_SOCKET_IFNAME"));
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_socket_ifname_of_the_user_is_kept(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch(NULL);
    /* Either variable set where the agent was started: both are left as the user set them. */
    char *base[] = {"NCCL_SOCKET_IFNAME=ib0", NULL};
    char **env = build_ifname(&m, 0, base, "eth1");
    expect(env, "NCCL_SOCKET_IFNAME", "ib0");
    assert_null(agent_env_get(env, "GLOO_SOCKET_IFNAME"));
    agent_env_free(env);
    char *base2[] = {"GLOO_SOCKET_IFNAME=lo", NULL};
    env = build_ifname(&m, 0, base2, "eth1");
    expect(env, "GLOO_SOCKET_IFNAME", "lo");
    assert_null(agent_env_get(env, "NCCL_SOCKET_IFNAME"));
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static void agent_socket_ifname_of_the_job_wins(void **state)
{
    (void)state;
    struct aproto_server_msg m = parse_launch("\"env\":{\"GLOO_SOCKET_IFNAME\":\"eth9\"}");
    char **env = build_ifname(&m, 0, NULL, "eth1");
    expect(env, "GLOO_SOCKET_IFNAME", "eth9");
    expect(env, "NCCL_SOCKET_IFNAME", "eth1");
    agent_env_free(env);
    aproto_server_msg_free(&m);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(agent_worker_gets_torch_distributed_variables),
    cmocka_unit_test(agent_worker_gets_trainyard_variables),
    cmocka_unit_test(agent_checkpoint_dir_is_passed_when_resuming),
    cmocka_unit_test(agent_cuda_visible_devices_lists_the_worker_gpus),
    cmocka_unit_test(agent_cuda_visible_devices_of_the_agent_is_replaced),
    cmocka_unit_test(agent_cuda_visible_devices_names_nvml_uuids),
    cmocka_unit_test(agent_tensorflow_backend_gets_tf_config),
    cmocka_unit_test(agent_tf_config_uses_rank_addresses_when_given),
    cmocka_unit_test(agent_job_env_is_applied_last),
    cmocka_unit_test(agent_environment_is_scrubbed),
    cmocka_unit_test(agent_private_variables_are_set),
    cmocka_unit_test(agent_pythonpath_starts_with_the_sdk_directory),
    cmocka_unit_test(agent_pythonpath_of_the_job_keeps_the_sdk_first),
    cmocka_unit_test(agent_absent_config_is_json_null),
    cmocka_unit_test(agent_socket_ifname_is_set_for_gloo_and_nccl),
    cmocka_unit_test(agent_socket_ifname_of_the_user_is_kept),
    cmocka_unit_test(agent_socket_ifname_of_the_job_wins),
};
TY_TEST_MAIN(tests)
