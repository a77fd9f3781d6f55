/*
 * progress.c — the heartbeat thread: every TRAINYARD_HEARTBEAT_S seconds it sends the agent a
 * `progress` message (docs/report-protocol.md) on a connection of its own, with the collective
 * the rank is in or last left, the number of reports it made, and how long ago that last changed.
 * The collectives publish that state with one relaxed atomic store on entry and one on exit
 * (internal.h), so the hot path pays no system call; the thread samples it every 100 ms (so the
 * age it sends is exact to 100 ms) and sends at its own, lower pace. A heartbeat that cannot be
 * delivered is dropped (the agent is gone or restarting): the next tick reconnects.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "report_proto.h"
#include "util.h"

#define PROGRESS_DEFAULT_INTERVAL_S 1.0
#define PROGRESS_WRITE_TIMEOUT_MS 1000
#define PROGRESS_SAMPLE_MS 100

struct ty__progress {
    ty_ctx *c; /* only its fields fixed at ty_init and the atomics are read */
    pid_t pid; /* the process that started the thread: a forked child has no thread to join */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    bool stop;           /* guarded by lock */
    int64_t interval_ms;
    int fd; /* thread only; -1 when not connected */
    bool warned;
    /* thread only: the last state sampled and when it changed (monotonic ms) */
    uint64_t word;
    int64_t reports, changed_ms, sent_ms;
};

/* Parses a non-negative number of seconds from env `name` into *out (unset: unchanged).
 * 0, or TY_ECONFIG naming the variable in err. */
static int progress_env_seconds(const char *name, double max, double *out, char *err, size_t errlen)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= 0) || v > max) {
        snprintf(err, errlen, "%s must be a number of seconds from 0 to %g, not '%s'", name, max,
                 s);
        return TY_ECONFIG;
    }
    *out = v;
    return 0;
}

/* TY_TEST_STALL=RANK:SEQ:SECONDS (tests only): rank RANK sleeps SECONDS inside its
 * collective number SEQ, after its data moved and before it leaves. 0 or TY_ECONFIG. */
static int progress_test_stall_env(ty_ctx *c, char *err, size_t errlen)
{
    const char *s = getenv("TY_TEST_STALL");
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long rank = strtol(s, &end, 10);
    long long seq = 0;
    double secs = 0;
    bool ok = errno == 0 && *end == ':' && rank >= 0;
    if (ok) {
        seq = strtoll(end + 1, &end, 10);
        ok = errno == 0 && *end == ':' && seq >= 1;
    }
    if (ok) {
        secs = strtod(end + 1, &end);
        ok = errno == 0 && *end == '\0' && secs > 0 && secs <= 3600;
    }
    if (!ok) {
        snprintf(err, errlen, "TY_TEST_STALL must be RANK:SEQ:SECONDS, not '%s'", s);
        return TY_ECONFIG;
    }
    if (rank == c->rank) {
        c->test_stall_seq = seq;
        c->test_stall_s = secs;
    }
    return 0;
}

void ty__progress_test_stall(ty_ctx *c)
{
    fprintf(stderr, "trainyard: TY_TEST_STALL: rank %d sleeps %g s in collective #%lld\n", c->rank,
            c->test_stall_s, (long long)c->coll_seq);
    struct timespec ts = {.tv_sec = (time_t)c->test_stall_s,
                          .tv_nsec =
                              (long)((c->test_stall_s - (double)(time_t)c->test_stall_s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Sends one heartbeat, connecting first when needed. Failures close the connection. */
static void progress_send(struct ty__progress *p, int64_t now)
{
    if (p->fd < 0) {
        int rc = ty__report_dial(p->c, PROGRESS_WRITE_TIMEOUT_MS, &p->fd);
        if (rc < 0) {
            p->fd = -1;
            if (!p->warned)
                fprintf(stderr, "trainyard: heartbeat: cannot reach the agent: %s\n",
                        ty_strerror(rc));
            p->warned = true;
            return;
        }
    }
    struct rproto_progress msg = {
        .op = rproto_op_name((int)(p->word >> 1 & 0x7f)),
        .coll_seq = (int64_t)(p->word >> 8),
        .in_collective = (p->word & 1) != 0,
        .report_seq = p->reports,
        .progress_age_ms = now - p->changed_ms,
    };
    json_t *m = rproto_progress_new(&msg);
    int rc = m ? rproto_write(p->fd, m, PROGRESS_WRITE_TIMEOUT_MS) : TY_ENOMEM;
    json_decref(m);
    if (rc < 0) {
        close(p->fd);
        p->fd = -1;
    } else {
        p->warned = false;
    }
}

/* One tick: samples the published state, and sends it when the interval has passed. */
static void progress_tick(struct ty__progress *p)
{
    int64_t now = util_mono_ms();
    uint64_t w = atomic_load_explicit(&p->c->progress_word, memory_order_relaxed);
    int64_t r = atomic_load_explicit(&p->c->progress_reports, memory_order_relaxed);
    if (w != p->word || r != p->reports || p->changed_ms == 0) {
        p->word = w;
        p->reports = r;
        p->changed_ms = now;
    }
    if (p->sent_ms == 0 || now - p->sent_ms >= p->interval_ms) {
        p->sent_ms = now;
        progress_send(p, now);
    }
}

static void *progress_thread(void *arg)
{
    struct ty__progress *p = arg;
    int64_t tick_ms = p->interval_ms < PROGRESS_SAMPLE_MS ? p->interval_ms : PROGRESS_SAMPLE_MS;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        pthread_mutex_unlock(&p->lock);
        progress_tick(p);
        struct timespec until = util_clock_in_ms(CLOCK_MONOTONIC, (long)tick_ms);
        pthread_mutex_lock(&p->lock);
        while (!p->stop && pthread_cond_timedwait(&p->cond, &p->lock, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int ty__progress_start(ty_ctx *c, char *err, size_t errlen)
{
    double interval = PROGRESS_DEFAULT_INTERVAL_S;
    int rc = progress_test_stall_env(c, err, errlen);
    if (rc == 0)
        rc = progress_env_seconds("TRAINYARD_HEARTBEAT_S", 3600, &interval, err, errlen);
    if (rc < 0)
        return rc;
    if (c->standalone || !c->report_socket || !c->job_id || interval == 0)
        return 0;
    struct ty__progress *p = calloc(1, sizeof *p);
    if (!p)
        return TY_ENOMEM;
    p->c = c;
    p->pid = getpid();
    p->fd = -1;
    p->interval_ms = (int64_t)(interval * 1000.0);
    if (p->interval_ms < 10)
        p->interval_ms = 10;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->lock, NULL);
    if (pthread_create(&p->thread, NULL, progress_thread, p) != 0) {
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
        free(p);
        snprintf(err, errlen, "cannot start the heartbeat thread");
        return TY_ENOMEM;
    }
    c->progress = p;
    return 0;
}

void ty__progress_stop(ty_ctx *c)
{
    struct ty__progress *p = c->progress;
    if (!p)
        return;
    c->progress = NULL;
    if (p->pid != getpid()) { /* ty_finish in a forked child: the thread is the parent's */
        if (p->fd >= 0)
            close(p->fd); /* the child's copy */
        free(p);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    if (p->fd >= 0)
        close(p->fd);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}
