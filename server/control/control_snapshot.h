/* The scheduler's input (scheduler/sched.h) built from the store's rows (store_sched_snapshot)
 * and the parsed specs of the pending jobs. Pure: no I/O, no database, no globals; what it leaves
 * out it reports through a callback. control_sched.c reads the rows, calls this, runs the pass. */
#ifndef SRV_CONTROL_SNAPSHOT_H
#define SRV_CONTROL_SNAPSHOT_H

#include "jobspec.h"
#include "scheduler/sched.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>

/* A node's GPUs as the pass sees them: the scheduler's GPU index i is the node's GPU gpu_ids[i]
 * (the ids of the node's resources "GPU" array, in that order). */
struct ctl_node_gpus {
    int ngpus;
    int gpu_ids[SCHED_MAX_GPUS_PER_NODE];
};

/* One pass's snapshot, and what is needed to read its decisions back. */
struct ctl_snapshot {
    sched_snapshot *snap;
    struct ctl_node_gpus *nodes; /* by scheduler node index (sched_add_node's order) */
    size_t nnodes;
};

/* Told about each node or job left out of the snapshot. bug: the rows contradict each other (a
 * live worker's allocation does not fit its node: our fault); false: the scheduler refuses the
 * node's or job's own data. `message` is valid only during the call. */
typedef void (*ctl_snapshot_note_fn)(void *arg, bool bug, const char *message);

/* Builds *out from `rows`:
 *   - every node: totals from its resources object ("CPU" in units, "memory_mb", "GPU" an array
 *     of GPU ids, any other number a custom resource), gpu_type, alive and draining;
 *   - every running job: its live workers summed per node (CPU, memory, custom amounts, the GPUs
 *     they hold), held until end_epoch (SCHED_TIME_NEVER when -1);
 *   - the pending jobs in row order, each from its parsed spec specs[i] (for rows->pending[i]);
 *     a NULL spec leaves the job out silently (not parsed: already reported).
 * A node, running job or pending job that the scheduler refuses is left out and reported to
 * note(arg, ...) when note is not NULL. Returns 0 (free *out with ctl_snapshot_free), or -1 when
 * out of memory (*out is then empty). */
int ctl_snapshot_build(const struct store_sched_rows *rows, const struct jobspec *const *specs,
                       ctl_snapshot_note_fn note, void *arg, struct ctl_snapshot *out);
/* Frees what ctl_snapshot_build made; safe on an empty (zeroed) snapshot. */
void ctl_snapshot_free(struct ctl_snapshot *s);

#endif
