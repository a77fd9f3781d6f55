/* Native collectives: exact results for world sizes 1..5, every dtype and op, sizes from 1
 * element to 64 MiB (counts not divisible by the world size, count < world size), through both
 * allreduce transports: shared memory (the default on one host) and the TCP ring
 * (TRAINYARD_TRANSPORT=tcp). Ranks are forked processes on 127.0.0.1
 * (test_collectives_world.c). Inputs are small integers, so float sums are exact and results
 * can be compared with ==. */
#include "ty_test.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_collectives_world.h"

#define DEADLINE_MS 100000

/* Rank r's input at index i: a small integer in [-20, 40]. */
static long input(int r, size_t i)
{
    return (long)((i * 7 + (size_t)r * 13) % 61) - 20;
}

/* Fill buf with rank r's input. */
static void fill(void *buf, size_t n, ty_dtype dt, int r)
{
    for (size_t i = 0; i < n; i++) {
        long v = input(r, i);
        switch (dt) {
        case TY_FLOAT32:
            ((float *)buf)[i] = (float)v;
            break;
        case TY_FLOAT64:
            ((double *)buf)[i] = (double)v;
            break;
        case TY_INT32:
            ((int32_t *)buf)[i] = (int32_t)v;
            break;
        case TY_INT64:
            ((int64_t *)buf)[i] = (int64_t)v;
            break;
        }
    }
}

/* Compare buf with the reduction of every rank's input; returns the number of mismatches. */
static size_t verify(const void *buf, size_t n, ty_dtype dt, ty_op op, int p)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        long s = 0, mn = LONG_MAX, mx = LONG_MIN;
        for (int r = 0; r < p; r++) {
            long v = input(r, i);
            s += v;
            mn = v < mn ? v : mn;
            mx = v > mx ? v : mx;
        }
        long iv = op == TY_SUM ? s : op == TY_MIN ? mn : op == TY_MAX ? mx : s / p;
        bool ok;
        switch (dt) {
        case TY_FLOAT32: {
            float e = op == TY_AVG ? (float)s / (float)p : (float)iv;
            ok = ((const float *)buf)[i] == e;
            break;
        }
        case TY_FLOAT64: {
            double e = op == TY_AVG ? (double)s / (double)p : (double)iv;
            ok = ((const double *)buf)[i] == e;
            break;
        }
        case TY_INT32:
            ok = ((const int32_t *)buf)[i] == (int32_t)iv;
            break;
        default:
            ok = ((const int64_t *)buf)[i] == (int64_t)iv;
            break;
        }
        if (!ok && bad++ < 3)
            fprintf(stderr, "mismatch dt=%d op=%d n=%zu at %zu\n", dt, op, n, i);
    }
    return bad;
}

/* One allreduce checked against the expected result: 0 or a failure code. */
static int check_one(ty_ctx *c, size_t n, ty_dtype dt, ty_op op)
{
    size_t esz = ty_dtype_size(dt);
    void *buf = malloc(n * esz + 8);
    if (!buf)
        return 10;
    fill(buf, n, dt, ty_world_rank(c));
    int rc = ty_allreduce(c, buf, n, dt, op);
    if (rc < 0) {
        fprintf(stderr, "rank %d: allreduce n=%zu: %s\n", ty_world_rank(c), n, ty_strerror(rc));
        free(buf);
        return 11;
    }
    size_t bad = verify(buf, n, dt, op, ty_world_size(c));
    free(buf);
    return bad ? 12 : 0;
}

struct sweep {
    const size_t *sizes;
    int nsizes;
    bool all_combos; /* every dtype x op, else the pairs below */
    int npairs;
    ty_dtype dts[4];
    ty_op ops[4];
};

static int rank_sweep(ty_ctx *c, void *arg)
{
    const struct sweep *s = arg;
    const ty_dtype dts[] = {TY_FLOAT32, TY_FLOAT64, TY_INT32, TY_INT64};
    const ty_op ops[] = {TY_SUM, TY_MIN, TY_MAX, TY_AVG};
    for (int k = 0; k < s->nsizes; k++) {
        if (s->all_combos) {
            for (int d = 0; d < 4; d++)
                for (int o = 0; o < 4; o++) {
                    int rc = check_one(c, s->sizes[k], dts[d], ops[o]);
                    if (rc)
                        return rc;
                }
        } else {
            for (int q = 0; q < s->npairs; q++) {
                int rc = check_one(c, s->sizes[k], s->dts[q], s->ops[q]);
                if (rc)
                    return rc;
            }
        }
    }
    int32_t zero_count_buf = 5;
    if (ty_allreduce(c, &zero_count_buf, 0, TY_INT32, TY_SUM) != 0 || zero_count_buf != 5)
        return 13;
    return 0;
}

