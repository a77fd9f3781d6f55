/* Query-string value parsers of the REST API (server/http/query.c). */
#include "ty_test.h"

#include "query.h"

#include <stdio.h>
#include <string.h>

static void statuses_become_a_sorted_unique_array(void **state)
{
    (void)state;
    char out[256], bad[40];
    assert_int_equal(
        srv_query_statuses_array("RUNNING,pending,running", out, sizeof(out), bad, sizeof(bad)), 0);
    assert_string_equal(out, "{PENDING,RUNNING}");
    assert_int_equal(srv_query_statuses_array("", out, sizeof(out), bad, sizeof(bad)), 0);
    assert_string_equal(out, "{}");
    assert_int_equal(srv_query_statuses_array("RUNNING,nope", out, sizeof(out), bad, sizeof(bad)),
                     -1);
    assert_string_equal(bad, "nope");
    /* Many repeats stay one entry each (issue 14, finding 11: the buffer stays bounded). */
    char many[2048];
    size_t used = 0;
    for (int i = 0; i < 100; i++)
        used += (size_t)snprintf(many + used, sizeof(many) - used, "%sSUCCEEDED", i ? "," : "");
    assert_int_equal(srv_query_statuses_array(many, out, sizeof(out), bad, sizeof(bad)), 0);
    assert_string_equal(out, "{SUCCEEDED}");
}

static void metric_names_are_bounded_and_non_empty(void **state)
{
    (void)state;
    char detail[120];
    assert_int_equal(srv_query_names_valid("loss,acc", detail, sizeof(detail)), 0);
    assert_int_equal(srv_query_names_valid("loss,,acc", detail, sizeof(detail)), -1);
    assert_int_equal(srv_query_names_valid("loss,", detail, sizeof(detail)), -1);
    char lots[1024];
    size_t used = 0;
    for (int i = 0; i <= SRV_QUERY_MAX_NAMES; i++) /* one name too many */
        used += (size_t)snprintf(lots + used, sizeof(lots) - used, "%sa", i ? "," : "");
    assert_int_equal(srv_query_names_valid(lots, detail, sizeof(detail)), -1);
    char longname[SRV_QUERY_MAX_NAME_LEN + 2];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(srv_query_names_valid(longname, detail, sizeof(detail)), -1);
}

static void ranks_become_an_array_literal(void **state)
{
    (void)state;
    char out[SRV_QUERY_RANKS_LEN];
    int n;
    assert_int_equal(srv_query_ranks_array("0,2,5", out, sizeof(out), &n), 0);
    assert_string_equal(out, "{0,2,5}");
    assert_int_equal(n, 3);
    const char *bad[] = {"", ",", "1,", "-1", "x", "2147483648", "1,,2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (srv_query_ranks_array(bad[i], out, sizeof(out), &n) == 0)
            fail_msg("accepted ranks '%s'", bad[i]);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(statuses_become_a_sorted_unique_array),
    cmocka_unit_test(metric_names_are_bounded_and_non_empty),
    cmocka_unit_test(ranks_become_an_array_literal),
};
TY_TEST_MAIN(tests)
