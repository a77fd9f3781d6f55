/* Unit tests for worker/agent/logcut.c: cutting a worker's output into log lines. */
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* Cuts `n` bytes of `in`; returns the lines (new array) and the bytes cut in *used. */
static json_t *cut(const char *in, size_t n, size_t max, bool final, size_t *used)
{
    json_t *lines = json_array();
    *used = agent_log_cut(in, n, max, final, lines);
    return lines;
}

static const char *line(json_t *lines, size_t i)
{
    return json_string_value(json_array_get(lines, i));
}

static void logcut_splits_at_newlines_and_drops_them(void **state)
{
    (void)state;
    size_t used;
    json_t *l = cut("a\nbc\n\nd\n", 8, 100, false, &used);
    assert_int_equal(used, 8);
    assert_int_equal(json_array_size(l), 4);
    assert_string_equal(line(l, 0), "a");
    assert_string_equal(line(l, 1), "bc");
    assert_string_equal(line(l, 2), "");
    assert_string_equal(line(l, 3), "d");
    json_decref(l);
}

static void logcut_holds_a_partial_last_line_until_final(void **state)
{
    (void)state;
    size_t used;
    json_t *l = cut("one\ntw", 6, 100, false, &used);
    assert_int_equal(used, 4);
    assert_int_equal(json_array_size(l), 1);
    json_decref(l);
    l = cut("tw", 2, 100, false, &used);
    assert_int_equal(used, 0);
    assert_int_equal(json_array_size(l), 0);
    json_decref(l);
    l = cut("tw", 2, 100, true, &used);
    assert_int_equal(used, 2);
    assert_string_equal(line(l, 0), "tw");
    json_decref(l);
}

static void logcut_splits_a_long_line_into_pieces_of_max(void **state)
{
    (void)state;
    char in[26];
    memset(in, 'x', 25);
    in[25] = '\n';
    size_t used;
    json_t *l = cut(in, 26, 10, false, &used);
    assert_int_equal(used, 26);
    assert_int_equal(json_array_size(l), 3);
    assert_int_equal(strlen(line(l, 0)), 10);
    assert_int_equal(strlen(line(l, 1)), 10);
    assert_int_equal(strlen(line(l, 2)), 5);
    json_decref(l);
    /* Without its newline yet, the full pieces go and the rest waits. */
    l = cut(in, 25, 10, false, &used);
    assert_int_equal(used, 20);
    assert_int_equal(json_array_size(l), 2);
    json_decref(l);
}

static void logcut_does_not_split_a_utf8_character(void **state)
{
    (void)state;
    /* "aaaaé..." with max 5: the piece would end inside é (2 bytes at offsets 4-5). */
    const char *in = "aaaa\xc3\xa9zz\n";
    size_t used;
    json_t *l = cut(in, strlen(in), 5, false, &used);
    assert_int_equal(used, strlen(in));
    assert_string_equal(line(l, 0), "aaaa");
    assert_string_equal(line(l, 1), "\xc3\xa9zz");
    json_decref(l);
}

static void logcut_replaces_invalid_utf8_and_nul_byte_by_byte(void **state)
{
    (void)state;
    const char in[] = "ok\xff\xfe\0\xe2\x82 \xed\xa0\x80 \xc0\xaf end\n";
    size_t used;
    json_t *l = cut(in, sizeof(in) - 1, 100, false, &used);
    assert_int_equal(used, sizeof(in) - 1);
    const char *want = "ok\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd end";
    assert_string_equal(line(l, 0), want);
    json_decref(l);
}

static void logcut_keeps_ansi_colours_carriage_returns_and_valid_utf8(void **state)
{
    (void)state;
    const char *in = "\x1b[31mred\x1b[0m caf\xc3\xa9 \xf0\x9f\x9a\x82\r\n";
    size_t used;
    json_t *l = cut(in, strlen(in), 100, false, &used);
    assert_int_equal(used, strlen(in));
    assert_string_equal(line(l, 0), "\x1b[31mred\x1b[0m caf\xc3\xa9 \xf0\x9f\x9a\x82\r");
    json_decref(l);
}

