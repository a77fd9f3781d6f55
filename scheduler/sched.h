/* Trainyard gang scheduler: a pure library.
 *
 * The caller builds a snapshot of the cluster (nodes with their total resources, the jobs that
 * are running with what they hold on which node and when they are expected to end, and the
 * queue of pending jobs), runs one pass, and reads back one decision per pending job: placed
 * (with every worker's rank, node and GPUs), waiting for resources, or unschedulable (can never
 * fit this cluster, even when it is idle).
 *
 * No I/O, no globals, no threads: a snapshot and a result are plain memory owned by the caller.
 * The same snapshot and `now` always give the same result. A pass does not modify the snapshot.
 *
 * Units:
 *   - CPU and custom resources in milli-units (`2500` = 2.5 CPU), as Kubernetes does, so
 *     fractional requests such as `{"CPU": 0.5}` are exact integers.
 *   - memory in MiB, times in seconds (any epoch, consistently), GPUs as indices 0..gpus-1.
 *
 * Free resources are derived: a node's free capacity is its total minus the allocations of the
 * running jobs added with sched_add_running(). GPUs are identified by index, so a node has at
 * most SCHED_MAX_GPUS_PER_NODE of them.
 *
 * Queue order is priority (higher first), then submit time (earlier first), then job id. The pass
 * is gang scheduling with EASY backfill; see sched_run_pass().
 */
#ifndef TRAINYARD_SCHED_H
#define TRAINYARD_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/vocab.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: 0 or negative. Codes are only ever appended. */
#define SCHED_ERRNO_MAP(X)                                                                         \
    X(OK, 0, "success")                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(EEXIST, -3, "duplicate id")                                                                  \
    X(ENOENT, -4, "unknown node")                                                                  \
    X(ERANGE, -5, "allocation exceeds the node's free resources")

enum sched_errno {
#define SCHED__ERRNO_ENUM(name, code, text) SCHED_##name = (code),
    SCHED_ERRNO_MAP(SCHED__ERRNO_ENUM)
#undef SCHED__ERRNO_ENUM
};

/* Text for an error code; never NULL ("unknown error" for codes not in the map). */
const char *sched_strerror(int code);

#define SCHED_TIME_NEVER INT64_MAX          /* end time of a job with no timeout */
#define SCHED_MAX_GPUS_PER_NODE 64          /* GPU indices are bits of a uint64_t */
#define SCHED_MAX_WORKERS (1 << 20)         /* per job */
#define SCHED_MAX_AMOUNT (INT64_C(1) << 40) /* any single CPU/memory/custom amount */

/* The placement strategies, named by JOBSPEC_STRATEGY_MAP of common/vocab.h:
 *   SCHED_PACK           as few nodes as possible (default)
 *   SCHED_SPREAD         as many distinct nodes as possible, best effort
 *   SCHED_STRICT_PACK    all workers on one node, or not at all
 *   SCHED_STRICT_SPREAD  every worker on a distinct node, or not at all */
typedef enum sched_strategy {
#define SCHED__STRATEGY_ENUM(name) SCHED_##name,
    JOBSPEC_STRATEGY_MAP(SCHED__STRATEGY_ENUM)
#undef SCHED__STRATEGY_ENUM
} sched_strategy;

/* A strategy's name as the job spec spells it ("STRICT_PACK"; exact case). Returns 0 or
 * SCHED_EINVAL. */
int sched_strategy_from_string(const char *s, sched_strategy *out);
/* Inverse of the above; "?" for a value outside the enum. */
const char *sched_strategy_name(sched_strategy s);

/* A custom resource amount, e.g. {"infiniband", 1000} for one unit. */
typedef struct sched_custom {
    const char *name; /* non-empty; compared exactly */
    int64_t amount_milli;
} sched_custom;

typedef struct sched_node_desc {
    const char *id;    /* unique, non-empty; copied */
    int64_t cpu_milli; /* totals */
    int64_t memory_mb;
    int gpus;             /* 0..SCHED_MAX_GPUS_PER_NODE; indices 0..gpus-1 */
    const char *gpu_type; /* e.g. "NVIDIA H100 80GB HBM3"; NULL when the node has none */
    const sched_custom *custom;
    size_t ncustom;
    bool alive;         /* heartbeating */
    bool draining;      /* drained by an operator: keeps running jobs, takes no new workers */
    bool disk_pressure; /* its agent's data directory is short of space: like draining */
} sched_node_desc;

/* What one running job holds on one node. */
typedef struct sched_alloc_desc {
    const char *node_id;
    int64_t cpu_milli;
    int64_t memory_mb;
    uint64_t gpu_mask; /* bit i = GPU index i */
    const sched_custom *custom;
    size_t ncustom;
} sched_alloc_desc;

/* One worker's resource bundle (Ray's resources_per_worker). At least one amount must be > 0. */
typedef struct sched_bundle {
    int64_t cpu_milli;
    int64_t memory_mb;
    int gpus;
    const sched_custom *custom;
    size_t ncustom;
} sched_bundle;

typedef struct sched_job_desc {
    int64_t id;
    int priority;        /* higher runs first */
    int64_t submit_time; /* earlier runs first among equal priorities */
    int min_workers;     /* fixed size: min_workers == max_workers */
    int max_workers;     /* elastic: the largest count in [min, max] that fits now is placed */
    sched_bundle bundle;
    sched_strategy strategy;
    const char *accelerator_type; /* NULL: any node; else nodes whose gpu_type holds its tokens */
    int64_t timeout_s;            /* 0: no limit (treated as running forever by backfill) */
} sched_job_desc;

