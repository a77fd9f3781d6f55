/* The agent protocol's `usage` message (agent -> server, docs/agent-protocol.md): what each
 * running worker of the node used, read from its cgroup by its agent every second, and once more
 * when it exited (`final`). Not an event: no seq, no ack; a lost one is replaced by the next.
 *
 *   {"type":"usage", "workers":[{"job_id", "attempt", "rank", "cpu_usec":n,
 *    "memory_bytes":n, "memory_peak_bytes":n, "final":bool}, ...]}
 *
 * Pure. */
#include "agent_proto_internal.h"

#include "util_json.h"

#include <stdio.h>
#include <stdlib.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

static json_t *row_json(const void *row)
{
    const struct aproto_usage *u = row;
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:b}", "job_id", u->job_id, "attempt",
                     (json_int_t)u->attempt, "rank", (json_int_t)u->rank, "cpu_usec",
                     (json_int_t)u->cpu_usec, "memory_bytes", (json_int_t)u->memory_bytes,
                     "memory_peak_bytes", (json_int_t)u->memory_peak_bytes, "final", u->final);
}

char *aproto_msg_usage(const struct aproto_usage *rows, size_t n)
{
    return aproto__msg_rows("usage", "workers", rows, n, sizeof(*rows), row_json);
}

/* One row of `workers`. */
static int parse_row(const json_t *o, size_t i, void *row, char *err, size_t errlen)
{
    struct aproto_usage *u = row;
    if (aproto__parse_worker_key(o, i, &u->job_id, &u->attempt, &u->rank, err, errlen) != 0)
        return -1;
    char sub[160];
    if (util_json_int(o, "cpu_usec", false, 0, INT64_MAX, &u->cpu_usec, sub, sizeof(sub)) < 0 ||
        util_json_int(o, "memory_bytes", false, 0, INT64_MAX, &u->memory_bytes, sub, sizeof(sub)) <
            0 ||
        util_json_int(o, "memory_peak_bytes", false, 0, INT64_MAX, &u->memory_peak_bytes, sub,
                      sizeof(sub)) < 0)
        return ERR("'workers[%zu].%s", i, sub + 1);
    json_t *final = json_object_get(o, "final");
    if (final && !json_is_boolean(final))
        return ERR("'workers[%zu].final' must be a boolean", i);
    u->final = json_is_true(final);
    return 0;
}

int aproto__parse_usage(json_t *root, struct aproto_usage **rows, size_t *n, char *err,
                        size_t errlen)
{
    void *out = NULL;
    int rc = aproto__parse_rows(root, "workers", APROTO_MAX_USAGE, sizeof(struct aproto_usage),
                                parse_row, &out, n, err, errlen);
    *rows = out;
    return rc;
}
