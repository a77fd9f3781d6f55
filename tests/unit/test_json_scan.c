/* Unit tests for common/json_scan.c, the validating JSON scanner of the agent's `report` message
 * (what it accepts and refuses is compared with jansson in test_agent_proto_report.c): a number
 * is read exactly as strtod and strtoll read it, on its fast path (Clinger's) and off it. */
#include "ty_test.h"

#include "json_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jscan_number_value of `s` (a JSON number) must be strtod's double, bit for bit. */
static void expect_as_strtod(const char *s)
{
    bool integer;
    size_t n = strlen(s);
    if (jscan_number(s, n, 0, &integer) != n)
        fail_msg("'%s' is not scanned as one number", s);
    int64_t as_int;
    double got, want = integer ? (double)strtoll(s, NULL, 10) : strtod(s, NULL);
    if (jscan_number_value(s, 0, n, integer, &as_int, &got) != 0)
        fail_msg("'%s' refused", s);
    if (memcmp(&got, &want, sizeof(got)) != 0)
        fail_msg("'%s': %.17g, strtod %.17g", s, got, want);
}

static void json_scan_reads_numbers_as_strtod_does(void **state)
{
    (void)state;
    static const char *const fixed[] = {
        "0.1",
        "-0.0",
        "0.0",
        "1e22",
        "1e23",
        "9007199254740993.0",
        "1e-22",
        "1e-23",
        "2.5E+3",
        "-7.25e-5",
        "0.7031093279839519",
        "0.9999999999999999",
        "123456789012345678.5",
        "1e308",
        "1e-320",
        "4.9e-324",
        "3.141592653589793238462643383279",
        "-1",
        "9223372036854775807",
        "-9223372036854775808",
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        expect_as_strtod(fixed[i]);
    /* doubles written every way workers write them: repr-like, %.17g, few digits, exponents */
    srand(27);
    static const char *const forms[] = {"%.17g", "%.16g", "%.15g", "%.6g", "%.3f", "%.12e"};
    for (int k = 0; k < 200000; k++) {
        double x = (double)rand() / RAND_MAX * (rand() % 2 ? 1 : -1);
        int scale = rand() % 40 - 20;
        for (int s = 0; s < (scale < 0 ? -scale : scale); s++)
            x = scale < 0 ? x / 10 : x * 10;
        char buf[64];
        snprintf(buf, sizeof(buf), forms[k % 6], x);
        if (strchr(buf, '.') == NULL && strchr(buf, 'e') == NULL)
            snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ".0");
        expect_as_strtod(buf);
    }
}

static void json_scan_refuses_what_jansson_refuses_in_numbers(void **state)
{
    (void)state;
    int64_t as_int;
    double v;
    static const char *const over[] = {"1e400", "-1e400", "99999999999999999999",
                                       "-9223372036854775809"};
    for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
        bool integer;
        size_t n = strlen(over[i]);
        assert_int_equal(jscan_number(over[i], n, 0, &integer), n);
        assert_int_equal(jscan_number_value(over[i], 0, n, integer, &as_int, &v), -1);
    }
    static const char *const bad[] = {"01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bool integer;
        size_t n = strlen(bad[i]);
        if (jscan_number(bad[i], n, 0, &integer) == n)
            fail_msg("'%s' scanned as a number", bad[i]);
    }
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(json_scan_reads_numbers_as_strtod_does),
    cmocka_unit_test(json_scan_refuses_what_jansson_refuses_in_numbers),
};
TY_TEST_MAIN(tests)
