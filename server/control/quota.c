/* Per-user quotas of running workers, CPUs and GPUs (quota.h). */
#include "quota.h"

#include <stdlib.h>
#include <string.h>

struct tally {
    const char *owner;
    int64_t workers;
};

/* The tally of `owner` in t[0..*n), added when missing (t has room for every owner). */
static struct tally *tally_of(struct tally *t, size_t *n, const char *owner)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(t[i].owner, owner) == 0)
            return &t[i];
    t[*n] = (struct tally){owner, 0};
    return &t[(*n)++];
}

int quota_admit(int64_t max_workers, const char *const *running_owner, size_t nrunning,
                const char *const *pending_owner, const int *min_workers, const int *max_workers_of,
                size_t npending, bool *admitted)
{
    for (size_t i = 0; i < npending; i++)
        admitted[i] = true;
    if (max_workers <= 0 || npending == 0)
        return 0;
    struct tally *t = calloc(nrunning + npending, sizeof(*t));
    if (t == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < nrunning; i++)
        tally_of(t, &n, running_owner[i])->workers++;
    for (size_t i = 0; i < npending; i++) {
        struct tally *o = tally_of(t, &n, pending_owner[i]);
        admitted[i] = o->workers + min_workers[i] <= max_workers;
        if (admitted[i])
            o->workers += max_workers_of[i];
    }
    free(t);
    return 0;
}

struct use_tally {
    const char *owner;
    struct quota_use used;
};

static struct use_tally *use_of(struct use_tally *t, size_t *n, const char *owner)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(t[i].owner, owner) == 0)
            return &t[i];
    t[*n] = (struct use_tally){owner, {0, 0}};
    return &t[(*n)++];
}

static struct quota_use limit_of(const struct quota_limit *limits, size_t nlimits,
                                 struct quota_use dflt, const char *owner)
{
    for (size_t i = 0; i < nlimits; i++)
        if (strcmp(limits[i].owner, owner) == 0)
            return limits[i].max;
    return dflt;
}

/* Whether `used` plus `more` stays within `max` in each limited field. */
static bool fits(struct quota_use used, struct quota_use more, struct quota_use max)
{
    return (max.cpu_milli <= 0 || used.cpu_milli + more.cpu_milli <= max.cpu_milli) &&
           (max.gpus <= 0 || used.gpus + more.gpus <= max.gpus);
}

int quota_admit_resources(const struct quota_limit *limits, size_t nlimits, struct quota_use dflt,
                          const char *const *running_owner, const struct quota_use *running_use,
                          size_t nrunning, const char *const *pending_owner,
                          const struct quota_use *min_use, const struct quota_use *max_use,
                          size_t npending, bool *admitted)
{
    for (size_t i = 0; i < npending; i++)
        admitted[i] = true;
    if (npending == 0)
        return 0;
    struct use_tally *t = calloc(nrunning + npending, sizeof(*t));
    if (t == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < nrunning; i++) {
        struct use_tally *o = use_of(t, &n, running_owner[i]);
        o->used.cpu_milli += running_use[i].cpu_milli;
        o->used.gpus += running_use[i].gpus;
    }
    for (size_t i = 0; i < npending; i++) {
        struct use_tally *o = use_of(t, &n, pending_owner[i]);
        admitted[i] = fits(o->used, min_use[i], limit_of(limits, nlimits, dflt, o->owner));
        if (admitted[i]) {
            o->used.cpu_milli += max_use[i].cpu_milli;
            o->used.gpus += max_use[i].gpus;
        }
    }
    free(t);
    return 0;
}
