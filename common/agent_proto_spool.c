/* The agent's spooled message bodies (agent_proto.h): what the agent writes under <data>/spool
 * before it acks a worker or forgets an exit, and reads back after a restart to resend it.
 *
 *   <job>.<attempt>.<rank>.<report_seq>.json: a report body (aproto_report_body), resent as a
 *     `report` message (aproto_msg_report);
 *   <job>.<attempt>.<rank>.exit: {"job_id", "attempt", "rank", "exit_code", "signal",
 *     "error":text|absent, "reason":text|absent}, resent as `worker_exited`.
 *
 * Pure: the agent (worker/agent/spool.c) does the file I/O. */
#include "agent_proto.h"

#include <stdlib.h>
#include <string.h>

int aproto_report_body_parse(const json_t *body, struct aproto_report_body_keys *out)
{
    json_t *job = json_object_get(body, "job_id"), *attempt = json_object_get(body, "attempt");
    json_t *rank = json_object_get(body, "rank"), *rseq = json_object_get(body, "report_seq");
    if (!json_is_object(body) || !json_is_string(job) || !json_is_integer(attempt) ||
        !json_is_integer(rank) || !json_is_integer(rseq) ||
        !json_is_object(json_object_get(body, "metrics")))
        return -1;
    *out = (struct aproto_report_body_keys){
        .job_id = json_string_value(job),
        .attempt = json_integer_value(attempt),
        .rank = json_integer_value(rank),
        .report_seq = json_integer_value(rseq),
    };
    return 0;
}

char *aproto_exit_body(const struct aproto_exit_body *e)
{
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s*, s:s*}", "job_id", e->job_id, "attempt",
                          (json_int_t)e->attempt, "rank", (json_int_t)e->rank, "exit_code",
                          (json_int_t)e->exit_code, "signal", (json_int_t)e->signal, "error",
                          e->error, "reason", e->reason);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

/* Member `key` of o as an int, or -1 when it is not an integer. */
static int int_or_minus_one(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : -1;
}

int aproto_exit_body_parse(const char *text, size_t len, struct aproto_exit_body *out)
{
    memset(out, 0, sizeof(*out));
    json_t *o = json_loadb(text, len, 0, NULL);
    const char *job = json_string_value(json_object_get(o, "job_id"));
    json_t *att = json_object_get(o, "attempt"), *rank = json_object_get(o, "rank");
    if (!job || aproto_job_id_valid(job) != 0 || !json_is_integer(att) || !json_is_integer(rank)) {
        json_decref(o);
        return -1;
    }
    *out = (struct aproto_exit_body){
        .root = o,
        .job_id = job,
        .attempt = json_integer_value(att),
        .rank = json_integer_value(rank),
        .exit_code = int_or_minus_one(o, "exit_code"),
        .signal = int_or_minus_one(o, "signal"),
        .error = json_string_value(json_object_get(o, "error")),
        .reason = json_string_value(json_object_get(o, "reason")),
    };
    if (out->reason && strlen(out->reason) > APROTO_MAX_EXIT_REASON)
        out->reason = NULL;
    return 0;
}

void aproto_exit_body_free(struct aproto_exit_body *e)
{
    if (!e)
        return;
    json_decref(e->root);
    memset(e, 0, sizeof(*e));
}
