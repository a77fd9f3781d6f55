/* Bearer-token authentication and role checks. */
#ifndef SRV_AUTH_H
#define SRV_AUTH_H

#include "http.h"

struct srv;

/* Decides whether req may use req->route and fills req->who. Returns 0 when allowed; otherwise
 * replies 401/403/503 and returns -1 with the MHD result in *denied. */
int srv_auth_check(struct srv_request *req, enum MHD_Result *denied);

struct db_conn;
/* Who API token `token` stands for, as srv_auth_check decides it (through the token cache):
 * fills *who and returns 1, 0 for an unknown or revoked token, or an error. Runs on `c`, or on a
 * pooled connection when c is NULL. For callers other than HTTP requests (the stream thread). */
int srv_auth_token(struct srv *srv, struct db_conn *c, const char *token, struct srv_identity *who);

/* True when `who` may change a job owned by `owner` (admins: any job; users: their own). */
bool srv_auth_may_modify(const struct srv_identity *who, const char *owner);

enum srv_job_access { SRV_JOB_NOT_FOUND, SRV_JOB_FORBIDDEN, SRV_JOB_ALLOWED };
/* Whether `who` may change job `id`: looks up its owner and applies srv_auth_may_modify.
 * Returns a db_qs; *access is set when it is not negative. */
int srv_auth_job_access(struct db_conn *c, const struct srv_identity *who, int64_t id,
                        enum srv_job_access *access);

enum srv_use_access { SRV_USE_NOT_FOUND, SRV_USE_FORBIDDEN, SRV_USE_ALLOWED };
/* may_use_package: whether `who` may name code package `sha256` in a job spec (code_package or
 * resume_from_package): it is stored, and `who` (a user or admin) may use it (ty_package_usable:
 * an admin, one of the users who uploaded its bytes, a member of a project with a job that names
 * it). The one place that decides it. Returns a db_qs; *access is set when it is not negative. */
int srv_auth_package_use(struct db_conn *c, const struct srv_identity *who, const char *sha256,
                         enum srv_use_access *access);
/* may_use_checkpoint: whether `who` may resume from checkpoint `ckpt` (resume_from_checkpoint):
 * it exists and `who` may see its job (else NOT_FOUND), and `who` (a user or admin) may use it
 * (ty_checkpoint_usable: an admin, the job's owner, a member of its project). Returns a db_qs;
 * *access is set when it is not negative. */
int srv_auth_checkpoint_use(struct db_conn *c, const struct srv_identity *who, int64_t ckpt,
                            enum srv_use_access *access);

/* What a job or sweep spec names besides checkpoints, checked before it is stored: its code
 * package (NULL: none; srv_auth_package_use into *code) and its project (NULL: the shared
 * default; *no_project set when `who` may see no project of that name). Returns a db_qs: 0 when
 * one was refused (*code is not ALLOWED, or *no_project), 1 when both may be used. */
int srv_auth_spec_refs(struct db_conn *c, const struct srv_identity *who, const char *code_package,
                       enum srv_use_access *code, const char *project, bool *no_project);

/* On the first start (no admin token in the database), issues an admin token and writes it to
 * <data_dir>/admin.token with mode 0600. Returns 0 or -1. */
int srv_auth_bootstrap(struct srv *srv);

#endif
