/* Collective failures: a peer killed or exiting returns TY_EPEER (not a hang), a stopped peer
 * gives TY_ETIMEDOUT after the configured timeout, a missing peer times the rendezvous out,
 * and a failed context stays failed — on the shared-memory transport (the default for ranks on
 * one host) and on the TCP ring (TRAINYARD_TRANSPORT=tcp). */
#include "ty_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_collectives_world.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Loop big allreduces until one fails; the failure must be a peer error (the dead peer is
 * noticed through its closed sockets, not by waiting out the 20 s timeout) and sticky.
 * Exit codes: 0 as expected, 2 no error, 3 wrong code, 4 not sticky. Hangs are caught by the
 * harness's deadline; no wall-clock bounds are asserted. */
static int rank_allreduce_until_error(ty_ctx *c, void *arg)
{
    (void)arg;
    size_t n = 1u << 20;
    float *b = calloc(n, sizeof *b);
    int rc = 0;
    for (int it = 0; it < 100000 && rc == 0; it++)
        rc = ty_allreduce(c, b, n, TY_FLOAT32, TY_SUM);
    free(b);
    if (rc == 0)
        return 2;
    if (rc != TY_EPEER) {
        fprintf(stderr, "rank %d: unexpected %s\n", ty_world_rank(c), ty_strerror(rc));
        return 3;
    }
    int x = 1;
    if (ty_allreduce(c, &x, 1, TY_INT32, TY_SUM) != rc || ty_barrier(c) != rc)
        return 4;
    return 0;
}

/* Kill `victim` of `world` ranks while they stream; every other rank must get TY_EPEER. */
static void kill_mid_allreduce(int world, int victim)
{
    struct tw_world w;
    int codes[TW_MAX_WORLD];
    assert_int_equal(tw_spawn(&w, world, rank_allreduce_until_error, NULL, 20), 0);
    sleep_ms(800); /* connected and streaming by now */
    assert_int_equal(kill(w.pid[victim], SIGKILL), 0);
    assert_int_equal(tw_wait(&w, 30000, codes), 0);
    for (int r = 0; r < world; r++)
        assert_int_equal(codes[r], r == victim ? 128 + SIGKILL : 0);
}

static void coll_peer_killed_mid_allreduce_returns_error(void **state)
{
    (void)state;
    kill_mid_allreduce(3, 1);
}

/* With five ranks, ranks 0 and 4 are not ring neighbours of rank 2: they learn of its death
 * through the others (the shared abort flag, or closed ring links on TCP). */
static void coll_peer_killed_far_away_returns_error(void **state)
{
    (void)state;
    kill_mid_allreduce(5, 2);
}

static void coll_peer_killed_mid_allreduce_tcp_returns_error(void **state)
{
    (void)state;
    setenv("TRAINYARD_TRANSPORT", "tcp", 1);
    kill_mid_allreduce(3, 1);
    kill_mid_allreduce(5, 2);
    unsetenv("TRAINYARD_TRANSPORT");
}

static int rank_one_exits_early(ty_ctx *c, void *arg)
{
    (void)arg;
    if (ty_barrier(c) != 0)
        return 60;
    if (ty_world_rank(c) == 2)
        return 0; /* leaves: ty_finish closes its links */
    long long t = tw_now_ms();
    int x[1000] = {0};
    int rc = ty_allreduce(c, x, 1000, TY_INT32, TY_SUM);
    if (rc != TY_EPEER)
        return 61;
    return tw_now_ms() - t < 3000 ? 0 : 62;
}

static void coll_peer_exit_between_collectives_gives_peer_error(void **state)
{
    (void)state;
    assert_int_equal(tw_run(3, rank_one_exits_early, NULL, 30, 30000), 0);
}

static int rank_stop_self(ty_ctx *c, void *arg)
{
    (void)arg;
    if (ty_barrier(c) != 0)
        return 70;
    if (ty_world_rank(c) == 1) {
        raise(SIGSTOP); /* hangs without closing anything */
        return 0;
    }
    long long t = tw_now_ms();
    double v[4096] = {0};
    int rc = ty_allreduce(c, v, 4096, TY_FLOAT64, TY_SUM);
    long long took = tw_now_ms() - t;
    fprintf(stderr, "rank 0: %s after %lld ms\n", ty_strerror(rc), took);
    if (rc != TY_ETIMEDOUT)
        return 71;
    /* Not before the configured 1 s timeout (load can only make it later). */
    return took >= 900 ? 0 : 72;
}

static void stopped_peer_times_out(void)
{
    struct tw_world w;
    assert_int_equal(tw_spawn(&w, 2, rank_stop_self, NULL, 1.0), 0);
    int st = 0;
    long long end = tw_now_ms() + 20000;
    pid_t p = 0;
    while ((p = waitpid(w.pid[0], &st, WNOHANG)) == 0 && tw_now_ms() < end)
        sleep_ms(10);
    kill(w.pid[1], SIGKILL);
    waitpid(w.pid[1], NULL, 0);
    if (p == 0) {
        kill(w.pid[0], SIGKILL);
        waitpid(w.pid[0], NULL, 0);
        fail_msg("rank 0 hung");
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void coll_stopped_peer_times_out(void **state)
{
    (void)state;
    stopped_peer_times_out();
    setenv("TRAINYARD_TRANSPORT", "tcp", 1);
    stopped_peer_times_out();
    unsetenv("TRAINYARD_TRANSPORT");
}

static int rank_missing_peer(ty_ctx *c, void *arg)
{
    int absent = *(const int *)arg;
    if (ty_world_rank(c) == absent)
        return 0; /* never joins */
    long long t = tw_now_ms();
    int rc = ty_barrier(c);
    long long took = tw_now_ms() - t;
    if (rc != TY_ETIMEDOUT) {
        fprintf(stderr, "rank %d: %s\n", ty_world_rank(c), ty_strerror(rc));
        return 80;
    }
    if (ty_barrier(c) != TY_ETIMEDOUT)
        return 81;
    return took >= 900 ? 0 : 82; /* not before the configured 1 s timeout */
}

static void coll_rendezvous_times_out_when_a_rank_is_missing(void **state)
{
    (void)state;
    int absent = 1; /* rank 0 waits for a HELLO that never comes */
    assert_int_equal(tw_run(2, rank_missing_peer, &absent, 1.0, 20000), 0);
    absent = 0; /* rank 1 keeps finding MASTER_PORT closed */
    assert_int_equal(tw_run(2, rank_missing_peer, &absent, 1.0, 20000), 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(coll_peer_killed_mid_allreduce_returns_error),
    cmocka_unit_test(coll_peer_killed_far_away_returns_error),
    cmocka_unit_test(coll_peer_killed_mid_allreduce_tcp_returns_error),
    cmocka_unit_test(coll_peer_exit_between_collectives_gives_peer_error),
    cmocka_unit_test(coll_stopped_peer_times_out),
    cmocka_unit_test(coll_rendezvous_times_out_when_a_rank_is_missing),
};
TY_TEST_MAIN(tests)
