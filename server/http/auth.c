/* Bearer tokens: only their SHA-256 is stored; roles admin > user > viewer. */
#include "auth.h"

#include "cache.h"
#include "db.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "token.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool srv_auth_may_modify(const struct srv_identity *who, const char *owner)
{
    if (who->role == SRV_ROLE_ADMIN)
        return true;
    return who->role == SRV_ROLE_USER && strcmp(who->name, owner) == 0;
}

int srv_auth_job_access(struct db_conn *c, const struct srv_identity *who, int64_t id,
                        enum srv_job_access *access)
{
    char *owner = NULL;
    int qs = store_job_owner(c, id, &owner);
    if (qs >= 0)
        *access = qs == 0 || owner == NULL          ? SRV_JOB_NOT_FOUND
                  : srv_auth_may_modify(who, owner) ? SRV_JOB_ALLOWED
                                                    : SRV_JOB_FORBIDDEN;
    free(owner);
    return qs;
}

int srv_auth_package_use(struct db_conn *c, const struct srv_identity *who, const char *sha256,
                         enum srv_use_access *access)
{
    struct store_code code;
    int qs = store_code_get(c, sha256, &code);
    if (qs <= 0) {
        if (qs == 0)
            *access = SRV_USE_NOT_FOUND;
        return qs;
    }
    bool usable = false;
    if (who->role >= SRV_ROLE_USER) {
        int uq = store_code_usable(c, who, sha256, &usable);
        if (uq < 0)
            return uq;
    }
    *access = usable ? SRV_USE_ALLOWED : SRV_USE_FORBIDDEN;
    return qs;
}

int srv_auth_spec_refs(struct db_conn *c, const struct srv_identity *who, const char *code_package,
                       enum srv_use_access *code, const char *project, bool *no_project)
{
    if (code_package) {
        int qs = srv_auth_package_use(c, who, code_package, code);
        if (qs < 0 || *code != SRV_USE_ALLOWED)
            return qs < 0 ? qs : 0;
    }
    if (project) {
        enum store_project_access access;
        int qs = store_project_access(c, who, project, &access);
        if (qs < 0)
            return qs;
        *no_project = access == STORE_PROJECT_NOT_FOUND;
        if (*no_project)
            return 0;
    }
    return 1;
}

int srv_auth_checkpoint_use(struct db_conn *c, const struct srv_identity *who, int64_t ckpt,
                            enum srv_use_access *access)
{
    bool usable = false;
    int qs = store_checkpoint_usable(c, who, ckpt, &usable);
    if (qs >= 0)
        *access = qs == 0                                ? SRV_USE_NOT_FOUND
                  : usable && who->role >= SRV_ROLE_USER ? SRV_USE_ALLOWED
                                                         : SRV_USE_FORBIDDEN;
    return qs;
}

struct token_query {
    const char *hash;
    struct srv_identity *who;
};

static int lookup_in_store(struct db_conn *c, void *arg)
{
    struct token_query *q = arg;
    return store_token_lookup(c, q->hash, q->who);
}

/* Token hash → identity, through the token cache; on `c`, or on a pooled connection when c is
 * NULL. Returns a db_qs (1 found, 0 unknown). */
static int lookup_token(struct srv *srv, struct db_conn *c, const char *hash,
                        struct srv_identity *who)
{
    uint64_t gen = db_token_generation(srv->db);
    size_t len;
    char *hit = cache_get(srv->token_cache, hash, gen, &len);
    if (hit) {
        /* "<role digit> <token id> <name>" */
        char *end = NULL;
        who->role = (enum srv_role)strtol(hit, &end, 10);
        who->token_id = strtoll(end, &end, 10);
        snprintf(who->name, sizeof(who->name), "%s", end + 1);
        free(hit);
        return 1;
    }
    struct token_query q = {hash, who};
    int qs = c ? lookup_in_store(c, &q) : db_with_conn(srv->db, lookup_in_store, &q);
    if (qs == 1) {
        char value[200];
        int n = snprintf(value, sizeof(value), "%d %lld %s", (int)who->role,
                         (long long)who->token_id, who->name);
        cache_put(srv->token_cache, hash, gen, value, (size_t)n);
    }
    return qs;
}

int srv_auth_token(struct srv *srv, struct db_conn *c, const char *token, struct srv_identity *who)
{
    char hash[65];
    util_sha256_hex(token, strlen(token), hash);
    return lookup_token(srv, c, hash, who);
}

/* Which job a route reads or changes: every route under /api/v1/jobs/{id} is about job {id},
 * every one under /api/v1/checkpoints/{id} about the job of checkpoint {id} (routes.c). */
enum job_scope { SCOPE_NONE, SCOPE_JOB, SCOPE_CHECKPOINT };

