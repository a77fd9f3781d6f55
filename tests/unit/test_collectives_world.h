/* Helpers for collective tests: run a function on `world` ranks, each a forked process with the
 * environment the agent would give it (127.0.0.1, a free MASTER_PORT). */
#ifndef TEST_COLLECTIVES_WORLD_H
#define TEST_COLLECTIVES_WORLD_H

#include <sys/types.h>

#include "trainyard.h"

#define TW_MAX_WORLD 8

/* A rank body: returns 0 on success or a small positive failure code (becomes the exit code). */
typedef int (*tw_rank_fn)(ty_ctx *c, void *arg);

struct tw_world {
    int n;
    int port;
    pid_t pid[TW_MAX_WORLD];
};

/* A TCP port on 127.0.0.1, free a moment ago, of a range no other test process uses. */
int tw_free_port(void);
/* Fork world ranks running fn (collective timeout coll_timeout_s). 0 or -1. */
int tw_spawn(struct tw_world *w, int world, tw_rank_fn fn, void *arg, double coll_timeout_s);
/* Wait for every rank up to deadline_ms; ranks still running then are SIGKILLed. codes[i]:
 * exit status, 128+signal if killed by a signal, or -1 if it missed the deadline.
 * Returns the number of ranks that missed the deadline. */
int tw_wait(struct tw_world *w, int deadline_ms, int *codes);
/* tw_spawn + tw_wait; returns the number of ranks whose code is not 0. */
int tw_run(int world, tw_rank_fn fn, void *arg, double coll_timeout_s, int deadline_ms);
/* Milliseconds on the monotonic clock (shared by forked processes). */
long long tw_now_ms(void);

#endif
