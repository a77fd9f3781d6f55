/* POST/GET /api/v1/projects, GET/DELETE /api/v1/projects/{name}, POST
 * /api/v1/projects/{name}/members, DELETE /api/v1/projects/{name}/members/{user} (issue 22). A
 * private project's jobs are seen by its members and admins only; a project the caller may not
 * see answers 404, as one that does not exist (store_projects.c). Users create projects and are
 * members of what they create; members and admins add and remove members and delete a project
 * that has no jobs. */
#include "db.h"
#include "handlers.h"
#include "jobspec.h"
#include "server.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMBERS_MAX 1000
#define MEMBER_NAME_MAX 128 /* token names */

struct project_query {
    const struct srv_identity *who;
    const char *name, *visibility, *members, *member;
    char *json;
    bool taken;                       /* create: the name is in use */
    enum store_project_access access; /* add/remove member, delete: what who may do */
    enum store_member_removal removal;
    int64_t jobs; /* delete: the jobs that keep it */
};

static int project_create(struct db_conn *c, void *arg)
{
    struct project_query *a = arg;
    int qs = store_project_create(c, a->name, a->visibility, a->who->name, a->members);
    if (qs == 0)
        a->taken = true;
    if (qs <= 0)
        return qs;
    return store_project_get(c, a->who, a->name, &a->json);
}

static int project_get(struct db_conn *c, void *arg)
{
    struct project_query *a = arg;
    return store_project_get(c, a->who, a->name, &a->json);
}

static int project_list(struct db_conn *c, void *arg)
{
    struct project_query *a = arg;
    return store_project_list(c, a->who, &a->json);
}

static int project_add_member(struct db_conn *c, void *arg)
{
    struct project_query *a = arg;
    int qs = store_project_access(c, a->who, a->name, &a->access);
    if (qs <= 0 || a->access != STORE_PROJECT_MEMBER)
        return qs;
    qs = store_project_add_member(c, a->name, a->member, a->who->name);
    if (qs < 0)
        return qs;
    return store_project_get(c, a->who, a->name, &a->json);
}

static int project_remove_member(struct db_conn *c, void *arg)
{
    struct project_query *a = arg;
    int qs = store_project_access(c, a->who, a->name, &a->access);
    if (qs <= 0 || a->access != STORE_PROJECT_MEMBER)
        return qs;
    qs = store_project_remove_member(c, a->name, a->member, &a->removal);
    if (qs <= 0 || a->removal != STORE_MEMBER_REMOVED)
        return qs;
    qs = store_project_get(c, a->who, a->name, &a->json);
    return qs == 0 ? 1 : qs; /* 0: who left a private project and no longer sees it */
}

static int project_delete(struct db_conn *c, void *arg)
{
    struct project_query *a = arg;
    int qs = store_project_access(c, a->who, a->name, &a->access);
    if (qs <= 0 || a->access != STORE_PROJECT_MEMBER)
        return qs;
    return store_project_delete(c, a->name, &a->jobs);
}

static void field_error(json_t *errors, const char *field, const char *detail)
{
    json_array_append_new(errors, json_pack("{s:s, s:s}", "field", field, "detail", detail));
}

static bool member_name_ok(const char *s)
{
    return s && s[0] != '\0' && strlen(s) <= MEMBER_NAME_MAX;
}

/* The 404 for a project the caller may not see or that does not exist: the same words. */
static enum MHD_Result reply_no_project(struct srv_request *req, const char *name)
{
    return srv_reply_problem(req, SRV_P_PROJECT_NOT_FOUND, NULL, "there is no project '%s'", name);
}

/* The body's members (token names) with the creator added, as a JSON array text (malloc'd), or
 * NULL after recording the problem in errors. */
static char *members_json(json_t *members, const char *creator, json_t *errors)
{
    if (members && !json_is_array(members)) {
        field_error(errors, "members", "must be an array of token names");
        return NULL;
    }
    if (json_array_size(members) > MEMBERS_MAX) {
        field_error(errors, "members", "must have at most 1000 entries");
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(members, i, m)
    {
        if (!member_name_ok(json_string_value(m))) {
            field_error(errors, "members", "each member must be a token name of 1 to 128 bytes");
            json_decref(out);
            return NULL;
        }
        json_array_append(out, m);
    }
    json_array_append_new(out, json_string(creator));
    char *text = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return text;
}

enum MHD_Result h_projects_create(struct srv_request *req)
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
        if (strcmp(key, "name") != 0 && strcmp(key, "visibility") != 0 &&
            strcmp(key, "members") != 0)
            field_error(errors, key, "unknown field");
    }
    json_t *name_v = json_object_get(in, "name");
    const char *name = json_string_value(name_v);
    const char *why = name ? jobspec_project_name_problem(name) : "is required: a string";
    if (why)
        field_error(errors, "name", why);
    json_t *vis_v = json_object_get(in, "visibility");
    const char *vis = vis_v && !json_is_null(vis_v) ? json_string_value(vis_v) : "private";
    if (vis == NULL || (strcmp(vis, "private") != 0 && strcmp(vis, "shared") != 0)) {
        field_error(errors, "visibility", "must be \"private\" or \"shared\"");
        vis = NULL;
    }
    json_t *members = json_object_get(in, "members");
    char *mjson = members_json(json_is_null(members) ? NULL : members, req->who.name, errors);
    if (json_array_size(errors) > 0) {
        free(mjson);
        json_t *first = json_array_get(errors, 0);
        char detail[320];
        snprintf(detail, sizeof(detail), "invalid project: %s %s",
                 json_string_value(json_object_get(first, "field")),
                 json_string_value(json_object_get(first, "detail")));
        json_decref(in);
        return srv_reply_problem(req, SRV_P_INVALID_BODY, errors, "%s", detail);
    }
    json_decref(errors);
    struct project_query a = {.who = &req->who, .name = name, .visibility = vis, .members = mjson};
    int qs = db_with_conn(req->srv->db, project_create, &a);
    free(mjson);
    enum MHD_Result r;
    if (a.taken)
        r = srv_reply_problem(req, SRV_P_PROJECT_EXISTS, NULL, "project '%s' already exists", name);
    else if (qs <= 0)
        r = srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    else {
        char location[128];
        snprintf(location, sizeof(location), "/api/v1/projects/%s", name);
        r = srv_reply_steal(req, MHD_HTTP_CREATED, "application/json", a.json, strlen(a.json),
                            location);
    }
    json_decref(in);
    return r;
}