/* Run fn(p) with the ranks on the TCP ring only (the environment is inherited by the forked
 * ranks). */
static void on_tcp(void (*fn)(int), int p)
{
    setenv("TRAINYARD_TRANSPORT", "tcp", 1);
    fn(p);
    unsetenv("TRAINYARD_TRANSPORT");
}

/* Sizes around world-size and chunk boundaries (ring and shared memory: 256 KiB = 65536 f32 /
 * 32768 f64; buffers up to 256 KiB take the shared-memory one-barrier path). */
static void sweep_world(int p)
{
    size_t sizes[] = {1,
                      2,
                      3,
                      (size_t)p - 1 ? (size_t)p - 1 : 1,
                      (size_t)p,
                      (size_t)p + 1,
                      2 * (size_t)p + 1,
                      1000,
                      32768 * (size_t)p + 3,
                      65536 * (size_t)p + 1,
                      262144,
                      300001};
    struct sweep s = {.sizes = sizes, .nsizes = sizeof sizes / sizeof sizes[0], .all_combos = true};
    assert_int_equal(tw_run(p, rank_sweep, &s, 30, DEADLINE_MS), 0);
}

static void coll_allreduce_world_1_all_dtypes_ops(void **state)
{
    (void)state;
    sweep_world(1);
}

static void coll_allreduce_world_2_all_dtypes_ops(void **state)
{
    (void)state;
    sweep_world(2);
}

static void coll_allreduce_tcp_world_2_all_dtypes_ops(void **state)
{
    (void)state;
    on_tcp(sweep_world, 2);
}

static void coll_allreduce_world_3_all_dtypes_ops(void **state)
{
    (void)state;
    sweep_world(3);
}

static void coll_allreduce_tcp_world_3_all_dtypes_ops(void **state)
{
    (void)state;
    on_tcp(sweep_world, 3);
}

static void coll_allreduce_world_4_all_dtypes_ops(void **state)
{
    (void)state;
    sweep_world(4);
}

static void coll_allreduce_tcp_world_4_all_dtypes_ops(void **state)
{
    (void)state;
    on_tcp(sweep_world, 4);
}

static void coll_allreduce_world_5_all_dtypes_ops(void **state)
{
    (void)state;
    sweep_world(5);
}

static void coll_allreduce_tcp_world_5_all_dtypes_ops(void **state)
{
    (void)state;
    on_tcp(sweep_world, 5);
}

/* 64 MiB buffers: float32 sum and int64 max (16 Mi and 8 Mi elements, + odd remainder). */
static void big_world(int p)
{
    size_t sizes[] = {(64u << 20) / 4 + 3};
    struct sweep s = {.sizes = sizes,
                      .nsizes = 1,
                      .npairs = 2,
                      .dts = {TY_FLOAT32, TY_INT32},
                      .ops = {TY_SUM, TY_MAX}};
    assert_int_equal(tw_run(p, rank_sweep, &s, 60, DEADLINE_MS), 0);
    size_t sizes64[] = {(64u << 20) / 8};
    struct sweep s64 = {
        .sizes = sizes64, .nsizes = 1, .npairs = 1, .dts = {TY_INT64}, .ops = {TY_AVG}};
    assert_int_equal(tw_run(p, rank_sweep, &s64, 60, DEADLINE_MS), 0);
}

static void coll_allreduce_64mib_world_2(void **state)
{
    (void)state;
    big_world(2);
}

static void coll_allreduce_64mib_world_4(void **state)
{
    (void)state;
    big_world(4);
}

static void coll_allreduce_64mib_tcp_world_3(void **state)
{
    (void)state;
    on_tcp(big_world, 3);
}

/* The shared-memory paths with 4 KiB chunks (1024 f32 / 512 f64), so that a few thousand
 * elements cross several chunk boundaries: sizes just below, at and above one chunk (the
 * one-barrier path ends at one chunk), a last chunk of one element (whose shares are all empty
 * but one), many chunks; calls alternate between the two paths, and worlds of 2 to 5 fold two to
 * five sources (one pass, or two above four). */
