/* cli/stream_proto.c and cli/follow_format.c: the /stream messages the CLI sends and reads
 * (docs/streams.md), the URL it derives from GET /version, the resume bookkeeping that keeps a
 * reconnect from repeating or losing rows, the backoff, and the lines the follow commands print. */
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#include "follow_format.h"
#include "stream_proto.h"

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    assert_non_null(v);
    return v;
}

/* ----- messages ------------------------------------------------------------------------------ */

static void event_message_fields_are_read(void **state)
{
    (void)state;
    json_t *v = load("{\"type\":\"event\",\"job\":7,\"seq\":42,\"kind\":\"log\",\"attempt\":2,"
                     "\"rank\":1,\"at\":\"2026-01-01T00:00:00Z\",\"data\":{\"lines\":[]}}");
    struct stream_msg m;
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_EVENT);
    assert_int_equal(m.job, 7);
    assert_int_equal(m.seq, 42);
    assert_string_equal(m.kind, "log");
    assert_int_equal(m.attempt, 2);
    assert_int_equal(m.rank, 1);
    assert_string_equal(json_string_value(m.at), "2026-01-01T00:00:00Z");
    assert_true(json_is_object(m.data));
    json_decref(v);
}

static void event_with_null_rank_reads_as_minus_one(void **state)
{
    (void)state;
    json_t *v = load("{\"type\":\"event\",\"job\":7,\"seq\":1,\"kind\":\"event\",\"attempt\":null,"
                     "\"rank\":null,\"data\":{}}");
    struct stream_msg m;
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_EVENT);
    assert_int_equal(m.rank, -1);
    assert_int_equal(m.attempt, 0);
    json_decref(v);
}

