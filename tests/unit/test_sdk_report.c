/* ty_report: the frames the client sends (hello, report with seq/step/checkpoint), waiting for
 * the ack, timeouts, a vanished or rejecting agent, input validation, standalone output. */
#include "ty_test.h"

#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_sdk_agent_stub.h"
#include "trainyard.h"

static void managed_env(const char *socket_path)
{
    unsetenv("TRAINYARD_CONFIG");
    unsetenv("TRAINYARD_CHECKPOINT_DIR");
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("TRAINYARD_JOB_ID", "job-7", 1);
    setenv("TRAINYARD_ATTEMPT", "2", 1);
    setenv("TRAINYARD_REPORT_TIMEOUT_S", "5", 1);
    setenv("TRAINYARD_HEARTBEAT_S", "0", 1); /* the stub serves one connection at a time */
    if (socket_path)
        setenv("TRAINYARD_REPORT_SOCKET", socket_path, 1);
    else
        unsetenv("TRAINYARD_REPORT_SOCKET");
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void report_sends_hello_then_acked_reports(void **state)
{
    (void)state;
    struct agent_stub s;
    assert_int_equal(agent_stub_start(&s, STUB_ACK), 0);
    managed_env(s.path);
    char ck[] = "/tmp/ty_ck_XXXXXX";
    assert_non_null(mkdtemp(ck));
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir("/tmp"), 0);

    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    json_t *m = json_pack("{s:f, s:i, s:i}", "loss", 0.5, "tokens", 1000, "step", 3);
    assert_int_equal(ty_report(c, m, ck + 5 /* relative: ty_ck_XXXXXX */), 0);
    json_decref(m);
    m = json_pack("{s:f}", "loss", 0.25);
    assert_int_equal(ty_report(c, m, NULL), 0);
    json_decref(m);
    ty_finish(&c);
    assert_int_equal(chdir(cwd), 0);
    agent_stub_stop(&s);

    assert_int_equal(s.bad_frames, 0);
    assert_int_equal(json_array_size(s.hellos), 1);
    json_t *h = json_array_get(s.hellos, 0);
    assert_string_equal(json_string_value(json_object_get(h, "job_id")), "job-7");
    assert_int_equal(json_integer_value(json_object_get(h, "attempt")), 2);
    assert_int_equal(json_integer_value(json_object_get(h, "rank")), 1);
    assert_int_equal(json_integer_value(json_object_get(h, "pid")), getpid());

    assert_int_equal(json_array_size(s.reports), 2);
    json_t *r1 = json_array_get(s.reports, 0), *r2 = json_array_get(s.reports, 1);
    assert_int_equal(json_integer_value(json_object_get(r1, "seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(r1, "step")), 3);
    json_t *met = json_object_get(r1, "metrics");
    assert_true(json_real_value(json_object_get(met, "loss")) == 0.5);
    assert_int_equal(json_integer_value(json_object_get(met, "tokens")), 1000);
    assert_null(json_object_get(met, "step"));
    assert_string_equal(json_string_value(json_object_get(r1, "checkpoint_dir")), ck);
    assert_int_equal(json_integer_value(json_object_get(r2, "seq")), 2);
    assert_null(json_object_get(r2, "step"));
    assert_null(json_object_get(r2, "checkpoint_dir"));
    agent_stub_free(&s);
    rmdir(ck);
}

static void report_times_out_when_agent_never_acks(void **state)
{
    (void)state;
    struct agent_stub s;
    assert_int_equal(agent_stub_start(&s, STUB_NEVER_ACK), 0);
    managed_env(s.path);
    setenv("TRAINYARD_REPORT_TIMEOUT_S", "0.5", 1);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    json_t *m = json_pack("{s:i}", "x", 1);
    long long t = now_ms();
    assert_int_equal(ty_report(c, m, NULL), TY_ETIMEDOUT);
    long long took = now_ms() - t;
    assert_true(took >= 450); /* not before the 0.5 s timeout; hangs fail the CTest timeout */
    /* a later report reconnects with a fresh hello and keeps counting */
    assert_int_equal(ty_set_report_timeout(c, 0.2), 0);
    assert_int_equal(ty_report(c, m, NULL), TY_ETIMEDOUT);
    json_decref(m);
    ty_finish(&c);
    agent_stub_stop(&s);
    assert_int_equal(json_array_size(s.reports), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(s.reports, 1), "seq")), 2);
    assert_int_equal(json_array_size(s.hellos), 2);
    agent_stub_free(&s);
}

/* An agent that is not there (restarting: docs/agent-restart.md) is tried again with the same
 * report until the report timeout, then TY_EPEER. */
static void report_retries_a_gone_agent_until_the_report_timeout(void **state)
{
    (void)state;
    managed_env("/tmp/ty_no_such_dir/report.sock");
    setenv("TRAINYARD_REPORT_TIMEOUT_S", "0.5", 1);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    json_t *m = json_pack("{s:i}", "x", 1);
    assert_int_equal(ty_report(c, m, NULL), TY_EPEER);

    struct agent_stub s;
    assert_int_equal(agent_stub_start(&s, STUB_CLOSE_AFTER_HELLO), 0);
    ty_finish(&c);
    managed_env(s.path);
    setenv("TRAINYARD_REPORT_TIMEOUT_S", "0.5", 1);
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    assert_int_equal(ty_report(c, m, NULL), TY_EPEER);
    json_decref(m);
    ty_finish(&c);
    agent_stub_stop(&s);
    assert_true(json_array_size(s.hellos) >= 2); /* it came back more than once */
    agent_stub_free(&s);
}

struct comeback {
    struct agent_stub stub;
    char link[PATH_MAX];
    int started;
};

/* After a pause, the agent "restarts": a new socket appears where the worker looks for it. */
static void *agent_comes_back(void *arg)
{
    struct comeback *cb = arg;
    struct timespec pause = {0, 300 * 1000000L};
    nanosleep(&pause, NULL);
    cb->started =
        agent_stub_start(&cb->stub, STUB_ACK) == 0 && symlink(cb->stub.path, cb->link) == 0;
    return NULL;
}

static void report_reaches_an_agent_that_comes_back_with_the_same_seq(void **state)
{
    (void)state;
    char dir[] = "/tmp/ty_comeback_XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct comeback cb = {.started = 0};
    snprintf(cb.link, sizeof(cb.link), "%s/report.sock", dir);
    struct agent_stub first;
    assert_int_equal(agent_stub_start(&first, STUB_ACK), 0);
    assert_int_equal(symlink(first.path, cb.link), 0);
    managed_env(cb.link);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    json_t *m = json_pack("{s:i}", "x", 1);
    assert_int_equal(ty_report(c, m, NULL), 0);
    agent_stub_stop(&first); /* the agent dies */
    unlink(cb.link);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, agent_comes_back, &cb), 0);
    assert_int_equal(ty_report(c, m, NULL), 0);
    pthread_join(t, NULL);
    assert_true(cb.started);
    json_decref(m);
    ty_finish(&c);
    agent_stub_stop(&cb.stub);
    assert_int_equal(json_array_size(first.reports), 1);
    assert_int_equal(json_array_size(cb.stub.reports), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(cb.stub.reports, 0), "seq")),
                     2);
    unlink(cb.link);
    rmdir(dir);
    agent_stub_free(&first);
    agent_stub_free(&cb.stub);
}

