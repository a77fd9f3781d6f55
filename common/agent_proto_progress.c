/* The agent protocol's `progress` message (agent -> server, docs/agent-protocol.md): the last
 * heartbeat of each running worker of the node, batched by its agent at a low rate. Not an event:
 * no seq, no ack; a lost one is replaced by the next.
 *
 *   {"type":"progress", "workers":[{"job_id", "attempt", "rank", "op":name|null, "coll_seq":n,
 *    "in_collective":bool, "report_seq":k, "heartbeat_age_ms":ms, "progress_age_ms":ms}, ...]}
 *
 * Pure. */
#include "agent_proto_internal.h"

#include "util.h"
#include "util_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

static json_t *row_json(const void *row)
{
    const struct aproto_progress *p = row;
    return json_pack("{s:s, s:I, s:I, s:s?, s:I, s:b, s:I, s:I, s:I}", "job_id", p->job_id,
                     "attempt", (json_int_t)p->attempt, "rank", (json_int_t)p->rank, "op", p->op,
                     "coll_seq", (json_int_t)p->coll_seq, "in_collective", p->in_collective,
                     "report_seq", (json_int_t)p->report_seq, "heartbeat_age_ms",
                     (json_int_t)p->heartbeat_age_ms, "progress_age_ms",
                     (json_int_t)p->progress_age_ms);
}

char *aproto_msg_progress(const struct aproto_progress *rows, size_t n)
{
    return aproto__msg_rows("progress", "workers", rows, n, sizeof(*rows), row_json);
}

/* One row of `workers`. */
static int parse_row(const json_t *o, size_t i, void *row, char *err, size_t errlen)
{
    struct aproto_progress *p = row;
    if (aproto__parse_worker_key(o, i, &p->job_id, &p->attempt, &p->rank, err, errlen) != 0)
        return -1;
    char sub[160];
    if (util_json_int(o, "coll_seq", false, 0, INT64_MAX, &p->coll_seq, sub, sizeof(sub)) < 0 ||
        util_json_int(o, "report_seq", false, 0, INT64_MAX, &p->report_seq, sub, sizeof(sub)) < 0 ||
        util_json_int(o, "heartbeat_age_ms", false, 0, INT64_MAX, &p->heartbeat_age_ms, sub,
                      sizeof(sub)) < 0 ||
        util_json_int(o, "progress_age_ms", false, 0, INT64_MAX, &p->progress_age_ms, sub,
                      sizeof(sub)) < 0)
        return ERR("'workers[%zu].%s", i, sub + 1);
    json_t *in = json_object_get(o, "in_collective");
    if (!json_is_boolean(in))
        return ERR("'workers[%zu].in_collective' must be a boolean", i);
    p->in_collective = json_is_true(in);
    json_t *op = json_object_get(o, "op");
    p->op = NULL;
    if (op && !json_is_null(op)) {
        p->op = json_string_value(op);
        if (p->op == NULL || *p->op == '\0' || json_string_length(op) > APROTO_MAX_OP ||
            strlen(p->op) != json_string_length(op))
            return ERR("'workers[%zu].op' must be null or a name of 1 to %d bytes", i,
                       APROTO_MAX_OP);
    }
    if (p->in_collective && p->op == NULL)
        return ERR("'workers[%zu].op' is required when in_collective is true", i);
    return 0;
}

int aproto__parse_progress(json_t *root, struct aproto_progress **rows, size_t *n, char *err,
                           size_t errlen)
{
    void *out = NULL;
    int rc = aproto__parse_rows(root, "workers", APROTO_MAX_PROGRESS,
                                sizeof(struct aproto_progress), parse_row, &out, n, err, errlen);
    *rows = out;
    return rc;
}
