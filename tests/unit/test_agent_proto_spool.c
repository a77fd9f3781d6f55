/* Unit tests for what the agent reads besides the server's messages (common/agent_proto.h): the
 * remains of a launch the parser refused, and the bodies the agent spools and reads back after a
 * restart (agent_proto_spool.c). */
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#include "agent_proto.h"

static void refused_launch_still_names_its_job_attempt_and_ranks(void **state)
{
    (void)state;
    const char *text = "{\"type\":\"launch\",\"job_id\":\"j-1\",\"attempt\":3,\"entrypoint\":7,"
                       "\"workers\":[{\"rank\":0},{\"rank\":\"x\"},{},{\"rank\":5}]}";
    struct aproto_server_msg m;
    char err[256] = "";
    assert_int_equal(aproto_server_msg_parse(text, strlen(text), &m, err, sizeof(err)), -1);
    assert_int_equal(m.type, APROTO_MSG_LAUNCH);
    assert_null(m.root);
    struct aproto_launch_refused r;
    assert_int_equal(aproto_launch_refused_parse(text, strlen(text), &r), 0);
    assert_string_equal(r.job_id, "j-1");
    assert_int_equal(r.attempt, 3);
    assert_int_equal(r.n_ranks, 2);
    assert_int_equal(r.ranks[0], 0);
    assert_int_equal(r.ranks[1], 5);
    aproto_launch_refused_free(&r);
    assert_null(r.root);
}

static void refused_launch_without_job_or_workers_names_nothing(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "{\"type\":\"launch\",\"attempt\":0,\"workers\":[{\"rank\":0}]}",
        "{\"type\":\"launch\",\"job_id\":\"j\",\"attempt\":\"0\",\"workers\":[{\"rank\":0}]}",
        "{\"type\":\"launch\",\"job_id\":\"j\",\"attempt\":0,\"workers\":{}}",
        "[1]",
        "{\"type\":",
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        struct aproto_launch_refused r;
        assert_int_equal(aproto_launch_refused_parse(texts[i], strlen(texts[i]), &r), -1);
        assert_null(r.root);
    }
}

static void spooled_exit_round_trips(void **state)
{
    (void)state;
    struct aproto_exit_body in = {.job_id = "17",
                                  .attempt = 2,
                                  .rank = 1,
                                  .exit_code = -1,
                                  .signal = 9,
                                  .error = "oom",
                                  .reason = "MemoryError"};
    char *text = aproto_exit_body(&in);
    assert_non_null(text);
    struct aproto_exit_body out;
    assert_int_equal(aproto_exit_body_parse(text, strlen(text), &out), 0);
    assert_string_equal(out.job_id, "17");
    assert_int_equal(out.attempt, 2);
    assert_int_equal(out.rank, 1);
    assert_int_equal(out.exit_code, -1);
    assert_int_equal(out.signal, 9);
    assert_string_equal(out.error, "oom");
    assert_string_equal(out.reason, "MemoryError");
    aproto_exit_body_free(&out);
    free(text);
}

static void spooled_exit_reads_leniently_and_refuses_what_names_no_worker(void **state)
{
    (void)state;
    const char *ok = "{\"job_id\":\"j\",\"attempt\":0,\"rank\":4,\"exit_code\":\"1\"}";
    struct aproto_exit_body e;
    assert_int_equal(aproto_exit_body_parse(ok, strlen(ok), &e), 0);
    assert_int_equal(e.exit_code, -1);
    assert_int_equal(e.signal, -1);
    assert_null(e.error);
    assert_null(e.reason);
    aproto_exit_body_free(&e);
    static const char *const bad[] = {
        "{\"job_id\":\"../x\",\"attempt\":0,\"rank\":0}",
        "{\"job_id\":\"j\",\"attempt\":null,\"rank\":0}",
        "{\"job_id\":\"j\",\"attempt\":0}",
        "not json",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(aproto_exit_body_parse(bad[i], strlen(bad[i]), &e), -1);
        assert_null(e.root);
    }
}

static void spooled_report_body_gives_its_keys(void **state)
{
    (void)state;
    json_t *metrics = json_pack("{s:f}", "loss", 0.5);
    json_t *body = aproto_report_body("j", 1, 2, 3, metrics, -1, "2024-01-02T03:04:05.006Z", NULL);
    struct aproto_report_body_keys k;
    assert_int_equal(aproto_report_body_parse(body, &k), 0);
    assert_string_equal(k.job_id, "j");
    assert_int_equal(k.attempt, 1);
    assert_int_equal(k.rank, 2);
    assert_int_equal(k.report_seq, 3);
    json_object_del(body, "metrics");
    assert_int_equal(aproto_report_body_parse(body, &k), -1);
    assert_int_equal(aproto_report_body_parse(NULL, &k), -1);
    json_decref(body);
    json_decref(metrics);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(refused_launch_still_names_its_job_attempt_and_ranks),
    cmocka_unit_test(refused_launch_without_job_or_workers_names_nothing),
    cmocka_unit_test(spooled_exit_round_trips),
    cmocka_unit_test(spooled_exit_reads_leniently_and_refuses_what_names_no_worker),
    cmocka_unit_test(spooled_report_body_gives_its_keys),
};
TY_TEST_MAIN(tests)
