/* Unit tests for server/stream/stream_proto.c: the /stream protocol's requests and messages
 * (docs/streams.md) and the cluster stream's ordering rule. */
#include "ty_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "stream_proto.h"

/* Parses `text`, expecting success. */
static struct stream_req parse_ok(const char *text)
{
    struct stream_req req;
    const char *code = NULL;
    char detail[256] = "";
    int rc = stream_req_parse(text, strlen(text), &req, &code, detail, sizeof(detail));
    if (rc != 0)
        fail_msg("%s refused: %s: %s", text, code, detail);
    return req;
}

/* Parses `text`, expecting refusal with `want_code` and a detail containing `want_detail`. */
static void parse_refused(const char *text, const char *want_code, const char *want_detail)
{
    struct stream_req req;
    const char *code = NULL;
    char detail[256] = "";
    assert_int_equal(stream_req_parse(text, strlen(text), &req, &code, detail, sizeof(detail)), -1);
    assert_string_equal(code, want_code);
    if (strstr(detail, want_detail) == NULL)
        fail_msg("detail '%s' does not mention '%s'", detail, want_detail);
}

/* Loads a built message (freeing the text) as JSON. */
static json_t *load(char *text)
{
    assert_non_null(text);
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (j == NULL)
        fail_msg("not JSON (%s): %s", err.text, text);
    free(text);
    return j;
}

static void auth_carries_the_token(void **state)
{
    (void)state;
    struct stream_req req = parse_ok("{\"type\":\"auth\",\"token\":\"ty_abc\"}");
    assert_int_equal(req.type, STREAM_REQ_AUTH);
    assert_string_equal(req.token, "ty_abc");
}

static void auth_without_a_token_is_a_bad_request(void **state)
{
    (void)state;
    parse_refused("{\"type\":\"auth\"}", STREAM_E_BAD_REQUEST, "token");
    parse_refused("{\"type\":\"auth\",\"token\":\"\"}", STREAM_E_BAD_REQUEST, "token");
    parse_refused("{\"type\":\"auth\",\"token\":7}", STREAM_E_BAD_REQUEST, "token");
}

static void an_overlong_token_is_refused_not_cut(void **state)
{
    (void)state;
    char text[600];
    char token[400];
    memset(token, 'a', sizeof(token) - 1);
    token[sizeof(token) - 1] = '\0';
    snprintf(text, sizeof(text), "{\"type\":\"auth\",\"token\":\"%s\"}", token);
    parse_refused(text, STREAM_E_BAD_REQUEST, "too long");
}

static void subscribe_to_a_job_defaults_after_to_zero(void **state)
{
    (void)state;
    struct stream_req req = parse_ok("{\"type\":\"subscribe\",\"job\":7}");
    assert_int_equal(req.type, STREAM_REQ_SUBSCRIBE);
    assert_false(req.cluster);
    assert_int_equal(req.job, 7);
    assert_int_equal(req.after, 0);
}

static void subscribe_takes_after_and_a_job_id_string(void **state)
{
    (void)state;
    struct stream_req req = parse_ok("{\"type\":\"subscribe\",\"job\":\"12\",\"after\":41}");
    assert_int_equal(req.job, 12);
    assert_int_equal(req.after, 41);
    req = parse_ok("{\"type\":\"subscribe\",\"job\":3,\"after\":null}");
    assert_int_equal(req.after, 0);
}

static void subscribe_takes_batch_and_defaults_it_to_false(void **state)
{
    (void)state;
    assert_false(parse_ok("{\"type\":\"subscribe\",\"job\":7}").batch);
    assert_true(parse_ok("{\"type\":\"subscribe\",\"job\":7,\"batch\":true}").batch);
    assert_false(parse_ok("{\"type\":\"subscribe\",\"job\":7,\"batch\":false}").batch);
    assert_false(parse_ok("{\"type\":\"subscribe\",\"job\":7,\"batch\":null}").batch);
    assert_true(parse_ok("{\"type\":\"subscribe\",\"cluster\":true,\"batch\":true}").batch);
    parse_refused("{\"type\":\"subscribe\",\"job\":7,\"batch\":1}", STREAM_E_BAD_REQUEST,
                  "'batch'");
    parse_refused("{\"type\":\"subscribe\",\"job\":7,\"batch\":\"yes\"}", STREAM_E_BAD_REQUEST,
                  "'batch'");
}