enum MHD_Result h_projects_list(struct srv_request *req)
{
    struct project_query a = {.who = &req->who};
    int qs = db_with_conn(req->srv->db, project_list, &a);
    if (qs <= 0)
        return srv_reply_db_error(req, qs < 0 ? qs : DB_HARD_ERROR);
    return srv_reply_wrapped(req, "projects", a.json);
}

enum MHD_Result h_projects_get(struct srv_request *req)
{
    const char *name = req->args[0];
    if (jobspec_project_name_problem(name))
        return reply_no_project(req, name);
    struct project_query a = {.who = &req->who, .name = name};
    int qs = db_with_conn(req->srv->db, project_get, &a);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return reply_no_project(req, name);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", a.json, strlen(a.json), NULL);
}

enum MHD_Result h_projects_add_member(struct srv_request *req)
{
    const char *name = req->args[0];
    if (jobspec_project_name_problem(name))
        return reply_no_project(req, name);
    enum MHD_Result ret;
    json_t *in = srv_body_json(req, &ret);
    if (in == NULL)
        return ret;
    const char *key;
    json_t *value;
    json_object_foreach(in, key, value)
    {
        if (strcmp(key, "user") != 0) {
            enum MHD_Result r =
                srv_reply_field_problem(req, SRV_P_INVALID_BODY, key, "unknown field");
            json_decref(in);
            return r;
        }
    }
    const char *user = json_string_value(json_object_get(in, "user"));
    if (!member_name_ok(user)) {
        json_decref(in);
        return srv_reply_field_problem(req, SRV_P_INVALID_BODY, "user",
                                       "is required: a token name of 1 to 128 bytes");
    }
    struct project_query a = {.who = &req->who, .name = name, .member = user};
    int qs = db_with_conn(req->srv->db, project_add_member, &a);
    json_decref(in);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (a.access == STORE_PROJECT_NOT_FOUND)
        return reply_no_project(req, name);
    if (a.access == STORE_PROJECT_VISIBLE)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "only members of project '%s' and admins may add members", name);
    if (a.json == NULL)
        return srv_reply_db_error(req, DB_HARD_ERROR);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", a.json, strlen(a.json), NULL);
}

/* Queues the reply for a caller who may not change project `name` (access: what it may do) and
 * returns true; false when it may. A project it cannot see is 404, one it only sees 403. */
static bool refused_change(struct srv_request *req, const char *name,
                           enum store_project_access access, const char *what, enum MHD_Result *res)
{
    if (access == STORE_PROJECT_NOT_FOUND)
        *res = reply_no_project(req, name);
    else if (access == STORE_PROJECT_VISIBLE)
        *res = srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "only members of project '%s' and admins may %s", name, what);
    else
        return false;
    return true;
}

enum MHD_Result h_projects_remove_member(struct srv_request *req)
{
    const char *name = req->args[0], *user = req->args[1];
    if (jobspec_project_name_problem(name))
        return reply_no_project(req, name);
    if (!member_name_ok(user))
        return srv_reply_problem(req, SRV_P_INVALID_BODY, NULL,
                                 "the member must be a token name of 1 to 128 bytes");
    struct project_query a = {.who = &req->who, .name = name, .member = user};
    int qs = db_with_conn(req->srv->db, project_remove_member, &a);
    enum MHD_Result r;
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (refused_change(req, name, a.access, "remove members", &r))
        return r;
    if (a.removal == STORE_MEMBER_NOT_A_MEMBER)
        return srv_reply_problem(req, SRV_P_MEMBER_NOT_FOUND, NULL,
                                 "'%s' is not a member of project '%s'", user, name);
    if (a.removal == STORE_MEMBER_LAST)
        return srv_reply_problem(req, SRV_P_PROJECT_LAST_MEMBER, NULL,
                                 "'%s' is the last member of private project '%s': add another "
                                 "member first, or delete the project",
                                 user, name);
    if (a.json == NULL) /* the caller left a private project */
        return srv_reply_empty(req, MHD_HTTP_NO_CONTENT);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", a.json, strlen(a.json), NULL);
}

enum MHD_Result h_projects_delete(struct srv_request *req)
{
    const char *name = req->args[0];
    if (jobspec_project_name_problem(name))
        return reply_no_project(req, name);
    if (strcmp(name, "default") == 0)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "project 'default' cannot be deleted: jobs without a project "
                                 "belong to it");
    struct project_query a = {.who = &req->who, .name = name};
    int qs = db_with_conn(req->srv->db, project_delete, &a);
    enum MHD_Result r;
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (refused_change(req, name, a.access, "delete it", &r))
        return r;
    if (a.jobs > 0)
        return srv_reply_problem(req, SRV_P_PROJECT_NOT_EMPTY, NULL,
                                 "project '%s' has %lld job%s: delete them first (DELETE "
                                 "/api/v1/jobs/{id})",
                                 name, (long long)a.jobs, a.jobs == 1 ? "" : "s");
    return srv_reply_empty(req, MHD_HTTP_NO_CONTENT);
}
