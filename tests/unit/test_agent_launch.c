/* Unit tests for server/control/launch.c: the `launch` messages the server builds from the job's
 * parsed spec and the typed rows of an attempt (one per node, parsed back here with the agent's
 * parser, common/agent_proto.c). */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"
#include "jobspec.h"
#include "launch.h"

/* Rows of a 4-rank tensorflow attempt on two nodes, two ranks each (as store_launch_rows gives
 * them: malloc'd, ordered by node_rank then local_rank). */
static struct srv_launch_rows rows_two_nodes(const char *spec)
{
    struct srv_launch_rows r = {
        .spec_json = strdup(spec),
        .master_addr = strdup("10.0.0.1"),
        .master_port = 29500,
        .world_size = 4,
        .num_nodes = 2,
        .rank_addresses = calloc(4, sizeof(char *)),
        .workers = calloc(4, sizeof(struct srv_launch_worker)),
        .n_workers = 4,
    };
    assert_non_null(r.rank_addresses);
    assert_non_null(r.workers);
    const char *addr[] = {"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"};
    for (int i = 0; i < 4; i++) {
        r.rank_addresses[i] = strdup(addr[i]);
        struct srv_launch_worker *w = &r.workers[i];
        w->node_id = strdup(i < 2 ? "node-a" : "node-b");
        w->node_rank = i / 2;
        w->rank = i;
        w->local_rank = i % 2;
        w->local_world_size = 2;
        w->n_gpus = 1;
        w->gpus = calloc(1, sizeof(int));
        w->gpus[0] = 7 - i;
    }
    return r;
}

static const char *tf_spec =
    "{\"entrypoint\":[\"python3\",\"train.py\"],\"backend\":\"tensorflow\",\"working_dir\":\"/w\","
    "\"env\":{\"X\":\"1\"},\"train_loop_config\":{\"lr\":0.5},\"resume_from_checkpoint\":9}";

static struct aproto_server_msg parse(const char *text)
{
    struct aproto_server_msg m;
    char err[256] = "";
    if (aproto_server_msg_parse(text, strlen(text), &m, err, sizeof(err)) != 0)
        fail_msg("the agent refuses the launch (%s): %s", err, text);
    assert_int_equal(m.type, APROTO_MSG_LAUNCH);
    return m;
}

/* srv_launch_build with the spec of the rows (rows->spec_json), parsed as the control thread
 * does (jobspec_from_json). */
static int build(int64_t job, int attempt, const struct srv_launch_rows *rows,
                 const struct srv_resume_dir *dirs, size_t n_dirs, struct srv_launch_msg **out,
                 size_t *n, char *err, size_t errlen)
{
    json_t *json = json_loads(rows->spec_json, 0, NULL);
    struct jobspec spec;
    char why[256] = "";
    if (json == NULL || jobspec_from_json(json, &spec, why, sizeof(why)) != JOBSPEC_OK)
        fail_msg("the test's spec does not parse: %s", why);
    json_decref(json);
    int rc = srv_launch_build(job, attempt, &spec, rows, dirs, n_dirs, out, n, err, errlen);
    jobspec_clear(&spec);
    return rc;
}