static void shm_chunk_edges(int p)
{
    setenv("TRAINYARD_SHM_CHUNK_KIB", "4", 1);
    setenv("TRAINYARD_SHM_SMALL_KIB", "4", 1);
    size_t sizes[] = {1, 511, 1024, 513, 1025, 2047, 7, 2049, 3 * 1024 + 17, 20000};
    struct sweep s = {.sizes = sizes, .nsizes = sizeof sizes / sizeof sizes[0], .all_combos = true};
    assert_int_equal(tw_run(p, rank_sweep, &s, 30, DEADLINE_MS), 0);
    unsetenv("TRAINYARD_SHM_CHUNK_KIB");
    unsetenv("TRAINYARD_SHM_SMALL_KIB");
}

static void coll_allreduce_shm_chunk_edges_and_both_paths(void **state)
{
    (void)state;
    for (int p = 2; p <= 5; p++)
        shm_chunk_edges(p);
}

/* Which transport the ranks ended up on: "none" before connecting, then arg. */
static int rank_transport(ty_ctx *c, void *arg)
{
    if (strcmp(ty_transport(c), "none") != 0)
        return 90;
    if (ty_connect(c) != 0)
        return 91;
    if (strcmp(ty_transport(c), (const char *)arg) != 0) {
        fprintf(stderr, "rank %d: transport %s\n", ty_world_rank(c), ty_transport(c));
        return 92;
    }
    return check_one(c, 1000, TY_FLOAT32, TY_SUM);
}

static void coll_transport_shared_memory_on_one_host_tcp_when_asked(void **state)
{
    (void)state;
    assert_int_equal(tw_run(3, rank_transport, "shm", 30, DEADLINE_MS), 0);
    setenv("TRAINYARD_TRANSPORT", "tcp", 1);
    assert_int_equal(tw_run(3, rank_transport, "tcp", 30, DEADLINE_MS), 0);
    unsetenv("TRAINYARD_TRANSPORT");
}

/* Ranks on several nodes (LOCAL_WORLD_SIZE < WORLD_SIZE) use the TCP ring. */
static void coll_transport_tcp_across_nodes(void **state)
{
    (void)state;
    setenv("TW_RANKS_PER_NODE", "2", 1);
    assert_int_equal(tw_run(4, rank_transport, "tcp", 30, DEADLINE_MS), 0);
    unsetenv("TW_RANKS_PER_NODE");
}

/* One rank that cannot open the others' segment (its own /dev/shm, as on another host although
 * LOCAL_WORLD_SIZE says otherwise): every rank falls back to the TCP ring, results still exact. */
static void coll_transport_falls_back_to_tcp_when_a_rank_cannot_share(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* a private /dev/shm needs a mount namespace */
    setenv("TW_PRIVATE_SHM_RANK", "2", 1);
    assert_int_equal(tw_run(3, rank_transport, "tcp", 30, DEADLINE_MS), 0);
    unsetenv("TW_PRIVATE_SHM_RANK");
}

/* Many back-to-back calls of changing sizes must not desynchronize the streams. */
static int rank_repeated(ty_ctx *c, void *arg)
{
    (void)arg;
    for (int it = 0; it < 300; it++) {
        size_t n = (size_t)(it * 37) % 5000 + 1;
        int rc = check_one(c, n, it % 2 ? TY_FLOAT64 : TY_INT32, (ty_op)(it % 4));
        if (rc)
            return rc;
    }
    return 0;
}

static void coll_allreduce_back_to_back_calls_stay_in_sync(void **state)
{
    (void)state;
    assert_int_equal(tw_run(3, rank_repeated, NULL, 30, DEADLINE_MS), 0);
}

static int rank_broadcast(ty_ctx *c, void *arg)
{
    (void)arg;
    const size_t sizes[] = {1, 7, 1000, (1u << 20) + 7};
    for (int root = 0; root < ty_world_size(c); root++) {
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            unsigned char *b = malloc(sizes[k]);
            for (size_t i = 0; i < sizes[k]; i++)
                b[i] = ty_world_rank(c) == root ? (unsigned char)(i * 31 + (size_t)root) : 0xee;
            int rc = ty_broadcast(c, b, sizes[k], root);
            for (size_t i = 0; rc == 0 && i < sizes[k]; i++) {
                if (b[i] != (unsigned char)(i * 31 + (size_t)root))
                    rc = -100;
            }
            free(b);
            if (rc)
                return 20;
        }
    }
    return ty_broadcast(c, NULL, 0, 0) == 0 ? 0 : 21;
}

static void coll_broadcast_every_root(void **state)
{
    (void)state;
    assert_int_equal(tw_run(3, rank_broadcast, NULL, 30, DEADLINE_MS), 0);
    assert_int_equal(tw_run(4, rank_broadcast, NULL, 30, DEADLINE_MS), 0);
}

