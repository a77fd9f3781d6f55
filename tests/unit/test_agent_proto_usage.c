/* Unit tests for the agent protocol's `usage` message (agent -> server,
 * common/agent_proto_usage.c): a built message parses back to what was built, and malformed ones
 * are refused naming the field. */
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"

static void usage_round_trips(void **state)
{
    (void)state;
    struct aproto_usage rows[] = {
        {.job_id = "17",
         .attempt = 2,
         .rank = 3,
         .cpu_usec = 1250000,
         .memory_bytes = 104857600,
         .memory_peak_bytes = 120586240},
        {.job_id = "17", .attempt = 2, .rank = 0, .final = true},
    };
    char *text = aproto_msg_usage(rows, 2);
    assert_non_null(text);
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_USAGE);
    assert_int_equal(m.n_usage, 2);
    assert_string_equal(m.usage[0].job_id, "17");
    assert_int_equal(m.usage[0].attempt, 2);
    assert_int_equal(m.usage[0].rank, 3);
    assert_int_equal(m.usage[0].cpu_usec, 1250000);
    assert_int_equal(m.usage[0].memory_bytes, 104857600);
    assert_int_equal(m.usage[0].memory_peak_bytes, 120586240);
    assert_false(m.usage[0].final);
    assert_int_equal(m.usage[1].cpu_usec, 0);
    assert_true(m.usage[1].final);
    aproto_node_msg_free(&m);
    free(text);
}

static void usage_empty_and_without_final(void **state)
{
    (void)state;
    char *text = aproto_msg_usage(NULL, 0);
    assert_non_null(text);
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), 0);
    assert_int_equal(m.n_usage, 0);
    assert_null(m.usage);
    aproto_node_msg_free(&m);
    free(text);
    /* `final` may be left out: a periodic sample */
    const char *t = "{\"type\":\"usage\",\"workers\":[{\"job_id\":\"1\",\"attempt\":1,\"rank\":0,"
                    "\"cpu_usec\":5,\"memory_bytes\":6,\"memory_peak_bytes\":7}]}";
    assert_int_equal(aproto_node_msg_parse(t, strlen(t), &m, err, sizeof(err)), 0);
    assert_int_equal(m.n_usage, 1);
    assert_false(m.usage[0].final);
    assert_int_equal(m.usage[0].memory_peak_bytes, 7);
    aproto_node_msg_free(&m);
}

/* Expects aproto_node_msg_parse to refuse `text` naming `field`. */
static void expect_refused(const char *text, const char *field)
{
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(aproto_node_msg_parse(text, strlen(text), &m, err, sizeof(err)), -1);
    assert_non_null(strstr(err, field));
    assert_int_equal(m.type, APROTO_MSG_USAGE);
}

static void usage_malformed_refused_naming_the_field(void **state)
{
    (void)state;
    expect_refused("{\"type\":\"usage\"}", "'workers'");
    expect_refused("{\"type\":\"usage\",\"workers\":{}}", "'workers'");
    expect_refused("{\"type\":\"usage\",\"workers\":[1]}", "workers[0]");
    expect_refused("{\"type\":\"usage\",\"workers\":[{\"job_id\":\"../x\",\"attempt\":1,"
                   "\"rank\":0,\"cpu_usec\":0,\"memory_bytes\":0,\"memory_peak_bytes\":0}]}",
                   "workers[0].job_id");
    expect_refused("{\"type\":\"usage\",\"workers\":[{\"job_id\":\"1\",\"attempt\":1,"
                   "\"rank\":0,\"cpu_usec\":-1,\"memory_bytes\":0,\"memory_peak_bytes\":0}]}",
                   "workers[0].cpu_usec");
    expect_refused("{\"type\":\"usage\",\"workers\":[{\"job_id\":\"1\",\"attempt\":1,"
                   "\"rank\":0,\"cpu_usec\":0,\"memory_bytes\":1.5,\"memory_peak_bytes\":0}]}",
                   "workers[0].memory_bytes");
    expect_refused("{\"type\":\"usage\",\"workers\":[{\"job_id\":\"1\",\"attempt\":1,"
                   "\"rank\":0,\"cpu_usec\":0,\"memory_bytes\":0}]}",
                   "workers[0].memory_peak_bytes");
    expect_refused("{\"type\":\"usage\",\"workers\":[{\"job_id\":\"1\",\"attempt\":1,"
                   "\"rank\":0,\"cpu_usec\":0,\"memory_bytes\":0,\"memory_peak_bytes\":0,"
                   "\"final\":1}]}",
                   "workers[0].final");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(usage_round_trips),
    cmocka_unit_test(usage_empty_and_without_final),
    cmocka_unit_test(usage_malformed_refused_naming_the_field),
};

TY_TEST_MAIN(tests)
