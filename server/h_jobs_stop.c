/* POST /api/v1/jobs/{id}/stop: a pending job stops at once; a running one goes to STOPPING
 * while its workers are stopped. 202 with the job. Users may stop their own jobs, admins any. */
#include "auth.h"
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

enum MHD_Result h_jobs_stop(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    struct db_conn *c = db_acquire(req->srv->db);
    char *owner = NULL, *job = NULL;
    enum store_stop_outcome outcome = STORE_STOP_NOT_FOUND;
    int qs = c ? store_job_owner(c, id, &owner) : DB_SOFT_ERROR;
    bool found = qs > 0 && owner != NULL;
    bool allowed = found && srv_auth_may_modify(&req->who, owner);
    free(owner);
    if (allowed)
        qs = store_job_stop(c, id, req->who.name, &outcome, &job);
    db_release(req->srv->db, c);
    if (qs < 0) {
        free(job);
        return srv_reply_db_error(req, qs);
    }
    if (!found || (allowed && outcome == STORE_STOP_NOT_FOUND))
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    if (!allowed)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "job %lld belongs to another user; '%s' may stop only its own "
                                 "jobs",
                                 (long long)id, req->who.name);
    if (outcome == STORE_STOP_ALREADY_FINISHED) {
        free(job);
        return srv_reply_problem(req, SRV_P_JOB_FINISHED, NULL, "job %lld has already finished",
                                 (long long)id);
    }
    if (job == NULL)
        return srv_reply_db_error(req, DB_HARD_ERROR);
    control_kick(req->srv->control);
    return srv_reply_steal(req, MHD_HTTP_ACCEPTED, "application/json", job, strlen(job), NULL);
}
