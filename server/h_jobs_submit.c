/* POST /api/v1/jobs: validate the spec, check that the checkpoint it resumes from exists, commit
 * the job, answer 201 with the job. */
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "jobspec.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum MHD_Result h_jobs_submit(struct srv_request *req)
{
    enum MHD_Result ret;
    json_t *in = srv_body_json(req, &ret);
    if (in == NULL)
        return ret;
    json_t *spec = NULL, *errors = NULL;
    int invalid = jobspec_validate(in, &spec, &errors);
    json_decref(in);
    if (invalid) {
        size_t n = json_array_size(errors);
        json_t *first = json_array_get(errors, 0);
        return srv_reply_problem(req, SRV_P_INVALID_SPEC, errors,
                                 "%zu invalid field%s; first: %s: %s", n, n == 1 ? "" : "s",
                                 json_string_value(json_object_get(first, "field")),
                                 json_string_value(json_object_get(first, "detail")));
    }
    struct db_conn *c = db_acquire(req->srv->db);
    int64_t id = 0;
    char *job = NULL;
    json_int_t ckpt = json_integer_value(json_object_get(spec, "resume_from_checkpoint"));
    /* A checkpoint removed between this check and the launch is the launch's to report. */
    int qs = c == NULL ? DB_SOFT_ERROR : ckpt > 0 ? store_checkpoint_exists(c, ckpt) : 1;
    if (qs == 0) {
        db_release(req->srv->db, c);
        json_decref(spec);
        char detail[64];
        snprintf(detail, sizeof(detail), "checkpoint %lld does not exist", (long long)ckpt);
        return srv_reply_field_problem(req, SRV_P_CHECKPOINT_NOT_FOUND, "resume_from_checkpoint",
                                       detail);
    }
    if (qs > 0)
        qs = store_job_insert(c, req->who.name, spec, &id, &job);
    db_release(req->srv->db, c);
    json_decref(spec);
    if (qs <= 0)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    control_kick(req->srv->control);
    char location[64];
    snprintf(location, sizeof(location), "/api/v1/jobs/%lld", (long long)id);
    return srv_reply_steal(req, MHD_HTTP_CREATED, "application/json", job, strlen(job), location);
}
