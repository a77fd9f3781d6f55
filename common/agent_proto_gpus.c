/* The agent protocol's `gpus` message (agent -> server, docs/agent-protocol.md): the node's GPUs
 * as NVML sees them, sampled every --gpu-sample-interval seconds. Not an event: no seq, no ack; a
 * lost one is replaced by the next.
 *
 *   {"type":"gpus", "gpus":[{"index", "uuid", "name", "memory_mb", "memory_used_mb",
 *    "utilization_pct":n|null, "temperature_c":n|null, "power_mw":n|null, "lost":bool,
 *    "xid":n}, ...]}
 *
 * "xid" (a critical Xid error that made the GPU unhealthy, docs/gpu.md) is sent only when there
 * is one; a row without it (an older agent) or with null has none.
 *
 * Pure. */
#include "agent_proto_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

/* n >= 0 as an integer, n < 0 as null (new reference). */
static json_t *int_or_null(int64_t n)
{
    return n < 0 ? json_null() : json_integer((json_int_t)n);
}

char *agent_msg_gpus(const struct agent_gpu_row *rows, size_t n)
{
    json_t *arr = json_array();
    json_t *msg = json_pack("{s:s, s:o}", "type", "gpus", "gpus", arr);
    for (size_t i = 0; msg && i < n; i++) {
        const struct agent_gpu_row *g = &rows[i];
        json_t *o = json_pack(
            "{s:I, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:b}", "index", (json_int_t)g->index, "uuid",
            g->uuid, "name", g->name, "memory_mb", (json_int_t)g->memory_mb, "memory_used_mb",
            (json_int_t)g->memory_used_mb, "utilization_pct", int_or_null(g->utilization_pct),
            "temperature_c", int_or_null(g->temperature_c), "power_mw", int_or_null(g->power_mw),
            "lost", g->lost);
        if (o && g->xid > 0 && json_object_set_new(o, "xid", json_integer(g->xid)) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(msg);
            msg = NULL;
        }
    }
    if (!msg)
        return NULL;
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    return text;
}

/* Member `name` of o: an integer in [0, max], or (when `nullable`) null or absent as -1. */
static int row_int(const json_t *o, size_t i, const char *name, int64_t max, bool nullable,
                   int64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    if (nullable && (!v || json_is_null(v))) {
        *out = -1;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return ERR("'gpus[%zu].%s' must be %san integer from 0 to %lld", i, name,
                   nullable ? "null or " : "", (long long)max);
    *out = json_integer_value(v);
    return 0;
}

/* Member `name` of o: a string of printable ASCII without quotes, min..max bytes. */
static int row_text(const json_t *o, size_t i, const char *name, size_t min, const char **out,
                    char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    const char *s = json_string_value(v);
    bool ok = s && json_string_length(v) >= min &&
              json_string_length(v) <= AGENT_PROTO_MAX_GPU_TEXT &&
              strlen(s) == json_string_length(v);
    for (size_t k = 0; ok && s[k]; k++)
        ok = s[k] >= 0x20 && s[k] < 0x7f && s[k] != '"' && s[k] != '\\';
    if (!ok)
        return ERR("'gpus[%zu].%s' must be %zu to %d printable ASCII bytes", i, name, min,
                   AGENT_PROTO_MAX_GPU_TEXT);
    *out = s;
    return 0;
}

static int parse_row(const json_t *o, size_t i, struct agent_gpu_row *g, char *err, size_t errlen)
{
    if (!json_is_object(o))
        return ERR("'gpus[%zu]' must be an object", i);
    int64_t big = INT64_C(1) << 40;
    if (row_int(o, i, "index", AGENT_PROTO_MAX_GPUS - 1, false, &g->index, err, errlen) != 0 ||
        row_text(o, i, "uuid", 1, &g->uuid, err, errlen) != 0 ||
        row_text(o, i, "name", 0, &g->name, err, errlen) != 0 ||
        row_int(o, i, "memory_mb", big, false, &g->memory_mb, err, errlen) != 0 ||
        row_int(o, i, "memory_used_mb", big, false, &g->memory_used_mb, err, errlen) != 0 ||
        row_int(o, i, "utilization_pct", 100, true, &g->utilization_pct, err, errlen) != 0 ||
        row_int(o, i, "temperature_c", 1000, true, &g->temperature_c, err, errlen) != 0 ||
        row_int(o, i, "power_mw", big, true, &g->power_mw, err, errlen) != 0)
        return -1;
    json_t *lost = json_object_get(o, "lost");
    if (!json_is_boolean(lost))
        return ERR("'gpus[%zu].lost' must be a boolean", i);
    g->lost = json_is_true(lost);
    if (row_int(o, i, "xid", AGENT_PROTO_MAX_XID, true, &g->xid, err, errlen) != 0)
        return -1;
    if (g->xid < 0)
        g->xid = 0;
    return 0;
}

int agent__parse_gpus(json_t *root, struct agent_gpu_row **rows, size_t *n, char *err,
                      size_t errlen)
{
    *rows = NULL;
    *n = 0;
    json_t *arr = json_object_get(root, "gpus");
    if (!json_is_array(arr) || json_array_size(arr) > AGENT_PROTO_MAX_GPU_ROWS)
        return ERR("'gpus' must be an array of at most %d objects", AGENT_PROTO_MAX_GPU_ROWS);
    size_t count = json_array_size(arr);
    if (count == 0)
        return 0;
    struct agent_gpu_row *out = calloc(count, sizeof(*out));
    if (out == NULL)
        return ERR("out of memory");
    for (size_t i = 0; i < count; i++) {
        if (parse_row(json_array_get(arr, i), i, &out[i], err, errlen) != 0) {
            free(out);
            return -1;
        }
        for (size_t k = 0; k < i; k++)
            if (out[k].index == out[i].index) {
                free(out);
                return ERR("'gpus[%zu].index' repeats gpus[%zu]", i, k);
            }
    }
    *rows = out;
    *n = count;
    return 0;
}
