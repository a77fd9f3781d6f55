/* Unit tests for worker/agent/proto.c: parsing what the server sends (launch validation names
 * the bad field) and building what the agent sends (docs/agent-protocol.md). */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define LAUNCH_HEAD                                                                                \
    "{\"type\":\"launch\",\"job_id\":\"j-1\",\"attempt\":0,\"world_size\":2,\"num_nodes\":1,"      \
    "\"node_rank\":0,\"local_world_size\":2,\"master_addr\":\"127.0.0.1\",\"master_port\":29500"

static const char *valid_launch =
    LAUNCH_HEAD ",\"backend\":\"torch\",\"entrypoint\":[\"python3\",\"-u\",\"t.py\"],"
                "\"working_dir\":\"/w\",\"env\":{\"A\":\"1\"},\"config\":{\"x\":[1,2]},"
                "\"checkpoint_dir\":null,\"workers\":[{\"rank\":0,\"local_rank\":0,\"gpus\":[2]},"
                "{\"rank\":1,\"local_rank\":1,\"gpus\":[3]}]}";

static int parse(const char *text, struct agent_server_msg *m, char *err, size_t errlen)
{
    return agent_server_msg_parse(text, strlen(text), m, err, errlen);
}

/* The launch LAUNCH_HEAD + tail must be refused with a reason containing `field`. */
static void expect_refused(const char *tail, const char *field)
{
    char text[2048], err[256] = "";
    snprintf(text, sizeof(text), "%s%s", LAUNCH_HEAD, tail);
    struct agent_server_msg m;
    if (parse(text, &m, err, sizeof(err)) == 0) {
        agent_server_msg_free(&m);
        fail_msg("accepted: %s", text);
    }
    if (!strstr(err, field))
        fail_msg("reason '%s' does not name '%s'", err, field);
}