static void subscribe_to_the_cluster(void **state)
{
    (void)state;
    struct stream_req req = parse_ok("{\"type\":\"subscribe\",\"cluster\":true,\"after\":8}");
    assert_true(req.cluster);
    assert_int_equal(req.job, 0);
    assert_int_equal(req.after, 8);
}

static void subscribe_needs_exactly_one_target(void **state)
{
    (void)state;
    parse_refused("{\"type\":\"subscribe\"}", STREAM_E_BAD_REQUEST, "'job'");
    parse_refused("{\"type\":\"subscribe\",\"cluster\":false}", STREAM_E_BAD_REQUEST, "'job'");
    parse_refused("{\"type\":\"subscribe\",\"cluster\":true,\"job\":1}", STREAM_E_BAD_REQUEST,
                  "not both");
    parse_refused("{\"type\":\"subscribe\",\"cluster\":\"yes\"}", STREAM_E_BAD_REQUEST,
                  "'cluster'");
}

static void job_ids_must_be_positive_integers(void **state)
{
    (void)state;
    const char *bad[] = {"0", "-3", "1.5", "\"\"", "\"007\"", "\"12x\"", "\"-1\"", "true", "[]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "{\"type\":\"subscribe\",\"job\":%s}", bad[i]);
        parse_refused(text, STREAM_E_BAD_REQUEST, "job");
    }
}

static void after_must_be_a_non_negative_integer(void **state)
{
    (void)state;
    parse_refused("{\"type\":\"subscribe\",\"job\":1,\"after\":-1}", STREAM_E_BAD_REQUEST, "after");
    parse_refused("{\"type\":\"subscribe\",\"job\":1,\"after\":\"5\"}", STREAM_E_BAD_REQUEST,
                  "after");
}

static void unsubscribe_names_its_target(void **state)
{
    (void)state;
    struct stream_req req = parse_ok("{\"type\":\"unsubscribe\",\"job\":9}");
    assert_int_equal(req.type, STREAM_REQ_UNSUBSCRIBE);
    assert_int_equal(req.job, 9);
    req = parse_ok("{\"type\":\"unsubscribe\",\"cluster\":true}");
    assert_true(req.cluster);
    parse_refused("{\"type\":\"unsubscribe\"}", STREAM_E_BAD_REQUEST, "'job'");
}

static void non_json_and_non_objects_are_bad_json(void **state)
{
    (void)state;
    parse_refused("{not json", STREAM_E_BAD_JSON, "not JSON");
    parse_refused("[1,2]", STREAM_E_BAD_JSON, "object");
    parse_refused("{\"type\":\"auth\",\"type\":\"auth\",\"token\":\"x\"}", STREAM_E_BAD_JSON,
                  "not JSON");
}

static void type_is_required_and_known(void **state)
{
    (void)state;
    parse_refused("{\"job\":1}", STREAM_E_BAD_REQUEST, "'type'");
    parse_refused("{\"type\":\"dance\"}", STREAM_E_UNKNOWN_TYPE, "dance");
}

