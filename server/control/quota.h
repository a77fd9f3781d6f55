/* Per-user quotas of running workers and of the CPUs and GPUs they hold, applied to the queue
 * before each scheduling pass. Pure. */
#ifndef SRV_QUOTA_H
#define SRV_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decides which pending jobs may be placed this pass under a quota of `max_workers` workers per
 * owner (0: no quota). running_owner[0..nrunning) names the owner of each live worker (one entry
 * per worker); pending jobs are in queue order, each with its owner and its minimum and maximum
 * worker counts. Job i is admitted when its owner's live workers, plus the maximum of each of the
 * owner's jobs admitted before it, plus its own minimum stay within the quota; its maximum then
 * counts against the owner for the jobs after it (so one pass can overshoot only by the
 * elasticity of one job). Writes admitted[0..npending). Returns 0, or -1 when out of memory
 * (every job is then admitted). */
int quota_admit(int64_t max_workers, const char *const *running_owner, size_t nrunning,
                const char *const *pending_owner, const int *min_workers, const int *max_workers_of,
                size_t npending, bool *admitted);

/* What workers hold, as the CPU and GPU quotas count it. */
struct quota_use {
    int64_t cpu_milli; /* thousandths of a CPU */
    int64_t gpus;
};
/* One owner's limits; 0 in a field: no limit there. */
struct quota_limit {
    const char *owner;
    struct quota_use max;
};

/* Like quota_admit, for the CPUs and GPUs that an owner's live workers hold: the owner's limits
 * are their entry of limits[0..nlimits), else dflt. Live worker i of running_owner[i] holds
 * running_use[i]; pending job i (in queue order) is admitted when, in each limited field, its
 * owner's use plus min_use[i] (its minimum workers' bundles) stays within the limit, and then
 * counts max_use[i] for the jobs after it. Writes admitted[0..npending). Returns 0, or -1 when
 * out of memory (every job is then admitted). */
int quota_admit_resources(const struct quota_limit *limits, size_t nlimits, struct quota_use dflt,
                          const char *const *running_owner, const struct quota_use *running_use,
                          size_t nrunning, const char *const *pending_owner,
                          const struct quota_use *min_use, const struct quota_use *max_use,
                          size_t npending, bool *admitted);

#endif
