/* Bearer tokens: only their SHA-256 is stored; roles admin > user > viewer. */
#include "auth.h"

#include "cache.h"
#include "db.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const role_names[] = {"none", "viewer", "user", "admin"};

const char *srv_role_name(enum srv_role role)
{
    return role_names[role];
}

int srv_role_from_string(const char *name, enum srv_role *out)
{
    for (int i = SRV_ROLE_VIEWER; i <= SRV_ROLE_ADMIN; i++) {
        if (name && strcmp(name, role_names[i]) == 0) {
            *out = (enum srv_role)i;
            return 0;
        }
    }
    return -1;
}

bool srv_auth_may_modify(const struct srv_identity *who, const char *owner)
{
    if (who->role == SRV_ROLE_ADMIN)
        return true;
    return who->role == SRV_ROLE_USER && strcmp(who->name, owner) == 0;
}

int srv_auth_new_token(char token[44], char hash[65])
{
    unsigned char raw[20];
    if (ty_random_bytes(raw, sizeof(raw)) != 0)
        return -1;
    memcpy(token, "ty_", 3);
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(token + 3 + 2 * i, 3, "%02x", raw[i]);
    ty_sha256_hex(token, strlen(token), hash);
    return 0;
}

/* Token hash → identity, through the token cache. Returns a db_qs (1 found, 0 unknown). */
static int lookup_token(struct srv *srv, const char *hash, struct srv_identity *who)
{
    uint64_t gen = db_generation(srv->db);
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
    struct db_conn *c = db_acquire(srv->db);
    int qs = c ? store_token_lookup(c, hash, who) : DB_SOFT_ERROR;
    db_release(srv->db, c);
    if (qs == 1) {
        char value[200];
        int n = snprintf(value, sizeof(value), "%d %lld %s", (int)who->role,
                         (long long)who->token_id, who->name);
        cache_put(srv->token_cache, hash, gen, value, (size_t)n);
    }
    return qs;
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
    char hash[65];
    ty_sha256_hex(h + 7, strlen(h + 7), hash);
    int qs = lookup_token(req->srv, hash, &req->who);
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
    return 0;
}

int srv_auth_bootstrap(struct srv *srv)
{
    if (srv->cfg.auth_mode == SRV_AUTH_NONE) {
        TY_WARN("auth", "--auth none: every request is treated as an admin's");
        return 0;
    }
    struct db_conn *c = db_acquire(srv->db);
    if (c == NULL)
        return -1;
    int rc = -1;
    int64_t admins = 0;
    /* Serialise with other servers starting on the same database. */
    if (db_exec_simple(c, "SELECT pg_advisory_lock(7468797901)") < 0)
        goto out;
    if (store_token_count_admins(c, &admins) < 0)
        goto unlock;
    if (admins > 0) {
        rc = 0;
        goto unlock;
    }
    char token[44], hash[65], path[4096];
    if (srv_auth_new_token(token, hash) != 0)
        goto unlock;
    snprintf(path, sizeof(path), "%s/admin.token", srv->cfg.data_dir);
    char line[64];
    int len = snprintf(line, sizeof(line), "%s\n", token);
    if (ty_write_file_durable(path, line, (size_t)len, 0600) != 0) {
        TY_ERROR("auth", "cannot write %s: %s", path, strerror(errno));
        goto unlock;
    }
    char *json = NULL;
    if (store_token_insert(c, "admin", "admin", hash, &json) < 0)
        goto unlock;
    free(json);
    TY_INFO("auth", "first start: admin API token written to %s (mode 0600)", path);
    rc = 0;
unlock:
    db_exec_simple(c, "SELECT pg_advisory_unlock(7468797901)");
out:
    db_release(srv->db, c);
    return rc;
}
