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
#include "util_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

/* n >= 0 as an integer, n < 0 as null (new reference). */
static json_t *int_or_null(int64_t n)
{
    return n < 0 ? json_null() : json_integer((json_int_t)n);
}

static json_t *row_json(const void *row)
{
    const struct aproto_gpu_row *g = row;
    json_t *o =
        json_pack("{s:I, s:s, s:s, s:I, s:I, s:o, s:o, s:o, s:b}", "index", (json_int_t)g->index,
                  "uuid", g->uuid, "name", g->name, "memory_mb", (json_int_t)g->memory_mb,
                  "memory_used_mb", (json_int_t)g->memory_used_mb, "utilization_pct",
                  int_or_null(g->utilization_pct), "temperature_c", int_or_null(g->temperature_c),
                  "power_mw", int_or_null(g->power_mw), "lost", g->lost);
    if (o && g->xid > 0 && json_object_set_new(o, "xid", json_integer(g->xid)) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

char *aproto_msg_gpus(const struct aproto_gpu_row *rows, size_t n)
{
    return aproto__msg_rows("gpus", "gpus", rows, n, sizeof(*rows), row_json);
}

/* Member `name` of o: a string of printable ASCII without quotes, min..max bytes. */
static int row_text(const json_t *o, size_t i, const char *name, size_t min, const char **out,
                    char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    const char *s = json_string_value(v);
    bool ok = s && json_string_length(v) >= min && json_string_length(v) <= APROTO_MAX_GPU_TEXT &&
              strlen(s) == json_string_length(v);
    for (size_t k = 0; ok && s[k]; k++)
        ok = s[k] >= 0x20 && s[k] < 0x7f && s[k] != '"' && s[k] != '\\';
    if (!ok)
        return ERR("'gpus[%zu].%s' must be %zu to %d printable ASCII bytes", i, name, min,
                   APROTO_MAX_GPU_TEXT);
    *out = s;
    return 0;
}

static int parse_row(const json_t *o, size_t i, void *row, char *err, size_t errlen)
{
    struct aproto_gpu_row *g = row;
    if (!json_is_object(o))
        return ERR("'gpus[%zu]' must be an object", i);
    int64_t big = INT64_C(1) << 40;
    char sub[160];
    /* utilization_pct, temperature_c, power_mw: null or absent (NVML did not say) is -1 */
    g->utilization_pct = g->temperature_c = g->power_mw = -1;
    if (util_json_int(o, "index", false, 0, APROTO_MAX_GPUS - 1, &g->index, sub, sizeof(sub)) < 0)
        return ERR("'gpus[%zu].%s", i, sub + 1);
    if (row_text(o, i, "uuid", 1, &g->uuid, err, errlen) != 0 ||
        row_text(o, i, "name", 0, &g->name, err, errlen) != 0)
        return -1;
    if (util_json_int(o, "memory_mb", false, 0, big, &g->memory_mb, sub, sizeof(sub)) < 0 ||
        util_json_int(o, "memory_used_mb", false, 0, big, &g->memory_used_mb, sub, sizeof(sub)) <
            0 ||
        util_json_int(o, "utilization_pct", true, 0, 100, &g->utilization_pct, sub, sizeof(sub)) <
            0 ||
        util_json_int(o, "temperature_c", true, 0, 1000, &g->temperature_c, sub, sizeof(sub)) < 0 ||
        util_json_int(o, "power_mw", true, 0, big, &g->power_mw, sub, sizeof(sub)) < 0)
        return ERR("'gpus[%zu].%s", i, sub + 1);
    json_t *lost = json_object_get(o, "lost");
    if (!json_is_boolean(lost))
        return ERR("'gpus[%zu].lost' must be a boolean", i);
    g->lost = json_is_true(lost);
    g->xid = 0; /* absent or null: none */
    if (util_json_int(o, "xid", true, 0, APROTO_MAX_XID, &g->xid, sub, sizeof(sub)) < 0)
        return ERR("'gpus[%zu].%s", i, sub + 1);
    return 0;
}

int aproto__parse_gpus(json_t *root, struct aproto_gpu_row **rows, size_t *n, char *err,
                       size_t errlen)
{
    void *out = NULL;
    int rc = aproto__parse_rows(root, "gpus", APROTO_MAX_GPU_ROWS, sizeof(struct aproto_gpu_row),
                                parse_row, &out, n, err, errlen);
    *rows = out;
    for (size_t i = 0; rc == 0 && i < *n; i++)
        for (size_t k = 0; k < i; k++)
            if ((*rows)[k].index == (*rows)[i].index) {
                free(*rows);
                *rows = NULL;
                *n = 0;
                return ERR("'gpus[%zu].index' repeats gpus[%zu]", i, k);
            }
    return rc;
}