static bool pattern_under(const char *pattern, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(pattern, prefix, n) == 0 && (pattern[n] == '\0' || pattern[n] == '/');
}

static enum job_scope route_scope(const struct srv_route *route)
{
    if (pattern_under(route->pattern, "/api/v1/jobs/{id}"))
        return SCOPE_JOB;
    if (pattern_under(route->pattern, "/api/v1/checkpoints/{id}"))
        return SCOPE_CHECKPOINT;
    return SCOPE_NONE;
}

struct visibility_query {
    const struct srv_identity *who;
    enum job_scope scope;
    int64_t id;
    bool visible;
};

static int visibility_query(struct db_conn *c, void *arg)
{
    struct visibility_query *q = arg;
    return q->scope == SCOPE_JOB ? store_job_visible(c, q->who, q->id, &q->visible)
                                 : store_checkpoint_visible(c, q->who, q->id, &q->visible);
}

/* Projects (issue 22): a job of a private project is seen by its members and admins only. To
 * everyone else each route about it answers the 404 it gives for a job (or checkpoint) that does
 * not exist, word for word, so that its existence is not revealed. An id that does not parse or
 * names nothing is left to the handler. 0: go on; -1: *denied holds the reply. */
static int job_visibility_check(struct srv_request *req, enum MHD_Result *denied)
{
    struct visibility_query q = {&req->who, route_scope(req->route), 0, true};
    if (q.scope == SCOPE_NONE || req->who.role == SRV_ROLE_ADMIN || srv_arg_id(req, 0, &q.id) != 0)
        return 0;
    int qs = db_with_conn(req->srv->db, visibility_query, &q);
    if (qs < 0) {
        *denied = srv_reply_db_error(req, qs);
        return -1;
    }
    if (qs == 0 || q.visible)
        return 0;
    *denied = q.scope == SCOPE_JOB
                  ? srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                      (long long)q.id)
                  : srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "there is no checkpoint %lld",
                                      (long long)q.id);
    return -1;
}

int srv_auth_check(struct srv_request *req, enum MHD_Result *denied)
{
    const struct srv_route *route = req->route;
    if (req->srv->cfg.auth_mode == SRV_AUTH_NONE) {
        req->who.role = SRV_ROLE_ADMIN;
        snprintf(req->who.name, sizeof(req->who.name), "local");
        return 0;
    }
    if (route->min_role == SRV_ROLE_NONE)
        return 0;
    const char *h =
        MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0') {
        *denied = srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL,
                                    "send an API token as 'Authorization: Bearer <token>'");
        return -1;
    }
    int qs = srv_auth_token(req->srv, NULL, h + 7, &req->who);
    if (qs < 0) {
        *denied = srv_reply_problem(req, SRV_P_DATABASE_UNAVAILABLE, NULL,
                                    "cannot check the token: the database is unavailable");
        return -1;
    }
    if (qs == 0) {
        *denied =
            srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL, "the API token is unknown or revoked");
        return -1;
    }
    if (req->who.role < route->min_role) {
        *denied = srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                    "%s %s needs the %s role; token '%s' has role %s", req->method,
                                    req->url, srv_role_name(route->min_role), req->who.name,
                                    srv_role_name(req->who.role));
        return -1;
    }
    return job_visibility_check(req, denied);
}

/* Issues the first admin token unless one exists (see srv_auth_bootstrap); under the first-start
 * lock. Returns 0 or -1. */
static int bootstrap_locked(struct srv *srv, struct db_conn *c)
{
    int64_t admins = 0;
    if (store_token_count_admins(c, &admins) < 0)
        return -1;
    if (admins > 0)
        return 0;
    char token[SRV_TOKEN_MAX], hash[65], path[4096];
    if (srv_token_mint("ty_", token, sizeof(token), hash) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/admin.token", srv->cfg.data_dir);
    char line[64];
    int len = snprintf(line, sizeof(line), "%s\n", token);
    if (util_write_file_durable(path, line, (size_t)len, 0600) != 0) {
        TY_ERROR("auth", "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    char *json = NULL;
    if (store_token_insert(c, "admin", "admin", hash, &json) < 0)
        return -1;
    free(json);
    TY_INFO("auth", "first start: admin API token written to %s (mode 0600)", path);
    return 0;
}

static int bootstrap(struct db_conn *c, void *arg)
{
    if (store_bootstrap_lock(c) < 0)
        return -1;
    int rc = bootstrap_locked(arg, c);
    store_bootstrap_unlock(c);
    return rc;
}

int srv_auth_bootstrap(struct srv *srv)
{
    if (srv->cfg.auth_mode == SRV_AUTH_NONE) {
        TY_WARN("auth", "--auth none: every request is treated as an admin's");
        return 0;
    }
    return db_with_conn(srv->db, bootstrap, srv) == 0 ? 0 : -1;
}
