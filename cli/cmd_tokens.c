/*
 * cmd_tokens.c - token create, list, delete (admin only on the server side).
 */
#include "api.h"
#include "cli.h"
#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_token_create(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *name = args_flag(args, "name");
    const char *role = args_flag(args, "role");
    if (!name[0] || !role[0]) /* both present: args_parse checks required flags */
        return cli_usage_error(ctx, "--name and --role must not be empty");

    json_t *req = json_pack("{s:s, s:s}", "name", name, "role", role);
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!body) /* json_pack fails only on invalid UTF-8 */
        return cli_usage_error(ctx, "--name and --role must be valid UTF-8");
    json_t *tok = NULL;
    int rc = api_json(ctx, "POST", "/api/v1/tokens", body, strlen(body), &tok);
    free(body);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(tok);
    } else {
        const json_t *secret = json_object_get(tok, "token");
        if (!json_is_string(secret)) {
            fputs("error: unexpected reply from the server: no \"token\" string\n", stderr);
            json_decref(tok);
            return CLI_EXIT_FAILED;
        }
        /* The token alone on stdout, so `T=$(trainyard token create ...)` works. */
        printf("%s\n", json_string_value(secret));
        fputs("(the token is shown only this once)\n", stderr);
    }
    json_decref(tok);
    return CLI_EXIT_OK;
}

static const char *const token_headers[] = {"ID", "NAME", "ROLE", "CREATED"};
static const char *const token_fields[] = {"id", "name", "role", "created_at"};

int cmd_token_list(struct cli_ctx *ctx, const struct cli_args *args)
{
    (void)args;
    json_t *reply;
    const json_t *tokens;
    int rc = api_get_list(ctx, "/api/v1/tokens", "tokens", &reply, &tokens);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
    } else {
        struct out_table t;
        size_t i, ncols = sizeof token_headers / sizeof token_headers[0];
        json_t *tok;
        table_init(&t, token_headers, ncols);
        json_array_foreach(tokens, i, tok)
        {
            for (size_t c = 0; c + 1 < ncols; c++)
                table_cell_json(&t, json_object_get(tok, token_fields[c]));
            table_cell_time(&t, json_object_get(tok, token_fields[ncols - 1]));
        }
        table_print(&t, stdout);
        table_free(&t);
    }
    json_decref(reply);
    return CLI_EXIT_OK;
}

int cmd_token_delete(struct cli_ctx *ctx, const struct cli_args *args)
{
    const char *id = args->pos[0];
    if (!id[0])
        return cli_usage_error(ctx, "empty token id");
    struct strbuf path = STRBUF_INIT;
    sb_puts(&path, "/api/v1/tokens/");
    api_path_escaped(ctx, &path, id);
    int rc = api_json(ctx, "DELETE", sb_str(&path), NULL, 0, NULL);
    sb_free(&path);
    if (rc == CLI_EXIT_OK && ctx->cfg.output == CLI_OUTPUT_TABLE) {
        struct strbuf sb = STRBUF_INIT;
        out_clean(&sb, id, strlen(id));
        printf("deleted token %s\n", sb_str(&sb));
        sb_free(&sb);
    }
    return rc;
}
