/* GET /api/v1/jobs/{id}/workers, /attempts and /events: the parts of a job kept in their own
 * tables. */
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*child_query)(struct db_conn *c, int64_t job, char **json_out);

struct child_list {
    child_query query;
    int64_t job;
    char *list;
};

static int child_list(struct db_conn *c, void *arg)
{
    struct child_list *a = arg;
    return a->query(c, a->job, &a->list);
}

static enum MHD_Result reply_child_list(struct srv_request *req, child_query query, const char *key)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    struct child_list a = {query, id, NULL};
    int qs = db_with_conn(req->srv->db, child_list, &a);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (a.list == NULL)
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    return srv_reply_wrapped(req, key, a.list);
}

enum MHD_Result h_jobs_workers(struct srv_request *req)
{
    return reply_child_list(req, store_job_workers, "workers");
}

enum MHD_Result h_jobs_events(struct srv_request *req)
{
    return reply_child_list(req, store_job_events, "events");
}

enum MHD_Result h_jobs_attempts(struct srv_request *req)
{
    return reply_child_list(req, store_job_attempts, "attempts");
}
