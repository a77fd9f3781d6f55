/* Worker status names and predicates (worker_status.h). */
#include "worker_status.h"

#include <string.h>

static const struct {
    const char *name;
    bool live;
} statuses[WORKER_STATUS_COUNT] = {
#define WORKER_STATUS_ROW(name, live) {#name, live},
    WORKER_STATUS_MAP(WORKER_STATUS_ROW)
#undef WORKER_STATUS_ROW
};

static bool is_status(enum worker_status s)
{
    return (unsigned)s < WORKER_STATUS_COUNT;
}

const char *worker_status_name(enum worker_status s)
{
    return is_status(s) ? statuses[s].name : NULL;
}

int worker_status_from_string(const char *name, enum worker_status *out)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < WORKER_STATUS_COUNT; i++) {
        if (strcmp(name, statuses[i].name) == 0) {
            *out = (enum worker_status)i;
            return 0;
        }
    }
    return -1;
}

bool worker_status_is_live(enum worker_status s)
{
    return is_status(s) && statuses[s].live;
}
