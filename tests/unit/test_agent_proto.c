/* Unit tests for common/agent_proto.c, the agent protocol shared by agent and server
 * (docs/agent-protocol.md): every message built then parsed gives back what was built, and every
 * malformed message is refused with a reason naming the field. */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"

#define LAUNCH_HEAD                                                                                \
    "{\"type\":\"launch\",\"job_id\":\"j-1\",\"attempt\":0,\"world_size\":2,\"num_nodes\":1,"      \
    "\"node_rank\":0,\"local_world_size\":2,\"master_addr\":\"127.0.0.1\",\"master_port\":29500"

static const char *valid_launch =
    LAUNCH_HEAD ",\"backend\":\"torch\",\"entrypoint\":[\"python3\",\"-u\",\"t.py\"],"
                "\"working_dir\":\"/w\",\"env\":{\"A\":\"1\"},\"config\":{\"x\":[1,2]},"
                "\"checkpoint_dir\":null,\"workers\":[{\"rank\":0,\"local_rank\":0,\"gpus\":[2]},"
                "{\"rank\":1,\"local_rank\":1,\"gpus\":[3]}]}";

static int parse(const char *text, struct aproto_server_msg *m, char *err, size_t errlen)
{
    return aproto_server_msg_parse(text, strlen(text), m, err, errlen);
}

/* The launch LAUNCH_HEAD + tail must be refused with a reason containing `field`. */
static void expect_refused(const char *tail, const char *field)
{
    char text[2048], err[256] = "";
    snprintf(text, sizeof(text), "%s%s", LAUNCH_HEAD, tail);
    struct aproto_server_msg m;
    if (parse(text, &m, err, sizeof(err)) == 0) {
        aproto_server_msg_free(&m);
        fail_msg("accepted: %s", text);
    }
    if (!strstr(err, field))
        fail_msg("reason '%s' does not name '%s'", err, field);
}

static void agent_proto_parses_a_launch(void **state)
{
    (void)state;
    struct aproto_server_msg m;
    char err[256] = "";
    assert_int_equal(parse(valid_launch, &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_LAUNCH);
    const struct aproto_launch *l = &m.launch;
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
    aproto_server_msg_free(&m);
}

static void agent_proto_string_entrypoint_runs_under_sh(void **state)
{
    (void)state;
    const char *text = LAUNCH_HEAD ",\"entrypoint\":\"echo hi && exit 3\","
                                   "\"workers\":[{\"rank\":0,\"local_rank\":0}]}";
    struct aproto_server_msg m;
    char err[256] = "";
    assert_int_equal(parse(text, &m, err, sizeof(err)), 0);
    assert_string_equal(m.launch.argv[0], "/bin/sh");
    assert_string_equal(m.launch.argv[1], "-c");
    assert_string_equal(m.launch.argv[2], "echo hi && exit 3");
    assert_null(m.launch.argv[3]);
    assert_string_equal(m.launch.backend, "torch");
    assert_int_equal(m.launch.workers[0].n_gpus, 0);
    aproto_server_msg_free(&m);
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
    struct aproto_server_msg m;
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
            aproto_server_msg_free(&m);
            fail_msg("accepted: %s", cases[i][0]);
        }
        if (!strstr(err, cases[i][1]))
            fail_msg("%s: reason '%s' does not name '%s'", cases[i][0], err, cases[i][1]);
    }
}

static void agent_proto_parses_control_messages(void **state)
{
    (void)state;
    struct aproto_server_msg m;
    char err[256];
    assert_int_equal(parse("{\"type\":\"registered\",\"node_id\":\"n-1\","
                           "\"heartbeat_interval_s\":3,\"extra\":true}",
                           &m, err, sizeof(err)),
                     0);
    assert_int_equal(m.type, APROTO_MSG_REGISTERED);
    assert_string_equal(m.node_id, "n-1");
    assert_int_equal(m.heartbeat_interval_s, 3);
    aproto_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"ack\",\"seq\":42}", &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_ACK);
    assert_int_equal(m.seq, 42);
    aproto_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"stop\",\"job_id\":\"j\",\"attempt\":1,\"grace_s\":5}", &m,
                           err, sizeof(err)),
                     0);
    assert_int_equal(m.type, APROTO_MSG_STOP);
    assert_string_equal(m.job_id, "j");
    assert_int_equal(m.attempt, 1);
    assert_int_equal(m.grace_s, 5);
    aproto_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"stop\",\"job_id\":\"j\"}", &m, err, sizeof(err)), 0);
    assert_int_equal(m.attempt, -1);
    assert_int_equal(m.grace_s, -1);
    aproto_server_msg_free(&m);

    assert_int_equal(parse("{\"type\":\"error\",\"message\":\"bad token\"}", &m, err, sizeof(err)),
                     0);
    assert_int_equal(m.type, APROTO_MSG_ERROR);
    assert_string_equal(m.message, "bad token");
    aproto_server_msg_free(&m);
}

