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

struct job_stop {
    int64_t id;
    const struct srv_identity *who;
    enum srv_job_access access;
    enum store_stop_outcome outcome;
    char *job;
};

static int job_stop(struct db_conn *c, void *arg)
{
    struct job_stop *a = arg;
    int qs = srv_auth_job_access(c, a->who, a->id, &a->access);
    if (qs < 0 || a->access != SRV_JOB_ALLOWED)
        return qs;
    return store_job_stop(c, a->id, a->who->name, &a->outcome, &a->job);
}

enum MHD_Result h_jobs_stop(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    struct job_stop a = {id, &req->who, SRV_JOB_NOT_FOUND, STORE_STOP_NOT_FOUND, NULL};
    int qs = db_with_conn(req->srv->db, job_stop, &a);
    if (qs < 0) {
        free(a.job);
        return srv_reply_db_error(req, qs);
    }
    if (a.access == SRV_JOB_NOT_FOUND ||
        (a.access == SRV_JOB_ALLOWED && a.outcome == STORE_STOP_NOT_FOUND))
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    if (a.access == SRV_JOB_FORBIDDEN)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "job %lld belongs to another user; '%s' may stop only its own "
                                 "jobs",
                                 (long long)id, req->who.name);
    if (a.outcome == STORE_STOP_ALREADY_FINISHED) {
        free(a.job);
        return srv_reply_problem(req, SRV_P_JOB_FINISHED, NULL, "job %lld has already finished",
                                 (long long)id);
    }
    if (a.job == NULL)
        return srv_reply_db_error(req, DB_HARD_ERROR);
    control_kick(req->srv->control);
    return srv_reply_steal(req, MHD_HTTP_ACCEPTED, "application/json", a.job, strlen(a.job), NULL);
}
