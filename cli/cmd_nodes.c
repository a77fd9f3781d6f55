/*
 * cmd_nodes.c - nodes, drain and undrain.
 */
#include "api.h"
#include "cli.h"
#include "output.h"

#include <stdio.h>
#include <string.h>

/* The member of a node's `allocated` ({cpu, memory_mb, gpu}: what its live workers hold) that
 * counts resource `key` of its total, or NULL (a custom resource). */
static const json_t *allocated_of(const json_t *allocated, const char *key)
{
    if (strcmp(key, "CPU") == 0)
        return json_object_get(allocated, "cpu");
    if (strcmp(key, "GPU") == 0)
        return json_object_get(allocated, "gpu");
    if (strcmp(key, "memory_mb") == 0)
        return json_object_get(allocated, "memory_mb");
    return NULL;
}

/* Appends "CPU 2/8, GPU 1/2, ..." from a node's total resources and what its workers hold
 * (allocated; a resource the server does not count shows its total only). A GPU list counts as
 * its length. */
static void resources_text(struct strbuf *sb, const json_t *total, const json_t *allocated)
{
    const char *key;
    json_t *v;
    bool first = true;
    if (!json_is_object(total) || json_object_size(total) == 0) {
        sb_puts(sb, "-");
        return;
    }
    json_object_foreach((json_t *)total, key, v)
    {
        if (!first)
            sb_puts(sb, ", ");
        first = false;
        out_clean(sb, key, strlen(key));
        sb_puts(sb, " ");
        const json_t *a = allocated_of(allocated, key);
        if (json_is_number(a))
            sb_printf(sb, "%g/", json_number_value(a));
        if (json_is_array(v))
            sb_printf(sb, "%zu", json_array_size(v));
        else if (json_is_number(v))
            sb_printf(sb, "%g", json_number_value(v));
        else
            out_value(sb, v);
    }
}

/* "812/2048 MiB" from a node's `disk` (its agent data directory's file system), with
 * " (pressure)" when it is under disk pressure; "-" before its agent said. */
static void disk_text(struct strbuf *sb, const json_t *disk)
{
    const json_t *free_mb = json_object_get(disk, "free_mb");
    const json_t *total_mb = json_object_get(disk, "total_mb");
    if (!json_is_integer(free_mb) || !json_is_integer(total_mb)) {
        sb_puts(sb, "-");
        return;
    }
    out_value(sb, free_mb);
    sb_puts(sb, "/");
    out_value(sb, total_mb);
    sb_puts(sb, " MiB");
    if (json_is_true(json_object_get(disk, "pressure")))
        sb_puts(sb, " (pressure)");
}

static const char *const node_headers[] = {"ID",     "HOSTNAME",   "ADDRESS",
                                           "STATUS", "USED/TOTAL", "DISK FREE"};

int cmd_nodes(struct cli_ctx *ctx, const struct cli_args *args)
{
    (void)args;
    json_t *reply;
    const json_t *nodes;
    int rc = api_get_list(ctx, "/api/v1/nodes", "nodes", &reply, &nodes);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
    } else {
        struct out_table t;
        size_t i;
        json_t *node;
        table_init(&t, node_headers, sizeof node_headers / sizeof node_headers[0]);
        json_array_foreach(nodes, i, node)
        {
            struct strbuf res = STRBUF_INIT;
            table_cell_json(&t, json_object_get(node, "id"));
            table_cell_json(&t, json_object_get(node, "hostname"));
            table_cell_json(&t, json_object_get(node, "address"));
            const json_t *status = json_object_get(node, "status");
            if (json_is_true(json_object_get(node, "draining")) && json_is_string(status)) {
                struct strbuf st = STRBUF_INIT;
                out_value(&st, status);
                sb_puts(&st, " (draining)");
                table_cell_steal(&t, sb_steal(&st));
            } else {
                table_cell_json(&t, status);
            }
            resources_text(&res, json_object_get(node, "resources"),
                           json_object_get(node, "allocated"));
            table_cell_steal(&t, sb_steal(&res));
            struct strbuf disk = STRBUF_INIT;
            disk_text(&disk, json_object_get(node, "disk"));
            table_cell_steal(&t, sb_steal(&disk));
        }
        table_print(&t, stdout);
        table_free(&t);
    }
    json_decref(reply);
    return CLI_EXIT_OK;
}

/* Appends "3, 5" from a JSON array of job ids. */
static void ids_text(struct strbuf *sb, const json_t *ids)
{
    size_t i;
    json_t *v;
    json_array_foreach((json_t *)ids, i, v)
    {
        if (i > 0)
            sb_puts(sb, ", ");
        out_value(sb, v);
    }
}

/* POST /api/v1/nodes/{node}/{verb} with `body` (NULL: none); *reply: the node, or NULL. */
static int node_action(struct cli_ctx *ctx, const char *node, const char *verb, const char *body,
                       json_t **reply)
{
    *reply = NULL;
    if (!node[0])
        return cli_usage_error(ctx, "empty node id");
    struct strbuf path = STRBUF_INIT;
    sb_puts(&path, "/api/v1/nodes/");
    api_path_escaped(ctx, &path, node);
    sb_puts(&path, "/");
    sb_puts(&path, verb);
    struct http_response resp;
    int rc =
        api_send(ctx, "POST", sb_str(&path), body, body ? strlen(body) : 0, false, &resp, NULL, 0);
    sb_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    *reply = resp.len ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
    http_response_free(&resp);
    if (ctx->cfg.output == CLI_OUTPUT_JSON && *reply)
        api_print_json(*reply);
    return CLI_EXIT_OK;
}

int cmd_drain(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *node = args->pos[0];
    bool preempt = args_flag(args, "no-preempt") == NULL;
    json_t *reply;
    int rc = node_action(ctx, node, "drain", preempt ? NULL : "{\"preempt\": false}", &reply);
    if (rc != CLI_EXIT_OK || ctx->cfg.output == CLI_OUTPUT_JSON) {
        json_decref(reply);
        return rc;
    }
    struct strbuf sb = STRBUF_INIT;
    sb_puts(&sb, "node ");
    out_clean(&sb, node, strlen(node));
    sb_puts(&sb, " draining: no new workers are placed there; ");
    const json_t *moved = json_object_get(reply, "preempted_jobs");
    if (!preempt) {
        sb_puts(&sb, "running jobs finish there ('trainyard undrain' to take it back)");
    } else if (json_array_size(moved) == 0) {
        sb_puts(&sb, "no job was running there");
    } else {
        sb_puts(&sb, json_array_size(moved) == 1 ? "job " : "jobs ");
        ids_text(&sb, moved);
        sb_puts(&sb, json_array_size(moved) == 1 ? " was" : " were");
        sb_puts(&sb, " running there: asked to checkpoint, stopped, and restarted elsewhere "
                     "from the checkpoint");
    }
    printf("%s\n", sb_str(&sb));
    sb_free(&sb);
    json_decref(reply);
    return CLI_EXIT_OK;
}

int cmd_undrain(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *node = args->pos[0];
    json_t *reply;
    int rc = node_action(ctx, node, "undrain", NULL, &reply);
    if (rc == CLI_EXIT_OK && ctx->cfg.output != CLI_OUTPUT_JSON) {
        struct strbuf sb = STRBUF_INIT;
        sb_puts(&sb, "node ");
        out_clean(&sb, node, strlen(node));
        sb_puts(&sb, " undrained: new workers may be placed there again");
        printf("%s\n", sb_str(&sb));
        sb_free(&sb);
    }
    json_decref(reply);
    return rc;
}
