/* GPUs of the nodes (issue 16): an agent's `gpus` message (its NVML view and the latest sample of
 * each GPU) is stored at once in nodes.gpus, one statement (server/store/sql/ty_gpus_ingest.sql);
 * a GPU newly reported lost (gone, or unhealthy after a critical Xid) leaves the node's capacity
 * there and the jobs with a worker on it get an event naming it and its Xid. */
#include "control_internal.h"

#include "log.h"

void ctl__on_gpus(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m)
{
    int lost = store_gpus_ingest(ctl->db, node->id, m->gpu_rows, m->n_gpu_rows);
    if (lost < 0)
        TY_WARN("control", "node %s: GPU sample not stored (database error)", node->id);
    else if (lost > 0)
        TY_WARN("control", "node %s: %d GPU(s) lost, taken out of its capacity", node->id, lost);
}
