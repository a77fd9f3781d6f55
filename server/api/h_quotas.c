/* The quotas of a user or a project (migrations/0030_quotas.sql):
 *   GET /api/v1/quotas/users/{name}   the user's own, or any with an admin token
 *   PUT /api/v1/quotas/users/{name}   admin: any of {"artifact_bytes", "cpus", "gpus"}, each an
 *                                     integer >= 0 (0: unlimited) or null (back to the server's
 *                                     --artifact-quota-bytes, --max-cpus-per-user,
 *                                     --max-gpus-per-user); fields left out keep their value
 *   GET /api/v1/quotas/projects/{name}  the project's members, or an admin; 404 for a project
 *                                       the caller may not see (as for one that does not exist)
 *   PUT /api/v1/quotas/projects/{name}  admin: the same body; null is no project limit (projects
 *                                       have no server default)
 * All answer {"subject_kind": "user" or "project", "subject", "artifact_bytes": {"limit", "used",
 * "default"}, "cpus": {...}, "gpus": {...}}: "default" says the limit is the server's option, not
 * the subject's own (for a project: 0, no limit); "used" counts what the artifact store keeps and
 * what the subject's live workers hold (CPUs may be fractional). A project counts the checkpoint
 * parts of its jobs only: code packages belong to the users who upload them. */
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <string.h>

struct quota_call {
    enum store_quota_kind kind;
    const char *subject;
    const struct srv_identity *who; /* projects: whom to check access for */
    enum store_project_access access;
    const struct srv_config *cfg;
    const struct store_quota_change *change; /* NULL: only read */
    int64_t bytes_used, bytes_limit, cpu_milli, gpus, own_cpus, own_gpus;
    bool own_bytes;
};

/* The server's defaults for the subject: a user's options; none for a project. */
static int64_t dflt_bytes(const struct quota_call *q)
{
    return q->kind == STORE_QUOTA_USER ? q->cfg->artifact_quota_bytes : 0;
}

static int64_t dflt_cpus(const struct quota_call *q)
{
    return q->kind == STORE_QUOTA_USER ? q->cfg->max_cpus_per_user : 0;
}

static int64_t dflt_gpus(const struct quota_call *q)
{
    return q->kind == STORE_QUOTA_USER ? q->cfg->max_gpus_per_user : 0;
}

static int quota_body(struct db_conn *c, void *arg)
{
    struct quota_call *q = arg;
    if (q->kind == STORE_QUOTA_PROJECT) {
        int qs = store_project_access(c, q->who, q->subject, &q->access);
        if (qs <= 0 || q->access != STORE_PROJECT_MEMBER)
            return qs;
    }
    if (q->change) {
        int qs = store_quota_set(c, q->kind, q->subject, q->change);
        if (qs < 0)
            return qs;
    }
    int qs = store_artifact_quota(c, q->kind, q->subject, dflt_bytes(q), &q->bytes_used,
                                  &q->bytes_limit, &q->own_bytes);
    if (qs < 0)
        return qs;
    return store_quota_running(c, q->kind, q->subject, &q->cpu_milli, &q->gpus, &q->own_cpus,
                               &q->own_gpus);
}

static json_t *limit_json(int64_t own, int64_t dflt, json_t *used)
{
    return json_pack("{s:I, s:o, s:b}", "limit", (json_int_t)(own >= 0 ? own : dflt), "used", used,
                     "default", own < 0);
}

static enum MHD_Result reply_quota(struct srv_request *req, struct quota_call *q)
{
    q->cfg = &req->srv->cfg;
    q->who = &req->who;
    int qs = db_with_conn(req->srv->db, quota_body, q);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (q->kind == STORE_QUOTA_PROJECT && q->access == STORE_PROJECT_NOT_FOUND)
        return srv_reply_problem(req, SRV_P_PROJECT_NOT_FOUND, NULL, "there is no project '%s'",
                                 q->subject);
    if (q->kind == STORE_QUOTA_PROJECT && q->access != STORE_PROJECT_MEMBER)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "a project's quotas are read by its members and admins");
    return srv_reply_json(
        req, MHD_HTTP_OK,
        json_pack("{s:s, s:s, s:{s:I, s:I, s:b}, s:o, s:o}", "subject_kind",
                  q->kind == STORE_QUOTA_PROJECT ? "project" : "user", "subject", q->subject,
                  "artifact_bytes", "limit", (json_int_t)q->bytes_limit, "used",
                  (json_int_t)q->bytes_used, "default", !q->own_bytes, "cpus",
                  limit_json(q->own_cpus, dflt_cpus(q), json_real((double)q->cpu_milli / 1000.0)),
                  "gpus",
                  limit_json(q->own_gpus, dflt_gpus(q), json_integer((json_int_t)q->gpus))));
}

enum MHD_Result h_quotas_user_get(struct srv_request *req)
{
    const char *user = req->args[0];
    if (req->who.role < SRV_ROLE_ADMIN && strcmp(user, req->who.name) != 0)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "a user reads their own quotas only (an admin reads any)");
    struct quota_call q = {.kind = STORE_QUOTA_USER, .subject = user};
    return reply_quota(req, &q);
}

/* Reads field `name` of the body into *set and *value (null: -1). 0, or -1 when malformed. */
static int change_field(const json_t *in, const char *name, int64_t max, bool *set, int64_t *value)
{
    const json_t *v = json_object_get(in, name);
    *set = v != NULL;
    *value = -1;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return -1;
    *value = json_integer_value(v);
    return 0;
}

enum MHD_Result h_quotas_project_get(struct srv_request *req)
{
    struct quota_call q = {.kind = STORE_QUOTA_PROJECT, .subject = req->args[0]};
    return reply_quota(req, &q);
}

/* PUT for a user or a project: the body, then the change. */
static enum MHD_Result quota_put(struct srv_request *req, enum store_quota_kind kind)
{
    enum MHD_Result ret;
    json_t *in = srv_body_json(req, &ret);
    if (in == NULL)
        return ret;
    struct store_quota_change ch = {0};
    const char *bad = NULL;
    if (change_field(in, "artifact_bytes", INT64_MAX, &ch.set_artifact_bytes, &ch.artifact_bytes))
        bad = "artifact_bytes";
    else if (change_field(in, "cpus", INT32_MAX, &ch.set_cpus, &ch.cpus))
        bad = "cpus";
    else if (change_field(in, "gpus", INT32_MAX, &ch.set_gpus, &ch.gpus))
        bad = "gpus";
    size_t known = (size_t)ch.set_artifact_bytes + ch.set_cpus + ch.set_gpus;
    bool unknown = json_object_size(in) != known;
    json_decref(in);
    if (bad)
        return srv_reply_field_problem(req, SRV_P_INVALID_BODY, bad,
                                       "an integer >= 0 (0: unlimited), or null for the server's "
                                       "default (a project: no limit)");
    if (unknown || known == 0)
        return srv_reply_problem(req, SRV_P_INVALID_BODY, NULL,
                                 "the body sets one or more of artifact_bytes, cpus, gpus, and "
                                 "nothing else");
    struct quota_call q = {.kind = kind, .subject = req->args[0], .change = &ch};
    return reply_quota(req, &q);
}

enum MHD_Result h_quotas_user_put(struct srv_request *req)
{
    return quota_put(req, STORE_QUOTA_USER);
}

enum MHD_Result h_quotas_project_put(struct srv_request *req)
{
    return quota_put(req, STORE_QUOTA_PROJECT);
}
