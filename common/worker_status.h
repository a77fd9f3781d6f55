/* A worker's status (WORKER_STATUS_MAP of vocab.h) for every C program: the agent protocol's
 * worker states, the server. */
#ifndef TY_WORKER_STATUS_H
#define TY_WORKER_STATUS_H

#include "vocab.h"

#include <stdbool.h>

enum worker_status {
#define WORKER_STATUS_ENUM(name, live) WORKER_STATUS_##name,
    WORKER_STATUS_MAP(WORKER_STATUS_ENUM)
#undef WORKER_STATUS_ENUM
        WORKER_STATUS_COUNT
};

/* The status's name as the API and the database spell it ("EXITED"); NULL when `s` is not a
 * status. */
const char *worker_status_name(enum worker_status s);

/* Parses an exact, case-sensitive status name. Returns 0 with *out set, or -1 (NULL or unknown
 * name; *out untouched). */
int worker_status_from_string(const char *name, enum worker_status *out);

/* True for the statuses of a worker that holds its node's resources (PLACED, RUNNING); false
 * otherwise, including for a value that is not a status. */
bool worker_status_is_live(enum worker_status s);

#endif
