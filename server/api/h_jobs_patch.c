/* PATCH /api/v1/jobs/{id}: changes a job's tags and notes, at any status (issue 26). The body sets
 * one or both of `tags` (an array, replacing the old ones) and `notes` (a string), and nothing
 * else. 200 with the job. Users may change their own jobs, admins any; viewers none (routes.c). */
#include "auth.h"
#include "db.h"
#include "handlers.h"
#include "jobspec.h"
#include "server.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

struct job_patch {
    int64_t id;
    const struct srv_identity *who;
    const char *tags, *notes;
    enum srv_job_access access;
    char *job;
};

static int job_patch(struct db_conn *c, void *arg)
{
    struct job_patch *a = arg;
    int qs = srv_auth_job_access(c, a->who, a->id, &a->access);
    if (qs < 0 || a->access != SRV_JOB_ALLOWED)
        return qs;
    return store_job_set_labels(c, a->id, a->tags, a->notes, &a->job);
}

/* The body's problem in words, or NULL when it is a valid change. */
static const char *body_problem(const json_t *in, const char **field)
{
    const json_t *tags = json_object_get(in, "tags"), *notes = json_object_get(in, "notes");
    size_t known = (tags != NULL) + (notes != NULL);
    *field = NULL;
    if (known == 0 || json_object_size(in) != known)
        return "the body sets one or both of tags and notes, and nothing else";
    const char *p;
    if (tags && (p = jobspec_tags_problem(tags)) != NULL) {
        *field = "tags";
        return p;
    }
    if (notes && (p = jobspec_notes_problem(notes)) != NULL) {
        *field = "notes";
        return p;
    }
    return NULL;
}

enum MHD_Result h_jobs_patch(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    enum MHD_Result ret;
    json_t *in = srv_body_json(req, &ret);
    if (in == NULL)
        return ret;
    const char *field;
    const char *problem = body_problem(in, &field);
    if (problem) {
        json_decref(in);
        return field ? srv_reply_field_problem(req, SRV_P_INVALID_BODY, field, problem)
                     : srv_reply_problem(req, SRV_P_INVALID_BODY, NULL, "%s", problem);
    }
    const json_t *tags = json_object_get(in, "tags");
    char *tags_text = tags ? json_dumps(tags, JSON_COMPACT) : NULL;
    struct job_patch a = {id,
                          &req->who,
                          tags_text,
                          json_string_value(json_object_get(in, "notes")),
                          SRV_JOB_NOT_FOUND,
                          NULL};
    int qs = tags && !tags_text ? DB_HARD_ERROR : db_with_conn(req->srv->db, job_patch, &a);
    free(tags_text);
    json_decref(in);
    if (qs < 0) {
        free(a.job);
        return srv_reply_db_error(req, qs);
    }
    if (a.access == SRV_JOB_NOT_FOUND || (a.access == SRV_JOB_ALLOWED && a.job == NULL))
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    if (a.access == SRV_JOB_FORBIDDEN)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "job %lld belongs to another user; '%s' may change only its own "
                                 "jobs",
                                 (long long)id, req->who.name);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", a.job, strlen(a.job), NULL);
}