static void logcut_gives_the_same_lines_for_the_same_bytes(void **state)
{
    (void)state;
    /* What a resend relies on: a chunk cut again (final) gives the lines it gave before. */
    const char *in = "abc\nxxxxxxxxxxxxyy\n\xff tail";
    size_t n = strlen(in), used1, used2;
    json_t *a = cut(in, n, 8, true, &used1);
    json_t *b = cut(in, used1, 8, true, &used2);
    assert_int_equal(used1, n);
    assert_true(json_equal(a, b));
    json_decref(a);
    json_decref(b);
}

static void journal_empty_or_missing_means_nothing_acked(void **state)
{
    (void)state;
    struct agent_log_journal j;
    agent_log_journal_parse(NULL, &j);
    assert_int_equal(j.acked, 0);
    assert_int_equal(j.n, 0);
    agent_log_journal_parse("", &j);
    assert_int_equal(j.n, 0);
}

static void journal_keeps_the_chunks_sent_after_the_last_ack(void **state)
{
    (void)state;
    struct agent_log_journal j;
    agent_log_journal_parse("c 0 100 0\nc 100 250 0\nc 250 300 0\na 100\nc 300 400 0\n"
                            "a 250\nc 900 1000 500\n",
                            &j);
    assert_int_equal(j.acked, 250);
    assert_int_equal(j.n, 3);
    assert_int_equal(j.start[0], 250);
    assert_int_equal(j.end[0], 300);
    assert_int_equal(j.start[1], 300);
    assert_int_equal(j.end[2], 1000);
    assert_int_equal(j.dropped[2], 500); /* skipped before it: 400..900 */
}

static void journal_ignores_torn_and_malformed_records(void **state)
{
    (void)state;
    struct agent_log_journal j;
    agent_log_journal_parse("a 10\nc 10 20 0\nc 5 8 0\nc 30 20 0\nc x 1 0\na -4\n"
                            "c 20 30 0 junk\nc 20 30",
                            &j);
    assert_int_equal(j.acked, 10);
    assert_int_equal(j.n, 1); /* only "c 10 20 0"; the torn last record does not count */
    assert_int_equal(j.start[0], 10);
    assert_int_equal(j.end[0], 20);
}

static void journal_ack_of_everything_leaves_nothing_to_resend(void **state)
{
    (void)state;
    struct agent_log_journal j;
    agent_log_journal_parse("c 0 10 0\nc 10 20 0\na 20\n", &j);
    assert_int_equal(j.acked, 20);
    assert_int_equal(j.n, 0);
}

/* The failure line of `text` (the whole output), "" when none. */
static const char *failure(const char *text, bool whole, char *out, size_t outlen)
{
    agent_log_failure_line(text, strlen(text), whole, out, outlen);
    return out;
}

static void failure_line_is_the_exception_of_the_last_python_traceback(void **state)
{
    (void)state;
    char out[513];
    assert_string_equal(failure("step 1\nTraceback (most recent call last):\n"
                                "  File \"<string>\", line 3, in <module>\n"
                                "    raise ValueError(\"bad lr 3.0\")\n"
                                "ValueError: bad lr 3.0\n",
                                true, out, sizeof(out)),
                        "ValueError: bad lr 3.0");
    /* Chained: the last traceback's exception; a multi-line message gives its first line. */
    assert_string_equal(failure("Traceback (most recent call last):\n  File \"a\", line 1\n"
                                "KeyError: 'x'\n\nDuring handling of the above exception, "
                                "another exception occurred:\n\n"
                                "Traceback (most recent call last):\n  File \"a\", line 2\n"
                                "    ^^^^^\nRuntimeError: no x\r\nsecond line\n",
                                true, out, sizeof(out)),
                        "RuntimeError: no x");
    /* A bare exception (no message), then ordinary output after it. */
    assert_string_equal(failure("Traceback (most recent call last):\n  File \"a\", line 1\n"
                                "KeyboardInterrupt\nbye\n",
                                true, out, sizeof(out)),
                        "KeyboardInterrupt");
}

