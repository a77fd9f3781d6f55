/* Forked multi-rank harness for collective tests; see test_collectives_world.h. */
#include "test_collectives_world.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

long long tw_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Ports are taken as tests/integration/harness.py's port_range() takes them: 20 ports of a slot
 * of 10000..(the kernel's ephemeral range) that this process holds with an flock on
 * /tmp/ty-slots/ports-<slot> until it exits, so that no other test process (C or Python) uses
 * them and no outgoing connection is given one. A port the kernel picked (bind to port 0, close)
 * was sometimes taken by another test's outgoing connection before rank 0 listened on it. */
#define TW_SLOT_DIR "/tmp/ty-slots"
#define TW_SLOT_PORTS 20

static int ephemeral_low(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

/* The first port of a slot this process holds, claimed on first use; -1 when none is free. */
static int slot_base(void)
{
    static int base = -1;
    if (base >= 0)
        return base;
    int slots = (ephemeral_low() - 10000) / TW_SLOT_PORTS;
    if (slots < 1)
        return -1;
    (void)mkdir(TW_SLOT_DIR, 01777);
    (void)chmod(TW_SLOT_DIR, 01777);
    for (int k = 0; k < slots; k++) {
        int slot = (int)(((long long)getpid() * 7 + k) % slots);
        char path[64];
        snprintf(path, sizeof path, TW_SLOT_DIR "/ports-%d", slot);
        int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) { /* held until this process exits */
            base = 10000 + slot * TW_SLOT_PORTS;
            return base;
        }
        close(fd);
    }
    return -1;
}

static bool bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int tw_free_port(void)
{
    static int next;
    int base = slot_base();
    if (base < 0)
        return -1;
    for (int k = 0; k < TW_SLOT_PORTS; k++) {
        int port = base + next;
        next = (next + 1) % TW_SLOT_PORTS;
        if (bindable(port))
            return port;
    }
    return -1;
}

/* Child side: set the environment, init, run, finish, exit. Never returns. */
static void tw_child(int rank, int world, int port, double tmo, tw_rank_fn fn, void *arg)
{
    char buf[32];
    /* TW_RANKS_PER_NODE: pretend the ranks are spread over nodes of that many ranks. */
    const char *per_s = getenv("TW_RANKS_PER_NODE");
    int per = per_s ? (int)strtol(per_s, NULL, 10) : world;
    if (per < 1 || per > world)
        per = world;
    snprintf(buf, sizeof buf, "%d", rank);
    setenv("RANK", buf, 1);
    snprintf(buf, sizeof buf, "%d", rank % per);
    setenv("LOCAL_RANK", buf, 1);
    snprintf(buf, sizeof buf, "%d", world);
    setenv("WORLD_SIZE", buf, 1);
    snprintf(buf, sizeof buf, "%d", per);
    setenv("LOCAL_WORLD_SIZE", buf, 1);
    snprintf(buf, sizeof buf, "%d", rank / per);
    setenv("NODE_RANK", buf, 1);
    /* TW_PRIVATE_SHM_RANK: that rank gets a /dev/shm of its own, as on another host. */
    const char *priv = getenv("TW_PRIVATE_SHM_RANK");
    if (priv && strtol(priv, NULL, 10) == rank &&
        (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
         mount("tmpfs", "/dev/shm", "tmpfs", 0, NULL) != 0)) {
        fprintf(stderr, "rank %d: cannot get a private /dev/shm: %s\n", rank, strerror(errno));
        _exit(101);
    }
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    snprintf(buf, sizeof buf, "%d", port);
    setenv("MASTER_PORT", buf, 1);
    setenv("TRAINYARD_JOB_ID", "test-collectives", 1);
    setenv("TRAINYARD_ATTEMPT", "0", 1);
    setenv("TRAINYARD_BACKEND", "native", 1);
    snprintf(buf, sizeof buf, "%g", tmo);
    setenv("TRAINYARD_COLLECTIVE_TIMEOUT_S", buf, 1);
    unsetenv("TRAINYARD_REPORT_SOCKET");
    unsetenv("CUDA_VISIBLE_DEVICES");
    ty_ctx *c = NULL;
    int rc = ty_init(&c, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "rank %d: ty_init: %s\n", rank, ty_strerror(rc));
        _exit(100);
    }
    rc = fn(c, arg);
    ty_finish(&c);
    _exit(rc);
}

int tw_spawn(struct tw_world *w, int world, tw_rank_fn fn, void *arg, double coll_timeout_s)
{
    if (world < 1 || world > TW_MAX_WORLD)
        return -1;
    w->n = world;
    w->port = tw_free_port();
    if (w->port < 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        pid_t p = fork();
        if (p < 0)
            return -1;
        if (p == 0)
            tw_child(r, world, w->port, coll_timeout_s, fn, arg);
        w->pid[r] = p;
    }
    return 0;
}

int tw_wait(struct tw_world *w, int deadline_ms, int *codes)
{
    long long end = tw_now_ms() + deadline_ms;
    int left = w->n, missed = 0;
    for (int r = 0; r < w->n; r++)
        codes[r] = -2;
    while (left > 0) {
        for (int r = 0; r < w->n; r++) {
            if (codes[r] != -2)
                continue;
            int st;
            pid_t p = waitpid(w->pid[r], &st, WNOHANG);
            if (p == w->pid[r]) {
                codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                left--;
            }
        }
        if (left == 0)
            break;
        if (tw_now_ms() > end) {
            for (int r = 0; r < w->n; r++) {
                if (codes[r] == -2) {
                    kill(w->pid[r], SIGKILL);
                    waitpid(w->pid[r], NULL, 0);
                    codes[r] = -1;
                    missed++;
                }
            }
            break;
        }
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
    return missed;
}

int tw_run(int world, tw_rank_fn fn, void *arg, double coll_timeout_s, int deadline_ms)
{
    struct tw_world w;
    int codes[TW_MAX_WORLD];
    if (tw_spawn(&w, world, fn, arg, coll_timeout_s) < 0)
        return world;
    tw_wait(&w, deadline_ms, codes);
    int bad = 0;
    for (int r = 0; r < world; r++) {
        if (codes[r] != 0) {
            fprintf(stderr, "rank %d of %d: exit code %d\n", r, world, codes[r]);
            bad++;
        }
    }
    return bad;
}
