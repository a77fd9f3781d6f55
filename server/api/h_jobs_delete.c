/* DELETE /api/v1/jobs/{id}: only finished jobs (409 otherwise); removes its events, metrics,
 * workers and checkpoint records. Users may delete their own jobs, admins any. */
#include "auth.h"
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdlib.h>

struct job_delete {
    int64_t id;
    const struct srv_identity *who;
    enum srv_job_access access;
    enum store_delete_outcome outcome;
    char *status;
};

static int job_delete(struct db_conn *c, void *arg)
{
    struct job_delete *a = arg;
    int qs = srv_auth_job_access(c, a->who, a->id, &a->access);
    if (qs < 0 || a->access != SRV_JOB_ALLOWED)
        return qs;
    return store_job_delete(c, a->id, &a->outcome, &a->status);
}

enum MHD_Result h_jobs_delete(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    struct job_delete a = {id, &req->who, SRV_JOB_NOT_FOUND, STORE_DELETE_NOT_FOUND, NULL};
    int qs = db_with_conn(req->srv->db, job_delete, &a);
    if (qs < 0) {
        free(a.status);
        return srv_reply_db_error(req, qs);
    }
    enum MHD_Result ret;
    if (a.access == SRV_JOB_NOT_FOUND ||
        (a.access == SRV_JOB_ALLOWED && a.outcome == STORE_DELETE_NOT_FOUND))
        ret = srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                (long long)id);
    else if (a.access == SRV_JOB_FORBIDDEN)
        ret = srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                "job %lld belongs to another user; '%s' may delete only its own "
                                "jobs",
                                (long long)id, req->who.name);
    else if (a.outcome == STORE_DELETE_NOT_FINISHED)
        ret = srv_reply_problem(req, SRV_P_JOB_NOT_FINISHED, NULL,
                                "job %lld is %s; stop it and wait until it has finished before "
                                "deleting it",
                                (long long)id, a.status ? a.status : "running");
    else {
        control_forget_job(req->srv->control, id);
        ret = srv_reply_empty(req, MHD_HTTP_NO_CONTENT);
    }
    free(a.status);
    return ret;
}
