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

struct checkpoint_list {
    int64_t job;
    char *list;
};

static int checkpoint_list(struct db_conn *c, void *arg)
{
    struct checkpoint_list *a = arg;
    return store_checkpoint_list(c, a->job, &a->list);
}

enum MHD_Result h_jobs_checkpoints(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    struct checkpoint_list a = {id, NULL};
    int qs = db_with_conn(req->srv->db, checkpoint_list, &a);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    return srv_reply_wrapped(req, "checkpoints", a.list);
}
