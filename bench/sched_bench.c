/* sched_bench: how fast one scheduling pass is at 10,000 nodes (not a test; see
 * docs/bench-scheduler.md).
 *
 *   sched_bench [--nodes N] [--jobs N] [--reps N] [--seed N] [--scenario empty|steady|both]
 *
 * Scenario "empty": N nodes x 8 H100 GPUs (64 CPUs, 512 GiB), all idle, and a queue of gang jobs
 * of 1, 2, 4, 8, 16 or 32 GPUs (as 1-GPU workers or 8-GPU workers), mixed strategies, priorities
 * and timeouts. The queue asks for more GPUs than the cluster has, so the pass places most jobs,
 * then makes a head reservation and tries every remaining job as a backfill candidate.
 *
 * Scenario "steady": the same cluster ~97% busy with running jobs that end at assorted times (a
 * fifth without timeout) and the same queue: few placements, a head reservation over every running
 * job, and a backfill attempt for every other job, which is the heaviest pass.
 *
 * Every figure is the median of --reps passes over the same snapshot (a pass does not modify it),
 * with the fastest and slowest alongside. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scheduler/sched.h"

struct opts {
    long nodes, jobs, reps;
    uint64_t seed;
    const char *scenario;
};

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static long rng_below(uint64_t *s, long n)
{
    return (long)(rng_next(s) % (uint64_t)n);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "sched_bench: %s: %s\n", what, sched_strerror(rc));
    exit(1);
}

static long parse_long(const char *s, long lo, long hi, const char *flag)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "sched_bench: %s wants an integer in %ld..%ld\n", flag, lo, hi);
        exit(2);
    }
    return v;
}

static void add_nodes(sched_snapshot *s, long n)
{
    for (long i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "node-%05ld", i);
        sched_node_desc d = {.id = id,
                             .cpu_milli = 64000,
                             .memory_mb = 524288,
                             .gpus = 8,
                             .gpu_type = "H100",
                             .alive = true};
        int rc = sched_add_node(s, &d, NULL);
        if (rc)
            die("add node", rc);
    }
}

/* The queue: sizes 1..32 GPUs, 1-GPU or 8-GPU workers, strategies mostly PACK. */
static void add_queue(sched_snapshot *s, long jobs, uint64_t *rng, int64_t now)
{
    static const int sizes[] = {1, 2, 4, 8, 16, 32};
    for (long i = 0; i < jobs; i++) {
        int size = sizes[rng_below(rng, 6)];
        int per = size >= 8 && rng_below(rng, 2) ? 8 : 1;
        long pick = rng_below(rng, 10);
        sched_strategy st = pick < 7    ? SCHED_PACK
                            : pick == 7 ? SCHED_SPREAD
                            : pick == 8 ? SCHED_STRICT_PACK
                                        : SCHED_STRICT_SPREAD;
        if (st == SCHED_STRICT_PACK && size > 8)
            st = SCHED_PACK;
        sched_job_desc j = {
            .id = 1000000 + i,
            .priority = (int)rng_below(rng, 4),
            .submit_time = now - rng_below(rng, 86400),
            .min_workers = size / per,
            .max_workers = size / per,
            .bundle = {.cpu_milli = 8000 * per, .memory_mb = 65536 * per, .gpus = per},
            .strategy = st,
            .timeout_s = rng_below(rng, 10) < 7 ? 600 + rng_below(rng, 86400) : 0};
        int rc = sched_add_pending(s, &j);
        if (rc)
            die("add pending", rc);
    }
}