static void agent_proto_unknown_type_is_ignored_not_refused(void **state)
{
    (void)state;
    struct aproto_server_msg m;
    char err[256];
    assert_int_equal(parse("{\"type\":\"upload_checkpoint\",\"x\":1}", &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_UNKNOWN);
    assert_string_equal(m.type_name, "upload_checkpoint");
    aproto_server_msg_free(&m);
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
    struct aproto_node_info n = {.id = "n-1",
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
    struct aproto_worker_event workers[] = {
        {.seq = -1,
         .job_id = "j",
         .attempt = 0,
         .rank = 0,
         .pid = 5,
         .exit_code = -1,
         .signal = -1},
    };
    char *s = aproto_msg_register(&n, "tok", workers, 1);
    json_t *got = load(s);
    json_t *want = load(
        "{\"type\":\"register\",\"token\":\"tok\",\"node\":{\"id\":\"n-1\",\"hostname\":\"h\","
        "\"address\":\"10.0.0.2\",\"resources\":{\"CPU\":8,\"memory_mb\":1024,\"GPU\":[0,1],"
        "\"tpu\":4},\"gpu_type\":\"H100\",\"labels\":{\"zone\":\"a\"},\"version\":\"0.1.0\","
        "\"port_range\":[29500,29999]},\"workers\":[{\"job_id\":\"j\",\"attempt\":0,\"rank\":0,"
        "\"pid\":5,\"status\":\"RUNNING\",\"exit_code\":null,\"signal\":null,\"error\":null}]}");
    if (!json_equal(got, want))
        fail_msg("register: %s", s);
    free(s);
    json_decref(got);
    json_decref(want);

    n.gpu_type = NULL;
    n.n_gpus = 0;
    n.custom = NULL;
    n.labels = NULL;
    s = aproto_msg_register(&n, NULL, NULL, 0);
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
}

static void agent_proto_worker_events(void **state)
{
    (void)state;
    char *s = aproto_msg_worker_started(7, "j", 1, 2, 4242, NULL);
    assert_string_equal(s, "{\"type\":\"worker_started\",\"seq\":7,\"job_id\":\"j\",\"attempt\":1,"
                           "\"rank\":2,\"pid\":4242}");
    free(s);
    s = aproto_msg_worker_exited(8, "j", 1, 2, 3, -1, NULL, NULL);
    assert_string_equal(s, "{\"type\":\"worker_exited\",\"seq\":8,\"job_id\":\"j\",\"attempt\":1,"
                           "\"rank\":2,\"exit_code\":3,\"signal\":null,\"error\":null}");
    free(s);
    s = aproto_msg_worker_exited(9, "j", 1, 2, -1, 9, NULL, NULL);
    assert_non_null(strstr(s, "\"exit_code\":null,\"signal\":9"));
    free(s);
    s = aproto_msg_worker_exited(10, "j", 1, 2, 127, -1, "cannot execute x: No such file", NULL);
    assert_non_null(strstr(s, "\"exit_code\":127,\"signal\":null,\"error\":\"cannot execute x"));
    free(s);
    s = aproto_msg_worker_exited(11, "j", 1, 2, 1, -1, NULL, "ValueError: bad lr 3.0");
    assert_non_null(strstr(s, "\"error\":null,\"reason\":\"ValueError: bad lr 3.0\"}"));
    free(s);
}

/* The exit in words: the agent's error, else the signal's name or the code; then the reason. */
static void agent_proto_exit_words(void **state)
{
    (void)state;
    static const struct {
        int code, sig;
        const char *error, *reason, *want;
    } cases[] = {
        {1, -1, NULL, "ValueError: bad lr 3.0", "exited with code 1: ValueError: bad lr 3.0"},
        {3, -1, NULL, NULL, "exited with code 3"},
        {-1, 11, NULL, NULL, "was killed by SIGSEGV"},
        {-1, 6, NULL, "a.c:3: main: Assertion `x' failed.",
         "was killed by SIGABRT: a.c:3: main: Assertion `x' failed."},
        {-1, 9, "was killed by the out-of-memory killer (memory limit 96 MiB)", "MemoryError",
         "was killed by the out-of-memory killer (memory limit 96 MiB): MemoryError"},
        {127, -1, "cannot execute x: No such file", NULL, "cannot execute x: No such file"},
        {-1, 200, NULL, NULL, "was killed by signal 200"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = aproto_exit_words(cases[i].code, cases[i].sig, cases[i].error, cases[i].reason);
        assert_non_null(got);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
    assert_null(aproto_exit_words(0, -1, NULL, "ValueError: ignored on success"));
    assert_null(aproto_exit_words(-1, -1, NULL, NULL));
}

static void agent_proto_report_adds_type_and_seq(void **state)
{
    (void)state;
    json_t *metrics = load("{\"loss\":0.25}");
    json_t *body = aproto_report_body("j", 0, 1, 3, metrics, 10, "2024-01-02T03:04:05.006Z", NULL);
    assert_non_null(body);
    char *s = aproto_msg_report(12, body);
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
    body = aproto_report_body("j", 0, 1, 4, metrics, -1, "t", "/ck/4");
    assert_true(json_is_null(json_object_get(body, "step")));
    assert_string_equal(json_string_value(json_object_get(body, "checkpoint_dir")), "/ck/4");
    json_decref(body);
    json_decref(metrics);
}

static void agent_proto_time_is_rfc3339_utc_with_millis(void **state)
{
    (void)state;
    char buf[40];
    aproto_format_time(INT64_C(1704164645006), buf, sizeof(buf));
    assert_string_equal(buf, "2024-01-02T03:04:05.006Z");
    aproto_format_time(0, buf, sizeof(buf));
    assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
}

static void agent_proto_job_id_must_be_a_safe_path_component(void **state)
{
    (void)state;
    assert_int_equal(aproto_job_id_valid("j-17"), 0);
    assert_int_equal(aproto_job_id_valid("abc_DEF.9"), 0);
    assert_int_equal(aproto_job_id_valid(""), -1);
    assert_int_equal(aproto_job_id_valid(".."), -1);
    assert_int_equal(aproto_job_id_valid("a/b"), -1);
    assert_int_equal(aproto_job_id_valid("a b"), -1);
}

/* ---- build then parse: server -> agent ---------------------------------------------------- */

static struct aproto_server_msg server_parse_ok(char *text)
{
    assert_non_null(text);
    struct aproto_server_msg m;
    char err[256] = "";
    if (aproto_server_msg_parse(text, strlen(text), &m, err, sizeof(err)) != 0)
        fail_msg("refused (%s): %s", err, text);
    free(text);
    return m;
}

static void agent_proto_server_control_messages_round_trip(void **state)
{
    (void)state;
    struct aproto_server_msg m = server_parse_ok(aproto_msg_registered("n-1", 7, NULL, NULL, 0));
    assert_int_equal(m.type, APROTO_MSG_REGISTERED);
    assert_string_equal(m.node_id, "n-1");
    assert_int_equal(m.heartbeat_interval_s, 7);
    assert_null(m.credential);
    aproto_server_msg_free(&m);

    assert_null(m.api_urls);
    assert_int_equal(m.n_api_urls, 0);
    m = server_parse_ok(aproto_msg_registered("n-1", 7, "tyn_abc", NULL, 0));
    assert_string_equal(m.credential, "tyn_abc");
    aproto_server_msg_free(&m);

    const char *urls[] = {"http://10.0.0.1:18080", "https://[::1]:8443"};
    m = server_parse_ok(aproto_msg_registered("n-1", 7, NULL, urls, 2));
    assert_int_equal(m.n_api_urls, 2);
    assert_string_equal(m.api_urls[0], "http://10.0.0.1:18080");
    assert_string_equal(m.api_urls[1], "https://[::1]:8443");
    aproto_server_msg_free(&m);

    m = server_parse_ok(aproto_msg_error("unknown cluster join token"));
    assert_int_equal(m.type, APROTO_MSG_ERROR);
    assert_string_equal(m.message, "unknown cluster join token");
    aproto_server_msg_free(&m);

    m = server_parse_ok(aproto_msg_ack(INT64_C(1) << 40));
    assert_int_equal(m.type, APROTO_MSG_ACK);
    assert_true(m.seq == INT64_C(1) << 40);
    aproto_server_msg_free(&m);

    m = server_parse_ok(aproto_msg_stop("42", 3, 10, 7));
    assert_int_equal(m.type, APROTO_MSG_STOP);
    assert_string_equal(m.job_id, "42");
    assert_int_equal(m.attempt, 3);
    assert_int_equal(m.grace_s, 10);
    assert_int_equal(m.notice_s, 7);
    aproto_server_msg_free(&m);

    m = server_parse_ok(aproto_msg_stop("42", -1, -1, 0));
    assert_int_equal(m.attempt, -1);
    assert_int_equal(m.grace_s, -1);
    assert_int_equal(m.notice_s, 0);
    aproto_server_msg_free(&m);
}

static void agent_proto_forget_round_trips_and_refuses_bad_job_ids(void **state)
{
    (void)state;
    struct aproto_server_msg m = server_parse_ok(aproto_msg_forget("42"));
    assert_int_equal(m.type, APROTO_MSG_FORGET);
    assert_string_equal(m.job_id, "42");
    aproto_server_msg_free(&m);
    char err[256];
    const char *bad[] = {"{\"type\":\"forget\"}", "{\"type\":\"forget\",\"job_id\":\"../x\"}",
                         "{\"type\":\"forget\",\"job_id\":7}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(aproto_server_msg_parse(bad[i], strlen(bad[i]), &m, err, sizeof(err)), -1);
}

static void agent_proto_checkpoint_delete_round_trips_and_refuses_bad_fields(void **state)
{
    (void)state;
    struct aproto_server_msg m = server_parse_ok(aproto_msg_checkpoint_delete("42", 1, 7));
    assert_int_equal(m.type, APROTO_MSG_CHECKPOINT_DELETE);
    assert_string_equal(m.job_id, "42");
    assert_int_equal(m.attempt, 1);
    assert_int_equal(m.index, 7);
    aproto_server_msg_free(&m);
    char err[256];
    const char *bad[] = {
        "{\"type\":\"checkpoint_delete\",\"attempt\":0,\"index\":1}",
        "{\"type\":\"checkpoint_delete\",\"job_id\":\"../x\",\"attempt\":0,\"index\":1}",
        "{\"type\":\"checkpoint_delete\",\"job_id\":\"4\",\"index\":1}",
        "{\"type\":\"checkpoint_delete\",\"job_id\":\"4\",\"attempt\":0}",
        "{\"type\":\"checkpoint_delete\",\"job_id\":\"4\",\"attempt\":-1,\"index\":1}",
        "{\"type\":\"checkpoint_delete\",\"job_id\":\"4\",\"attempt\":0,\"index\":\"1\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(aproto_server_msg_parse(bad[i], strlen(bad[i]), &m, err, sizeof(err)), -1);
        assert_true(err[0] != '\0');
    }
}

static void agent_proto_launch_round_trips(void **state)
{
    (void)state;
    json_t *ep = load("[\"python3\",\"-u\",\"train.py\"]");
    json_t *env = load("{\"A\":\"1\",\"B\":\"two\"}");
    json_t *config = load("{\"lr\":0.25,\"layers\":[1,2]}");
    int g0[] = {1, 3};
    struct aproto_launch_worker ws[] = {{.rank = 2, .local_rank = 0, .gpus = g0, .n_gpus = 2},
                                        {.rank = 3, .local_rank = 1}};
    const char *addrs[] = {"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"};
    struct aproto_launch in = {
        .job_id = "17",
        .attempt = 2,
        .backend = "tensorflow",
        .entrypoint = ep,
        .working_dir = "/w",
        .env = env,
        .config = config,
        .world_size = 4,
        .num_nodes = 2,
        .node_rank = 1,
        .local_world_size = 2,
        .master_addr = "10.0.0.1",
        .master_port = 29510,
        .checkpoint_dir = "/ck/3",
        .rank_addresses = addrs,
        .rendezvous_secret = "rv-secret",
        .workers = ws,
        .n_workers = 2,
    };
    struct aproto_server_msg m = server_parse_ok(aproto_msg_launch(&in));
    assert_int_equal(m.type, APROTO_MSG_LAUNCH);
    const struct aproto_launch *l = &m.launch;
    assert_string_equal(l->job_id, "17");
    assert_int_equal(l->attempt, 2);
    assert_string_equal(l->backend, "tensorflow");
    assert_true(json_equal((json_t *)l->entrypoint, ep));
    assert_string_equal(l->argv[0], "python3");
    assert_string_equal(l->argv[2], "train.py");
    assert_null(l->argv[3]);
    assert_string_equal(l->working_dir, "/w");
    assert_true(json_equal((json_t *)l->env, env));
    assert_true(json_equal((json_t *)l->config, config));
    json_t *cfg = load(l->config_json);
    assert_true(json_equal(cfg, config));
    json_decref(cfg);
    assert_int_equal(l->world_size, 4);
    assert_int_equal(l->num_nodes, 2);
    assert_int_equal(l->node_rank, 1);
    assert_int_equal(l->local_world_size, 2);
    assert_string_equal(l->master_addr, "10.0.0.1");
    assert_int_equal(l->master_port, 29510);
    assert_string_equal(l->checkpoint_dir, "/ck/3");
    assert_string_equal(l->rendezvous_secret, "rv-secret");
    assert_non_null(l->rank_addresses);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(l->rank_addresses[i], addrs[i]);
    assert_int_equal(l->n_workers, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(l->workers[i].rank, ws[i].rank);
        assert_int_equal(l->workers[i].local_rank, ws[i].local_rank);
        assert_int_equal(l->workers[i].n_gpus, ws[i].n_gpus);
        for (size_t g = 0; g < ws[i].n_gpus; g++)
            assert_int_equal(l->workers[i].gpus[g], ws[i].gpus[g]);
    }
    aproto_server_msg_free(&m);

    /* Optional fields left out come back as the agent's defaults. */
    json_t *sh = json_string("echo hi");
    struct aproto_launch bare = {.job_id = "5",
                                 .entrypoint = sh,
                                 .env = env,
                                 .world_size = 1,
                                 .num_nodes = 1,
                                 .local_world_size = 1,
                                 .master_addr = "h",
                                 .master_port = 1,
                                 .workers = ws + 1,
                                 .n_workers = 1};
    ws[1].rank = 0;
    ws[1].local_rank = 0;
    m = server_parse_ok(aproto_msg_launch(&bare));
    assert_string_equal(m.launch.backend, "torch");
    assert_string_equal(m.launch.argv[0], "/bin/sh");
    assert_string_equal(m.launch.argv[2], "echo hi");
    assert_null(m.launch.working_dir);
    assert_null(m.launch.checkpoint_dir);
    assert_null(m.launch.rank_addresses);
    assert_null(m.launch.rendezvous_secret);
    assert_string_equal(m.launch.config_json, "null");
    aproto_server_msg_free(&m);
    json_decref(sh);
    json_decref(ep);
    json_decref(env);
    json_decref(config);
}

static void agent_proto_launch_refuses_bad_rank_addresses(void **state)
{
    (void)state;
    const char *w = ",\"entrypoint\":\"x\",\"workers\":[{\"rank\":0,\"local_rank\":0}]";
    char tail[512];
    snprintf(tail, sizeof(tail), "%s,\"rank_addresses\":[\"a\"]}", w);
    expect_refused(tail, "rank_addresses");
    snprintf(tail, sizeof(tail), "%s,\"rank_addresses\":[\"a\",\"\"]}", w);
    expect_refused(tail, "rank_addresses[1]");
    snprintf(tail, sizeof(tail), "%s,\"rank_addresses\":\"a\"}", w);
    expect_refused(tail, "rank_addresses");
}

/* ---- build then parse: agent -> server ---------------------------------------------------- */

static struct aproto_node_msg node_parse_ok(char *text)
{
    assert_non_null(text);
    struct aproto_node_msg m;
    char err[256] = "";
    if (aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)) != 0)
        fail_msg("refused (%s): %s", err, text);
    free(text);
    return m;
}

/* Issue 23: registered.api_urls and the artifact_store message. */
static void agent_proto_api_urls_and_artifact_store(void **state)
{
    (void)state;
    static const char *const bad_registered[] = {
        "{\"type\":\"registered\",\"node_id\":\"n\",\"api_urls\":\"http://a:1\"}",
        "{\"type\":\"registered\",\"node_id\":\"n\",\"api_urls\":[\"ftp://a:1\"]}",
        "{\"type\":\"registered\",\"node_id\":\"n\",\"api_urls\":[\"http://\"]}",
        "{\"type\":\"registered\",\"node_id\":\"n\",\"api_urls\":[\"http://a b\"]}",
        "{\"type\":\"registered\",\"node_id\":\"n\",\"api_urls\":[3]}",
    };
    for (size_t i = 0; i < sizeof(bad_registered) / sizeof(bad_registered[0]); i++) {
        struct aproto_server_msg m;
        char err[256] = "";
        assert_int_equal(aproto_server_msg_parse(bad_registered[i], strlen(bad_registered[i]), &m,
                                                 err, sizeof(err)),
                         -1);
        assert_non_null(strstr(err, "api_urls"));
        aproto_server_msg_free(&m);
    }
    assert_true(aproto_api_url_valid("http://h:8080"));
    assert_false(aproto_api_url_valid("h:8080"));
    assert_false(aproto_api_url_valid(NULL));

    struct aproto_store_status st = {.ok = false,
                                     .url = "http://127.0.0.1:9",
                                     .message = "checkpoint 1 upload to http://127.0.0.1:9/x "
                                                "failed: Couldn't connect to server (retrying)",
                                     .job_id = "12",
                                     .attempt = 2};
    struct aproto_node_msg m = node_parse_ok(aproto_msg_artifact_store(&st));
    assert_int_equal(m.type, APROTO_MSG_ARTIFACT_STORE);
    assert_false(m.store.ok);
    assert_string_equal(m.store.url, "http://127.0.0.1:9");
    assert_string_equal(m.store.message, st.message);
    assert_string_equal(m.store.job_id, "12");
    assert_int_equal(m.store.attempt, 2);
    aproto_node_msg_free(&m);

    struct aproto_store_status ok = {.ok = true, .url = "https://a:1", .attempt = -1};
    m = node_parse_ok(aproto_msg_artifact_store(&ok));
    assert_true(m.store.ok);
    assert_null(m.store.message);
    assert_null(m.store.job_id);
    aproto_node_msg_free(&m);

    static const char *const bad[][2] = {
        {"{\"type\":\"artifact_store\",\"url\":\"http://a:1\"}", "ok"},
        {"{\"type\":\"artifact_store\",\"ok\":true,\"url\":\"a:1\"}", "url"},
        {"{\"type\":\"artifact_store\",\"ok\":false,\"url\":\"http://a:1\"}", "message"},
        {"{\"type\":\"artifact_store\",\"ok\":false,\"url\":\"http://a:1\",\"message\":\"\"}",
         "message"},
        {"{\"type\":\"artifact_store\",\"ok\":true,\"url\":\"http://a:1\",\"job_id\":\"../x\"}",
         "job_id"},
        {"{\"type\":\"artifact_store\",\"ok\":true,\"url\":\"http://a:1\",\"job_id\":\"1\"}",
         "attempt"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        assert_int_equal(aproto_node_msg_parse(bad[i][0], strlen(bad[i][0]), &m, err, sizeof(err)),
                         -1);
        if (strstr(err, bad[i][1]) == NULL)
            fail_msg("%s: '%s' does not name %s", bad[i][0], err, bad[i][1]);
        aproto_node_msg_free(&m);
    }
}

/* Issue 23: the disk_full message, built and parsed; a bad field is named. */
static void agent_proto_disk_full(void **state)
{
    (void)state;
    struct aproto_disk_full d = {.job_id = "12",
                                 .attempt = 1,
                                 .path = "/data/code/ab.part/package.tar.gz",
                                 .what = "code package fetch"};
    struct aproto_node_msg m = node_parse_ok(aproto_msg_disk_full(&d));
    assert_int_equal(m.type, APROTO_MSG_DISK_FULL);
    assert_string_equal(m.disk_full.job_id, "12");
    assert_int_equal(m.disk_full.attempt, 1);
    assert_string_equal(m.disk_full.path, d.path);
    assert_string_equal(m.disk_full.what, d.what);
    aproto_node_msg_free(&m);
    static const char *const bad[][2] = {
        {"{\"type\":\"disk_full\",\"attempt\":1,\"path\":\"/p\",\"what\":\"w\"}", "job_id"},
        {"{\"type\":\"disk_full\",\"job_id\":\"../x\",\"attempt\":1,\"path\":\"/"
         "p\",\"what\":\"w\"}",
         "job_id"},
        {"{\"type\":\"disk_full\",\"job_id\":\"1\",\"path\":\"/p\",\"what\":\"w\"}", "attempt"},
        {"{\"type\":\"disk_full\",\"job_id\":\"1\",\"attempt\":-1,\"path\":\"/p\",\"what\":\"w\"}",
         "attempt"},
        {"{\"type\":\"disk_full\",\"job_id\":\"1\",\"attempt\":1,\"path\":\"\",\"what\":\"w\"}",
         "path"},
        {"{\"type\":\"disk_full\",\"job_id\":\"1\",\"attempt\":1,\"path\":\"/p\"}", "what"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        assert_int_equal(aproto_node_msg_parse(bad[i][0], strlen(bad[i][0]), &m, err, sizeof(err)),
                         -1);
        if (strstr(err, bad[i][1]) == NULL)
            fail_msg("%s: '%s' does not name %s", bad[i][0], err, bad[i][1]);
        aproto_node_msg_free(&m);
    }
}

/* Issue 28: the preempt_notice message, built and parsed; a missing, empty or too long reason
 * is refused. */
static void agent_proto_preempt_notice(void **state)
{
    (void)state;
    struct aproto_node_msg m = node_parse_ok(aproto_msg_preempt_notice("Slurm signalled"));
    assert_int_equal(m.type, APROTO_MSG_PREEMPT_NOTICE);
    assert_string_equal(m.preempt_reason, "Slurm signalled");
    aproto_node_msg_free(&m);
    char long_reason[APROTO_MAX_PREEMPT_REASON + 64];
    snprintf(long_reason, sizeof(long_reason), "{\"type\":\"preempt_notice\",\"reason\":\"%0*d\"}",
             APROTO_MAX_PREEMPT_REASON + 1, 0);
    const char *const bad[] = {"{\"type\":\"preempt_notice\"}",
                               "{\"type\":\"preempt_notice\",\"reason\":\"\"}",
                               "{\"type\":\"preempt_notice\",\"reason\":7}", long_reason};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        assert_int_equal(aproto_node_msg_parse(bad[i], strlen(bad[i]), &m, err, sizeof(err)), -1);
        if (strstr(err, "reason") == NULL)
            fail_msg("%s: '%s' does not name reason", bad[i], err);
        aproto_node_msg_free(&m);
    }
}

static void expect_same_worker(const struct aproto_worker_event *got,
                               const struct aproto_worker_event *want)
{
    assert_int_equal(got->seq, want->seq);
    assert_string_equal(got->job_id, want->job_id);
    assert_int_equal(got->attempt, want->attempt);
    assert_int_equal(got->rank, want->rank);
    assert_int_equal(got->pid, want->pid);
    assert_int_equal(got->exited, want->exited);
    assert_int_equal(got->exit_code, want->exit_code);
    assert_int_equal(got->signal, want->signal);
    if (want->error)
        assert_string_equal(got->error, want->error);
    else
        assert_null(got->error);
    if (want->reason)
        assert_string_equal(got->reason, want->reason);
    else
        assert_null(got->reason);
}

static void agent_proto_register_round_trips(void **state)
{
    (void)state;
    int gpus[] = {0, 2};
    json_t *custom = load("{\"tpu\":4,\"fpga\":0.5}");
    json_t *labels = load("{\"zone\":\"a\"}");
    struct aproto_node_info n = {.id = "n-1",
                                 .hostname = "host-1",
                                 .address = "10.0.0.2",
                                 .gpu_type = "H100",
                                 .version = "0.1.0",
                                 .cpus = 8,
                                 .memory_mb = 1024,
                                 .gpus = gpus,
                                 .n_gpus = 2,
                                 .custom = custom,
                                 .labels = labels,
                                 .port_lo = 30000,
                                 .port_hi = 30099};
    struct aproto_worker_event ws[] = {
        {.seq = -1,
         .job_id = "7",
         .attempt = 1,
         .rank = 0,
         .pid = 99,
         .exit_code = -1,
         .signal = -1},
        {.seq = -1,
         .job_id = "7",
         .attempt = 1,
         .rank = 1,
         .pid = 100,
         .exited = true,
         .exit_code = -1,
         .signal = 9},
        {.seq = -1,
         .job_id = "8",
         .attempt = 0,
         .rank = 0,
         .pid = -1,
         .exited = true,
         .exit_code = 127,
         .signal = -1,
         .error = "cannot execute x"},
    };
    struct aproto_node_msg m = node_parse_ok(aproto_msg_register(&n, "tok", ws, 3));
    assert_int_equal(m.type, APROTO_MSG_REGISTER);
    assert_string_equal(m.token, "tok");
    const struct aproto_node_info *g = &m.node;
    assert_string_equal(g->id, "n-1");
    assert_string_equal(g->hostname, "host-1");
    assert_string_equal(g->address, "10.0.0.2");
    assert_string_equal(g->gpu_type, "H100");
    assert_string_equal(g->version, "0.1.0");
    assert_int_equal(g->cpus, 8);
    assert_int_equal(g->memory_mb, 1024);
    assert_int_equal(g->n_gpus, 2);
    assert_int_equal(g->gpus[0], 0);
    assert_int_equal(g->gpus[1], 2);
    assert_true(json_equal((json_t *)g->custom, custom));
    assert_true(json_equal((json_t *)g->labels, labels));
    assert_int_equal(g->port_lo, 30000);
    assert_int_equal(g->port_hi, 30099);
    assert_true(json_is_object(m.resources));
    assert_int_equal(m.n_workers, 3);
    for (size_t i = 0; i < 3; i++)
        expect_same_worker(&m.workers[i], &ws[i]);
    aproto_node_msg_free(&m);

    /* Without the optional parts: no token, no GPU type, no workers. */
    n.gpu_type = NULL;
    n.custom = NULL;
    n.labels = NULL;
    m = node_parse_ok(aproto_msg_register(&n, NULL, NULL, 0));
    assert_null(m.token);
    assert_null(m.node.gpu_type);
    assert_null(m.node.credential);
    assert_int_equal(json_object_size(m.node.custom), 0);
    assert_int_equal(m.n_workers, 0);
    aproto_node_msg_free(&m);

    /* The node credential travels; node ids and addresses are bounded. */
    n.credential = "tyn_0123";
    m = node_parse_ok(aproto_msg_register(&n, NULL, NULL, 0));
    assert_string_equal(m.node.credential, "tyn_0123");
    aproto_node_msg_free(&m);
    n.credential = NULL;
    char err[256];
    const char *bad_ids[] = {"has space", "a/b", ".."};
    for (size_t i = 0; i < 3; i++) {
        n.id = bad_ids[i];
        char *text = aproto_msg_register(&n, NULL, NULL, 0);
        assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), -1);
        aproto_node_msg_free(&m);
        free(text);
    }
    n.id = "n-1";
    char long_addr[300];
    memset(long_addr, 'a', sizeof(long_addr) - 1);
    long_addr[sizeof(long_addr) - 1] = '\0';
    n.address = long_addr;
    char *text = aproto_msg_register(&n, NULL, NULL, 0);
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "address"));
    aproto_node_msg_free(&m);
    free(text);
    json_decref(custom);
    json_decref(labels);
}

