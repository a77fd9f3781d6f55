/* trainyard.py: runs /usr/bin/python3 against the agent stub (same wire protocol as the C
 * client) and standalone. */
#include "ty_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_sdk_agent_stub.h"

/* Run python3 -c script with the given extra environment ("K=V" strings, NULL-terminated),
 * stderr to err_path (or inherited). Returns the exit status, or -1 on timeout (10 s). */
static int run_python(const char *script, const char *const *env, const char *err_path)
{
    pid_t p = fork();
    if (p == 0) {
        static const char *clear[] = {"RANK",
                                      "WORLD_SIZE",
                                      "LOCAL_RANK",
                                      "LOCAL_WORLD_SIZE",
                                      "NODE_RANK",
                                      "TRAINYARD_JOB_ID",
                                      "TRAINYARD_ATTEMPT",
                                      "TRAINYARD_CONFIG",
                                      "TRAINYARD_CHECKPOINT_DIR",
                                      "TRAINYARD_REPORT_SOCKET",
                                      "TRAINYARD_REPORT_TIMEOUT_S"};
        for (size_t i = 0; i < sizeof clear / sizeof clear[0]; i++)
            unsetenv(clear[i]);
        for (size_t i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        setenv("TRAINYARD_HEARTBEAT_S", "0", 1); /* the stub serves one connection at a time */
        setenv("PYTHONPATH", TY_PYTHON_DIR, 1);
        setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
        if (err_path) {
            FILE *f = freopen(err_path, "w", stderr);
            (void)f;
        }
        execl(TY_PYTHON3, "python3", "-c", script, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        int st;
        if (waitpid(p, &st, WNOHANG) == p)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    kill(p, SIGKILL);
    waitpid(p, NULL, 0);
    return -1;
}

static void python_reports_through_agent_socket(void **state)
{
    (void)state;
    struct agent_stub s;
    assert_int_equal(agent_stub_start(&s, STUB_ACK), 0);
    char sock[192], ckpt_env[192];
    snprintf(sock, sizeof sock, "TRAINYARD_REPORT_SOCKET=%s", s.path);
    snprintf(ckpt_env, sizeof ckpt_env, "CKPT=%s", s.dir);
    const char *env[] = {"RANK=3",
                         "WORLD_SIZE=4",
                         "LOCAL_RANK=1",
                         "LOCAL_WORLD_SIZE=2",
                         "NODE_RANK=1",
                         "TRAINYARD_JOB_ID=job-py",
                         "TRAINYARD_ATTEMPT=1",
                         "TRAINYARD_CONFIG={\"lr\": 0.5}",
                         "TRAINYARD_CHECKPOINT_DIR=/resume/here",
                         sock,
                         ckpt_env,
                         NULL};
    const char *script =
        "import os, trainyard\n"
        "c = trainyard.get_context()\n"
        "assert (c.get_world_rank(), c.get_world_size(), c.get_local_rank(),\n"
        "        c.get_local_world_size(), c.get_node_rank()) == (3, 4, 1, 2, 1), c\n"
        "assert c.get_job_id() == 'job-py' and c.get_attempt() == 1\n"
        "assert c.config == {'lr': 0.5}\n"
        "assert trainyard.get_checkpoint() == '/resume/here'\n"
        "trainyard.report({'loss': 0.125, 'step': 4}, checkpoint=os.environ['CKPT'])\n"
        "class Ck: path = os.environ['CKPT']\n"
        "trainyard.report({'loss': 0.0625, 'phase': 'warm', 'tags': ('a', 1)}, checkpoint=Ck())\n"
        "try:\n"
        "    trainyard.report({'model': object()})\n"
        "    raise SystemExit(3)\n"
        "except trainyard.TrainyardError as e:\n"
        "    assert \"'model' is a object, which is not JSON-serialisable\" in str(e), e\n";
    assert_int_equal(run_python(script, env, NULL), 0);
    agent_stub_stop(&s);
    assert_int_equal(s.bad_frames, 0);
    assert_int_equal(json_array_size(s.hellos), 1);
    json_t *h = json_array_get(s.hellos, 0);
    assert_string_equal(json_string_value(json_object_get(h, "job_id")), "job-py");
    assert_int_equal(json_integer_value(json_object_get(h, "rank")), 3);
    assert_int_equal(json_integer_value(json_object_get(h, "attempt")), 1);
    assert_int_equal(json_array_size(s.reports), 2);
    json_t *r1 = json_array_get(s.reports, 0);
    assert_int_equal(json_integer_value(json_object_get(r1, "seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(r1, "step")), 4);
    assert_string_equal(json_string_value(json_object_get(r1, "checkpoint_dir")), s.dir);
    assert_true(json_real_value(json_object_get(json_object_get(r1, "metrics"), "loss")) == 0.125);
    json_t *r2 = json_array_get(s.reports, 1);
    assert_int_equal(json_integer_value(json_object_get(r2, "seq")), 2);
    assert_string_equal(json_string_value(json_object_get(r2, "checkpoint_dir")), s.dir);
    json_t *m2 = json_object_get(r2, "metrics"); /* values that are not numbers travel as JSON */
    assert_string_equal(json_string_value(json_object_get(m2, "phase")), "warm");
    assert_int_equal(json_array_size(json_object_get(m2, "tags")), 2);
    agent_stub_free(&s);
}

static void python_report_times_out_without_ack(void **state)
{
    (void)state;
    struct agent_stub s;
    assert_int_equal(agent_stub_start(&s, STUB_NEVER_ACK), 0);
    char sock[192];
    snprintf(sock, sizeof sock, "TRAINYARD_REPORT_SOCKET=%s", s.path);
    const char *env[] = {
        "RANK=0", "WORLD_SIZE=1", "TRAINYARD_JOB_ID=j", "TRAINYARD_REPORT_TIMEOUT_S=0.3", sock,
        NULL};
    const char *script = "import time, trainyard\n"
                         "t = time.monotonic()\n"
                         "try:\n"
                         "    trainyard.report({'x': 1})\n"
                         "    raise SystemExit(2)\n"
                         "except trainyard.TrainyardError as e:\n"
                         "    assert 'ack' in str(e), e\n"
                         "assert time.monotonic() - t < 3\n";
    assert_int_equal(run_python(script, env, NULL), 0);
    agent_stub_stop(&s);
    assert_int_equal(json_array_size(s.reports), 1);
    agent_stub_free(&s);
}

/* It retries (an agent may be restarting: docs/agent-restart.md), then raises at the timeout. */
static void python_agent_gone_raises_after_the_report_timeout(void **state)
{
    (void)state;
    const char *env[] = {"RANK=0",
                         "WORLD_SIZE=1",
                         "TRAINYARD_JOB_ID=j",
                         "TRAINYARD_REPORT_SOCKET=/tmp/ty_nowhere/report.sock",
                         "TRAINYARD_REPORT_TIMEOUT_S=0.5",
                         NULL};
    const char *script = "import trainyard\n"
                         "try:\n"
                         "    trainyard.report({'x': 1})\n"
                         "    raise SystemExit(2)\n"
                         "except trainyard.TrainyardError:\n"
                         "    pass\n";
    assert_int_equal(run_python(script, env, NULL), 0);
}

static void python_standalone_prints_report_and_reads_config_flag(void **state)
{
    (void)state;
    char cfg[] = "/tmp/ty_pycfg_XXXXXX", err[] = "/tmp/ty_pyerr_XXXXXX";
    int fd = mkstemp(cfg);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "{\"epochs\": 2}", 13), 13);
    close(fd);
    fd = mkstemp(err);
    assert_true(fd >= 0);
    close(fd);
    char script[1024];
    snprintf(script, sizeof script,
             "import sys, trainyard\n"
             "sys.argv = ['train.py', '--config', '%s', '--x']\n"
             "c = trainyard.get_context()\n"
             "assert c.config == {'epochs': 2} and sys.argv == ['train.py', '--x']\n"
             "assert (c.world_rank, c.world_size, c.job_id) == (0, 1, 'local')\n"
             "assert trainyard.get_checkpoint() is None\n"
             "trainyard.report({'loss': 2.5, 'step': 1})\n",
             cfg);
    assert_int_equal(run_python(script, NULL, err), 0);
    json_error_t je;
    json_t *line = json_load_file(err, 0, &je);
    assert_non_null(line);
    assert_string_equal(json_string_value(json_object_get(line, "type")), "report");
    assert_int_equal(json_integer_value(json_object_get(line, "seq")), 1);
    assert_int_equal(json_integer_value(json_object_get(line, "step")), 1);
    assert_true(json_real_value(json_object_get(json_object_get(line, "metrics"), "loss")) == 2.5);
    json_decref(line);
    unlink(cfg);
    unlink(err);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(python_reports_through_agent_socket),
    cmocka_unit_test(python_report_times_out_without_ack),
    cmocka_unit_test(python_agent_gone_raises_after_the_report_timeout),
    cmocka_unit_test(python_standalone_prints_report_and_reads_config_flag),
};
TY_TEST_MAIN(tests)
