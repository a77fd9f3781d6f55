/*
 * cmd_projects.c - project create, list, add-member, remove-member, delete (issue 22): who sees
 * which jobs; project
 * quota, set-quota: the project's limits (GET/PUT /api/v1/quotas/projects/{name}).
 */
#include "api.h"
#include "cli.h"
#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints "project NAME (VISIBILITY), members: A B". */
static void print_project(const json_t *project)
{
    struct strbuf sb = STRBUF_INIT;
    const char *name = json_string_value(json_object_get(project, "name"));
    out_clean(&sb, name ? name : "", name ? strlen(name) : 0);
    printf("project %s (%s), members:", sb_str(&sb),
           json_string_value(json_object_get(project, "visibility")) ?: "?");
    sb_free(&sb);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(project, "members"), i, m)
    {
        const char *s = json_string_value(m);
        struct strbuf ms = STRBUF_INIT;
        out_clean(&ms, s ? s : "", s ? strlen(s) : 0);
        printf(" %s", sb_str(&ms));
        sb_free(&ms);
    }
    putchar('\n');
}

/* Sends `method` to path with `body` (NULL: none) and prints the project it answers; `gone`
 * when it answers none (204: the caller left the project). */
static int project_request(struct cli_ctx *ctx, const char *method, const char *path,
                           const char *body, const char *gone)
{
    json_t *project = NULL;
    int rc = api_json(ctx, method, path, body, body ? strlen(body) : 0, &project);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON && project)
        api_print_json(project);
    else if (project)
        print_project(project);
    else if (ctx->cfg.output != CLI_OUTPUT_JSON && gone)
        printf("%s\n", gone);
    json_decref(project);
    return CLI_EXIT_OK;
}

/* POSTs `req` (taken) to path and prints the project it answers. */
static int post_project(struct cli_ctx *ctx, const char *path, json_t *req)
{
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) /* json_pack fails only on invalid UTF-8 */
        return cli_input_error("the project's name and members must be valid UTF-8");
    int rc = project_request(ctx, "POST", path, body, NULL);
    free(body);
    return rc;
}

int cmd_project_create(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *name = args->pos[0];
    bool priv = args_flag(args, "private") != NULL, shared = args_flag(args, "shared") != NULL;
    if (!name[0])
        return cli_usage_error(ctx, "empty project name");
    if (priv && shared)
        return cli_usage_error(ctx, "--private and --shared exclude each other");
    const char *members[CLI_MAX_VALUES];
    int n = args_flag_values(args, "member", members, CLI_MAX_VALUES);
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        if (!members[i][0]) {
            json_decref(list);
            return cli_usage_error(ctx, "--member must not be empty");
        }
        json_array_append_new(list, json_string(members[i]));
    }
    json_t *req = json_pack("{s:s, s:s, s:o}", "name", name, "visibility",
                            shared ? "shared" : "private", "members", list);
    return post_project(ctx, "/api/v1/projects", req);
}

static const char *const project_headers[] = {"NAME", "VISIBILITY", "MEMBERS", "CREATED BY",
                                              "CREATED"};

int cmd_project_list(struct cli_ctx *ctx, const struct cli_args *args)
{
    (void)args;
    json_t *reply;
    const json_t *projects;
    int rc = api_get_list(ctx, "/api/v1/projects", "projects", &reply, &projects);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
    } else {
        struct out_table t;
        size_t i;
        json_t *p;
        table_init(&t, project_headers, sizeof project_headers / sizeof project_headers[0]);
        json_array_foreach(projects, i, p)
        {
            table_cell_json(&t, json_object_get(p, "name"));
            table_cell_json(&t, json_object_get(p, "visibility"));
            struct strbuf members = STRBUF_INIT;
            size_t k;
            json_t *m;
            json_array_foreach(json_object_get(p, "members"), k, m)
            {
                if (k > 0)
                    sb_puts(&members, ",");
                sb_puts(&members, json_string_value(m) ? json_string_value(m) : "?");
            }
            table_cell(&t, members.len ? sb_str(&members) : "-");
            sb_free(&members);
            table_cell_json(&t, json_object_get(p, "created_by"));
            table_cell_time(&t, json_object_get(p, "created_at"));
        }
        table_print(&t, stdout);
        table_free(&t);
    }
    json_decref(reply);
    return CLI_EXIT_OK;
}

/* "/api/v1/projects/NAME", with "/members/MEMBER" unless member is NULL (each escaped). */
static void project_path(struct cli_ctx *ctx, struct strbuf *path, const char *name,
                         const char *member)
{
    sb_puts(path, "/api/v1/projects/");
    api_path_escaped(ctx, path, name);
    if (member) {
        sb_puts(path, "/members/");
        api_path_escaped(ctx, path, member);
    }
}

