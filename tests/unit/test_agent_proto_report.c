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

/* The report's values_text, parsed (it must be one JSON object). */
static json_t *values_of(const struct aproto_report *r)
{
    json_t *v = json_loadb(r->values_text, r->values_len, 0, NULL);
    if (!json_is_object(v))
        fail_msg("values_text is no JSON object: %.*s", (int)r->values_len, r->values_text);
    return v;
}

/* The report's metric named `name`; NULL when it has none. */
static const struct aproto_metric *metric(const struct aproto_report *r, const char *name)
{
    for (size_t i = 0; i < r->n_metrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0)
            return &r->metrics[i];
    return NULL;
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
    json_t *values = values_of(r);
    assert_int_equal(json_object_size(values), 7);
    assert_true(json_real_value(json_object_get(values, "loss")) == 0.25);
    assert_int_equal(json_integer_value(json_object_get(values, "epoch")), 4);
    assert_string_equal(json_string_value(json_object_get(values, "note")), "warm");
    assert_true(json_is_true(json_object_get(values, "flag")));
    assert_true(json_is_null(json_object_get(values, "none")));
    assert_int_equal(json_array_size(json_object_get(values, "list")), 1);
    assert_true(json_is_object(json_object_get(values, "obj")));
    json_decref(values);
    assert_true(metric(r, "loss")->is_number && metric(r, "loss")->number == 0.25);
    assert_true(metric(r, "epoch")->is_number && metric(r, "epoch")->number == 4);
    assert_false(metric(r, "note")->is_number);
    assert_false(metric(r, "list")->is_number);
    assert_null(metric(r, ""));
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
    assert_int_equal(m.report.n_metrics, 0);
    assert_int_equal(m.report.values_len, 2);
    aproto_node_msg_free(&m);
}

/* The values' text: as the message wrote it (stored as is, not written again); when a metric was
 * skipped or named twice, the members kept as written; when a field of the message is written
 * twice or with an escape (read by jansson), as jansson writes the values. */
static void expect_values_text(const char *text, const char *values)
{
    struct aproto_node_msg m;
    char err[256] = "";
    assert_int_equal(parse_text(text, &m, err, sizeof(err)), 0);
    if (m.report.values_len != strlen(values) ||
        memcmp(m.report.values_text, values, strlen(values)) != 0)
        fail_msg("%s: values '%.*s', not '%s'", text, (int)m.report.values_len,
                 m.report.values_text, values);
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
                       "{\"y\":-0.002}");
    expect_values_text(HEAD "\"report_seq\":1,\"metrics\":{}" TIME "}", "{}");
    expect_values_text(HEAD "\"report_seq\":1,\"metrics\":{\"\":1,\"a\" : 2.50}" TIME "}",
                       "{\"a\" : 2.50}");
    expect_values_text(HEAD "\"report_seq\":1,\"metrics\":{\"a\":0.10,\"b\":[1],\"a\":2.50}" TIME
                            "}",
                       "{\"a\":2.50,\"b\":[1]}");
    expect_values_text(HEAD "\"report_seq\":1,\"metric\\u0073\":{\"a\":2.50}" TIME "}",
                       "{\"a\":2.5}");
    expect_values_text(HEAD "\"report_seq\":1,\"metrics\":{\"n\\u00e9\\n\":2.50}" TIME "}",
                       "{\"n\\u00e9\\n\":2.50}");
#undef HEAD
#undef TIME
}

/* A report written plainly (scanned: json_scan.h) and the same one with its "type" written with
 * an escape (read by jansson) hold the same metrics: names decoded, numbers as jansson reads them,
 * values equal; a metric named twice keeps the last, as jansson does. */
static void agent_proto_report_scanned_and_parsed_agree(void **state)
{
    (void)state;
    static const char *const metrics[] = {
        "{\"a\":1,\"b\":-0.0,\"c\":1e300,\"d\":1e-400,\"e\":1152921504606846976,\"f\":-7}",
        "{\"na\\u00efve\\t\\\"q\\\"\":0.5,\"\\ud83d\\ude00\":\"smile \\ud83d\\ude00\"}",
        "{\"x\":[1,[2,[3]],{\"y\":{\"z\":null}}],\"t\":true,\"f\":false,\"s\":\"\xc3\xa9\"}",
        "{\"a\":1,\"a\":2}",
        " { } ",
    };
    for (size_t k = 0; k < sizeof(metrics) / sizeof(metrics[0]); k++) {
        char plain[512], escaped[512];
        static const char form[] =
            "{\"%s\":\"report\",\"seq\":3,\"job_id\":\"12\",\"attempt\":1,\"rank\":0,"
            "\"report_seq\":2,\"step\":null,\"metrics\":%s,\"time\":\"2030-01-02T03:04:05Z\"}";
        snprintf(plain, sizeof(plain), form, "type", metrics[k]);
        snprintf(escaped, sizeof(escaped), form, "typ\\u0065", metrics[k]);
        struct aproto_node_msg a, b;
        char err[256] = "";
        if (parse_text(plain, &a, err, sizeof(err)) != 0 ||
            parse_text(escaped, &b, err, sizeof(err)) != 0)
            fail_msg("%s: %s", metrics[k], err);
        assert_null(a.root); /* scanned */
        assert_non_null(b.root);
        assert_int_equal(a.report.n_metrics, b.report.n_metrics);
        for (size_t i = 0; i < a.report.n_metrics; i++) {
            const struct aproto_metric *x = &a.report.metrics[i], *y = metric(&b.report, x->name);
            if (y == NULL || x->is_number != y->is_number ||
                (x->is_number && memcmp(&x->number, &y->number, sizeof(double)) != 0))
                fail_msg("%s: metric '%s' differs", metrics[k], x->name);
        }
        json_t *va = values_of(&a.report), *vb = values_of(&b.report);
        assert_true(json_equal(va, vb));
        json_decref(va);
        json_decref(vb);
        assert_int_equal(a.report.seq, 3);
        assert_int_equal(a.report.job, 12);
        assert_int_equal(a.report.step, -1);
        assert_string_equal(a.report.time, b.report.time);
        aproto_node_msg_free(&a);
        aproto_node_msg_free(&b);
    }
}

