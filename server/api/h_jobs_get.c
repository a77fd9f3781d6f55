/* GET /api/v1/jobs/{id} */
#include "cache.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <string.h>

struct job_get {
    int64_t id;
    char *job;
};

static int job_get(struct db_conn *c, void *arg)
{
    struct job_get *a = arg;
    return store_job_get(c, a->id, &a->job);
}

enum MHD_Result h_jobs_get(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    char key[32];
    snprintf(key, sizeof(key), "%lld", (long long)id);
    uint64_t gen = db_generation(req->srv->db);
    size_t len;
    char *job = cache_get(req->srv->job_cache, key, gen, &len);
    if (job)
        return srv_reply_steal(req, MHD_HTTP_OK, "application/json", job, len, NULL);
    struct job_get a = {id, NULL};
    int qs = db_with_conn(req->srv->db, job_get, &a);
    job = a.job;
    if (qs > 0)
        cache_put(req->srv->job_cache, key, gen, job, strlen(job));
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", job, strlen(job), NULL);
}
