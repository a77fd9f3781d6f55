/* GET /api/v1/jobs/{id}/checkpoints
 * The job's registered (COMMITTED) checkpoints, by attempt then index:
 *   {"checkpoints":[{"id","attempt","index","step","metrics","size_bytes","location",
 *                    "created_at"}]}
 * location: [{"node_id","path"}] - the agent-owned directories holding its parts. 404 problem for
 * an unknown job. */
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum MHD_Result h_jobs_checkpoints(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    struct db_conn *c = db_acquire(req->srv->db);
    char *list = NULL;
    int qs = c ? store_checkpoint_list(c, id, &list) : DB_SOFT_ERROR;
    db_release(req->srv->db, c);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    return srv_reply_wrapped(req, "checkpoints", list);
}