static void agent_proto_register_defaults_hostname_and_port_range(void **state)
{
    (void)state;
    const char *text = "{\"type\":\"register\",\"node\":{\"id\":\"n\",\"address\":\"a\","
                       "\"resources\":{}}}";
    struct aproto_node_msg m;
    char err[256];
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_string_equal(m.node.hostname, "n");
    assert_int_equal(m.node.port_lo, APROTO_DEFAULT_PORT_LO);
    assert_int_equal(m.node.port_hi, APROTO_DEFAULT_PORT_HI);
    assert_null(m.node.labels);
    aproto_node_msg_free(&m);
}

static void agent_proto_worker_events_round_trip(void **state)
{
    (void)state;
    struct aproto_node_msg m = node_parse_ok(aproto_msg_worker_started(7, "12", 1, 2, 4242, NULL));
    assert_int_equal(m.type, APROTO_MSG_WORKER_STARTED);
    expect_same_worker(&m.event, &(struct aproto_worker_event){.seq = 7,
                                                               .job_id = "12",
                                                               .attempt = 1,
                                                               .rank = 2,
                                                               .pid = 4242,
                                                               .exit_code = -1,
                                                               .signal = -1});
    assert_true(m.event.startup.code_fetch_s < 0 && m.event.startup.process_start_s < 0);
    aproto_node_msg_free(&m);

    /* The launch's step times: a step the launch did not have stays out (< 0). */
    m = node_parse_ok(
        aproto_msg_worker_started(9, "12", 1, 0, 4243, &(struct aproto_startup){0.25, -1, 0.5}));
    assert_true(m.event.startup.code_fetch_s == 0.25 && m.event.startup.checkpoint_fetch_s < 0 &&
                m.event.startup.process_start_s == 0.5);
    aproto_node_msg_free(&m);
    char err[200];
    const char *bad = "{\"type\":\"worker_started\",\"seq\":1,\"job_id\":\"1\",\"attempt\":1,"
                      "\"rank\":0,\"pid\":5,\"startup\":{\"process_start_s\":-1}}";
    assert_int_equal(aproto_node_msg_parse(bad, strlen(bad), &m, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "startup.process_start_s"));
    aproto_node_msg_free(&m);

    m = node_parse_ok(aproto_msg_worker_exited(8, "12", 1, 2, 3, -1, NULL, "OSError: x"));
    assert_int_equal(m.type, APROTO_MSG_WORKER_EXITED);
    expect_same_worker(&m.event, &(struct aproto_worker_event){.seq = 8,
                                                               .job_id = "12",
                                                               .attempt = 1,
                                                               .rank = 2,
                                                               .pid = -1,
                                                               .exited = true,
                                                               .exit_code = 3,
                                                               .signal = -1,
                                                               .reason = "OSError: x"});
    aproto_node_msg_free(&m);

    m = node_parse_ok(aproto_msg_worker_exited(9, "12", 1, 2, -1, 15, "launch failed", NULL));
    assert_int_equal(m.event.exit_code, -1);
    assert_int_equal(m.event.signal, 15);
    assert_string_equal(m.event.error, "launch failed");
    aproto_node_msg_free(&m);

    m = node_parse_ok(aproto_msg_heartbeat(NULL));
    assert_int_equal(m.type, APROTO_MSG_HEARTBEAT);
    assert_false(m.has_disk);
    aproto_node_msg_free(&m);

    m = node_parse_ok(aproto_msg_heartbeat(
        &(struct aproto_disk){.path = "/var/lib/trainyard", .free_mb = 12, .total_mb = 900}));
    assert_int_equal(m.type, APROTO_MSG_HEARTBEAT);
    assert_true(m.has_disk);
    assert_string_equal(m.disk.path, "/var/lib/trainyard");
    assert_int_equal(m.disk.free_mb, 12);
    assert_int_equal(m.disk.total_mb, 900);
    aproto_node_msg_free(&m);

    json_t *metrics = load("{\"loss\":0.5}");
    json_t *body =
        aproto_report_body("12", 1, 0, 4, metrics, 100, "2024-01-02T03:04:05.006Z", NULL);
    m = node_parse_ok(aproto_msg_report(31, body));
    assert_int_equal(m.type, APROTO_MSG_REPORT);
    assert_int_equal(m.seq, 31);
    json_t *values = json_loadb(m.report.values_text, m.report.values_len, 0, NULL);
    assert_true(json_equal(values, metrics));
    json_decref(values);
    aproto_node_msg_free(&m);
    json_decref(body);
    json_decref(metrics);
}

