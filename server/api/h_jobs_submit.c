/* POST /api/v1/jobs: validate the spec, check that the checkpoint it resumes from and the code
 * package it names exist and are the submitter's to use, commit the job, answer 201 with it. */
#include "auth.h"
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "jobspec.h"
#include "server.h"
#include "shared.h"
#include "store.h"
#include "submit_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job_submit {
    const struct srv_identity *who;
    const char *owner;
    const json_t *spec;
    json_int_t resume_from;         /* 0: starts fresh */
    enum srv_use_access checkpoint; /* out: resume_from's access, when resume_from > 0 */
    const char *code_package;       /* the spec's code_package, or NULL */
    enum srv_use_access code;       /* out: its access, when set */
    const char *resume_package;     /* the spec's resume_from_package, or NULL */
    enum srv_use_access resume;     /* out: its access, when set */
    const char *project;            /* the spec's project, or NULL ("default", shared) */
    bool no_project;                /* out: none the submitter may see; nothing was inserted */
    const char *key;                /* Idempotency-Key, or NULL */
    enum store_once_outcome once;   /* out, with a key */
    int64_t id;
    char *job;
};

/* Checks what the spec names from the store (the checkpoint or package to resume from, the code
 * package: each stored and the submitter's to use, srv_auth_*_use), then, with an Idempotency-Key,
 * inserts the job (without one, the submit queue does, after this). Returns a db_qs: 0 when one
 * is refused. */
static int job_submit(struct db_conn *c, void *arg)
{
    struct job_submit *a = arg;
    /* A checkpoint removed between this check and the launch is the launch's to report. */
    if (a->resume_from > 0) {
        int qs = srv_auth_checkpoint_use(c, a->who, a->resume_from, &a->checkpoint);
        if (qs < 0 || a->checkpoint != SRV_USE_ALLOWED)
            return qs < 0 ? qs : 0;
    }
    if (a->resume_package) {
        int qs = srv_auth_package_use(c, a->who, a->resume_package, &a->resume);
        if (qs < 0 || a->resume != SRV_USE_ALLOWED)
            return qs < 0 ? qs : 0;
    }
    int qs = srv_auth_spec_refs(c, a->who, a->code_package, &a->code, a->project, &a->no_project);
    if (qs <= 0)
        return qs;
    if (a->key)
        return store_job_insert_once(c, a->owner, a->spec, a->key, &a->id, &a->job, &a->once);
    return qs;
}

/* Queues the reply for a project, checkpoint or package job_submit refused (*res) and returns true;
 * false when none was. */
static bool refused(struct srv_request *req, const struct job_submit *a, enum MHD_Result *res)
{
    if (a->no_project) {
        char detail[160];
        snprintf(detail, sizeof(detail),
                 "there is no project '%s' (or it is private and you are not a member)",
                 a->project);
        *res = srv_reply_field_problem(req, SRV_P_PROJECT_NOT_FOUND, "project", detail);
    } else if (a->code_package && a->code == SRV_USE_NOT_FOUND)
        *res = srv_reply_field_problem(req, SRV_P_CODE_PACKAGE_NOT_FOUND, "code_package",
                                       "no such code package: upload it first (PUT "
                                       "/api/v1/code/{sha256})");
    else if (a->code_package && a->code == SRV_USE_FORBIDDEN)
        *res = srv_reply_field_problem(req, SRV_P_PACKAGE_FORBIDDEN, "code_package",
                                       "this package was uploaded by another user and no job "
                                       "of a project of yours uses it: upload the working "
                                       "directory yourself");
    else if (a->resume_package && a->resume == SRV_USE_NOT_FOUND)
        *res = srv_reply_field_problem(req, SRV_P_CODE_PACKAGE_NOT_FOUND, "resume_from_package",
                                       "no such package: upload the checkpoint directory first "
                                       "(PUT /api/v1/code/{sha256})");
    else if (a->resume_package && a->resume == SRV_USE_FORBIDDEN)
        *res = srv_reply_field_problem(req, SRV_P_PACKAGE_FORBIDDEN, "resume_from_package",
                                       "this package was uploaded by another user and no job "
                                       "of a project of yours uses it: upload the checkpoint "
                                       "directory yourself");
    else if (a->resume_from > 0 && a->checkpoint != SRV_USE_ALLOWED) {
        char detail[160];
        bool gone = a->checkpoint == SRV_USE_NOT_FOUND;
        snprintf(detail, sizeof(detail),
                 gone ? "checkpoint %lld does not exist"
                      : "checkpoint %lld belongs to another user's job, not one of a "
                        "project you are a member of",
                 (long long)a->resume_from);
        *res = srv_reply_field_problem(
            req, gone ? SRV_P_CHECKPOINT_NOT_FOUND : SRV_P_CHECKPOINT_FORBIDDEN,
            "resume_from_checkpoint", detail);
    } else
        return false;
    return true;
}

