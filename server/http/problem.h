/* The registry of every error the REST API returns: code, HTTP status and short title. Each reply
 * is an RFC 9457 application/problem+json body:
 *   {"type": "urn:trainyard:problem:<slug>", "title": ..., "status": ..., "detail": ...,
 *    "code": "<slug>", "errors": [{"field": ..., "detail": ...}]}   (errors: only when fields are
 * at fault) */
#ifndef SRV_PROBLEM_H
#define SRV_PROBLEM_H

#define SRV_PROBLEM_MAP(X)                                                                         \
    X(BAD_REQUEST, 400, "bad-request", "Bad request")                                              \
    X(INVALID_JSON, 400, "invalid-json", "Malformed JSON body")                                    \
    X(INVALID_SPEC, 400, "invalid-job-spec", "Invalid job specification")                          \
    X(INVALID_PARAMETER, 400, "invalid-parameter", "Invalid query parameter")                      \
    X(INVALID_BODY, 400, "invalid-body", "Invalid request body")                                   \
    X(UNAUTHORIZED, 401, "unauthorized", "Authentication required")                                \
    X(FORBIDDEN, 403, "forbidden", "Not allowed")                                                  \
    X(NOT_FOUND, 404, "not-found", "No such route")                                                \
    X(JOB_NOT_FOUND, 404, "job-not-found", "Job not found")                                        \
    X(NODE_NOT_FOUND, 404, "node-not-found", "Node not found")                                     \
    X(TOKEN_NOT_FOUND, 404, "token-not-found", "Token not found")                                  \
    X(PROJECT_NOT_FOUND, 404, "project-not-found", "Project not found")                            \
    X(PROJECT_EXISTS, 409, "project-exists", "Project name already in use")                        \
    X(PROJECT_NOT_EMPTY, 409, "project-not-empty", "Project still has jobs")                       \
    X(PROJECT_LAST_MEMBER, 409, "project-last-member", "Last member of a private project")         \
    X(MEMBER_NOT_FOUND, 404, "member-not-found", "Not a member of the project")                    \
    X(METHOD_NOT_ALLOWED, 405, "method-not-allowed", "Method not allowed")                         \
    X(JOB_NOT_FINISHED, 409, "job-not-finished", "Job has not finished")                           \
    X(JOB_FINISHED, 409, "job-finished", "Job has already finished")                               \
    X(BODY_TOO_LARGE, 413, "body-too-large", "Request body too large")                             \
    X(UNSUPPORTED_MEDIA_TYPE, 415, "unsupported-media-type", "Unsupported content type")           \
    X(CHECKPOINT_NOT_FOUND, 422, "checkpoint-not-found", "Checkpoint not found")                   \
    X(INTERNAL, 500, "internal", "Internal server error")                                          \
    X(DATABASE_UNAVAILABLE, 503, "database-unavailable", "Database unavailable")                   \
    X(CHECKPOINT_FORBIDDEN, 403, "checkpoint-forbidden", "Checkpoint of another user's job")       \
    X(IDEMPOTENCY_CONFLICT, 409, "idempotency-key-reused",                                         \
      "Idempotency-Key already used for another job spec")                                         \
    X(TOKEN_NAME_TAKEN, 409, "token-name-taken", "Token name already in use")                      \
    X(UPLOAD_OFFSET, 409, "upload-offset", "Upload offset is not where the stored bytes end")      \
    X(UPLOAD_BUSY, 409, "upload-busy", "Another request is writing this upload")                   \
    X(UPLOAD_CORRUPT, 422, "upload-corrupt", "Uploaded bytes do not match their SHA-256")          \
    X(ARTIFACT_STORE_FAILED, 507, "artifact-store-failed", "The artifact store could not write")   \
    X(ARCHIVE_NOT_READY, 409, "archive-not-ready", "Checkpoint not (yet) in the artifact store")   \
    X(CHECKPOINT_DELETED, 410, "checkpoint-deleted", "Checkpoint deleted by retention")            \
    X(RANGE_NOT_SATISFIABLE, 416, "range-not-satisfiable", "Range not satisfiable")                \
    X(CODE_PACKAGE_NOT_FOUND, 422, "code-package-not-found", "Code package not uploaded")          \
    X(PACKAGE_FORBIDDEN, 403, "package-forbidden", "Package uploaded by another user")             \
    X(ARTIFACT_QUOTA, 403, "artifact-quota-exceeded", "Artifact store quota exceeded")             \
    X(INVALID_SWEEP, 400, "invalid-sweep", "Invalid sweep")                                        \
    X(SWEEP_NOT_FOUND, 404, "sweep-not-found", "Sweep not found")                                  \
    X(SWEEP_FINISHED, 409, "sweep-finished", "Sweep has already finished")

enum srv_problem {
#define X(name, status, slug, title) SRV_P_##name,
    SRV_PROBLEM_MAP(X)
#undef X
};

unsigned srv_problem_status(enum srv_problem p);
const char *srv_problem_slug(enum srv_problem p);
const char *srv_problem_title(enum srv_problem p);

#endif
