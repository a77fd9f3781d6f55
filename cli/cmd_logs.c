/*
 * cmd_logs.c - `trainyard logs ID [--rank R] [--attempt N] [--tail N] [--grep RE] [--follow]`: a
 * job's worker output as stored by the server (GET /api/v1/jobs/{id}/logs), printed as it comes:
 * the lines as they are for one rank, "[rank R] line" for several; JSON lines with -o json. With
 * --follow the lines come from the job's live stream instead (cli_follow_logs, cmd_follow.c),
 * from the first, until the job ends; --grep is then matched here (POSIX extended syntax).
 *
 * Built in two steps so that a following mode can reuse the first: logs_request() turns the
 * command line into the query, logs_print_stored() prints what is stored.
 */
#include "api.h"
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* What `trainyard logs` asks for. */
struct logs_request {
    long id;
    long rank;    /* -1: every rank */
    long attempt; /* 0: the job's current attempt */
    long tail;    /* 0: every line */
    const char *grep;
};

/* Fills *r from the command line. 0, or the usage exit code (printed). */
static int logs_request(struct cli_ctx *ctx, const struct cli_args *args, struct logs_request *r)
{
    int rc;
    *r = (struct logs_request){.rank = -1};
    if ((rc = cli_parse_id(ctx, args->pos[0], "job id", &r->id)) != 0 ||
        (rc = cli_flag_long(ctx, args, "rank", 0, INT_MAX, &r->rank)) != 0 ||
        (rc = cli_flag_long(ctx, args, "attempt", 1, INT_MAX, &r->attempt)) != 0 ||
        (rc = cli_flag_long(ctx, args, "tail", 1, 10000000, &r->tail)) != 0)
        return rc;
    r->grep = args_flag(args, "grep");
    return 0;
}

/* GETs the stored lines of r and writes them to stdout. Returns an enum cli_exit. */
static int logs_print_stored(struct cli_ctx *ctx, const struct logs_request *r)
{
    char num[3][32];
    struct strbuf path = STRBUF_INIT;
    sb_printf(&path, "/api/v1/jobs/%ld/logs", r->id);
    snprintf(num[0], sizeof num[0], "%ld", r->rank);
    snprintf(num[1], sizeof num[1], "%ld", r->attempt);
    snprintf(num[2], sizeof num[2], "%ld", r->tail);
    api_query(ctx, &path, "rank", r->rank >= 0 ? num[0] : NULL);
    api_query(ctx, &path, "attempt", r->attempt > 0 ? num[1] : NULL);
    api_query(ctx, &path, "tail", r->tail > 0 ? num[2] : NULL);
    api_query(ctx, &path, "grep", r->grep);
    api_query(ctx, &path, "format", ctx->cfg.output == CLI_OUTPUT_JSON ? "jsonl" : NULL);
    struct http_response resp;
    char err[HTTP_ERROR_MAX];
    int rc = api_send(ctx, "GET", sb_str(&path), NULL, 0, false, &resp, err, sizeof err);
    sb_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (resp.len > 0 && fwrite(resp.body, 1, resp.len, stdout) != resp.len)
        rc = CLI_EXIT_FAILED;
    http_response_free(&resp);
    return rc;
}

int cmd_logs(struct cli_ctx *ctx, const struct cli_args *args)
{
    struct logs_request r;
    int rc = logs_request(ctx, args, &r);
    if (rc != 0)
        return rc;
    if (args_flag(args, "follow")) {
        if (r.tail > 0)
            return cli_usage_error(ctx, "--tail cannot be combined with --follow");
        return cli_follow_logs(ctx, r.id, r.rank, r.attempt > 0 ? r.attempt : -1, r.grep);
    }
    return logs_print_stored(ctx, &r);
}