static void welcome_subscribed_and_error_messages(void **state)
{
    (void)state;
    json_t *w = load(stream_msg_welcome("viewer"));
    assert_string_equal(json_string_value(json_object_get(w, "type")), "welcome");
    assert_string_equal(json_string_value(json_object_get(w, "role")), "viewer");
    json_decref(w);

    json_t *s = load(stream_msg_subscribed(7, 41));
    assert_string_equal(json_string_value(json_object_get(s, "type")), "subscribed");
    assert_int_equal(json_integer_value(json_object_get(s, "job")), 7);
    assert_int_equal(json_integer_value(json_object_get(s, "head")), 41);
    assert_null(json_object_get(s, "cluster"));
    json_decref(s);

    s = load(stream_msg_subscribed(0, 9));
    assert_true(json_is_true(json_object_get(s, "cluster")));
    assert_null(json_object_get(s, "job"));
    assert_int_equal(json_integer_value(json_object_get(s, "head")), 9);
    json_decref(s);

    json_t *e = load(stream_msg_error(STREAM_E_UNKNOWN_JOB, "there is no job \"5\""));
    assert_string_equal(json_string_value(json_object_get(e, "code")), "unknown_job");
    assert_string_equal(json_string_value(json_object_get(e, "detail")), "there is no job \"5\"");
    json_decref(e);
}

static void closing_lists_each_subscription_resume_point(void **state)
{
    (void)state;
    struct stream_resume r[] = {{7, 41}, {0, 8}, {12, 0}};
    json_t *c = load(stream_msg_closing("slow_consumer", r, 3));
    assert_string_equal(json_string_value(json_object_get(c, "type")), "closing");
    assert_string_equal(json_string_value(json_object_get(c, "reason")), "slow_consumer");
    json_t *resume = json_object_get(c, "resume");
    json_t *jobs = json_object_get(resume, "job");
    assert_int_equal(json_object_size(jobs), 2);
    assert_int_equal(json_integer_value(json_object_get(jobs, "7")), 41);
    assert_int_equal(json_integer_value(json_object_get(jobs, "12")), 0);
    assert_int_equal(json_integer_value(json_object_get(resume, "cluster")), 8);
    json_decref(c);

    c = load(stream_msg_closing("shutdown", NULL, 0));
    resume = json_object_get(c, "resume");
    assert_int_equal(json_object_size(json_object_get(resume, "job")), 0);
    assert_null(json_object_get(resume, "cluster"));
    json_decref(c);
}

static void job_event_carries_the_row_and_its_data(void **state)
{
    (void)state;
    const char *body = "{\"lines\": [\"a \\\"b\\\"\"], \"rank\": 1}";
    struct store_stream_row row = {.seq = 42,
                                   .kind = "log",
                                   .has_attempt = true,
                                   .attempt = 2,
                                   .has_rank = true,
                                   .rank = 1,
                                   .at = "2026-11-23T23:00:00.123Z",
                                   .body = body,
                                   .body_len = strlen(body)};
    json_t *ev = load(stream_msg_event(7, &row));
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "event");
    assert_int_equal(json_integer_value(json_object_get(ev, "job")), 7);
    assert_int_equal(json_integer_value(json_object_get(ev, "seq")), 42);
    assert_string_equal(json_string_value(json_object_get(ev, "kind")), "log");
    assert_int_equal(json_integer_value(json_object_get(ev, "attempt")), 2);
    assert_int_equal(json_integer_value(json_object_get(ev, "rank")), 1);
    assert_string_equal(json_string_value(json_object_get(ev, "at")), "2026-11-23T23:00:00.123Z");
    json_t *line = json_array_get(json_object_get(json_object_get(ev, "data"), "lines"), 0);
    assert_string_equal(json_string_value(line), "a \"b\"");
    assert_null(json_object_get(ev, "cluster"));
    json_decref(ev);
}

static void job_event_without_attempt_or_rank_has_nulls(void **state)
{
    (void)state;
    struct store_stream_row row = {
        .seq = 1, .kind = "event", .at = "t", .body = "{}", .body_len = 2};
    json_t *ev = load(stream_msg_event(3, &row));
    assert_true(json_is_null(json_object_get(ev, "attempt")));
    assert_true(json_is_null(json_object_get(ev, "rank")));
    json_decref(ev);
}