typedef struct sched_snapshot sched_snapshot;

/* An empty snapshot, or NULL when out of memory. Free with sched_snapshot_destroy(). */
sched_snapshot *sched_snapshot_create(void);
/* Frees the snapshot and everything it copied. NULL is a no-op. */
void sched_snapshot_destroy(sched_snapshot *snap);

/* Adds a node; every string in `desc` is copied. On success stores the node's index (its order
 * of addition, from 0) in *index_out when not NULL. Nodes that are not alive, draining or under
 * disk pressure are kept (their running jobs still count) but receive no workers. Fails with
 * SCHED_EINVAL (bad amounts, missing id, duplicate custom name), SCHED_EEXIST (id already added) or
 * SCHED_ENOMEM; the snapshot is unchanged on failure. */
int sched_add_node(sched_snapshot *snap, const sched_node_desc *desc, size_t *index_out);

/* Adds a running job holding `allocs` (one entry per node it uses) until `end_time`
 * (start + timeout_s, or SCHED_TIME_NEVER when it has none). The allocations are taken from the
 * nodes' free resources. Fails with SCHED_EINVAL, SCHED_EEXIST (job id already added, running or
 * pending), SCHED_ENOENT (unknown node id), SCHED_ERANGE (more than the node has free, or a GPU
 * that is already held) or SCHED_ENOMEM; the snapshot is unchanged on failure. */
int sched_add_running(sched_snapshot *snap, int64_t job_id, int64_t end_time,
                      const sched_alloc_desc *allocs, size_t nallocs);

/* Adds a pending job to the queue; strings are copied. Fails with SCHED_EINVAL (worker counts
 * outside 1..SCHED_MAX_WORKERS or min > max, empty or negative bundle, unknown strategy,
 * negative timeout), SCHED_EEXIST or SCHED_ENOMEM; the snapshot is unchanged on failure. */
int sched_add_pending(sched_snapshot *snap, const sched_job_desc *desc);

/* Index of the node with this id, or -1. */
long sched_find_node(const sched_snapshot *snap, const char *node_id);

typedef enum sched_outcome {
    SCHED_PLACED = 0,    /* workers below were placed in this pass */
    SCHED_WAITING,       /* fits the cluster, not now: waiting for resources */
    SCHED_UNSCHEDULABLE, /* cannot fit even when every schedulable node is idle */
} sched_outcome;

typedef struct sched_worker {
    int rank;             /* 0..num_workers-1 */
    int local_rank;       /* 0..local_world_size-1 */
    int local_world_size; /* workers of this job on this node */
    int node_rank;        /* 0..num_nodes-1; node rank 0 holds rank 0 (MASTER_ADDR) */
    size_t node_index;    /* as returned by sched_add_node() */
    const char *node_id;  /* owned by the result */
    int ngpus;
    const int *gpus; /* ngpus indices, ascending; owned by the result; NULL when ngpus == 0 */
} sched_worker;

typedef struct sched_decision {
    int64_t job_id;
    sched_outcome outcome;
    int num_workers;             /* placed workers (0 unless SCHED_PLACED) */
    int num_nodes;               /* distinct nodes among them */
    const sched_worker *workers; /* num_workers entries ordered by rank; NULL when none */
    const char *message;         /* human status, never NULL; owned by the result */
    bool is_head;                /* the blocked job that holds the backfill reservation */
    int64_t reserved_start;      /* head only: when its reservation starts; SCHED_TIME_NEVER
                                    when not the head or when it waits on jobs without timeout */
} sched_decision;

typedef struct sched_result sched_result;

/* Runs one scheduling pass at time `now` and stores a new result in *out (free it with
 * sched_result_destroy()). The snapshot is not modified.
 *
 * Pending jobs are taken in queue order. A job that cannot fit the cluster even when it is idle is
 * SCHED_UNSCHEDULABLE and blocks nothing. Otherwise the job is placed whole (gang) or not at all;
 * each placement is applied to the working state, so later jobs see it. The first job that cannot
 * start now becomes the head: it gets a reservation at the earliest time it would fit, computed
 * from running jobs' end times (and those of jobs placed earlier in this pass). Every later job
 * may start now only if it cannot delay the head: it ends (now + timeout_s) no later than the
 * reservation, or it uses only resources the reservation does not need (EASY backfill).
 *
 * Fails with SCHED_EINVAL (NULL argument) or SCHED_ENOMEM; *out is then NULL. */
int sched_run_pass(const sched_snapshot *snap, int64_t now, sched_result **out);

/* One decision per pending job, in queue order. */
size_t sched_result_count(const sched_result *res);
/* The i-th decision (i < count), or NULL when out of range. Valid until the result is freed. */
const sched_decision *sched_result_decision(const sched_result *res, size_t i);
/* The decision for a job id (linear search), or NULL. */
const sched_decision *sched_result_find(const sched_result *res, int64_t job_id);
/* Totals of the pass: jobs placed and workers placed. Either pointer may be NULL. */
void sched_result_totals(const sched_result *res, size_t *jobs_placed, size_t *workers_placed);
/* Frees the result and everything it owns. NULL is a no-op. */
void sched_result_destroy(sched_result *res);

#ifdef __cplusplus
}
#endif

#endif