/* The agent message `text` must be refused with a reason containing `field`; `seq` is what the
 * refused message still reports (to ack it), `type` its type. */
static void expect_node_refused(const char *text, const char *field, int64_t seq,
                                enum aproto_msg_type type)
{
    struct aproto_node_msg m;
    char err[256] = "";
    if (aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)) == 0) {
        aproto_node_msg_free(&m);
        fail_msg("accepted: %s", text);
    }
    if (!strstr(err, field))
        fail_msg("%s: reason '%s' does not name '%s'", text, err, field);
    assert_int_equal(m.seq, seq);
    assert_int_equal(m.type, type);
    assert_null(m.root);
}

#define REG(node) "{\"type\":\"register\",\"node\":" node "}"
#define NODE_OK "\"id\":\"n\",\"address\":\"a\""

static void agent_proto_refuses_malformed_agent_messages(void **state)
{
    (void)state;
    const enum aproto_msg_type R = APROTO_MSG_REGISTER, S = APROTO_MSG_WORKER_STARTED,
                               X = APROTO_MSG_WORKER_EXITED;
    expect_node_refused("{\"type\":", "JSON", -1, APROTO_MSG_UNKNOWN);
    expect_node_refused("[]", "object", -1, APROTO_MSG_UNKNOWN);
    expect_node_refused("{\"seq\":3}", "type", 3, APROTO_MSG_UNKNOWN);
    expect_node_refused("{\"type\":\"register\"}", "node", -1, R);
    expect_node_refused(REG("{\"address\":\"a\",\"resources\":{}}"), "id", -1, R);
    expect_node_refused(REG("{\"id\":\"n\",\"resources\":{}}"), "address", -1, R);
    expect_node_refused(REG("{\"id\":7,\"address\":\"a\",\"resources\":{}}"), "id", -1, R);
    char long_id[400];
    snprintf(long_id, sizeof(long_id),
             REG("{\"id\":\"%0129d\",\"address\":\"a\",\"resources\":{}}"), 0);
    expect_node_refused(long_id, "node.id", -1, R);
    expect_node_refused(REG("{" NODE_OK "}"), "node.resources", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":[]}"), "node.resources", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{\"CPU\":\"8\"}}"), "resources.CPU", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{\"memory_mb\":1e300}}"),
                        "resources.memory_mb", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{\"CPU\":-1}}"), "resources.CPU", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{\"GPU\":[0,-1]}}"), "GPU[1]", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{\"GPU\":2}}"), "GPU", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{},\"port_range\":[10,5]}"), "port_range",
                        -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{},\"port_range\":[1,70000]}"),
                        "port_range", -1, R);
    expect_node_refused(REG("{" NODE_OK ",\"resources\":{},\"labels\":[]}"), "labels", -1, R);
    expect_node_refused("{\"type\":\"register\",\"token\":5,\"node\":{" NODE_OK
                        ",\"resources\":{}}}",
                        "token", -1, R);
    expect_node_refused("{\"type\":\"register\",\"node\":{" NODE_OK ",\"resources\":{}},"
                        "\"workers\":{}}",
                        "workers", -1, R);
    expect_node_refused("{\"type\":\"register\",\"node\":{" NODE_OK ",\"resources\":{}},"
                        "\"workers\":[{\"job_id\":\"1\",\"attempt\":0,\"rank\":0,"
                        "\"status\":\"ZOMBIE\"}]}",
                        "workers[0]: 'status'", -1, R);
    expect_node_refused("{\"type\":\"register\",\"node\":{" NODE_OK ",\"resources\":{}},"
                        "\"workers\":[{\"job_id\":\"1\",\"attempt\":0,\"status\":\"RUNNING\"}]}",
                        "workers[0]: 'rank'", -1, R);
    expect_node_refused("{\"type\":\"worker_started\",\"job_id\":\"1\",\"attempt\":0,\"rank\":0,"
                        "\"pid\":5}",
                        "seq", -1, S);
    expect_node_refused("{\"type\":\"worker_started\",\"seq\":4,\"job_id\":\"1\",\"attempt\":0,"
                        "\"rank\":0}",
                        "pid", 4, S);
    expect_node_refused("{\"type\":\"worker_started\",\"seq\":4,\"job_id\":1,\"attempt\":0,"
                        "\"rank\":0,\"pid\":5}",
                        "job_id", 4, S);
    expect_node_refused("{\"type\":\"worker_started\",\"seq\":4,\"job_id\":\"../x\","
                        "\"attempt\":0,\"rank\":0,\"pid\":5}",
                        "job_id", 4, S);
    expect_node_refused("{\"type\":\"worker_exited\",\"seq\":5,\"job_id\":\"1\",\"attempt\":0,"
                        "\"rank\":-2,\"exit_code\":0}",
                        "rank", 5, X);
    expect_node_refused("{\"type\":\"worker_exited\",\"seq\":5,\"job_id\":\"1\",\"attempt\":0,"
                        "\"rank\":0,\"exit_code\":\"0\"}",
                        "exit_code", 5, X);
    expect_node_refused("{\"type\":\"worker_exited\",\"seq\":5,\"job_id\":\"1\",\"attempt\":0,"
                        "\"rank\":0,\"exit_code\":null,\"signal\":null,\"error\":3}",
                        "error", 5, X);
    expect_node_refused("{\"type\":\"worker_exited\",\"seq\":5,\"job_id\":\"1\",\"attempt\":0,"
                        "\"rank\":0,\"exit_code\":1,\"reason\":[]}",
                        "'reason'", 5, X);
    const enum aproto_msg_type H = APROTO_MSG_HEARTBEAT;
    expect_node_refused("{\"type\":\"heartbeat\",\"disk\":5}", "'disk'", -1, H);
    expect_node_refused("{\"type\":\"heartbeat\",\"disk\":{\"free_mb\":1,\"total_mb\":2}}",
                        "'path'", -1, H);
    expect_node_refused("{\"type\":\"heartbeat\",\"disk\":{\"path\":\"/d\",\"free_mb\":-1,"
                        "\"total_mb\":2}}",
                        "'free_mb'", -1, H);
    char long_reason[APROTO_MAX_EXIT_REASON + 200];
    snprintf(long_reason, sizeof(long_reason),
             "{\"type\":\"worker_exited\",\"seq\":5,\"job_id\":\"1\",\"attempt\":0,"
             "\"rank\":0,\"exit_code\":1,\"reason\":\"%0*d\"}",
             APROTO_MAX_EXIT_REASON + 1, 0);
    expect_node_refused(long_reason, "at most 512 bytes", 5, X);
}