static void agent_proto_parses_a_launch(void **state)
{
    (void)state;
    struct agent_server_msg m;
    char err[256] = "";
    assert_int_equal(parse(valid_launch, &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, AGENT_MSG_LAUNCH);
    const struct agent_launch *l = &m.launch;
    assert_string_equal(l->job_id, "j-1");
    assert_int_equal(l->attempt, 0);
    assert_string_equal(l->backend, "torch");
    assert_string_equal(l->argv[0], "python3");
    assert_string_equal(l->argv[2], "t.py");
    assert_null(l->argv[3]);
    assert_string_equal(l->working_dir, "/w");
    assert_string_equal(l->config_json, "{\"x\":[1,2]}");
    assert_null(l->checkpoint_dir);
    assert_int_equal(l->n_workers, 2);
    assert_int_equal(l->workers[1].rank, 1);
    assert_int_equal(l->workers[1].n_gpus, 1);
    assert_int_equal(l->workers[1].gpus[0], 3);
    agent_server_msg_free(&m);
}

static void agent_proto_string_entrypoint_runs_under_sh(void **state)
{
    (void)state;
    const char *text = LAUNCH_HEAD ",\"entrypoint\":\"echo hi && exit 3\","
                                   "\"workers\":[{\"rank\":0,\"local_rank\":0}]}";
    struct agent_server_msg m;
    char err[256] = "";
    assert_int_equal(parse(text, &m, err, sizeof(err)), 0);
    assert_string_equal(m.launch.argv[0], "/bin/sh");
    assert_string_equal(m.launch.argv[1], "-c");
    assert_string_equal(m.launch.argv[2], "echo hi && exit 3");
    assert_null(m.launch.argv[3]);
    assert_string_equal(m.launch.backend, "torch");
    assert_int_equal(m.launch.workers[0].n_gpus, 0);
    agent_server_msg_free(&m);
}

static void agent_proto_refuses_malformed_launches_naming_the_field(void **state)
{
    (void)state;
    const char *w = ",\"workers\":[{\"rank\":0,\"local_rank\":0}]";
    char tail[512];
    snprintf(tail, sizeof(tail), "%s}", w);
    expect_refused(tail, "entrypoint");
    snprintf(tail, sizeof(tail), ",\"entrypoint\":[]%s}", w);
    expect_refused(tail, "entrypoint");
    snprintf(tail, sizeof(tail), ",\"entrypoint\":[\"a\",3]%s}", w);
    expect_refused(tail, "entrypoint[1]");
    snprintf(tail, sizeof(tail), ",\"entrypoint\":\"x\",\"backend\":\"jax\"%s}", w);
    expect_refused(tail, "backend");
    snprintf(tail, sizeof(tail), ",\"entrypoint\":\"x\",\"env\":{\"A\":1}%s}", w);
    expect_refused(tail, "env.A");
    snprintf(tail, sizeof(tail), ",\"entrypoint\":\"x\",\"working_dir\":7%s}", w);
    expect_refused(tail, "working_dir");
    expect_refused(",\"entrypoint\":\"x\"}", "workers");
    expect_refused(",\"entrypoint\":\"x\",\"workers\":[]}", "workers");
    expect_refused(",\"entrypoint\":\"x\",\"workers\":[{\"rank\":2,\"local_rank\":0}]}", "rank");
    expect_refused(",\"entrypoint\":\"x\",\"workers\":[{\"rank\":0,\"local_rank\":0},"
                   "{\"rank\":0,\"local_rank\":1}]}",
                   "twice");
    expect_refused(",\"entrypoint\":\"x\",\"workers\":[{\"rank\":0,\"local_rank\":0,"
                   "\"gpus\":[-1]}]}",
                   "gpus[0]");
}

static void agent_proto_refuses_bad_scalars(void **state)
{
    (void)state;
    char err[256];
    struct agent_server_msg m;
    const char *cases[][2] = {
        {"{\"type\":\"launch\",\"job_id\":\"../etc\",\"attempt\":0}", "job_id"},
        {"{\"type\":\"launch\",\"job_id\":\"j\",\"attempt\":-1}", "attempt"},
        {"{\"type\":\"launch\",\"job_id\":\"j\"}", "attempt"},
        {"{\"type\":\"launch\",\"job_id\":\"j\",\"attempt\":0,\"entrypoint\":\"x\","
         "\"world_size\":1,\"num_nodes\":1,\"node_rank\":0,\"local_world_size\":1,"
         "\"master_addr\":\"h\",\"master_port\":70000,\"workers\":[{\"rank\":0,"
         "\"local_rank\":0}]}",
         "master_port"},
        {"{\"type\":\"launch\",\"job_id\":\"j\",\"attempt\":0,\"entrypoint\":\"x\","
         "\"world_size\":1,\"num_nodes\":1,\"node_rank\":0,\"local_world_size\":1,"
         "\"master_port\":1,\"workers\":[{\"rank\":0,\"local_rank\":0}]}",
         "master_addr"},
        {"{\"type\":\"launch\",\"job_id\":\"j\",\"attempt\":0,\"entrypoint\":\"x\","
         "\"world_size\":1,\"num_nodes\":1,\"node_rank\":1,\"local_world_size\":1,"
         "\"master_addr\":\"h\",\"master_port\":1,\"workers\":[{\"rank\":0,\"local_rank\":0}]}",
         "node_rank"},
        {"{\"type\":\"ack\"}", "seq"},
        {"{\"type\":\"ack\",\"seq\":\"3\"}", "seq"},
        {"{\"type\":\"stop\",\"attempt\":0}", "job_id"},
        {"{\"seq\":1}", "type"},
        {"[1,2]", "object"},
        {"{\"type\":", "JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err[0] = '\0';
        if (parse(cases[i][0], &m, err, sizeof(err)) == 0) {
            agent_server_msg_free(&m);
            fail_msg("accepted: %s", cases[i][0]);
        }
        if (!strstr(err, cases[i][1]))
            fail_msg("%s: reason '%s' does not name '%s'", cases[i][0], err, cases[i][1]);
    }
}

static void agent_proto_parses_control_messages(void **state)
{
    (void)state;
    struct agent_server_msg m;
    char err[256];
    assert_int_equal(parse("{\"type\":\"registered\",\"node_id\":\"n-1\","
                           "\"heartbeat_interval_s\":3,\"extra\":true}",
                           &m, err, sizeof(err)),
                     0);
    assert_int_equal(m.type, AGENT_MSG_REGISTERED);
    assert_string_equal(m.node_id, "n-1");
    assert_int_equal(m.heartbeat_interval_s, 3);
    agent_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"ack\",\"seq\":42}", &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, AGENT_MSG_ACK);
    assert_int_equal(m.seq, 42);
    agent_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"stop\",\"job_id\":\"j\",\"attempt\":1,\"grace_s\":5}", &m,
                           err, sizeof(err)),
                     0);
    assert_int_equal(m.type, AGENT_MSG_STOP);
    assert_string_equal(m.job_id, "j");
    assert_int_equal(m.attempt, 1);
    assert_int_equal(m.grace_s, 5);
    agent_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"stop\",\"job_id\":\"j\"}", &m, err, sizeof(err)), 0);
    assert_int_equal(m.attempt, -1);
    assert_int_equal(m.grace_s, -1);
    agent_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"error\",\"message\":\"bad token\"}", &m, err, sizeof(err)),
                     0);
    assert_int_equal(m.type, AGENT_MSG_ERROR);
    assert_string_equal(m.message, "bad token");
    agent_server_msg_free(&m);
}

