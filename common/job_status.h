/* A job's status (DESIGN.md section 2) for every C program: the server (list filter, worker-exit
 * outcome), the CLI (`wait`). The names are JOB_STATUS_MAP of vocab.h. The transitions between
 * statuses are not here: they are owned by the database (the rows of job_transitions in
 * server/store/sql/job_transitions.sql, the function in server/store/sql/ty_job_transition.sql;
 * see docs/lifecycle.md). The names must be the rows of its table job_statuses
 * (server/store/sql/job_statuses.sql), which tests/integration/test_vocab_sql.py checks. */
#ifndef TY_JOB_STATUS_H
#define TY_JOB_STATUS_H

#include "vocab.h"

#include <stdbool.h>
#include <stddef.h>

enum job_status {
#define JOB_STATUS_ENUM(name, terminal) JOB_STATUS_##name,
    JOB_STATUS_MAP(JOB_STATUS_ENUM)
#undef JOB_STATUS_ENUM
        JOB_STATUS_COUNT
};

/* The status's name as the API and the database spell it ("RUNNING"); NULL when `s` is not a
 * status. */
const char *job_status_name(enum job_status s);

/* Parses an exact, case-sensitive status name. Returns 0 with *out set, or -1 (NULL, empty or
 * unknown name; *out untouched). */
int job_status_from_string(const char *name, enum job_status *out);

/* Parses the `len` bytes at `s` as a status name, ignoring case (query parameters such as
 * `status=running,pending`). Returns 0 with *out set, or -1. */
int job_status_from_token(const char *s, size_t len, enum job_status *out);

/* True for the statuses a job never leaves (SUCCEEDED, FAILED, STOPPED); false otherwise,
 * including for a value that is not a status. */
bool job_status_is_terminal(enum job_status s);

/* Writes every name, in order, as "PENDING, STARTING, ... FAILED or STOPPED" into buf (for
 * messages that list the accepted values). Returns the length the whole text needs, like
 * snprintf; the text is truncated (and still terminated) when size is too small. */
size_t job_status_names_text(char *buf, size_t size);

#endif