/* Whether an Idempotency-Key header value is acceptable: 1 to 255 printable ASCII bytes. */
static bool key_valid(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++)
        if (k[i] < 0x21 || k[i] > 0x7e)
            return false;
    return true;
}

enum MHD_Result h_jobs_submit(struct srv_request *req)
{
    const char *key = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (key && !key_valid(key))
        return srv_reply_problem(req, SRV_P_BAD_REQUEST, NULL,
                                 "Idempotency-Key must be 1 to 255 printable ASCII characters");
    enum MHD_Result ret;
    json_t *in = srv_body_json(req, &ret);
    if (in == NULL)
        return ret;
    json_t *spec = NULL, *errors = NULL;
    int invalid = jobspec_validate(in, &spec, &errors);
    json_decref(in);
    if (invalid == JOBSPEC_ENOMEM)
        return srv_reply_problem(req, SRV_P_INTERNAL, NULL,
                                 "out of memory while validating the job spec");
    if (invalid) {
        size_t n = json_array_size(errors);
        json_t *first = json_array_get(errors, 0);
        return srv_reply_problem(req, SRV_P_INVALID_SPEC, errors,
                                 "%zu invalid field%s; first: %s: %s", n, n == 1 ? "" : "s",
                                 json_string_value(json_object_get(first, "field")),
                                 json_string_value(json_object_get(first, "detail")));
    }
    const char *sp =
        json_string_value(json_object_get(json_object_get(spec, "run_config"), "storage_path"));
    char why[256];
    if (sp && shared_path_check(req->srv->cfg.storage_path_allow, sp, why, sizeof(why)) != 0) {
        json_decref(spec);
        return srv_reply_field_problem(req, SRV_P_INVALID_SPEC, "run_config.storage_path", why);
    }
    json_int_t prio = json_integer_value(json_object_get(spec, "priority"));
    if (req->who.role < SRV_ROLE_ADMIN && prio > req->srv->cfg.max_priority_user) {
        json_decref(spec);
        char detail[96];
        snprintf(detail, sizeof(detail), "at most %lld for a non-admin token (--max-priority-user)",
                 (long long)req->srv->cfg.max_priority_user);
        return srv_reply_field_problem(req, SRV_P_INVALID_SPEC, "priority", detail);
    }
    struct job_submit a = {
        .who = &req->who,
        .owner = req->who.name,
        .key = key,
        .spec = spec,
        .resume_from = json_integer_value(json_object_get(spec, "resume_from_checkpoint")),
        .code_package = json_string_value(json_object_get(spec, "code_package")),
        .resume_package = json_string_value(json_object_get(spec, "resume_from_package")),
        .project = json_string_value(json_object_get(spec, "project")),
    };
    /* Each access starts "allowed": only a check that ran can refuse. */
    a.checkpoint = a.code = a.resume = SRV_USE_ALLOWED;
    /* A plain submission (the common case) reads nothing first: the queue commits it with the
     * others waiting (submit_queue.h). */
    bool checks = a.key || a.resume_from > 0 || a.resume_package || a.code_package || a.project;
    int qs = checks ? db_with_conn(req->srv->db, job_submit, &a) : 1;
    enum MHD_Result res;
    bool refuse = qs >= 0 && refused(req, &a, &res);
    if (qs > 0 && !refuse && !key) {
        struct store_job_new job = {.owner = a.owner, .spec = spec};
        qs = submit_queue_insert(req->srv->submits, req->srv->db, &job);
        a.id = job.id;
        a.job = job.json;
        if (qs > 0 && a.job == NULL)
            qs = DB_HARD_ERROR;
    }
    json_decref(spec);
    if (refuse)
        return res;
    if (qs <= 0)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    char location[64];
    snprintf(location, sizeof(location), "/api/v1/jobs/%lld", (long long)a.id);
    if (key && a.once == STORE_ONCE_CONFLICT) {
        free(a.job);
        return srv_reply_problem(req, SRV_P_IDEMPOTENCY_CONFLICT, NULL,
                                 "Idempotency-Key '%s' already created job %lld with another spec",
                                 key, (long long)a.id);
    }
    if (key && a.once == STORE_ONCE_REPLAYED) /* a retry: the job the first request created */
        return srv_reply_steal(req, MHD_HTTP_OK, "application/json", a.job, strlen(a.job),
                               location);
    control_kick(req->srv->control);
    return srv_reply_steal(req, MHD_HTTP_CREATED, "application/json", a.job, strlen(a.job),
                           location);
}
