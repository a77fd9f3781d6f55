/* GPUs of the nodes (issue 16): an agent's `gpus` message (its NVML view and the latest sample of
 * each GPU) is stored at once in nodes.gpus, one statement (server/store/sql/ty_gpus_ingest.sql);
 * a GPU newly reported lost (gone, or unhealthy after a critical Xid) leaves the node's capacity
 * there and the jobs with a worker on it get an event naming it and its Xid. */
#include "control_internal.h"

#include "log.h"

#include <stdlib.h>

void ctl__on_gpus(struct control *ctl, struct ctl_node *node, const struct agent_node_msg *m)
{
    json_t *rows = json_array();
    for (size_t i = 0; rows && i < m->n_gpu_rows; i++) {
        const struct agent_gpu_row *g = &m->gpu_rows[i];
        json_t *row = json_pack(
            "{s:I, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:b}", "index", (json_int_t)g->index, "uuid",
            g->uuid, "name", g->name, "memory_mb", (json_int_t)g->memory_mb, "memory_used_mb",
            (json_int_t)g->memory_used_mb, "utilization_pct", (json_int_t)g->utilization_pct,
            "temperature_c", (json_int_t)g->temperature_c, "power_mw", (json_int_t)g->power_mw,
            "lost", g->lost);
        /* -1 (NVML did not say) is stored as null */
        static const char *const opt[] = {"utilization_pct", "temperature_c", "power_mw"};
        for (size_t k = 0; row && k < sizeof(opt) / sizeof(opt[0]); k++)
            if (json_integer_value(json_object_get(row, opt[k])) < 0)
                json_object_set_new(row, opt[k], json_null());
        /* the critical Xid that made it unhealthy (ty_gpus_ingest names it in the event) */
        if (row && g->xid > 0 && json_object_set_new(row, "xid", json_integer(g->xid)) != 0) {
            json_decref(row);
            row = NULL;
        }
        if (row == NULL || json_array_append_new(rows, row) != 0) {
            json_decref(rows);
            rows = NULL;
        }
    }
    char *text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
    json_decref(rows);
    if (text == NULL) {
        TY_ERROR("control", "out of memory storing the GPUs of node %s", node->id);
        return;
    }
    int lost = store_gpus_ingest(ctl->db, node->id, text);
    if (lost < 0)
        TY_WARN("control", "node %s: GPU sample not stored (database error)", node->id);
    else if (lost > 0)
        TY_WARN("control", "node %s: %d GPU(s) lost, taken out of its capacity", node->id, lost);
    free(text);
}