static void failure_line_finds_assertions_fatal_errors_and_plain_error_lines(void **state)
{
    (void)state;
    char out[513];
    assert_string_equal(
        failure("x\nw: w.c:12: main: Assertion `n > 0' failed.\n", true, out, sizeof(out)),
        "w: w.c:12: main: Assertion `n > 0' failed.");
    assert_string_equal(failure("Fatal Python error: Segmentation fault\n\nCurrent thread:\n", true,
                                out, sizeof(out)),
                        "Fatal Python error: Segmentation fault");
    assert_string_equal(failure("terminate called after throwing an instance of 'x'\n  what(): y\n",
                                true, out, sizeof(out)),
                        "terminate called after throwing an instance of 'x'");
    /* No traceback: the last line that reads like an error; a later strong line wins. */
    assert_string_equal(failure("RuntimeError: first\nOSError: [Errno 28] No space left on "
                                "device\ndone\n",
                                true, out, sizeof(out)),
                        "OSError: [Errno 28] No space left on device");
    assert_string_equal(failure("error: cannot open x\n", true, out, sizeof(out)),
                        "error: cannot open x");
    assert_string_equal(failure("Traceback (most recent call last):\n  File \"a\"\nE: x\n"
                                "ValueError: later plain line\n",
                                true, out, sizeof(out)),
                        "E: x");
    /* Nothing that says why. */
    assert_int_equal(agent_log_failure_line("step 1\nstep 2\n", 14, true, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(agent_log_failure_line("", 0, true, out, sizeof(out)), 0);
}

static void failure_line_skips_a_partial_first_line_and_stays_bounded_valid_utf8(void **state)
{
    (void)state;
    char out[16];
    /* Not the whole output: the first line may be the end of an earlier one. */
    assert_string_equal(failure("ValueError: cut\nok\n", false, out, sizeof(out)), "");
    assert_string_equal(failure("ValueError: cut\nKeyError: k\n", false, out, sizeof(out)),
                        "KeyError: k");
    /* Cut to 15 bytes without splitting "é" (2 bytes); control and invalid bytes become '?'. */
    assert_string_equal(failure("error: abcdefgh\xc3\xa9z\n", true, out, sizeof(out)),
                        "error: abcdefgh");
    assert_string_equal(failure("error: \x1b[1m\xff\n", true, out, sizeof(out)), "error: ?[1m?");
    /* A huge line: at most outlen - 1 bytes. */
    char big[4096], out2[513];
    memset(big, 'x', sizeof(big));
    memcpy(big, "OSError: ", 9);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(agent_log_failure_line(big, strlen(big), true, out2, sizeof(out2)), 512);
    assert_int_equal(strlen(out2), 512);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(logcut_splits_at_newlines_and_drops_them),
    cmocka_unit_test(logcut_holds_a_partial_last_line_until_final),
    cmocka_unit_test(logcut_splits_a_long_line_into_pieces_of_max),
    cmocka_unit_test(logcut_does_not_split_a_utf8_character),
    cmocka_unit_test(logcut_replaces_invalid_utf8_and_nul_byte_by_byte),
    cmocka_unit_test(logcut_keeps_ansi_colours_carriage_returns_and_valid_utf8),
    cmocka_unit_test(logcut_gives_the_same_lines_for_the_same_bytes),
    cmocka_unit_test(failure_line_is_the_exception_of_the_last_python_traceback),
    cmocka_unit_test(failure_line_finds_assertions_fatal_errors_and_plain_error_lines),
    cmocka_unit_test(failure_line_skips_a_partial_first_line_and_stays_bounded_valid_utf8),
    cmocka_unit_test(journal_empty_or_missing_means_nothing_acked),
    cmocka_unit_test(journal_keeps_the_chunks_sent_after_the_last_ack),
    cmocka_unit_test(journal_ignores_torn_and_malformed_records),
    cmocka_unit_test(journal_ack_of_everything_leaves_nothing_to_resend),
};
TY_TEST_MAIN(tests)
