/*
 * cmd_logs.c - `trainyard logs ID [--rank R] [--attempt N] [--tail N] [--grep RE] [--stderr |
 * --stdout] [--follow]`: a job's worker output as stored by the server (GET
 * /api/v1/jobs/{id}/logs, read as JSON lines), printed as it comes: the lines as they are for one
 * rank, "[rank R] line" for several, stderr's marked (cli_print_log_line) unless one stream is
 * asked for; JSON lines with -o json. With
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
    const char *stream; /* "stdout", "stderr" or NULL: both */
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
    bool out = args_flag(args, "stdout") != NULL, err = args_flag(args, "stderr") != NULL;
    if (out && err)
        return cli_usage_error(ctx, "--stdout and --stderr cannot be combined (leave both out "
                                    "for both streams)");
    r->stream = out ? "stdout" : err ? "stderr" : NULL;
    return 0;
}

/* Prints the JSON lines {rank, stream, line, ...} of body as text. Returns an enum cli_exit. */
static int print_lines(const char *body, size_t len, const struct logs_request *r)
{
    size_t at = 0;
    while (at < len) {
        const char *nl = memchr(body + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (body + at)) : len - at;
        json_error_t jerr;
        json_t *o = json_loadb(body + at, n, 0, &jerr);
        json_t *line = json_object_get(o, "line");
        const char *stream = json_string_value(json_object_get(o, "stream"));
        if (!json_is_string(line)) {
            json_decref(o);
            fprintf(stderr, "error: the server sent a log line that is not JSON\n");
            return CLI_EXIT_FAILED;
        }
        cli_print_log_line(json_integer_value(json_object_get(o, "rank")), r->rank < 0,
                           stream ? stream : "stdout", r->stream == NULL, json_string_value(line),
                           json_string_length(line));
        json_decref(o);
        at += n + 1;
    }
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
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
    api_query(ctx, &path, "stream", r->stream);
    api_query(ctx, &path, "format", "jsonl");
    struct http_response resp;
    char err[HTTP_ERROR_MAX];
    int rc = api_send(ctx, "GET", sb_str(&path), NULL, 0, false, &resp, err, sizeof err);
    sb_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        if (resp.len > 0 && fwrite(resp.body, 1, resp.len, stdout) != resp.len)
            rc = CLI_EXIT_FAILED;
    } else {
        rc = print_lines(resp.body, resp.len, r);
    }
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
        return cli_follow_logs(ctx, r.id, r.rank, r.attempt > 0 ? r.attempt : -1, r.grep, r.stream);
    }
    return logs_print_stored(ctx, &r);
}
