/* POST/GET /api/v1/tokens and DELETE /api/v1/tokens/{id} (admin only): the three token
 * endpoints share their validation and live together. */
#include "auth.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"
#include "token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One token query: its arguments and its JSON text result. */
struct token_query {
    const char *name, *role, *hash;
    int64_t id;
    char *json;
    bool name_taken; /* out of token_insert: nothing was inserted */
};

/* Inserts the token unless a live token has its name (jobs are owned by name). */
static int token_insert(struct db_conn *c, void *arg)
{
    struct token_query *a = arg;
    int qs = store_token_name_taken(c, a->name);
    if (qs != 0) {
        a->name_taken = qs > 0;
        return qs > 0 ? 0 : qs;
    }
    return store_token_insert(c, a->name, a->role, a->hash, &a->json);
}

static int token_list(struct db_conn *c, void *arg)
{
    struct token_query *a = arg;
    return store_token_list(c, &a->json);
}

static int token_revoke(struct db_conn *c, void *arg)
{
    struct token_query *a = arg;
    return store_token_revoke(c, a->id);
}

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
    char token[SRV_TOKEN_MAX], hash[65];
    struct token_query a = {.name = name, .role = role, .hash = hash};
    int qs = DB_HARD_ERROR;
    if (srv_token_mint("ty_", token, sizeof(token), hash) == 0)
        qs = db_with_conn(req->srv->db, token_insert, &a);
    if (a.name_taken) {
        json_t *errs = json_pack("[{s:s, s:s}]", "field", "name", "detail",
                                 "a live token already has this name (it owns that name's jobs)");
        enum MHD_Result r = srv_reply_problem(req, SRV_P_TOKEN_NAME_TAKEN, errs,
                                              "a live token is already named '%s'", a.name);
        json_decref(in); /* a.name points into it */
        return r;
    }
    json_decref(in);
    if (qs <= 0)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    json_t *out = json_loads(a.json, 0, NULL);
    free(a.json);
    json_object_set_new(out, "token", json_string(token));
    return srv_reply_json(req, MHD_HTTP_CREATED, out);
}

enum MHD_Result h_tokens_list(struct srv_request *req)
{
    struct token_query a = {0};
    int qs = db_with_conn(req->srv->db, token_list, &a);
    if (qs <= 0)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    return srv_reply_wrapped(req, "tokens", a.json);
}

enum MHD_Result h_tokens_delete(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_problem(req, SRV_P_TOKEN_NOT_FOUND, NULL, "'%s' is not a token id",
                                 req->args[0]);
    int qs = db_with_conn(req->srv->db, token_revoke, &(struct token_query){.id = id});
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_TOKEN_NOT_FOUND, NULL, "there is no token %lld",
                                 (long long)id);
    return srv_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
