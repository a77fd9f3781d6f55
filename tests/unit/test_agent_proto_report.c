/* Unit tests for the agent protocol's `report` message (common/agent_proto_report.c): a report
 * built the agent's way (aproto_report_body + aproto_msg_report) parses back to what was built, and
 * every malformed report is refused with a reason naming the field at fault. */
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"

/* A report built by the agent's builders: event seq 7, job "42", attempt 2, rank 1, k 3. */
static char *built_report(const char *checkpoint_dir)
{
    json_t *metrics =
        json_pack("{s:f, s:i, s:s, s:b, s:n, s:[i], s:{}, s:i}", "loss", 0.25, "epoch", 4, "note",
                  "warm", "flag", 1, "none", "list", 1, "obj", "", 9);
    json_t *body =
        aproto_report_body("42", 2, 1, 3, metrics, 100, "2030-01-02T03:04:05.678Z", checkpoint_dir);
    char *text = aproto_msg_report(7, body);
    json_decref(body);
    json_decref(metrics);
    assert_non_null(text);
    return text;
}

static int parse_text(const char *text, struct aproto_node_msg *m, char *err, size_t errlen)
{
    return aproto_node_msg_parse(text, strlen(text), m, err, errlen);
}

static void agent_proto_report_round_trips_keeping_every_value(void **state)
{
    (void)state;
    char *text = built_report(NULL);
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(parse_text(text, &m, err, sizeof(err)), 0);
    assert_int_equal(m.type, APROTO_MSG_REPORT);
    const struct aproto_report *r = &m.report;
    assert_int_equal(r->seq, 7);
    assert_int_equal(r->job, 42);
    assert_int_equal(r->attempt, 2);
    assert_int_equal(r->rank, 1);
    assert_int_equal(r->report_seq, 3);
    assert_int_equal(r->step, 100);
    assert_string_equal(r->time, "2030-01-02T03:04:05.678Z");
    assert_null(r->checkpoint_dir);
    assert_int_equal(r->checkpoint_bytes, -1);
    assert_int_equal(json_object_size(r->values), 7);
    assert_true(json_real_value(json_object_get(r->values, "loss")) == 0.25);
    assert_int_equal(json_integer_value(json_object_get(r->values, "epoch")), 4);
    assert_string_equal(json_string_value(json_object_get(r->values, "note")), "warm");
    assert_true(json_is_true(json_object_get(r->values, "flag")));
    assert_true(json_is_null(json_object_get(r->values, "none")));
    assert_int_equal(json_array_size(json_object_get(r->values, "list")), 1);
    assert_true(json_is_object(json_object_get(r->values, "obj")));
    assert_int_equal(r->skipped, 1); /* "" */
    aproto_node_msg_free(&m);
    free(text);
}

static void agent_proto_report_with_checkpoint_round_trips(void **state)
{
    (void)state;
    char *text = built_report("/var/lib/ty/staging/ck-3");
    json_t *o = json_loads(text, 0, NULL);
    json_object_set_new(o, "checkpoint_bytes", json_integer(4096));
    json_object_set_new(o, "step", json_null());
    char *with_bytes = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(parse_text(with_bytes, &m, err, sizeof(err)), 0);
    assert_string_equal(m.report.checkpoint_dir, "/var/lib/ty/staging/ck-3");
    assert_int_equal(m.report.checkpoint_bytes, 4096);
    assert_int_equal(m.report.step, -1);
    aproto_node_msg_free(&m);
    free(with_bytes);
    free(text);
}

static void agent_proto_report_job_id_may_be_an_integer(void **state)
{
    (void)state;
    const char *text = "{\"type\":\"report\",\"seq\":1,\"job_id\":9,\"attempt\":1,\"rank\":0,"
                       "\"report_seq\":1,\"metrics\":{},\"time\":\"2030-01-02 03:04:05+02:00\"}";
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(parse_text(text, &m, err, sizeof(err)), 0);
    assert_int_equal(m.report.job, 9);
    assert_int_equal(m.report.step, -1);
    assert_int_equal(json_object_size(m.report.values), 0);
    aproto_node_msg_free(&m);
}

/* The values' text as the message wrote it (stored as is, not written again), found at the top
 * level only, the last one of a member named twice (as jansson keeps it); none when a metric was
 * skipped or the member's name is written with an escape. */
static void expect_values_text(const char *text, const char *values)
{
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(parse_text(text, &m, err, sizeof(err)), 0);
    if (values == NULL) {
        assert_null(m.report.values_text);
    } else {
        assert_non_null(m.report.values_text);
        assert_int_equal(m.report.values_len, strlen(values));
        assert_memory_equal(m.report.values_text, values, strlen(values));
    }
    aproto_node_msg_free(&m);
}

static void agent_proto_report_keeps_the_text_of_its_values(void **state)
{
    (void)state;
#define HEAD "{\"type\":\"report\",\"seq\":1,\"job_id\":9,\"attempt\":1,\"rank\":0,"
#define TIME ",\"time\":\"2030-01-02T03:04:05Z\""
    expect_values_text(
        HEAD "\"report_seq\":1,\"metrics\": {\"a\": 0.1, \"b\":[1,{\"c\":\"}]\\\"\"}]}" TIME "}",
        "{\"a\": 0.1, \"b\":[1,{\"c\":\"}]\\\"\"}]}");
    expect_values_text(HEAD "\"note\":{\"metrics\":1},\"metrics\":{\"x\":1},\"report_seq\":1,"
                            "\"metrics\"\t:\n{\"y\":-2e-3}" TIME "}",
                       "{\"y\":-2e-3}");
    expect_values_text(HEAD "\"report_seq\":1,\"metrics\":{}" TIME "}", "{}");
    expect_values_text(HEAD "\"report_seq\":1,\"metrics\":{\"\":1,\"a\":2}" TIME "}", NULL);
    expect_values_text(HEAD "\"report_seq\":1,\"metric\\u0073\":{\"a\":2}" TIME "}", NULL);
#undef HEAD
#undef TIME
}

