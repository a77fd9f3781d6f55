/* Per-user quota of running workers, applied to the queue before each scheduling pass. Pure. */
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

#endif