static void agent_proto_refuses_messages_over_the_size_limit(void **state)
{
    (void)state;
    size_t len = APROTO_MAX_MESSAGE + 1;
    char *big = malloc(len);
    assert_non_null(big);
    memset(big, ' ', len);
    memcpy(big, "{\"type\":\"heartbeat\"}", 20);
    char err[256] = "";
    struct aproto_node_msg m;
    assert_int_equal(aproto_node_msg_parse(big, len, &m, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "limit"));
    struct aproto_server_msg s;
    err[0] = '\0';
    assert_int_equal(aproto_server_msg_parse(big, len, &s, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "limit"));
    /* The same message within the limit is accepted. */
    assert_int_equal(aproto_node_msg_parse(big, len - 1, &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_HEARTBEAT);
    aproto_node_msg_free(&m);
    free(big);
}

static void agent_proto_unknown_agent_message_is_not_refused(void **state)
{
    (void)state;
    const char *text = "{\"type\":\"checkpoint_uploaded\",\"seq\":3}";
    struct aproto_node_msg m;
    char err[256];
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_UNKNOWN);
    assert_string_equal(m.type_name, "checkpoint_uploaded");
    assert_int_equal(m.seq, 3);
    aproto_node_msg_free(&m);
}

static void agent_proto_log_round_trip(void **state)
{
    (void)state;
    json_t *lines = json_pack("[s, s, s]", "one", "",
                              "\x1b[32mgr\xc3\xa9"
                              "en\x1b[0m");
    struct aproto_log_chunk c = {"17", 2, 3, APROTO_LOG_STDOUT, 4096, 30, 0, lines};
    char *text = aproto_msg_log(9, &c);
    assert_non_null(text);
    assert_null(strstr(text, "dropped"));
    struct aproto_node_msg m;
    char err[256];
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_LOG);
    assert_int_equal(m.seq, 9);
    assert_string_equal(m.log.job_id, "17");
    assert_int_equal(m.log.attempt, 2);
    assert_int_equal(m.log.rank, 3);
    assert_int_equal(m.log.offset, 4096);
    assert_int_equal(m.log.bytes, 30);
    assert_int_equal(m.log.dropped, 0);
    assert_true(json_equal((json_t *)m.log.lines, lines));
    aproto_node_msg_free(&m);
    free(text);
    c.dropped = 12345;
    text = aproto_msg_log(10, &c);
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_int_equal(m.log.dropped, 12345);
    assert_int_equal(m.log.stream, APROTO_LOG_STDOUT);
    aproto_node_msg_free(&m);
    free(text);
    c.stream = APROTO_LOG_STDERR;
    text = aproto_msg_log(11, &c);
    assert_non_null(strstr(text, "\"stream\":\"stderr\""));
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_int_equal(m.log.stream, APROTO_LOG_STDERR);
    aproto_node_msg_free(&m);
    free(text);
    json_decref(lines);
}