/* What jansson refuses is refused whichever way it is read (the scanner leaves it to jansson):
 * broken syntax in or after the values, bad UTF-8 or escapes, numbers out of range. */
static void agent_proto_report_refuses_what_jansson_refuses(void **state)
{
    (void)state;
    static const char *const metrics[] = {
        "{\"a\":1 \"b\":2}",
        "{\"a\":1,}",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":-}",
        "{\"a\":tru}",
        "{\"a\":\"\xc3\"}",
        "{\"a\":\"\xed\xa0\x80\"}",
        "{\"a\":\"\\ud800\"}",
        "{\"\\u0000\":1}",
        "{\"a\":\"\\x\"}",
        "{\"a\":1e400}",
        "{\"a\":99999999999999999999}",
        "{\"a\":[1,]}",
        "{\"a\":\"tab\there\"}",
        "{\"a\":{\"b\"}}",
    };
    for (size_t k = 0; k < sizeof(metrics) / sizeof(metrics[0]); k++) {
        char text[512];
        snprintf(text, sizeof(text),
                 "{\"type\":\"report\",\"seq\":3,\"job_id\":\"12\",\"attempt\":1,\"rank\":0,"
                 "\"report_seq\":2,\"metrics\":%s,\"time\":\"2030-01-02T03:04:05Z\"}",
                 metrics[k]);
        struct aproto_node_msg m;
        char err[256] = "";
        if (parse_text(text, &m, err, sizeof(err)) == 0) {
            aproto_node_msg_free(&m);
            fail_msg("accepted: %s", text);
        }
        if (strstr(err, "invalid JSON") == NULL)
            fail_msg("%s: reason '%s'", text, err);
    }
    struct aproto_node_msg m;
    char err[256] = "";
    const char *trailing = "{\"type\":\"report\",\"seq\":3,\"job_id\":\"12\",\"attempt\":1,"
                           "\"rank\":0,\"report_seq\":2,\"metrics\":{},"
                           "\"time\":\"2030-01-02T03:04:05Z\"} x";
    assert_int_equal(parse_text(trailing, &m, err, sizeof(err)), -1);
}

/* The server's --max-metrics-per-report keeps a report's first metrics: its values' text is
 * then theirs only. */
static void agent_proto_report_keeps_its_first_metrics(void **state)
{
    (void)state;
    const char *text = "{\"type\":\"report\",\"seq\":3,\"job_id\":\"12\",\"attempt\":1,\"rank\":0,"
                       "\"report_seq\":2,\"metrics\":{ \"a\" : 1 , \"b\":[2,3],\"c\":\"x\" },"
                       "\"time\":\"2030-01-02T03:04:05Z\"}";
    for (size_t keep = 0; keep <= 3; keep++) {
        struct aproto_node_msg m;
        char err[256] = "";
        assert_int_equal(parse_text(text, &m, err, sizeof(err)), 0);
        aproto_report_keep(&m.report, keep);
        static const char *const want[] = {"{}", "{\"a\":1}", "{\"a\":1,\"b\":[2,3]}",
                                           "{\"a\":1,\"b\":[2,3],\"c\":\"x\"}"};
        json_t *got = values_of(&m.report), *w = json_loads(want[keep], 0, NULL);
        assert_true(json_equal(got, w));
        json_decref(got);
        json_decref(w);
        assert_int_equal(m.report.n_metrics, keep);
        assert_int_equal(m.report.skipped, 3 - keep);
        aproto_node_msg_free(&m);
    }
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
    cmocka_unit_test(agent_proto_report_scanned_and_parsed_agree),
    cmocka_unit_test(agent_proto_report_refuses_what_jansson_refuses),
    cmocka_unit_test(agent_proto_report_keeps_its_first_metrics),
    cmocka_unit_test(agent_proto_malformed_reports_are_refused_naming_the_field),
    cmocka_unit_test(agent_proto_overlong_checkpoint_dir_is_refused),
    cmocka_unit_test(agent_proto_rfc3339_accepts_the_forms_agents_write),
};
TY_TEST_MAIN(tests)