/* The built report with field `name` set to the JSON `value` (NULL: removed) must be refused with
 * a reason naming `field`; the seq is kept (or not, when it is the field at fault) for the ack. */
static void expect_refused(const char *name, const char *value, const char *field)
{
    char *text = built_report("/ck");
    json_t *o = json_loads(text, 0, NULL);
    free(text);
    if (value)
        json_object_set_new(o, name, json_loads(value, JSON_DECODE_ANY, NULL));
    else
        json_object_del(o, name);
    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    struct aproto_node_msg m;
    char err[256] = "";
    if (parse_text(text, &m, err, sizeof(err)) == 0) {
        aproto_node_msg_free(&m);
        fail_msg("accepted: %s", text);
    }
    if (!strstr(err, field))
        fail_msg("reason '%s' does not name '%s' (%s)", err, field, text);
    assert_int_equal(m.type, APROTO_MSG_REPORT);
    if (strcmp(name, "seq") != 0)
        assert_int_equal(m.seq, 7);
    free(text);
}

static void agent_proto_malformed_reports_are_refused_naming_the_field(void **state)
{
    (void)state;
    expect_refused("seq", NULL, "seq");
    expect_refused("seq", "0", "seq");
    expect_refused("seq", "\"7\"", "seq");
    expect_refused("job_id", NULL, "job_id");
    expect_refused("job_id", "\"not-a-job\"", "job_id");
    expect_refused("job_id", "0", "job_id");
    expect_refused("job_id", "\"-3\"", "job_id");
    expect_refused("attempt", NULL, "attempt");
    expect_refused("attempt", "-1", "attempt");
    expect_refused("attempt", "2147483648", "attempt");
    expect_refused("rank", "-1", "rank");
    expect_refused("rank", "1.5", "rank");
    expect_refused("report_seq", "0", "report_seq");
    expect_refused("report_seq", NULL, "report_seq");
    expect_refused("step", "-5", "step");
    expect_refused("step", "1.5", "step");
    expect_refused("step", "\"10\"", "step");
    expect_refused("time", NULL, "time");
    expect_refused("time", "null", "time");
    expect_refused("time", "\"yesterday\"", "time");
    expect_refused("time", "\"2030-13-02T03:04:05Z\"", "time");
    expect_refused("time", "\"2030-01-02T24:00:00Z\"", "time");
    expect_refused("time", "\"2030-01-02T03:04:05\"", "time");
    expect_refused("time", "\"2030-01-02T03:04:05.Z\"", "time");
    expect_refused("time", "\"2030-01-02T03:04:05+0200\"", "time");
    expect_refused("time", "\"2030-01-02T03:04:05Zjunk\"", "time");
    expect_refused("checkpoint_dir", "42", "checkpoint_dir");
    expect_refused("checkpoint_dir", "\"\"", "checkpoint_dir");
    expect_refused("checkpoint_bytes", "-1", "checkpoint_bytes");
    expect_refused("checkpoint_bytes", "\"big\"", "checkpoint_bytes");
    expect_refused("metrics", NULL, "metrics");
    expect_refused("metrics", "[1,2]", "metrics");
    expect_refused("metrics", "null", "metrics");
}

static void agent_proto_overlong_checkpoint_dir_is_refused(void **state)
{
    (void)state;
    char value[APROTO_MAX_CHECKPOINT_PATH + 8];
    value[0] = '"';
    memset(value + 1, 'a', APROTO_MAX_CHECKPOINT_PATH + 1);
    value[APROTO_MAX_CHECKPOINT_PATH + 2] = '"';
    value[APROTO_MAX_CHECKPOINT_PATH + 3] = '\0';
    expect_refused("checkpoint_dir", value, "checkpoint_dir");
}

static void agent_proto_rfc3339_accepts_the_forms_agents_write(void **state)
{
    (void)state;
    assert_true(aproto_rfc3339_valid("2030-01-02T03:04:05Z"));
    assert_true(aproto_rfc3339_valid("2030-01-02t03:04:05.123456z"));
    assert_true(aproto_rfc3339_valid("2030-01-02 03:04:05-07:30"));
    assert_true(aproto_rfc3339_valid("2030-02-30T00:00:00Z")); /* the calendar is PostgreSQL's */
    assert_false(aproto_rfc3339_valid(""));
    assert_false(aproto_rfc3339_valid("2030-01-02"));
    assert_false(aproto_rfc3339_valid("2030-00-02T03:04:05Z"));
    assert_false(aproto_rfc3339_valid("2030-01-32T03:04:05Z"));
    assert_false(aproto_rfc3339_valid("2030-01-02T03:60:05Z"));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(agent_proto_report_round_trips_keeping_every_value),
    cmocka_unit_test(agent_proto_report_with_checkpoint_round_trips),
    cmocka_unit_test(agent_proto_report_job_id_may_be_an_integer),
    cmocka_unit_test(agent_proto_report_keeps_the_text_of_its_values),
    cmocka_unit_test(agent_proto_malformed_reports_are_refused_naming_the_field),
    cmocka_unit_test(agent_proto_overlong_checkpoint_dir_is_refused),
    cmocka_unit_test(agent_proto_rfc3339_accepts_the_forms_agents_write),
};
TY_TEST_MAIN(tests)