static void report_rejected_by_agent(void **state)
{
    (void)state;
    struct agent_stub s;
    assert_int_equal(agent_stub_start(&s, STUB_REJECT), 0);
    managed_env(s.path);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    json_t *m = json_pack("{s:i}", "x", 1);
    assert_int_equal(ty_report(c, m, NULL), TY_EREJECTED);
    assert_int_equal(ty_report(c, m, NULL), TY_EREJECTED); /* connection kept */
    json_decref(m);
    ty_finish(&c);
    agent_stub_stop(&s);
    assert_int_equal(json_array_size(s.hellos), 1);
    agent_stub_free(&s);
}

static void report_invalid_arguments_send_nothing(void **state)
{
    (void)state;
    struct agent_stub s;
    assert_int_equal(agent_stub_start(&s, STUB_ACK), 0);
    managed_env(s.path);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    json_t *bad[] = {json_pack("{s:i}", "", 1), json_pack("{s:f}", "step", 1.5),
                     json_pack("{s:i}", "step", -1), json_pack("[i]", 1),
                     json_pack("{s:s}", "step", "x")};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ty_report(c, bad[i], NULL), TY_EINVAL);
        json_decref(bad[i]);
    }
    assert_int_equal(ty_report(c, NULL, NULL), TY_EINVAL);
    /* Any JSON value is a metric (numbers are charted, the rest stored as it is). */
    json_t *ok = json_pack("{s:i, s:s, s:{}}", "x", 1, "loss", "low", "nested");
    assert_int_equal(ty_report(c, ok, "/nonexistent/ckpt"), TY_EINVAL);
    assert_int_equal(ty_report(c, ok, NULL), 0);
    json_decref(ok);
    ty_finish(&c);
    agent_stub_stop(&s);
    assert_int_equal(json_array_size(s.reports), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(s.reports, 0), "seq")), 1);
    json_t *sent = json_object_get(json_array_get(s.reports, 0), "metrics");
    assert_string_equal(json_string_value(json_object_get(sent, "loss")), "low");
    agent_stub_free(&s);
}

static void report_standalone_prints_json_line_to_stderr(void **state)
{
    (void)state;
    const char *vars[] = {"RANK", "WORLD_SIZE", "TRAINYARD_JOB_ID", "TRAINYARD_REPORT_SOCKET"};
    for (size_t i = 0; i < 4; i++)
        unsetenv(vars[i]);
    char path[] = "/tmp/ty_err_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    json_t *m = json_pack("{s:f, s:i}", "loss", 1.5, "step", 9);
    int rc = ty_report(c, m, NULL);
    json_decref(m);
    ty_finish(&c);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(rc, 0);
    char buf[512] = {0};
    assert_true(pread(fd, buf, sizeof buf - 1, 0) > 0);
    close(fd);
    unlink(path);
    char *nl = strchr(buf, '\n');
    assert_non_null(nl);
    *nl = '\0';
    json_t *line = json_loads(buf, 0, NULL);
    assert_non_null(line);
    assert_string_equal(json_string_value(json_object_get(line, "type")), "report");
    assert_int_equal(json_integer_value(json_object_get(line, "seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(line, "step")), 9);
    assert_true(json_real_value(json_object_get(json_object_get(line, "metrics"), "loss")) == 1.5);
    json_decref(line);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(report_sends_hello_then_acked_reports),
    cmocka_unit_test(report_times_out_when_agent_never_acks),
    cmocka_unit_test(report_retries_a_gone_agent_until_the_report_timeout),
    cmocka_unit_test(report_reaches_an_agent_that_comes_back_with_the_same_seq),
    cmocka_unit_test(report_rejected_by_agent),
    cmocka_unit_test(report_invalid_arguments_send_nothing),
    cmocka_unit_test(report_standalone_prints_json_line_to_stderr),
};
TY_TEST_MAIN(tests)
