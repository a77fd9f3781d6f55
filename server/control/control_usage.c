/* Workers' resource use (issue 22): an agent's `usage` message (what each worker's cgroup says
 * it used) is stored at once in worker_usage, one statement (server/store/sql/ty_usage_ingest.sql);
 * GET /jobs/{id}/workers shows it. */
#include "control_internal.h"

#include "log.h"

void ctl__on_usage(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m)
{
    if (m->n_usage == 0)
        return;
    if (store_usage_ingest(ctl->db, node->id, m->usage, m->n_usage) < 0)
        TY_WARN("control", "node %s: worker usage not stored (database error)", node->id);
}