static void agent_proto_refuses_malformed_log_messages(void **state)
{
    (void)state;
    static const struct {
        const char *text, *field;
    } bad[] = {
        {"{\"type\":\"log\",\"job_id\":\"1\",\"attempt\":1,\"rank\":0,\"offset\":0,\"bytes\":1,"
         "\"lines\":[]}",
         "seq"},
        {"{\"type\":\"log\",\"seq\":1,\"attempt\":1,\"rank\":0,\"offset\":0,\"bytes\":1,"
         "\"lines\":[]}",
         "job_id"},
        {"{\"type\":\"log\",\"seq\":1,\"job_id\":\"1\",\"attempt\":1,\"rank\":0,\"offset\":-1,"
         "\"bytes\":1,\"lines\":[]}",
         "offset"},
        {"{\"type\":\"log\",\"seq\":1,\"job_id\":\"1\",\"attempt\":1,\"rank\":0,\"offset\":0,"
         "\"bytes\":0,\"lines\":[]}",
         "bytes"},
        {"{\"type\":\"log\",\"seq\":1,\"job_id\":\"1\",\"attempt\":1,\"rank\":0,\"offset\":0,"
         "\"bytes\":1,\"lines\":\"x\"}",
         "lines"},
        {"{\"type\":\"log\",\"seq\":1,\"job_id\":\"1\",\"attempt\":1,\"rank\":0,\"offset\":0,"
         "\"bytes\":1,\"lines\":[1]}",
         "lines[0]"},
        {"{\"type\":\"log\",\"seq\":1,\"job_id\":\"1\",\"attempt\":1,\"rank\":0,\"offset\":0,"
         "\"bytes\":1,\"dropped\":-5,\"lines\":[]}",
         "dropped"},
        {"{\"type\":\"log\",\"seq\":1,\"job_id\":\"1\",\"attempt\":1,\"rank\":0,\"offset\":0,"
         "\"bytes\":1,\"stream\":\"stdin\",\"lines\":[]}",
         "stream"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct aproto_node_msg m;
        char err[256] = "";
        assert_int_equal(
            aproto_node_msg_parse(bad[i].text, strlen(bad[i].text), &m, err, sizeof(err)), -1);
        assert_int_equal(m.type, APROTO_MSG_LOG);
        if (!strstr(err, bad[i].field))
            fail_msg("case %zu: '%s' does not name %s", i, err, bad[i].field);
        aproto_node_msg_free(&m);
    }
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
    cmocka_unit_test(agent_proto_server_control_messages_round_trip),
    cmocka_unit_test(agent_proto_api_urls_and_artifact_store),
    cmocka_unit_test(agent_proto_disk_full),
    cmocka_unit_test(agent_proto_preempt_notice),
    cmocka_unit_test(agent_proto_launch_round_trips),
    cmocka_unit_test(agent_proto_launch_refuses_bad_rank_addresses),
    cmocka_unit_test(agent_proto_register_round_trips),
    cmocka_unit_test(agent_proto_register_defaults_hostname_and_port_range),
    cmocka_unit_test(agent_proto_worker_events_round_trip),
    cmocka_unit_test(agent_proto_refuses_malformed_agent_messages),
    cmocka_unit_test(agent_proto_unknown_agent_message_is_not_refused),
    cmocka_unit_test(agent_proto_refuses_messages_over_the_size_limit),
    cmocka_unit_test(agent_proto_log_round_trip),
    cmocka_unit_test(agent_proto_exit_words),
    cmocka_unit_test(agent_proto_refuses_malformed_log_messages),
    cmocka_unit_test(agent_proto_forget_round_trips_and_refuses_bad_job_ids),
    cmocka_unit_test(agent_proto_checkpoint_delete_round_trips_and_refuses_bad_fields),
};
TY_TEST_MAIN(tests)
