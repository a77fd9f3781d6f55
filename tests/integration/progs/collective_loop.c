/*
 * collective_loop.c — a test worker for the hang tests (tests/integration/test_hangs.py): runs
 * `iterations` allreduces of a small buffer, checks each result, sleeps `sleep_ms` after each
 * (computing, as far as the server can tell), reports once at the end, and exits 0. With
 * TY_TEST_STALL=RANK:SEQ:SECONDS in its environment, libtrainyard makes that rank sleep
 * inside its collective number SEQ: a rank stuck in a collective.
 *
 * Usage: collective_loop [iterations [sleep_ms]]   (default 20 and 0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "trainyard.h"

int main(int argc, char **argv)
{
    ty_ctx *c = NULL;
    int rc = ty_init(&c, &argc, &argv);
    if (rc < 0) {
        fprintf(stderr, "ty_init: %s\n", ty_strerror(rc));
        return 1;
    }
    long iterations = 20, sleep_ms = 0;
    char *end = NULL;
    if (argc > 1)
        iterations = strtol(argv[1], &end, 10);
    if (argc > 1 && (*end || iterations < 1 || iterations > 1000000)) {
        fprintf(stderr, "usage: collective_loop [iterations [sleep_ms]]\n");
        ty_finish(&c);
        return 2;
    }
    if (argc > 2)
        sleep_ms = strtol(argv[2], &end, 10);
    if (argc > 2 && (*end || sleep_ms < 0 || sleep_ms > 3600000)) {
        fprintf(stderr, "usage: collective_loop [iterations [sleep_ms]]\n");
        ty_finish(&c);
        return 2;
    }
    int world = ty_world_size(c);
    for (long i = 0; i < iterations && rc == 0; i++) {
        float v[4] = {1, 2, 3, 4};
        rc = ty_allreduce(c, v, 4, TY_FLOAT32, TY_SUM);
        if (rc == 0 && v[3] != 4.0f * (float)world) {
            fprintf(stderr, "allreduce %ld: got %g, want %g\n", i + 1, v[3], 4.0 * world);
            rc = TY_EPROTO;
        }
        struct timespec ts = {.tv_sec = sleep_ms / 1000, .tv_nsec = sleep_ms % 1000 * 1000000L};
        if (rc == 0 && sleep_ms > 0)
            nanosleep(&ts, NULL);
    }
    if (rc == 0) {
        json_t *m = json_pack("{s:I}", "iterations", (json_int_t)iterations);
        rc = m ? ty_report(c, m, NULL) : TY_ENOMEM;
        json_decref(m);
    }
    if (rc < 0)
        fprintf(stderr, "rank %d: %s\n", ty_world_rank(c), ty_strerror(rc));
    ty_finish(&c);
    return rc < 0 ? 1 : 0;
}