static void agent_proto_unknown_type_is_ignored_not_refused(void **state)
{
    (void)state;
    struct agent_server_msg m;
    char err[256];
    assert_int_equal(parse("{\"type\":\"upload_checkpoint\",\"x\":1}", &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, AGENT_MSG_UNKNOWN);
    assert_string_equal(m.type_name, "upload_checkpoint");
    agent_server_msg_free(&m);
}

static json_t *load(const char *s)
{
    assert_non_null(s);
    json_t *v = json_loads(s, 0, NULL);
    assert_non_null(v);
    return v;
}

static void agent_proto_register_carries_node_and_workers(void **state)
{
    (void)state;
    int gpus[] = {0, 1};
    json_t *custom = load("{\"tpu\":4}");
    json_t *labels = load("{\"zone\":\"a\"}");
    struct agent_node_info n = {.id = "n-1",
                                .hostname = "h",
                                .address = "10.0.0.2",
                                .gpu_type = "H100",
                                .version = "0.1.0",
                                .cpus = 8,
                                .memory_mb = 1024,
                                .gpus = gpus,
                                .n_gpus = 2,
                                .custom = custom,
                                .labels = labels,
                                .port_lo = 29500,
                                .port_hi = 29999};
    json_t *workers = load("[{\"job_id\":\"j\",\"attempt\":0,\"rank\":0,\"pid\":5,"
                           "\"status\":\"RUNNING\",\"exit_code\":null,\"signal\":null}]");
    char *s = agent_msg_register(&n, "tok", workers);
    json_t *got = load(s);
    json_t *want = load(
        "{\"type\":\"register\",\"token\":\"tok\",\"node\":{\"id\":\"n-1\",\"hostname\":\"h\","
        "\"address\":\"10.0.0.2\",\"resources\":{\"CPU\":8,\"memory_mb\":1024,\"GPU\":[0,1],"
        "\"tpu\":4},\"gpu_type\":\"H100\",\"labels\":{\"zone\":\"a\"},\"version\":\"0.1.0\","
        "\"port_range\":[29500,29999]},\"workers\":[{\"job_id\":\"j\",\"attempt\":0,\"rank\":0,"
        "\"pid\":5,\"status\":\"RUNNING\",\"exit_code\":null,\"signal\":null}]}");
    if (!json_equal(got, want))
        fail_msg("register: %s", s);
    free(s);
    json_decref(got);
    json_decref(want);

    n.gpu_type = NULL;
    n.n_gpus = 0;
    n.custom = NULL;
    n.labels = NULL;
    s = agent_msg_register(&n, NULL, NULL);
    got = load(s);
    assert_true(json_is_null(json_object_get(got, "token")));
    json_t *node = json_object_get(got, "node");
    assert_true(json_is_null(json_object_get(node, "gpu_type")));
    assert_int_equal(json_array_size(json_object_get(json_object_get(node, "resources"), "GPU")),
                     0);
    assert_int_equal(json_array_size(json_object_get(got, "workers")), 0);
    free(s);
    json_decref(got);
    json_decref(custom);
    json_decref(labels);
    json_decref(workers);
}

static void agent_proto_worker_events(void **state)
{
    (void)state;
    char *s = agent_msg_worker_started(7, "j", 1, 2, 4242);
    assert_string_equal(s, "{\"type\":\"worker_started\",\"seq\":7,\"job_id\":\"j\",\"attempt\":1,"
                           "\"rank\":2,\"pid\":4242}");
    free(s);
    s = agent_msg_worker_exited(8, "j", 1, 2, 3, -1, NULL);
    assert_string_equal(s, "{\"type\":\"worker_exited\",\"seq\":8,\"job_id\":\"j\",\"attempt\":1,"
                           "\"rank\":2,\"exit_code\":3,\"signal\":null,\"error\":null}");
    free(s);
    s = agent_msg_worker_exited(9, "j", 1, 2, -1, 9, NULL);
    assert_non_null(strstr(s, "\"exit_code\":null,\"signal\":9"));
    free(s);
    s = agent_msg_worker_exited(10, "j", 1, 2, 127, -1, "cannot execute x: No such file");
    assert_non_null(strstr(s, "\"exit_code\":127,\"signal\":null,\"error\":\"cannot execute x"));
    free(s);
}

static void agent_proto_report_adds_type_and_seq(void **state)
{
    (void)state;
    json_t *metrics = load("{\"loss\":0.25}");
    json_t *body = agent_report_body("j", 0, 1, 3, metrics, 10, "2024-01-02T03:04:05.006Z", NULL);
    assert_non_null(body);
    char *s = agent_msg_report(12, body);
    json_t *got = load(s);
    json_t *want = load("{\"type\":\"report\",\"seq\":12,\"job_id\":\"j\",\"attempt\":0,"
                        "\"rank\":1,\"report_seq\":3,\"metrics\":{\"loss\":0.25},\"step\":10,"
                        "\"time\":\"2024-01-02T03:04:05.006Z\",\"checkpoint_dir\":null}");
    if (!json_equal(got, want))
        fail_msg("report: %s", s);
    /* The spooled body is not modified. */
    assert_null(json_object_get(body, "seq"));
    free(s);
    json_decref(got);
    json_decref(want);
    json_decref(body);
    body = agent_report_body("j", 0, 1, 4, metrics, -1, "t", "/ck/4");
    assert_true(json_is_null(json_object_get(body, "step")));
    assert_string_equal(json_string_value(json_object_get(body, "checkpoint_dir")), "/ck/4");
    json_decref(body);
    json_decref(metrics);
}

static void agent_proto_time_is_rfc3339_utc_with_millis(void **state)
{
    (void)state;
    char buf[40];
    agent_format_time(INT64_C(1704164645006), buf, sizeof(buf));
    assert_string_equal(buf, "2024-01-02T03:04:05.006Z");
    agent_format_time(0, buf, sizeof(buf));
    assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
}

static void agent_proto_job_id_must_be_a_safe_path_component(void **state)
{
    (void)state;
    assert_int_equal(agent_job_id_valid("j-17"), 0);
    assert_int_equal(agent_job_id_valid("abc_DEF.9"), 0);
    assert_int_equal(agent_job_id_valid(""), -1);
    assert_int_equal(agent_job_id_valid(".."), -1);
    assert_int_equal(agent_job_id_valid("a/b"), -1);
    assert_int_equal(agent_job_id_valid("a b"), -1);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(agent_proto_parses_a_launch),
    cmocka_unit_test(agent_proto_string_entrypoint_runs_under_sh),
    cmocka_unit_test(agent_proto_refuses_malformed_launches_naming_the_field),
    cmocka_unit_test(agent_proto_refuses_bad_scalars),
    cmocka_unit_test(agent_proto_parses_control_messages),
    cmocka_unit_test(agent_proto_unknown_type_is_ignored_not_refused),
    cmocka_unit_test(agent_proto_register_carries_node_and_workers),
    cmocka_unit_test(agent_proto_worker_events),
    cmocka_unit_test(agent_proto_report_adds_type_and_seq),
    cmocka_unit_test(agent_proto_time_is_rfc3339_utc_with_millis),
    cmocka_unit_test(agent_proto_job_id_must_be_a_safe_path_component),
};
TY_TEST_MAIN(tests)
