/* Unit tests for server/control/hang.c: deciding that an attempt hangs and naming where each
 * rank is. */
#include "ty_test.h"

#include "hang.h"

#include <string.h>

/* A rank with a heartbeat of `age` seconds and no progress for `age` seconds. */
static struct hang_rank at(int64_t rank, const char *op, int64_t seq, bool in, double age)
{
    return (struct hang_rank){.rank = rank,
                              .known = true,
                              .op = op,
                              .coll_seq = seq,
                              .in_collective = in,
                              .progress_age_s = age,
                              .heartbeat_age_s = 0.5};
}

static void ranks_compress_into_ranges(void **state)
{
    (void)state;
    char out[64];
    int64_t a[] = {7, 0, 2, 1, 4, 5, 6, 5};
    assert_int_equal(hang_format_ranks(a, 8, out, sizeof(out)), strlen("0-2, 4-7"));
    assert_string_equal(out, "0-2, 4-7");
    int64_t b[] = {3};
    hang_format_ranks(b, 1, out, sizeof(out));
    assert_string_equal(out, "3");
    int64_t c[] = {9, 1, 5};
    hang_format_ranks(c, 3, out, sizeof(out));
    assert_string_equal(out, "1, 5, 9");
}

static void rank_list_truncated_to_its_buffer(void **state)
{
    (void)state;
    char out[6];
    int64_t a[] = {0, 2, 4, 6};
    size_t need = hang_format_ranks(a, 4, out, sizeof(out));
    assert_int_equal(need, strlen("0, 2, 4, 6"));
    assert_true(strlen(out) < sizeof(out));
}

static void straggler_in_collective_named_before_the_waiting_ranks(void **state)
{
    (void)state;
    struct hang_rank r[8];
    for (int i = 0; i < 8; i++)
        r[i] = at(i, "allreduce", 1843, true, 45.2 + i);
    r[3] = at(3, "allreduce", 1842, true, 45.2);
    char out[256];
    double stalled = 0;
    assert_true(hang_analyze(r, 8, 30, &stalled, out, sizeof(out)));
    assert_string_equal(out, "no progress for 45 s: rank 3 in allreduce #1842; "
                             "ranks 0-2, 4-7 waiting in allreduce #1843");
    assert_true(stalled > 45.1 && stalled < 45.3);
}

static void rank_outside_collectives_named_after_its_last(void **state)
{
    (void)state;
    struct hang_rank r[] = {at(0, "allreduce", 5, true, 40), at(1, "allreduce", 4, false, 40),
                            at(2, "allreduce", 5, true, 40)};
    char out[256];
    double stalled;
    assert_true(hang_analyze(r, 3, 30, &stalled, out, sizeof(out)));
    assert_string_equal(out, "no progress for 40 s: rank 1 after allreduce #4; "
                             "ranks 0, 2 waiting in allreduce #5");
}

static void every_rank_in_the_same_collective_is_a_hang(void **state)
{
    (void)state;
    struct hang_rank r[] = {at(0, "broadcast", 9, true, 31), at(1, "broadcast", 9, true, 31)};
    char out[256];
    double stalled;
    assert_true(hang_analyze(r, 2, 30, &stalled, out, sizeof(out)));
    assert_string_equal(out, "no progress for 31 s: ranks 0-1 in broadcast #9");
}

static void recent_progress_of_one_rank_is_no_hang(void **state)
{
    (void)state;
    struct hang_rank r[] = {at(0, "allreduce", 5, true, 40), at(1, "allreduce", 4, false, 2)};
    char out[64] = "untouched";
    double stalled;
    assert_false(hang_analyze(r, 2, 30, &stalled, out, sizeof(out)));
    assert_string_equal(out, "untouched");
}

static void ranks_computing_between_the_same_collectives_do_not_hang(void **state)
{
    (void)state;
    struct hang_rank r[] = {at(0, "allreduce", 5, false, 400), at(1, "allreduce", 5, false, 400)};
    char out[64];
    double stalled;
    assert_false(hang_analyze(r, 2, 30, &stalled, out, sizeof(out)));
}

static void a_rank_never_heard_of_is_not_judged(void **state)
{
    (void)state;
    struct hang_rank r[] = {at(0, "allreduce", 5, true, 400), {.rank = 1}};
    char out[64];
    double stalled;
    assert_false(hang_analyze(r, 2, 30, &stalled, out, sizeof(out)));
}

static void report_numbers_place_ranks_without_collectives(void **state)
{
    (void)state;
    struct hang_rank r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = at(i, NULL, 0, false, 60);
        r[i].report_seq = i == 2 ? 5 : 6;
    }
    char out[256];
    double stalled;
    assert_true(hang_analyze(r, 4, 30, &stalled, out, sizeof(out)));
    assert_string_equal(out, "no progress for 60 s: rank 2 after report #5; "
                             "ranks 0-1, 3 after report #6");
}

static void a_silent_rank_is_a_hang_and_says_so(void **state)
{
    (void)state;
    struct hang_rank r[] = {at(0, "allreduce", 5, false, 50), at(1, "allreduce", 5, false, 50)};
    r[1].heartbeat_age_s = 42;
    r[0].heartbeat_age_s = 9; /* late, but heartbeats may be 2 s apart: not silent below 10 s */
    char out[256];
    double stalled;
    assert_true(hang_analyze(r, 2, 30, &stalled, out, sizeof(out)));
    assert_string_equal(out, "no progress for 50 s: rank 0 after allreduce #5; "
                             "rank 1 after allreduce #5 (no heartbeat for 42 s)");
}

static void a_long_text_is_cut_with_dots(void **state)
{
    (void)state;
    struct hang_rank r[64];
    for (int i = 0; i < 64; i++)
        r[i] = at(i, "allreduce", i, true, 100);
    char out[80];
    double stalled;
    assert_true(hang_analyze(r, 64, 30, &stalled, out, sizeof(out)));
    assert_int_equal(strlen(out), sizeof(out) - 1);
    assert_string_equal(out + sizeof(out) - 4, "...");
    assert_memory_equal(out, "no progress for 100 s: rank 0 before any collective", 20);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(ranks_compress_into_ranges),
    cmocka_unit_test(rank_list_truncated_to_its_buffer),
    cmocka_unit_test(straggler_in_collective_named_before_the_waiting_ranks),
    cmocka_unit_test(rank_outside_collectives_named_after_its_last),
    cmocka_unit_test(every_rank_in_the_same_collective_is_a_hang),
    cmocka_unit_test(recent_progress_of_one_rank_is_no_hang),
    cmocka_unit_test(ranks_computing_between_the_same_collectives_do_not_hang),
    cmocka_unit_test(a_rank_never_heard_of_is_not_judged),
    cmocka_unit_test(report_numbers_place_ranks_without_collectives),
    cmocka_unit_test(a_silent_rank_is_a_hang_and_says_so),
    cmocka_unit_test(a_long_text_is_cut_with_dots),
};

TY_TEST_MAIN(tests)