static void event_without_seq_or_kind_is_bad(void **state)
{
    (void)state;
    struct stream_msg m;
    json_t *v = load("{\"type\":\"event\",\"job\":7,\"kind\":\"log\"}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_BAD);
    json_decref(v);
    v = load("{\"type\":\"event\",\"job\":7,\"seq\":\"3\",\"kind\":\"log\"}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_BAD);
    json_decref(v);
    v = load("{\"type\":\"event\",\"job\":7,\"seq\":3}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_BAD);
    json_decref(v);
    v = load("[1]");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_BAD);
    json_decref(v);
    assert_int_equal(stream_msg_parse(NULL, &m), STREAM_MSG_BAD);
}

static void control_messages_are_read(void **state)
{
    (void)state;
    struct stream_msg m;
    json_t *v = load("{\"type\":\"subscribed\",\"job\":7,\"head\":41}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_SUBSCRIBED);
    assert_int_equal(m.job, 7);
    assert_int_equal(m.seq, 41);
    json_decref(v);
    v = load("{\"type\":\"error\",\"code\":\"unauthorized\",\"detail\":\"bad token\"}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_ERROR);
    assert_string_equal(m.text, "unauthorized");
    assert_string_equal(m.detail, "bad token");
    json_decref(v);
    v = load("{\"type\":\"closing\",\"reason\":\"too slow\",\"resume\":{\"job\":{\"7\":41}}}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_CLOSING);
    assert_string_equal(m.text, "too slow");
    json_decref(v);
    v = load("{\"type\":\"welcome\",\"role\":\"viewer\"}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_WELCOME);
    json_decref(v);
    v = load("{\"type\":\"events\",\"events\":[{\"type\":\"event\",\"job\":7,\"seq\":42,"
             "\"kind\":\"log\"},{\"type\":\"event\",\"job\":7,\"seq\":43,\"kind\":\"log\"}]}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_EVENTS);
    assert_int_equal(json_array_size(m.data), 2);
    struct stream_msg e;
    assert_int_equal(stream_msg_parse(json_array_get(m.data, 1), &e), STREAM_MSG_EVENT);
    assert_int_equal(e.seq, 43);
    json_decref(v);
    v = load("{\"type\":\"events\",\"events\":7}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_BAD);
    json_decref(v);
    v = load("{\"type\":\"something-newer\"}");
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_OTHER);
    json_decref(v);
}

static void only_unavailable_and_too_many_clients_are_retried(void **state)
{
    (void)state;
    assert_true(stream_error_is_transient("unavailable"));
    assert_true(stream_error_is_transient("too_many_clients"));
    assert_false(stream_error_is_transient("bad_token"));
    assert_false(stream_error_is_transient("unknown_job"));
    assert_false(stream_error_is_transient("not_authenticated"));
    assert_false(stream_error_is_transient(NULL));
}

static void auth_and_subscribe_messages_follow_the_protocol(void **state)
{
    (void)state;
    char *text = stream_auth_message("s3cret");
    json_t *v = load(text);
    assert_string_equal(json_string_value(json_object_get(v, "type")), "auth");
    assert_string_equal(json_string_value(json_object_get(v, "token")), "s3cret");
    json_decref(v);
    free(text);
    text = stream_subscribe_message(7, 41);
    v = load(text);
    assert_string_equal(json_string_value(json_object_get(v, "type")), "subscribe");
    assert_int_equal(json_integer_value(json_object_get(v, "job")), 7);
    assert_int_equal(json_integer_value(json_object_get(v, "after")), 41);
    assert_true(json_is_true(json_object_get(v, "batch")));
    json_decref(v);
    free(text);
}

/* ----- URL ----------------------------------------------------------------------------------- */

static const char version_text[] =
    "{\"version\":\"1\",\"stream\":{\"port\":8081,\"path\":\"/stream\","
    "\"protocol\":\"trainyard-stream.v1\"}}";

static void stream_url_takes_the_servers_host_and_the_streams_port(void **state)
{
    (void)state;
    json_t *v = load(version_text);
    char url[256], err[256];
    assert_int_equal(
        stream_url_from_version("http://10.1.2.3:8080", v, url, sizeof url, err, sizeof err), 0);
    assert_string_equal(url, "ws://10.1.2.3:8081/stream");
    assert_int_equal(
        stream_url_from_version("http://example.org", v, url, sizeof url, err, sizeof err), 0);
    assert_string_equal(url, "ws://example.org:8081/stream");
    assert_int_equal(
        stream_url_from_version("http://[::1]:8080/x", v, url, sizeof url, err, sizeof err), 0);
    assert_string_equal(url, "ws://[::1]:8081/stream");
    assert_int_equal(
        stream_url_from_version("https://h.example:8443", v, url, sizeof url, err, sizeof err), 0);
    assert_string_equal(url, "wss://h.example:8081/stream");
    json_decref(v);
}

static void stream_url_is_refused_without_a_stream_or_for_another_scheme(void **state)
{
    (void)state;
    char url[256], err[256];
    json_t *old = load("{\"version\":\"1\",\"api\":\"v1\"}");
    assert_int_equal(
        stream_url_from_version("http://h:8080", old, url, sizeof url, err, sizeof err), -1);
    assert_non_null(strstr(err, "stream"));
    json_decref(old);
    json_t *v = load(version_text);
    assert_int_equal(stream_url_from_version("ftp://h", v, url, sizeof url, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an http:// or https://"));
    json_decref(v);
    json_t *other = load("{\"stream\":{\"port\":1,\"path\":\"/s\",\"protocol\":\"v2\"}}");
    assert_int_equal(stream_url_from_version("http://h", other, url, sizeof url, err, sizeof err),
                     -1);
    json_decref(other);
}

/* ----- resume bookkeeping ----------------------------------------------------------------------
 */

static void cursor_hands_on_each_seq_once_across_a_reconnect(void **state)
{
    (void)state;
    struct stream_cursor c;
    stream_cursor_init(&c, 7);
    assert_int_equal(c.last_seq, 0);
    for (long long s = 1; s <= 5; s++)
        assert_true(stream_cursor_take(&c, 7, s));
    /* The connection drops; the resubscription says after=5 but a resend overlaps. */
    assert_int_equal(c.last_seq, 5);
    assert_false(stream_cursor_take(&c, 7, 4));
    assert_false(stream_cursor_take(&c, 7, 5));
    assert_true(stream_cursor_take(&c, 7, 6));
    assert_int_equal(c.last_seq, 6);
}

static void cursor_accepts_gaps_and_ignores_other_jobs(void **state)
{
    (void)state;
    struct stream_cursor c;
    stream_cursor_init(&c, 7);
    assert_true(stream_cursor_take(&c, 7, 3));
    assert_true(stream_cursor_take(&c, 7, 10));
    assert_false(stream_cursor_take(&c, 8, 11));
    assert_int_equal(c.last_seq, 10);
}

static void cursor_is_caught_up_once_the_head_is_handed_on(void **state)
{
    (void)state;
    struct stream_cursor c;
    stream_cursor_init(&c, 7);
    assert_false(stream_cursor_caught_up(&c));
    stream_cursor_subscribed(&c, 2);
    assert_false(stream_cursor_caught_up(&c));
    stream_cursor_take(&c, 7, 1);
    assert_false(stream_cursor_caught_up(&c));
    stream_cursor_take(&c, 7, 2);
    assert_true(stream_cursor_caught_up(&c));
    struct stream_cursor empty;
    stream_cursor_init(&empty, 9);
    stream_cursor_subscribed(&empty, 0);
    assert_true(stream_cursor_caught_up(&empty));
}

static void backoff_doubles_up_to_its_ceiling(void **state)
{
    (void)state;
    long b = stream_backoff_next(0);
    assert_int_equal(b, STREAM_BACKOFF_FIRST_MS);
    long prev = b;
    for (int i = 0; i < 20; i++) {
        b = stream_backoff_next(b);
        assert_true(b >= prev);
        assert_true(b <= STREAM_BACKOFF_MAX_MS);
        prev = b;
    }
    assert_int_equal(b, STREAM_BACKOFF_MAX_MS);
    assert_int_equal(stream_backoff_next(STREAM_BACKOFF_FIRST_MS), 2 * STREAM_BACKOFF_FIRST_MS);
}

/* ----- lines --------------------------------------------------------------------------------- */

/* Formats `text` (an event message) with fn into a string the test owns. */
static char *line_of(const char *text, int which)
{
    json_t *v = load(text);
    struct stream_msg m;
    assert_int_equal(stream_msg_parse(v, &m), STREAM_MSG_EVENT);
    struct strbuf sb = STRBUF_INIT;
    bool ok = which == 0   ? follow_format_event(&sb, &m)
              : which == 1 ? follow_format_report(&sb, &m, NULL, -1)
              : which == 2 ? follow_format_report(&sb, &m, "loss", 1)
                           : follow_format_rank0_report(&sb, &m);
    json_decref(v);
    if (!ok) {
        assert_int_equal(sb.len, 0);
        sb_free(&sb);
        return NULL;
    }
    return sb_steal(&sb);
}

static const char status_row[] =
    "{\"type\":\"event\",\"job\":7,\"seq\":3,\"kind\":\"event\",\"at\":\"2026-11-23T07:43:04."
    "123Z\","
    "\"data\":{\"status\":\"RUNNING\",\"message\":\"all 2 workers\\nrunning\",\"attempt\":1}}";
static const char worker_row[] =
    "{\"type\":\"event\",\"job\":7,\"seq\":4,\"kind\":\"worker\",\"attempt\":1,\"rank\":1,"
    "\"at\":\"2026-11-23T07:43:05Z\",\"data\":{\"rank\":1,\"attempt\":1,\"node_id\":\"n1\","
    "\"status\":\"EXITED\",\"pid\":4242,\"exit_code\":0,\"signal\":null}}";
static const char checkpoint_row[] =
    "{\"type\":\"event\",\"job\":7,\"seq\":5,\"kind\":\"checkpoint\",\"at\":\"2026-11-23T07:43:"
    "06Z\","
    "\"data\":{\"id\":9,\"attempt\":1,\"index\":3,\"step\":200,\"metrics\":{\"loss\":0.25},"
    "\"status\":\"COMMITTED\"}}";
static const char report_row[] =
    "{\"type\":\"event\",\"job\":7,\"seq\":6,\"kind\":\"report\",\"rank\":1,"
    "\"at\":\"2026-11-23T07:43:07Z\",\"data\":{\"rank\":1,\"attempt\":1,\"k\":2,\"step\":20,"
    "\"metrics\":{\"loss\":0.5,\"acc\":0.75}}}";
static const char rank0_report_row[] =
    "{\"type\":\"event\",\"job\":7,\"seq\":7,\"kind\":\"report\",\"rank\":0,"
    "\"at\":\"2026-11-23T07:43:07Z\",\"data\":{\"rank\":0,\"attempt\":1,\"k\":2,\"step\":20,"
    "\"metrics\":{\"loss\":0.5}}}";

static void status_change_line_has_time_status_attempt_and_message(void **state)
{
    (void)state;
    char *line = line_of(status_row, 0);
    assert_string_equal(line, "2026-11-23T07:43:04Z status RUNNING (attempt 1): all 2 workers "
                              "running");
    free(line);
}

static void worker_and_checkpoint_lines_say_what_changed(void **state)
{
    (void)state;
    char *line = line_of(worker_row, 0);
    assert_string_equal(line, "2026-11-23T07:43:05Z worker rank 1 EXITED (attempt 1) node_id n1 "
                              "pid 4242 exit_code 0");
    free(line);
    line = line_of(checkpoint_row, 0);
    assert_string_equal(
        line, "2026-11-23T07:43:06Z checkpoint 3 COMMITTED (attempt 1) step 200 loss=0.25");
    free(line);
    assert_null(line_of(report_row, 0));
}

static void report_line_lists_metrics_and_obeys_filters(void **state)
{
    (void)state;
    char *line = line_of(report_row, 1);
    assert_string_equal(line, "2026-11-23T07:43:07Z rank 1 step 20 loss=0.5 acc=0.75");
    free(line);
    line = line_of(report_row, 2);
    assert_string_equal(line, "2026-11-23T07:43:07Z rank 1 step 20 loss=0.5");
    free(line);
    assert_null(line_of(rank0_report_row, 2)); /* rank filter 1 */
    assert_null(line_of(status_row, 1));
}

static void only_rank_zero_reports_make_wait_follow_lines(void **state)
{
    (void)state;
    char *line = line_of(rank0_report_row, 3);
    assert_string_equal(line, "[report] step 20 loss=0.5");
    free(line);
    assert_null(line_of(report_row, 3));
}

static void terminal_statuses_end_the_follow(void **state)
{
    (void)state;
    const char *statuses[] = {"SUCCEEDED", "FAILED", "STOPPED", "RUNNING", "RESTARTING"};
    for (int i = 0; i < 5; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"type\":\"event\",\"job\":1,\"seq\":1,\"kind\":\"event\",\"data\":"
                 "{\"status\":\"%s\"}}",
                 statuses[i]);
        json_t *v = load(text);
        struct stream_msg m;
        stream_msg_parse(v, &m);
        assert_int_equal(follow_is_terminal(&m), i < 3);
        assert_string_equal(follow_event_status(&m), statuses[i]);
        json_decref(v);
    }
    json_t *v = load(worker_row);
    struct stream_msg m;
    stream_msg_parse(v, &m);
    assert_false(follow_is_terminal(&m));
    assert_null(follow_event_status(&m));
    json_decref(v);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(event_message_fields_are_read),
    cmocka_unit_test(event_with_null_rank_reads_as_minus_one),
    cmocka_unit_test(event_without_seq_or_kind_is_bad),
    cmocka_unit_test(control_messages_are_read),
    cmocka_unit_test(only_unavailable_and_too_many_clients_are_retried),
    cmocka_unit_test(auth_and_subscribe_messages_follow_the_protocol),
    cmocka_unit_test(stream_url_takes_the_servers_host_and_the_streams_port),
    cmocka_unit_test(stream_url_is_refused_without_a_stream_or_for_another_scheme),
    cmocka_unit_test(cursor_hands_on_each_seq_once_across_a_reconnect),
    cmocka_unit_test(cursor_accepts_gaps_and_ignores_other_jobs),
    cmocka_unit_test(cursor_is_caught_up_once_the_head_is_handed_on),
    cmocka_unit_test(backoff_doubles_up_to_its_ceiling),
    cmocka_unit_test(status_change_line_has_time_status_attempt_and_message),
    cmocka_unit_test(worker_and_checkpoint_lines_say_what_changed),
    cmocka_unit_test(report_line_lists_metrics_and_obeys_filters),
    cmocka_unit_test(only_rank_zero_reports_make_wait_follow_lines),
    cmocka_unit_test(terminal_statuses_end_the_follow),
};
TY_TEST_MAIN(tests)
