/*
 * cmd_server.c - health and version.
 */
#include "api.h"
#include "cli.h"
#include "output.h"

#include <stdio.h>

#ifndef TY_VERSION
#define TY_VERSION "0.0.0"
#endif

/* Prints each member of a flat object as "key: value". */
static void print_members(struct out_table *t, const json_t *obj)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        kv_json(t, key, v);
    }
}

int cmd_health(struct cli_ctx *ctx, const struct cli_args *args)
{
    (void)args;
    json_t *reply = NULL;
    int rc = api_json(ctx, "GET", "/api/v1/health", NULL, 0, &reply);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
    } else {
        struct out_table t;
        table_init(&t, NULL, 2);
        if (json_is_object(reply))
            print_members(&t, reply);
        else
            kv_json(&t, "status", reply);
        table_print(&t, stdout);
        table_free(&t);
    }
    json_decref(reply);
    return CLI_EXIT_OK;
}

int cmd_version(struct cli_ctx *ctx, const struct cli_args *args)
{
    (void)args;
    json_t *reply = NULL;
    int rc = api_json(ctx, "GET", "/api/v1/version", NULL, 0, &reply);
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        if (rc == CLI_EXIT_OK)
            api_print_json(reply);
        json_decref(reply);
        return rc;
    }
    struct out_table t;
    table_init(&t, NULL, 2);
    kv_text(&t, "client", TY_VERSION);
    if (rc == CLI_EXIT_OK && json_is_object(reply)) {
        kv_json(&t, "server", json_object_get(reply, "version"));
        kv_json(&t, "api", json_object_get(reply, "api"));
    }
    table_print(&t, stdout);
    table_free(&t);
    json_decref(reply);
    return rc;
}
