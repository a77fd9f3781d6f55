/* DELETE /api/v1/jobs/{id}: only finished jobs (409 otherwise); removes its events, metrics,
 * workers and checkpoint records. Users may delete their own jobs, admins any. */
#include "auth.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdlib.h>

enum MHD_Result h_jobs_delete(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    struct db_conn *c = db_acquire(req->srv->db);
    char *owner = NULL, *status = NULL;
    enum store_delete_outcome outcome = STORE_DELETE_NOT_FOUND;
    int qs = c ? store_job_owner(c, id, &owner) : DB_SOFT_ERROR;
    bool found = qs > 0 && owner != NULL;
    bool allowed = found && srv_auth_may_modify(&req->who, owner);
    free(owner);
    if (allowed)
        qs = store_job_delete(c, id, &outcome, &status);
    db_release(req->srv->db, c);
    if (qs < 0) {
        free(status);
        return srv_reply_db_error(req, qs);
    }
    enum MHD_Result ret;
    if (!found || (allowed && outcome == STORE_DELETE_NOT_FOUND))
        ret = srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                (long long)id);
    else if (!allowed)
        ret = srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                "job %lld belongs to another user; '%s' may delete only its own "
                                "jobs",
                                (long long)id, req->who.name);
    else if (outcome == STORE_DELETE_NOT_FINISHED)
        ret = srv_reply_problem(req, SRV_P_JOB_NOT_FINISHED, NULL,
                                "job %lld is %s; stop it and wait until it has finished before "
                                "deleting it",
                                (long long)id, status ? status : "running");
    else
        ret = srv_reply_empty(req, MHD_HTTP_NO_CONTENT);
    free(status);
    return ret;
}
