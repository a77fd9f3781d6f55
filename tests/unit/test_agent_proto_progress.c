/* Unit tests for the heartbeat messages: the report protocol's `progress` frame (worker ->
 * agent, common/report_proto_progress.c) and the agent protocol's `progress` message (agent ->
 * server, common/agent_proto_progress.c). Each built message parses back to what was built, and
 * malformed ones are refused naming the field. */
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"
#include "report_proto.h"

static void wire_progress_round_trips(void **state)
{
    (void)state;
    struct rproto_progress in = {.op = "allreduce",
                                 .coll_seq = 1842,
                                 .in_collective = true,
                                 .report_seq = 3,
                                 .progress_age_ms = 250};
    json_t *m = rproto_progress_new(&in);
    assert_non_null(m);
    assert_int_equal(rproto_type_of(m), RPROTO_PROGRESS);
    struct rproto_progress out;
    char err[128] = "";
    assert_int_equal(rproto_parse_progress(m, &out, err, sizeof(err)), 0);
    assert_string_equal(out.op, "allreduce");
    assert_int_equal(out.coll_seq, 1842);
    assert_true(out.in_collective);
    assert_int_equal(out.report_seq, 3);
    assert_int_equal(out.progress_age_ms, 250);
    json_decref(m);
}

static void wire_progress_before_any_collective_has_no_op(void **state)
{
    (void)state;
    struct rproto_progress in = {.progress_age_ms = -1};
    json_t *m = rproto_progress_new(&in);
    assert_non_null(m);
    assert_true(json_is_null(json_object_get(m, "op")));
    assert_null(json_object_get(m, "progress_age_ms"));
    struct rproto_progress out;
    assert_int_equal(rproto_parse_progress(m, &out, NULL, 0), 0);
    assert_null(out.op);
    assert_int_equal(out.progress_age_ms, -1);
    json_decref(m);
    in.in_collective = true; /* inside a collective without a name */
    assert_null(rproto_progress_new(&in));
}

/* Parses `text` (a JSON object) and expects TY_EPROTO naming `field`. */
static void expect_wire_refused(const char *text, const char *field)
{
    json_t *m = json_loads(text, 0, NULL);
    assert_non_null(m);
    struct rproto_progress out;
    char err[128] = "";
    assert_int_equal(rproto_parse_progress(m, &out, err, sizeof(err)), TY_EPROTO);
    assert_non_null(strstr(err, field));
    json_decref(m);
}

static void wire_progress_malformed_refused_naming_the_field(void **state)
{
    (void)state;
    expect_wire_refused("{\"type\":\"progress\",\"op\":\"allreduce\",\"coll_seq\":-1,"
                        "\"in_collective\":false,\"report_seq\":0}",
                        "coll_seq");
    expect_wire_refused("{\"type\":\"progress\",\"op\":\"All Reduce\",\"coll_seq\":1,"
                        "\"in_collective\":false,\"report_seq\":0}",
                        "op");
    expect_wire_refused("{\"type\":\"progress\",\"op\":null,\"coll_seq\":1,"
                        "\"in_collective\":true,\"report_seq\":0}",
                        "op");
    expect_wire_refused("{\"type\":\"progress\",\"coll_seq\":1,\"in_collective\":1,"
                        "\"report_seq\":0}",
                        "in_collective");
    expect_wire_refused("{\"type\":\"progress\",\"coll_seq\":1,\"in_collective\":false,"
                        "\"report_seq\":0,\"progress_age_ms\":-5}",
                        "progress_age_ms");
}

static void agent_progress_round_trips(void **state)
{
    (void)state;
    struct aproto_progress rows[] = {
        {.job_id = "17",
         .attempt = 2,
         .rank = 3,
         .op = "broadcast",
         .coll_seq = 9,
         .in_collective = true,
         .report_seq = 4,
         .heartbeat_age_ms = 120,
         .progress_age_ms = 45000},
        {.job_id = "17", .attempt = 2, .rank = 0},
    };
    char *text = aproto_msg_progress(rows, 2);
    assert_non_null(text);
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_PROGRESS);
    assert_int_equal(m.n_progress, 2);
    assert_string_equal(m.progress[0].job_id, "17");
    assert_string_equal(m.progress[0].op, "broadcast");
    assert_int_equal(m.progress[0].coll_seq, 9);
    assert_true(m.progress[0].in_collective);
    assert_int_equal(m.progress[0].progress_age_ms, 45000);
    assert_null(m.progress[1].op);
    assert_false(m.progress[1].in_collective);
    aproto_node_msg_free(&m);
    free(text);
}

/* Expects aproto_node_msg_parse to refuse `text` naming `field`. */
static void expect_agent_refused(const char *text, const char *field)
{
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), -1);
    assert_non_null(strstr(err, field));
    assert_int_equal(m.type, APROTO_MSG_PROGRESS);
}

static void agent_progress_malformed_refused_naming_the_field(void **state)
{
    (void)state;
    expect_agent_refused("{\"type\":\"progress\"}", "'workers'");
    expect_agent_refused("{\"type\":\"progress\",\"workers\":[1]}", "workers[0]");
    expect_agent_refused("{\"type\":\"progress\",\"workers\":[{\"job_id\":\"a/b\",\"attempt\":1,"
                         "\"rank\":0,\"coll_seq\":0,\"in_collective\":false,\"report_seq\":0,"
                         "\"heartbeat_age_ms\":0,\"progress_age_ms\":0}]}",
                         "workers[0].job_id");
    expect_agent_refused("{\"type\":\"progress\",\"workers\":[{\"job_id\":\"1\",\"attempt\":1,"
                         "\"rank\":-1,\"coll_seq\":0,\"in_collective\":false,\"report_seq\":0,"
                         "\"heartbeat_age_ms\":0,\"progress_age_ms\":0}]}",
                         "workers[0].rank");
    expect_agent_refused("{\"type\":\"progress\",\"workers\":[{\"job_id\":\"1\",\"attempt\":1,"
                         "\"rank\":0,\"op\":null,\"coll_seq\":0,\"in_collective\":true,"
                         "\"report_seq\":0,\"heartbeat_age_ms\":0,\"progress_age_ms\":0}]}",
                         "workers[0].op");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(wire_progress_round_trips),
    cmocka_unit_test(wire_progress_before_any_collective_has_no_op),
    cmocka_unit_test(wire_progress_malformed_refused_naming_the_field),
    cmocka_unit_test(agent_progress_round_trips),
    cmocka_unit_test(agent_progress_malformed_refused_naming_the_field),
};

TY_TEST_MAIN(tests)
