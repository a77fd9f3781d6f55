/* ty_shard / ty_shard_range: contiguous, balanced, complete partitions. */
#include "ty_test.h"

#include <stdlib.h>

#include "trainyard.h"

/* Check the partition of n over size ranks: contiguous, disjoint, complete, balanced. */
static void check_partition(size_t n, int size)
{
    size_t expect_begin = 0, lo = (size_t)-1, hi = 0;
    for (int r = 0; r < size; r++) {
        size_t b, e;
        ty_shard_range(n, r, size, &b, &e);
        assert_int_equal(b, expect_begin);
        assert_true(e >= b);
        lo = e - b < lo ? e - b : lo;
        hi = e - b > hi ? e - b : hi;
        /* the first n % size ranks get the extra item */
        assert_int_equal(e - b, n / (size_t)size + ((size_t)r < n % (size_t)size ? 1 : 0));
        expect_begin = e;
    }
    assert_int_equal(expect_begin, n);
    assert_true(hi - lo <= 1);
}

static void shard_covers_every_item_exactly_once(void **state)
{
    (void)state;
    for (int size = 1; size <= 9; size++)
        for (size_t n = 0; n <= 100; n++)
            check_partition(n, size);
    check_partition((size_t)1 << 40, 7);
}

static void shard_fewer_items_than_ranks(void **state)
{
    (void)state;
    size_t b, e;
    for (int r = 0; r < 5; r++) {
        ty_shard_range(3, r, 5, &b, &e);
        assert_int_equal(e - b, r < 3 ? 1 : 0);
    }
    ty_shard_range(0, 2, 5, &b, &e);
    assert_int_equal(b, e);
}

static void shard_divisible_is_equal_split(void **state)
{
    (void)state;
    size_t b, e;
    ty_shard_range(12, 2, 4, &b, &e);
    assert_int_equal(b, 6);
    assert_int_equal(e, 9);
}

static void shard_not_divisible_front_loads_remainder(void **state)
{
    (void)state;
    size_t b, e;
    ty_shard_range(10, 0, 4, &b, &e); /* 3 3 2 2 */
    assert_int_equal(b, 0);
    assert_int_equal(e, 3);
    ty_shard_range(10, 3, 4, &b, &e);
    assert_int_equal(b, 8);
    assert_int_equal(e, 10);
}

static void shard_bad_rank_is_empty(void **state)
{
    (void)state;
    size_t b = 1, e = 2;
    ty_shard_range(10, 4, 4, &b, &e);
    assert_int_equal(b, e);
    ty_shard_range(10, 0, 0, &b, &e);
    assert_int_equal(b, e);
}

static void shard_uses_context_rank(void **state)
{
    (void)state;
    unsetenv("TRAINYARD_JOB_ID");
    setenv("RANK", "2", 1);
    setenv("WORLD_SIZE", "3", 1);
    ty_ctx *c;
    assert_int_equal(ty_init(&c, NULL, NULL), 0);
    size_t b, e;
    ty_shard(c, 10, &b, &e);
    assert_int_equal(b, 7);
    assert_int_equal(e, 10);
    ty_finish(&c);
    assert_null(c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(shard_covers_every_item_exactly_once),
    cmocka_unit_test(shard_fewer_items_than_ranks),
    cmocka_unit_test(shard_divisible_is_equal_split),
    cmocka_unit_test(shard_not_divisible_front_loads_remainder),
    cmocka_unit_test(shard_bad_rank_is_empty),
    cmocka_unit_test(shard_uses_context_rank),
};
TY_TEST_MAIN(tests)