int cmd_project_add_member(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *name = args->pos[0], *user = args->pos[1];
    if (!name[0] || !user[0])
        return cli_usage_error(ctx, "empty project name or user");
    struct strbuf path = STRBUF_INIT;
    project_path(ctx, &path, name, NULL);
    sb_puts(&path, "/members");
    int rc = post_project(ctx, sb_str(&path), json_pack("{s:s}", "user", user));
    sb_free(&path);
    return rc;
}

int cmd_project_remove_member(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *name = args->pos[0], *user = args->pos[1];
    if (!name[0] || !user[0])
        return cli_usage_error(ctx, "empty project name or user");
    struct strbuf path = STRBUF_INIT;
    project_path(ctx, &path, name, user);
    int rc = project_request(ctx, "DELETE", sb_str(&path), NULL,
                             "you left the project; it is private, so you no longer see it");
    sb_free(&path);
    return rc;
}

int cmd_project_delete(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *name = args->pos[0];
    if (!name[0])
        return cli_usage_error(ctx, "empty project name");
    struct strbuf path = STRBUF_INIT;
    project_path(ctx, &path, name, NULL);
    int rc = api_json(ctx, "DELETE", sb_str(&path), NULL, 0, NULL);
    sb_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output != CLI_OUTPUT_JSON) {
        struct strbuf sb = STRBUF_INIT;
        out_clean(&sb, name, strlen(name));
        printf("project %s deleted\n", sb_str(&sb));
        sb_free(&sb);
    }
    return CLI_EXIT_OK;
}

/* Prints one quota line: "NAME  LIMIT  USED" (limit 0: none). */
static void print_limit(const char *what, const json_t *q)
{
    const json_t *lim = json_object_get(q, "limit"), *used = json_object_get(q, "used");
    json_int_t l = json_integer_value(lim);
    char limit[32];
    if (l > 0)
        snprintf(limit, sizeof(limit), "%lld", (long long)l);
    else
        snprintf(limit, sizeof(limit), "none");
    printf("%-15s limit %-20s used %g\n", what, limit,
           json_is_number(used) ? json_number_value(used) : 0.0);
}

/* Sends `method` (GET, or PUT with body, taken) to the project's quotas and prints them. */
static int project_quota_call(struct cli_ctx *ctx, const char *name, const char *method,
                              json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    struct strbuf path = STRBUF_INIT;
    sb_puts(&path, "/api/v1/quotas/projects/");
    api_path_escaped(ctx, &path, name);
    json_t *q = NULL;
    int rc = api_json(ctx, method, sb_str(&path), text, text ? strlen(text) : 0, &q);
    sb_free(&path);
    free(text);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(q);
    } else {
        print_limit("artifact_bytes", json_object_get(q, "artifact_bytes"));
        print_limit("cpus", json_object_get(q, "cpus"));
        print_limit("gpus", json_object_get(q, "gpus"));
    }
    json_decref(q);
    return CLI_EXIT_OK;
}

int cmd_project_quota(struct cli_ctx *ctx, const struct cli_args *args)
{
    if (!args->pos[0][0])
        return cli_usage_error(ctx, "empty project name");
    return project_quota_call(ctx, args->pos[0], "GET", NULL);
}

/* Adds flag `flag` (an integer >= 0, or "none": null) to body as `field`. 0, or -1 if bad. */
static int quota_field(const struct cli_args *args, const char *flag, const char *field,
                       json_t *body)
{
    const char *v = args_flag(args, flag);
    if (v == NULL)
        return 0;
    if (strcmp(v, "none") == 0)
        return json_object_set_new(body, field, json_null()) == 0 ? 0 : -1;
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (!v[0] || *end != '\0' || n < 0 || v[0] == '-' || v[0] == '+')
        return -1;
    return json_object_set_new(body, field, json_integer((json_int_t)n)) == 0 ? 0 : -1;
}

int cmd_project_set_quota(struct cli_ctx *ctx, const struct cli_args *args)
{
    if (!args->pos[0][0])
        return cli_usage_error(ctx, "empty project name");
    static const char *const flags[][2] = {
        {"cpus", "cpus"}, {"gpus", "gpus"}, {"artifact-bytes", "artifact_bytes"}};
    json_t *body = json_object();
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (quota_field(args, flags[i][0], flags[i][1], body) != 0) {
            json_decref(body);
            return cli_usage_error(ctx, "--%s takes an integer >= 0, or none", flags[i][0]);
        }
    }
    if (json_object_size(body) == 0) {
        json_decref(body);
        return cli_usage_error(ctx, "give one or more of --cpus, --gpus, --artifact-bytes");
    }
    return project_quota_call(ctx, args->pos[0], "PUT", body);
}