/* Fills each node with running jobs of 1-4 GPUs (a few 4-node ones too), leaving ~3% free. */
static long add_running(sched_snapshot *s, long nodes, uint64_t *rng, int64_t now)
{
    int64_t id = 1;
    long count = 0;
    for (long n = 0; n < nodes; n++) {
        char nid[32];
        snprintf(nid, sizeof nid, "node-%05ld", n);
        int gpu = 0, limit = rng_below(rng, 100) < 80 ? 8 : 8 - (int)(1 + rng_below(rng, 4));
        if (n % 16 == 0 && n + 4 <= nodes) { /* a 4-node job holding 8 GPUs on each */
            sched_alloc_desc a[4];
            char ids[4][32];
            for (int k = 0; k < 4; k++) {
                snprintf(ids[k], sizeof ids[k], "node-%05ld", n + k);
                a[k] = (sched_alloc_desc){
                    .node_id = ids[k], .cpu_milli = 64000, .memory_mb = 524288, .gpu_mask = 0xff};
            }
            int rc = sched_add_running(s, id++, now + 60 + rng_below(rng, 86400), a, 4);
            if (rc)
                die("add running", rc);
            count++;
            n += 3;
            continue;
        }
        while (gpu < limit) {
            int take = 1 + (int)rng_below(rng, 4);
            if (gpu + take > limit)
                take = limit - gpu;
            uint64_t mask = ((UINT64_C(1) << take) - 1) << gpu;
            sched_alloc_desc a = {.node_id = nid,
                                  .cpu_milli = 8000 * take,
                                  .memory_mb = 65536 * take,
                                  .gpu_mask = mask};
            int64_t end =
                rng_below(rng, 5) == 0 ? SCHED_TIME_NEVER : now + 60 + rng_below(rng, 86400);
            int rc = sched_add_running(s, id++, end, &a, 1);
            if (rc)
                die("add running", rc);
            count++;
            gpu += take;
        }
    }
    return count;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs reps passes; prints the median and the placement rates. */
static void measure(const char *name, const sched_snapshot *s, long reps, int64_t now)
{
    double *t = calloc((size_t)reps, sizeof *t);
    size_t jobs = 0, workers = 0, waiting = 0, unsched = 0;
    if (!t)
        die("measure", SCHED_ENOMEM);
    for (long r = 0; r < reps; r++) {
        sched_result *res = NULL;
        double t0 = now_s();
        int rc = sched_run_pass(s, now, &res);
        t[r] = now_s() - t0;
        if (rc)
            die("pass", rc);
        if (r == 0) {
            sched_result_totals(res, &jobs, &workers);
            for (size_t i = 0; i < sched_result_count(res); i++) {
                sched_outcome o = sched_result_decision(res, i)->outcome;
                waiting += o == SCHED_WAITING;
                unsched += o == SCHED_UNSCHEDULABLE;
            }
        }
        sched_result_destroy(res);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double med = t[reps / 2];
    printf("[%s] pass: median %.2f ms (min %.2f, max %.2f, %ld reps)\n", name, med * 1e3,
           t[0] * 1e3, t[reps - 1] * 1e3, reps);
    printf("[%s] decisions: %zu placed (%zu workers), %zu waiting, %zu unschedulable\n", name, jobs,
           workers, waiting, unsched);
    printf("[%s] throughput: %.0f jobs placed/s, %.0f workers placed/s, %.0f decisions/s\n", name,
           (double)jobs / med, (double)workers / med, (double)(jobs + waiting + unsched) / med);
    free(t);
}

/* Builds one scenario's snapshot (the queue is the same in both: its own generator, same seed),
 * then measures it. */
static void run_scenario(const struct opts *o, bool busy, int64_t now)
{
    const char *name = busy ? "steady" : "empty";
    uint64_t cluster_rng = o->seed ^ 0x5eed, queue_rng = o->seed;
    double t0 = now_s();
    sched_snapshot *s = sched_snapshot_create();
    if (!s)
        die("create", SCHED_ENOMEM);
    add_nodes(s, o->nodes);
    long running = busy ? add_running(s, o->nodes, &cluster_rng, now) : 0;
    add_queue(s, o->jobs, &queue_rng, now);
    printf("[%s] snapshot built in %.2f ms (%ld running jobs)\n", name, (now_s() - t0) * 1e3,
           running);
    measure(name, s, o->reps, now);
    sched_snapshot_destroy(s);
}

int main(int argc, char **argv)
{
    struct opts o = {.nodes = 10000, .jobs = 10000, .reps = 11, .seed = 42, .scenario = "both"};
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--nodes") == 0)
            o.nodes = parse_long(v, 1, 1000000, "--nodes");
        else if (strcmp(argv[i], "--jobs") == 0)
            o.jobs = parse_long(v, 0, 1000000, "--jobs");
        else if (strcmp(argv[i], "--reps") == 0)
            o.reps = parse_long(v, 1, 1000, "--reps");
        else if (strcmp(argv[i], "--seed") == 0)
            o.seed = (uint64_t)parse_long(v, 0, INT32_MAX, "--seed");
        else if (strcmp(argv[i], "--scenario") == 0 &&
                 (strcmp(v, "empty") == 0 || strcmp(v, "steady") == 0 || strcmp(v, "both") == 0))
            o.scenario = v;
        else {
            fprintf(stderr, "usage: sched_bench [--nodes N] [--jobs N] [--reps N] [--seed N] "
                            "[--scenario empty|steady|both]\n");
            return 2;
        }
    }
    const int64_t now = 1700000000;
    printf("sched_bench: %ld nodes x 8 GPUs (64 CPUs, 512 GiB), %ld queued jobs, seed %" PRIu64
           "\n",
           o.nodes, o.jobs, o.seed);
    if (strcmp(o.scenario, "steady") != 0)
        run_scenario(&o, false, now);
    if (strcmp(o.scenario, "empty") != 0)
        run_scenario(&o, true, now);
    return 0;
}