static void cluster_event_is_marked_and_has_no_job_attempt_or_rank(void **state)
{
    (void)state;
    const char *body = "{\"id\": \"node-a\", \"status\": \"ALIVE\"}";
    struct store_stream_row row = {
        .seq = 9, .kind = "node", .at = "t", .body = body, .body_len = strlen(body)};
    json_t *ev = load(stream_msg_event(0, &row));
    assert_true(json_is_true(json_object_get(ev, "cluster")));
    assert_int_equal(json_integer_value(json_object_get(ev, "seq")), 9);
    assert_null(json_object_get(ev, "job"));
    assert_null(json_object_get(ev, "attempt"));
    assert_null(json_object_get(ev, "rank"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(ev, "data"), "id")),
                        "node-a");
    json_decref(ev);
}

static void strings_that_would_need_escaping_cannot_break_the_message(void **state)
{
    (void)state;
    struct store_stream_row row = {
        .seq = 1, .kind = "ev\"il\\", .at = "a\nb", .body = "{}", .body_len = 2};
    json_t *ev = load(stream_msg_event(3, &row));
    assert_string_equal(json_string_value(json_object_get(ev, "kind")), "ev?il?");
    assert_string_equal(json_string_value(json_object_get(ev, "at")), "a?b");
    json_decref(ev);
}

static void contiguous_rows_are_all_deliverable(void **state)
{
    (void)state;
    int64_t seqs[] = {5, 6, 7};
    assert_int_equal(stream_deliverable(4, 0, seqs, 3), 3);
    assert_int_equal(stream_deliverable(4, 0, seqs, 0), 0);
}

static void delivery_stops_at_a_hole_that_may_still_be_filled(void **state)
{
    (void)state;
    int64_t seqs[] = {5, 7, 8};
    assert_int_equal(stream_deliverable(4, 4, seqs, 3), 1);
    int64_t first_missing[] = {6, 7};
    assert_int_equal(stream_deliverable(4, 4, first_missing, 2), 0);
}

static void holes_below_the_settled_mark_are_passed(void **state)
{
    (void)state;
    int64_t seqs[] = {5, 7, 8, 11, 12};
    /* 6 is final (below 8); 9 and 10 are not (above 8): stops before 11. */
    assert_int_equal(stream_deliverable(4, 8, seqs, 5), 3);
    /* Everything up to 12 settled: all of them. */
    assert_int_equal(stream_deliverable(4, 12, seqs, 5), 5);
    /* The hole right after the cursor, settled. */
    int64_t after_hole[] = {9, 10};
    assert_int_equal(stream_deliverable(4, 9, after_hole, 2), 2);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(auth_carries_the_token),
    cmocka_unit_test(auth_without_a_token_is_a_bad_request),
    cmocka_unit_test(an_overlong_token_is_refused_not_cut),
    cmocka_unit_test(subscribe_to_a_job_defaults_after_to_zero),
    cmocka_unit_test(subscribe_takes_batch_and_defaults_it_to_false),
    cmocka_unit_test(subscribe_takes_after_and_a_job_id_string),
    cmocka_unit_test(subscribe_to_the_cluster),
    cmocka_unit_test(subscribe_needs_exactly_one_target),
    cmocka_unit_test(job_ids_must_be_positive_integers),
    cmocka_unit_test(after_must_be_a_non_negative_integer),
    cmocka_unit_test(unsubscribe_names_its_target),
    cmocka_unit_test(non_json_and_non_objects_are_bad_json),
    cmocka_unit_test(type_is_required_and_known),
    cmocka_unit_test(welcome_subscribed_and_error_messages),
    cmocka_unit_test(closing_lists_each_subscription_resume_point),
    cmocka_unit_test(job_event_carries_the_row_and_its_data),
    cmocka_unit_test(job_event_without_attempt_or_rank_has_nulls),
    cmocka_unit_test(cluster_event_is_marked_and_has_no_job_attempt_or_rank),
    cmocka_unit_test(strings_that_would_need_escaping_cannot_break_the_message),
    cmocka_unit_test(contiguous_rows_are_all_deliverable),
    cmocka_unit_test(delivery_stops_at_a_hole_that_may_still_be_filled),
    cmocka_unit_test(holes_below_the_settled_mark_are_passed),
};

TY_TEST_MAIN(tests)
