/* common/job_status.c: every status round-trips through its name, unknown names are refused,
 * the terminal statuses are exactly the three a job never leaves, and the list of names reads as
 * the API's messages print it. The same for worker statuses (worker_status.c: the live ones are
 * PLACED and RUNNING) and node statuses (node_status.c). */
#include "ty_test.h"

#include <string.h>

#include "job_status.h"
#include "node_status.h"
#include "worker_status.h"

static void every_status_round_trips_through_its_name(void **state)
{
    (void)state;
    for (int i = 0; i < JOB_STATUS_COUNT; i++) {
        const char *name = job_status_name((enum job_status)i);
        assert_non_null(name);
        enum job_status back = JOB_STATUS_COUNT;
        assert_int_equal(job_status_from_string(name, &back), 0);
        assert_int_equal(back, i);
        back = JOB_STATUS_COUNT;
        assert_int_equal(job_status_from_token(name, strlen(name), &back), 0);
        assert_int_equal(back, i);
    }
}

static void names_are_the_api_spelling(void **state)
{
    (void)state;
    assert_string_equal(job_status_name(JOB_STATUS_PENDING), "PENDING");
    assert_string_equal(job_status_name(JOB_STATUS_STARTING), "STARTING");
    assert_string_equal(job_status_name(JOB_STATUS_RUNNING), "RUNNING");
    assert_string_equal(job_status_name(JOB_STATUS_RESTARTING), "RESTARTING");
    assert_string_equal(job_status_name(JOB_STATUS_STOPPING), "STOPPING");
    assert_string_equal(job_status_name(JOB_STATUS_SUCCEEDED), "SUCCEEDED");
    assert_string_equal(job_status_name(JOB_STATUS_FAILED), "FAILED");
    assert_string_equal(job_status_name(JOB_STATUS_STOPPED), "STOPPED");
    assert_int_equal(JOB_STATUS_COUNT, 8);
}

static void unknown_names_are_refused(void **state)
{
    (void)state;
    enum job_status s = JOB_STATUS_RUNNING;
    const char *bad[] = {"", "RUN", "RUNNINGX", "running", " RUNNING", "DONE", "PENDING,"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(job_status_from_string(bad[i], &s), -1);
        assert_int_equal(s, JOB_STATUS_RUNNING); /* untouched */
    }
    assert_int_equal(job_status_from_string(NULL, &s), -1);
    assert_int_equal(job_status_from_token(NULL, 0, &s), -1);
    assert_int_equal(job_status_from_token("RUN", 3, &s), -1);
    assert_int_equal(job_status_from_token("", 0, &s), -1);
    assert_null(job_status_name(JOB_STATUS_COUNT));
    assert_null(job_status_name((enum job_status) - 1));
}

static void token_ignores_case_and_stops_at_its_length(void **state)
{
    (void)state;
    enum job_status s = JOB_STATUS_COUNT;
    const char *query = "running,Pending";
    assert_int_equal(job_status_from_token(query, 7, &s), 0);
    assert_int_equal(s, JOB_STATUS_RUNNING);
    assert_int_equal(job_status_from_token(query + 8, 7, &s), 0);
    assert_int_equal(s, JOB_STATUS_PENDING);
    assert_int_equal(job_status_from_token(query, 8, &s), -1); /* "running," */
    assert_int_equal(job_status_from_token(query, 6, &s), -1); /* "runnin" */
}

static void only_succeeded_failed_and_stopped_are_terminal(void **state)
{
    (void)state;
    int terminal = 0;
    for (int i = 0; i < JOB_STATUS_COUNT; i++)
        terminal += job_status_is_terminal((enum job_status)i);
    assert_int_equal(terminal, 3);
    assert_true(job_status_is_terminal(JOB_STATUS_SUCCEEDED));
    assert_true(job_status_is_terminal(JOB_STATUS_FAILED));
    assert_true(job_status_is_terminal(JOB_STATUS_STOPPED));
    assert_false(job_status_is_terminal(JOB_STATUS_STOPPING));
    assert_false(job_status_is_terminal(JOB_STATUS_RESTARTING));
    assert_false(job_status_is_terminal(JOB_STATUS_PENDING));
    assert_false(job_status_is_terminal(JOB_STATUS_COUNT));
}

static void names_text_lists_every_status_in_order(void **state)
{
    (void)state;
    const char *want = "PENDING, STARTING, RUNNING, RESTARTING, STOPPING, SUCCEEDED, FAILED or "
                       "STOPPED";
    char buf[128];
    assert_int_equal(job_status_names_text(buf, sizeof(buf)), strlen(want));
    assert_string_equal(buf, want);
}

static void names_text_truncates_but_reports_the_full_length(void **state)
{
    (void)state;
    char buf[12];
    size_t need = job_status_names_text(buf, sizeof(buf));
    assert_true(need > sizeof(buf));
    assert_string_equal(buf, "PENDING, ST");
    assert_int_equal(job_status_names_text(NULL, 0), need);
}

static void worker_statuses_round_trip_and_only_placed_and_running_are_live(void **state)
{
    (void)state;
    for (int i = 0; i < WORKER_STATUS_COUNT; i++) {
        enum worker_status back = WORKER_STATUS_COUNT;
        assert_int_equal(
            worker_status_from_string(worker_status_name((enum worker_status)i), &back), 0);
        assert_int_equal(back, i);
        assert_int_equal(worker_status_is_live((enum worker_status)i),
                         i == WORKER_STATUS_PLACED || i == WORKER_STATUS_RUNNING);
    }
    assert_string_equal(worker_status_name(WORKER_STATUS_EXITED), "EXITED");
    assert_null(worker_status_name(WORKER_STATUS_COUNT));
    assert_false(worker_status_is_live(WORKER_STATUS_COUNT));
    enum worker_status ws = WORKER_STATUS_LOST;
    assert_int_equal(worker_status_from_string("exited", &ws), -1);
    assert_int_equal(worker_status_from_string(NULL, &ws), -1);
    assert_int_equal(ws, WORKER_STATUS_LOST);
}

static void node_status_names_are_the_api_spelling(void **state)
{
    (void)state;
    assert_string_equal(node_status_name(NODE_STATUS_ALIVE), "ALIVE");
    assert_string_equal(node_status_name(NODE_STATUS_LOST), "LOST");
    assert_null(node_status_name(NODE_STATUS_COUNT));
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(every_status_round_trips_through_its_name),
    cmocka_unit_test(names_are_the_api_spelling),
    cmocka_unit_test(unknown_names_are_refused),
    cmocka_unit_test(token_ignores_case_and_stops_at_its_length),
    cmocka_unit_test(only_succeeded_failed_and_stopped_are_terminal),
    cmocka_unit_test(names_text_lists_every_status_in_order),
    cmocka_unit_test(names_text_truncates_but_reports_the_full_length),
    cmocka_unit_test(worker_statuses_round_trip_and_only_placed_and_running_are_live),
    cmocka_unit_test(node_status_names_are_the_api_spelling),
};
TY_TEST_MAIN(tests)