static int rank_allgather(ty_ctx *c, void *arg)
{
    (void)arg;
    int p = ty_world_size(c), r = ty_world_rank(c);
    const size_t sizes[] = {1, 13, 100003};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t b = sizes[k];
        unsigned char *send = malloc(b), *recv = malloc(b * (size_t)p);
        for (size_t i = 0; i < b; i++)
            send[i] = (unsigned char)(i + (size_t)r * 17);
        int rc = ty_allgather(c, send, recv, b);
        for (int q = 0; rc == 0 && q < p; q++)
            for (size_t i = 0; i < b; i++)
                if (recv[(size_t)q * b + i] != (unsigned char)(i + (size_t)q * 17))
                    rc = -100;
        /* in place: send is this rank's slot of recv */
        memset(recv, 0, b * (size_t)p);
        memcpy(recv + (size_t)r * b, send, b);
        if (rc == 0)
            rc = ty_allgather(c, recv + (size_t)r * b, recv, b);
        for (int q = 0; rc == 0 && q < p; q++)
            for (size_t i = 0; i < b; i++)
                if (recv[(size_t)q * b + i] != (unsigned char)(i + (size_t)q * 17))
                    rc = -101;
        free(send);
        free(recv);
        if (rc)
            return 30;
    }
    return 0;
}

static void coll_allgather_including_in_place(void **state)
{
    (void)state;
    assert_int_equal(tw_run(2, rank_allgather, NULL, 30, DEADLINE_MS), 0);
    assert_int_equal(tw_run(3, rank_allgather, NULL, 30, DEADLINE_MS), 0);
}

static long long barrier_t0;

static int rank_barrier(ty_ctx *c, void *arg)
{
    (void)arg;
    if (ty_connect(c) != 0)
        return 40;
    struct timespec ts = {0, (long)ty_world_rank(c) * 150 * 1000000L};
    nanosleep(&ts, NULL);
    long long start = tw_now_ms();
    if (ty_barrier(c) != 0)
        return 41;
    (void)start;
    /* nobody leaves before the slowest rank (150 ms x (p-1) after connecting) arrived */
    return tw_now_ms() - barrier_t0 >= (long long)(ty_world_size(c) - 1) * 150 ? 0 : 42;
}

static void coll_barrier_waits_for_slowest_rank(void **state)
{
    (void)state;
    barrier_t0 = tw_now_ms();
    assert_int_equal(tw_run(4, rank_barrier, NULL, 30, DEADLINE_MS), 0);
}

static int rank_mixed(ty_ctx *c, void *arg)
{
    (void)arg;
    for (int it = 0; it < 20; it++) {
        int rc = check_one(c, 1000 + (size_t)it, TY_FLOAT32, TY_SUM);
        if (rc)
            return rc;
        int64_t v = ty_world_rank(c) == it % ty_world_size(c) ? it : -1;
        if (ty_broadcast(c, &v, sizeof v, it % ty_world_size(c)) != 0 || v != it)
            return 50;
        int me = ty_world_rank(c), all[8];
        if (ty_allgather(c, &me, all, sizeof me) != 0)
            return 51;
        for (int q = 0; q < ty_world_size(c); q++)
            if (all[q] != q)
                return 52;
        if (ty_barrier(c) != 0)
            return 53;
    }
    return 0;
}

static void coll_mixed_collectives_sequence(void **state)
{
    (void)state;
    assert_int_equal(tw_run(5, rank_mixed, NULL, 30, DEADLINE_MS), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(coll_allreduce_world_1_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_world_2_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_world_3_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_world_4_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_world_5_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_64mib_world_2),
    cmocka_unit_test(coll_allreduce_64mib_world_4),
    cmocka_unit_test(coll_allreduce_tcp_world_2_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_tcp_world_3_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_tcp_world_4_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_tcp_world_5_all_dtypes_ops),
    cmocka_unit_test(coll_allreduce_64mib_tcp_world_3),
    cmocka_unit_test(coll_allreduce_shm_chunk_edges_and_both_paths),
    cmocka_unit_test(coll_transport_shared_memory_on_one_host_tcp_when_asked),
    cmocka_unit_test(coll_transport_tcp_across_nodes),
    cmocka_unit_test(coll_transport_falls_back_to_tcp_when_a_rank_cannot_share),
    cmocka_unit_test(coll_allreduce_back_to_back_calls_stay_in_sync),
    cmocka_unit_test(coll_broadcast_every_root),
    cmocka_unit_test(coll_allgather_including_in_place),
    cmocka_unit_test(coll_barrier_waits_for_slowest_rank),
    cmocka_unit_test(coll_mixed_collectives_sequence),
};
TY_TEST_MAIN(tests)
