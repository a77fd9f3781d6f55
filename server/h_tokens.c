/* POST/GET /api/v1/tokens and DELETE /api/v1/tokens/{id} (admin only): the three token
 * endpoints share their validation and live together. */
#include "auth.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum MHD_Result h_tokens_create(struct srv_request *req)
{
    enum MHD_Result ret;
    json_t *in = srv_body_json(req, &ret);
    if (in == NULL)
        return ret;
    json_t *errors = json_array();
    const char *key;
    json_t *value;
    json_object_foreach(in, key, value)
    {
        if (strcmp(key, "name") != 0 && strcmp(key, "role") != 0)
            json_array_append_new(errors,
                                  json_pack("{s:s, s:s}", "field", key, "detail", "unknown field"));
    }
    const char *name = json_string_value(json_object_get(in, "name"));
    const char *role = json_string_value(json_object_get(in, "role"));
    enum srv_role r;
    if (name == NULL || strlen(name) == 0 || strlen(name) > 128)
        json_array_append_new(errors, json_pack("{s:s, s:s}", "field", "name", "detail",
                                                "is required: a string of 1 to 128 bytes"));
    if (srv_role_from_string(role, &r) != 0)
        json_array_append_new(errors, json_pack("{s:s, s:s}", "field", "role", "detail",
                                                "must be admin, user or viewer"));
    if (json_array_size(errors) > 0) {
        json_decref(in);
        return srv_reply_problem(req, SRV_P_INVALID_BODY, errors, "invalid token request");
    }
    json_decref(errors);
    char token[44], hash[65];
    char *json = NULL;
    int qs = DB_HARD_ERROR;
    if (srv_auth_new_token(token, hash) == 0) {
        struct db_conn *c = db_acquire(req->srv->db);
        qs = c ? store_token_insert(c, name, role, hash, &json) : DB_SOFT_ERROR;
        db_release(req->srv->db, c);
    }
    json_decref(in);
    if (qs <= 0)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    json_t *out = json_loads(json, 0, NULL);
    free(json);
    json_object_set_new(out, "token", json_string(token));
    return srv_reply_json(req, MHD_HTTP_CREATED, out);
}

enum MHD_Result h_tokens_list(struct srv_request *req)
{
    struct db_conn *c = db_acquire(req->srv->db);
    char *list = NULL;
    int qs = c ? store_token_list(c, &list) : DB_SOFT_ERROR;
    db_release(req->srv->db, c);
    if (qs <= 0)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    return srv_reply_wrapped(req, "tokens", list);
}

enum MHD_Result h_tokens_delete(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_problem(req, SRV_P_TOKEN_NOT_FOUND, NULL, "'%s' is not a token id",
                                 req->args[0]);
    struct db_conn *c = db_acquire(req->srv->db);
    int qs = c ? store_token_revoke(c, id) : DB_SOFT_ERROR;
    db_release(req->srv->db, c);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_TOKEN_NOT_FOUND, NULL, "there is no token %lld",
                                 (long long)id);
    return srv_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
