/*
 * report_proto_progress.c — the report protocol's `progress` message (docs/report-protocol.md): a
 * worker's heartbeat carrying the collective it is in or last left, and how many reports it
 * made. Sent by the SDK's heartbeat thread (worker/sdk/progress.c) and by trainyard.py; read by the
 * agent.
 */
#include <stdio.h>
#include <string.h>

#include "util_json.h"
#include "report_proto.h"

#define ERRF(...)                                                                                  \
    do {                                                                                           \
        if (err && errlen)                                                                         \
            snprintf(err, errlen, __VA_ARGS__);                                                    \
    } while (0)

static const char *const wire_ops[] = {"allreduce", "broadcast", "allgather"};

const char *rproto_op_name(int op)
{
    if (op < 1 || op > (int)(sizeof wire_ops / sizeof wire_ops[0]))
        return NULL;
    return wire_ops[op - 1];
}

json_t *rproto_progress_new(const struct rproto_progress *p)
{
    if (!p || p->coll_seq < 0 || p->report_seq < 0 || (p->in_collective && !p->op))
        return NULL;
    json_t *m = json_pack("{s:s, s:s?, s:I, s:b, s:I}", "type", "progress", "op", p->op, "coll_seq",
                          (json_int_t)p->coll_seq, "in_collective", p->in_collective, "report_seq",
                          (json_int_t)p->report_seq);
    if (m && p->progress_age_ms >= 0 &&
        json_object_set_new(m, "progress_age_ms", json_integer(p->progress_age_ms)) != 0) {
        json_decref(m);
        m = NULL;
    }
    return m;
}

/* A non-negative integer field (required); TY_EPROTO naming it otherwise. */
static int progress_count(const json_t *msg, const char *key, int64_t *out, char *err,
                          size_t errlen)
{
    return util_json_int(msg, key, false, 0, INT64_MAX, out, err, errlen) < 0 ? TY_EPROTO : 0;
}

int rproto_parse_progress(const json_t *msg, struct rproto_progress *out, char *err, size_t errlen)
{
    if (!json_is_object(msg) || rproto_type_of(msg) != RPROTO_PROGRESS) {
        ERRF("field 'type' must be \"progress\"");
        return TY_EPROTO;
    }
    *out = (struct rproto_progress){0};
    json_t *op = json_object_get(msg, "op");
    if (op && !json_is_null(op)) {
        const char *s = json_string_value(op);
        if (!s || !*s || strlen(s) > RPROTO_MAX_OP || strlen(s) != json_string_length(op)) {
            ERRF("field 'op' must be null or a name of 1 to %d bytes", RPROTO_MAX_OP);
            return TY_EPROTO;
        }
        for (const char *q = s; *q; q++)
            if (!((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')) {
                ERRF("field 'op' may hold only a-z, 0-9 and '_'");
                return TY_EPROTO;
            }
        out->op = s;
    }
    json_t *in = json_object_get(msg, "in_collective");
    if (!json_is_boolean(in)) {
        ERRF("field 'in_collective' missing or not a boolean");
        return TY_EPROTO;
    }
    out->in_collective = json_is_true(in);
    if (out->in_collective && !out->op) {
        ERRF("field 'op' is required when 'in_collective' is true");
        return TY_EPROTO;
    }
    int rc = progress_count(msg, "coll_seq", &out->coll_seq, err, errlen);
    if (rc == 0)
        rc = progress_count(msg, "report_seq", &out->report_seq, err, errlen);
    out->progress_age_ms = -1;
    json_t *age = json_object_get(msg, "progress_age_ms");
    if (rc == 0 && age && !json_is_null(age))
        rc = progress_count(msg, "progress_age_ms", &out->progress_age_ms, err, errlen);
    return rc;
}
