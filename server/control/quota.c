/* Per-user quota of running workers (quota.h). */
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
