/* Unit tests for server/artifacts/retention.c: which checkpoints num_to_keep deletes. */
#include "ty_test.h"

#include <string.h>

#include "retention.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void keep_all_without_num_to_keep(void **state)
{
    (void)state;
    struct retention_ckpt c[] = {{1, true, 0.5}, {2, true, 0.1}, {3, true, 0.9}};
    bool del[3];
    assert_int_equal(retention_select(c, N(c), 0, true, RETENTION_MAX, del), 0);
    assert_false(del[0] || del[1] || del[2]);
}

static void keeps_exactly_the_best_n_by_max_score(void **state)
{
    (void)state;
    /* latest (order 5) is among the best two */
    struct retention_ckpt c[] = {
        {1, true, 0.2}, {2, true, 0.9}, {3, true, 0.1}, {4, true, 0.3}, {5, true, 0.8}};
    bool del[5];
    assert_int_equal(retention_select(c, N(c), 2, true, RETENTION_MAX, del), 3);
    bool want[] = {true, false, true, true, false};
    assert_memory_equal(del, want, sizeof(want));
}

static void min_order_prefers_small_scores(void **state)
{
    (void)state;
    struct retention_ckpt c[] = {{1, true, 0.2}, {2, true, 0.9}, {3, true, 0.1}, {4, true, 0.05}};
    bool del[4];
    assert_int_equal(retention_select(c, N(c), 2, true, RETENTION_MIN, del), 2);
    bool want[] = {true, true, false, false};
    assert_memory_equal(del, want, sizeof(want));
}

static void the_latest_is_never_deleted(void **state)
{
    (void)state;
    struct retention_ckpt c[] = {{1, true, 0.9}, {2, true, 0.8}, {3, true, 0.1}};
    bool del[3];
    assert_int_equal(retention_select(c, N(c), 1, true, RETENTION_MAX, del), 1);
    bool want[] = {false, true, false};
    assert_memory_equal(del, want, sizeof(want));
}

static void without_an_attribute_the_oldest_go(void **state)
{
    (void)state;
    struct retention_ckpt c[] = {{3, false, 0}, {1, false, 0}, {4, false, 0}, {2, false, 0}};
    bool del[4];
    assert_int_equal(retention_select(c, N(c), 2, false, RETENTION_MAX, del), 2);
    bool want[] = {false, true, false, true};
    assert_memory_equal(del, want, sizeof(want));
}

static void unscored_rank_below_scored_and_ties_keep_the_newer(void **state)
{
    (void)state;
    struct retention_ckpt c[] = {{1, true, 0.5}, {2, false, 0}, {3, true, 0.5}, {4, true, 0.1}};
    bool del[4];
    assert_int_equal(retention_select(c, N(c), 1, true, RETENTION_MAX, del), 2);
    bool want[] = {true, true, false, false}; /* 3 best (newer tie), 4 latest */
    assert_memory_equal(del, want, sizeof(want));
}

static void fewer_than_n_keeps_all(void **state)
{
    (void)state;
    struct retention_ckpt c[] = {{1, true, 0.5}, {2, true, 0.1}};
    bool del[2];
    assert_int_equal(retention_select(c, N(c), 2, true, RETENTION_MAX, del), 0);
    assert_int_equal(retention_select(c, 0, 2, true, RETENTION_MAX, del), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(keep_all_without_num_to_keep),
    cmocka_unit_test(keeps_exactly_the_best_n_by_max_score),
    cmocka_unit_test(min_order_prefers_small_scores),
    cmocka_unit_test(the_latest_is_never_deleted),
    cmocka_unit_test(without_an_attribute_the_oldest_go),
    cmocka_unit_test(unscored_rank_below_scored_and_ties_keep_the_newer),
    cmocka_unit_test(fewer_than_n_keeps_all),
};

TY_TEST_MAIN(tests)
