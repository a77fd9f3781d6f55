/* POST /api/v1/jobs: validate the spec, check that the checkpoint it resumes from and the code
 * package it names exist, commit the job, answer 201 with the job. */
#include "auth.h"
#include "control.h"
#include "db.h"
#include "handlers.h"
#include "jobspec.h"
#include "server.h"
#include "shared.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job_submit {
    const struct srv_identity *who;
    const char *owner;
    const json_t *spec;
    json_int_t resume_from;       /* 0: starts fresh */
    bool no_checkpoint;           /* out: resume_from does not exist; nothing was inserted */
    bool foreign_checkpoint;      /* out: resume_from is another user's; nothing was inserted */
    const char *code_package;     /* the spec's code_package, or NULL */
    bool no_code_package;         /* out: it is not stored; nothing was inserted */
    const char *resume_package;   /* the spec's resume_from_package, or NULL */
    bool no_resume_package;       /* out: it is not stored; nothing was inserted */
    bool foreign_resume_package;  /* out: the submitter did not upload it; nothing was inserted */
    const char *project;          /* the spec's project, or NULL ("default", shared) */
    bool no_project;              /* out: none the submitter may see; nothing was inserted */
    const char *key;              /* Idempotency-Key, or NULL */
    enum store_once_outcome once; /* out, with a key */
    int64_t id;
    char *job;
};

/* Checks the checkpoint to resume from, a checkpoint id or a package (it exists, and is the
 * submitter's own unless the submitter is an admin: a checkpoint holds its job's weights and
 * data), and the code package, then inserts the job. Returns a db_qs. */
static int job_submit(struct db_conn *c, void *arg)
{
    struct job_submit *a = arg;
    /* A checkpoint removed between this check and the launch is the launch's to report. */
    if (a->resume_from > 0) {
        char *owner = NULL;
        int qs = store_checkpoint_owner(c, a->resume_from, &owner);
        if (qs <= 0) {
            a->no_checkpoint = qs == 0;
            return qs;
        }
        bool mine = owner && srv_auth_may_modify(a->who, owner);
        free(owner);
        if (!mine) {
            a->foreign_checkpoint = true;
            return 0;
        }
    }
    if (a->resume_package) {
        struct store_code code;
        int qs = store_code_get(c, a->resume_package, &code);
        if (qs <= 0) {
            a->no_resume_package = qs == 0;
            return qs;
        }
        bool owned = false;
        qs = store_code_owned(c, a->resume_package, a->owner[0] ? a->owner : "anonymous", &owned);
        if (qs < 0)
            return qs;
        if (!owned && a->who->role < SRV_ROLE_ADMIN) {
            a->foreign_resume_package = true;
            return 0;
        }
    }
    if (a->code_package) {
        struct store_code code;
        int qs = store_code_get(c, a->code_package, &code);
        if (qs <= 0) {
            a->no_code_package = qs == 0;
            return qs;
        }
    }
    if (a->project) {
        enum store_project_access access;
        int qs = store_project_access(c, a->who, a->project, &access);
        if (qs < 0)
            return qs;
        if (access == STORE_PROJECT_NOT_FOUND) {
            a->no_project = true;
            return 0;
        }
    }
    if (a->key)
        return store_job_insert_once(c, a->owner, a->spec, a->key, &a->id, &a->job, &a->once);
    return store_job_insert(c, a->owner, a->spec, &a->id, &a->job);
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
    int qs = db_with_conn(req->srv->db, job_submit, &a);
    if (a.no_code_package) {
        json_decref(spec);
        return srv_reply_field_problem(req, SRV_P_CODE_PACKAGE_NOT_FOUND, "code_package",
                                       "no such code package: upload it first (PUT "
                                       "/api/v1/code/{sha256})");
    }
    if (a.no_project) {
        char detail[160];
        snprintf(detail, sizeof(detail), "there is no project '%s' (or it is private and you are "
                 "not a member)", a.project);
        json_decref(spec);
        return srv_reply_field_problem(req, SRV_P_PROJECT_NOT_FOUND, "project", detail);
    }
    json_decref(spec);
    if (a.no_resume_package)
        return srv_reply_field_problem(req, SRV_P_CODE_PACKAGE_NOT_FOUND, "resume_from_package",
                                       "no such package: upload the checkpoint directory first "
                                       "(PUT /api/v1/code/{sha256})");
    if (a.foreign_resume_package)
        return srv_reply_field_problem(req, SRV_P_PACKAGE_FORBIDDEN, "resume_from_package",
                                       "this package was uploaded by another user: upload the "
                                       "checkpoint directory yourself");
    if (a.no_checkpoint) {
        char detail[64];
        snprintf(detail, sizeof(detail), "checkpoint %lld does not exist",
                 (long long)a.resume_from);
        return srv_reply_field_problem(req, SRV_P_CHECKPOINT_NOT_FOUND, "resume_from_checkpoint",
                                       detail);
    }
    if (a.foreign_checkpoint) {
        char detail[96];
        snprintf(detail, sizeof(detail), "checkpoint %lld belongs to another user's job",
                 (long long)a.resume_from);
        return srv_reply_field_problem(req, SRV_P_CHECKPOINT_FORBIDDEN, "resume_from_checkpoint",
                                       detail);
    }
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