static void launch_is_one_message_per_node_with_its_workers(void **state)
{
    (void)state;
    struct srv_launch_rows rows = rows_two_nodes(tf_spec);
    struct srv_launch_msg *msgs;
    size_t n;
    char err[256];
    assert_int_equal(build(12, 3, &rows, NULL, 0, &msgs, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 2);
    for (size_t k = 0; k < n; k++) {
        assert_string_equal(msgs[k].node_id, k == 0 ? "node-a" : "node-b");
        struct aproto_server_msg m = parse(msgs[k].text);
        const struct aproto_launch *l = &m.launch;
        assert_string_equal(l->job_id, "12");
        assert_int_equal(l->attempt, 3);
        assert_string_equal(l->backend, "tensorflow");
        assert_string_equal(l->argv[1], "train.py");
        assert_string_equal(l->working_dir, "/w");
        assert_string_equal(json_string_value(json_object_get(l->env, "X")), "1");
        assert_string_equal(l->config_json, "{\"lr\":0.5}");
        assert_int_equal(l->world_size, 4);
        assert_int_equal(l->num_nodes, 2);
        assert_int_equal(l->node_rank, (int64_t)k);
        assert_int_equal(l->local_world_size, 2);
        assert_string_equal(l->master_addr, "10.0.0.1");
        assert_int_equal(l->master_port, 29500);
        assert_null(l->checkpoint_dir);
        assert_int_equal(l->n_workers, 2);
        for (size_t i = 0; i < 2; i++) {
            int64_t rank = (int64_t)(2 * k + i);
            assert_int_equal(l->workers[i].rank, rank);
            assert_int_equal(l->workers[i].local_rank, (int64_t)i);
            assert_int_equal(l->workers[i].n_gpus, 1);
            assert_int_equal(l->workers[i].gpus[0], 7 - rank);
        }
        aproto_server_msg_free(&m);
    }
    srv_launch_msgs_free(msgs, n);
    srv_launch_rows_free(&rows);
}

static void launch_carries_the_address_of_every_rank(void **state)
{
    (void)state;
    struct srv_launch_rows rows = rows_two_nodes(tf_spec);
    struct srv_launch_msg *msgs;
    size_t n;
    char err[256];
    assert_int_equal(build(12, 3, &rows, NULL, 0, &msgs, &n, err, sizeof(err)), 0);
    const char *want[] = {"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"};
    for (size_t k = 0; k < n; k++) {
        struct aproto_server_msg m = parse(msgs[k].text);
        assert_non_null(m.launch.rank_addresses);
        for (size_t r = 0; r < 4; r++)
            assert_string_equal(m.launch.rank_addresses[r], want[r]);
        aproto_server_msg_free(&m);
    }
    srv_launch_msgs_free(msgs, n);
    srv_launch_rows_free(&rows);
}

static void launch_gives_each_node_its_resume_directory(void **state)
{
    (void)state;
    struct srv_launch_rows rows = rows_two_nodes(tf_spec);
    size_t n_nodes;
    const char **nodes = srv_launch_nodes(&rows, &n_nodes);
    assert_int_equal(n_nodes, 2);
    assert_string_equal(nodes[0], "node-a");
    assert_string_equal(nodes[1], "node-b");
    free(nodes);
    /* node-a holds a copy, node-b none: it fetches the checkpoint from the artifact store. */
    char sha[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    struct srv_resume_dir dirs[] = {{"node-a", "/ck/a/9", NULL, 0, NULL, NULL},
                                    {"node-b", NULL, NULL, 9, sha, NULL}};
    struct srv_launch_msg *msgs;
    size_t n;
    char err[256];
    assert_int_equal(build(12, 3, &rows, dirs, 2, &msgs, &n, err, sizeof(err)), 0);
    struct aproto_server_msg a = parse(msgs[0].text), b = parse(msgs[1].text);
    assert_string_equal(a.launch.checkpoint_dir, "/ck/a/9");
    assert_null(b.launch.checkpoint_dir);
    assert_int_equal(a.launch.checkpoint_fetch_id, 0);
    assert_null(a.launch.checkpoint_fetch_sha256);
    assert_int_equal(b.launch.checkpoint_fetch_id, 9);
    assert_string_equal(b.launch.checkpoint_fetch_sha256, sha);
    aproto_server_msg_free(&a);
    aproto_server_msg_free(&b);
    srv_launch_msgs_free(msgs, n);
    /* A directory listed for another node than the k-th is not used. */
    struct srv_resume_dir swapped[] = {{"node-b", "/ck/b/9", NULL, 0, NULL, NULL},
                                       {"node-a", "/ck/a/9", NULL, 0, NULL, NULL}};
    assert_int_equal(build(12, 3, &rows, swapped, 2, &msgs, &n, err, sizeof(err)), 0);
    a = parse(msgs[0].text);
    assert_null(a.launch.checkpoint_dir);
    aproto_server_msg_free(&a);
    srv_launch_msgs_free(msgs, n);
    srv_launch_rows_free(&rows);
}

/* A job with run_config.storage_path: every node is told it, and a node without a copy is told
 * where the checkpoint lies on shared storage. */
static void launch_carries_the_storage_path_and_the_shared_checkpoint(void **state)
{
    (void)state;
    struct srv_launch_rows rows = rows_two_nodes(
        "{\"entrypoint\":\"true\",\"run_config\":{\"storage_path\":\"/mnt/shared\"}}");
    char sha[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char shared[] = "/mnt/shared/job-1/attempt-1/checkpoint-2";
    struct srv_resume_dir dirs[] = {{"node-a", "/ck/a/9", NULL, 0, NULL, NULL},
                                    {"node-b", NULL, NULL, 9, sha, shared}};
    struct srv_launch_msg *msgs;
    size_t n;
    char err[256];
    assert_int_equal(build(12, 3, &rows, dirs, 2, &msgs, &n, err, sizeof(err)), 0);
    struct aproto_server_msg a = parse(msgs[0].text), b = parse(msgs[1].text);
    assert_string_equal(a.launch.storage_path, "/mnt/shared");
    assert_string_equal(b.launch.storage_path, "/mnt/shared");
    assert_null(a.launch.checkpoint_fetch_shared);
    assert_int_equal(b.launch.checkpoint_fetch_id, 9);
    assert_string_equal(b.launch.checkpoint_fetch_shared, shared);
    aproto_server_msg_free(&a);
    aproto_server_msg_free(&b);
    srv_launch_msgs_free(msgs, n);
    srv_launch_rows_free(&rows);
    /* Without one, neither appears. */
    rows = rows_two_nodes("{\"entrypoint\":\"true\"}");
    assert_int_equal(build(12, 3, &rows, NULL, 0, &msgs, &n, err, sizeof(err)), 0);
    assert_null(strstr(msgs[0].text, "storage_path"));
    a = parse(msgs[0].text);
    assert_null(a.launch.storage_path);
    aproto_server_msg_free(&a);
    srv_launch_msgs_free(msgs, n);
    srv_launch_rows_free(&rows);
}

static void launch_of_a_minimal_spec_uses_the_agent_defaults(void **state)
{
    (void)state;
    struct srv_launch_rows rows = rows_two_nodes("{\"entrypoint\":\"echo hi\"}");
    struct srv_launch_msg *msgs;
    size_t n;
    char err[256];
    assert_int_equal(build(5, 1, &rows, NULL, 0, &msgs, &n, err, sizeof(err)), 0);
    struct aproto_server_msg m = parse(msgs[1].text);
    assert_string_equal(m.launch.backend, "torch");
    assert_string_equal(m.launch.argv[0], "/bin/sh");
    assert_null(m.launch.working_dir);
    assert_int_equal(json_object_size(m.launch.env), 0);
    assert_string_equal(m.launch.config_json, "{}"); /* the normalized spec's default */
    aproto_server_msg_free(&m);
    srv_launch_msgs_free(msgs, n);
    srv_launch_rows_free(&rows);
}

static void launch_keeps_a_string_entrypoint_and_secret_env_wins(void **state)
{
    (void)state;
    struct srv_launch_rows rows =
        rows_two_nodes("{\"entrypoint\":\"echo hi\",\"env\":{\"A\":\"1\",\"B\":\"2\"},"
                       "\"secret_env\":{\"B\":\"s\",\"C\":\"3\"},\"code_package\":"
                       "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}");
    struct srv_launch_msg *msgs;
    size_t n;
    char err[256];
    assert_int_equal(build(5, 1, &rows, NULL, 0, &msgs, &n, err, sizeof(err)), 0);
    json_t *root = json_loads(msgs[0].text, 0, NULL);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "entrypoint")), "echo hi");
    struct aproto_server_msg m = parse(msgs[0].text);
    assert_string_equal(json_string_value(json_object_get(m.launch.env, "A")), "1");
    assert_string_equal(json_string_value(json_object_get(m.launch.env, "B")), "s");
    assert_string_equal(json_string_value(json_object_get(m.launch.env, "C")), "3");
    assert_string_equal(m.launch.code_sha256,
                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    aproto_server_msg_free(&m);
    json_decref(root);
    srv_launch_msgs_free(msgs, n);
    srv_launch_rows_free(&rows);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(launch_is_one_message_per_node_with_its_workers),
    cmocka_unit_test(launch_carries_the_address_of_every_rank),
    cmocka_unit_test(launch_gives_each_node_its_resume_directory),
    cmocka_unit_test(launch_carries_the_storage_path_and_the_shared_checkpoint),
    cmocka_unit_test(launch_of_a_minimal_spec_uses_the_agent_defaults),
    cmocka_unit_test(launch_keeps_a_string_entrypoint_and_secret_env_wins),
};
TY_TEST_MAIN(tests)
