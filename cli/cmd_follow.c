/*
 * cmd_follow.c - commands that read a job's live stream (docs/streams.md): `events`,
 * `metrics --follow`, `logs --follow`, `wait --follow` and `submit --wait --follow`. The loop
 * (connect, resume, reconnect) is stream.c; the lines are follow_format.c.
 */
#include "api.h"
#include "cli.h"
#include "follow_format.h"
#include "output.h"
#include "stream.h"
#include "util.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The exit code of a follow that did not end with the job (viewer commands). */
static int outcome_exit(enum stream_outcome o)
{
    switch (o) {
    case STREAM_DONE:
        return CLI_EXIT_OK;
    case STREAM_TIMED_OUT:
        return CLI_EXIT_TIMEOUT;
    case STREAM_UNREACHABLE:
        return CLI_EXIT_UNREACHABLE;
    case STREAM_BAD_URL:
        return CLI_EXIT_USAGE;
    case STREAM_REFUSED:
        break;
    }
    return CLI_EXIT_FAILED;
}

/* Prints a stream message as one compact JSON line (json output mode). */
static void print_raw(const json_t *raw)
{
    char *text = json_dumps(raw, JSON_COMPACT);
    if (text) {
        puts(text);
        free(text);
    }
}

static void print_line(struct strbuf *sb)
{
    fwrite(sb_str(sb), 1, sb->len, stdout);
    fputc('\n', stdout);
    sb->len = 0;
    if (sb->buf)
        sb->buf[0] = '\0';
}

/* The rank a row is about: its data's "rank", else the row's. */
static long long row_rank(const struct stream_msg *m)
{
    const json_t *r = json_object_get(m->data, "rank");
    return json_is_integer(r) ? json_integer_value(r) : m->rank;
}

static long long row_attempt(const struct stream_msg *m)
{
    const json_t *a = json_object_get(m->data, "attempt");
    return json_is_integer(a) ? json_integer_value(a) : m->attempt;
}

/* The output stream of a `log` row: its data's "stream" ("stdout" for rows stored before
 * servers said). */
static const char *row_stream(const struct stream_msg *m)
{
    const char *s = json_string_value(json_object_get(m->data, "stream"));
    return s ? s : "stdout";
}

void cli_print_log_line(long long rank, bool prefix_rank, const char *stream, bool mark_stream,
                        const char *text, size_t len)
{
    static int color = -1;
    if (color < 0)
        color = isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
    bool err = mark_stream && strcmp(stream, "stderr") == 0;
    if (err && color)
        fputs("\x1b[31m", stdout);
    if (prefix_rank && err)
        printf("[rank %lld stderr] ", rank);
    else if (prefix_rank)
        printf("[rank %lld] ", rank);
    else if (err)
        fputs("[stderr] ", stdout);
    fwrite(text, 1, len, stdout);
    fputs(err && color ? "\x1b[0m\n" : "\n", stdout);
}

/* Prints the lines of a `log` row (cli_print_log_line), keeping those that match re (if any). */
static void print_log_lines(const struct stream_msg *m, const regex_t *re, bool prefix,
                            bool mark_stream)
{
    const json_t *lines = json_object_get(m->data, "lines");
    size_t i;
    json_t *line;
    long long rank = row_rank(m);
    const char *stream = row_stream(m);
    json_array_foreach(lines, i, line)
    {
        const char *text = json_string_value(line);
        if (!text || (re && regexec(re, text, 0, NULL, 0) != 0))
            continue;
        cli_print_log_line(rank, prefix, stream, mark_stream, text, json_string_length(line));
    }
}

/*
 * Prints the lines of a `log` row as JSON lines {rank, attempt, stream, offset, at, line}, as
 * `logs -o json` does (offset: the byte offset of the chunk that holds the line in its stream;
 * at: when it was stored).
 */
static void print_log_json(const struct stream_msg *m, const regex_t *re)
{
    const json_t *lines = json_object_get(m->data, "lines");
    const json_t *off = json_object_get(m->data, "offset");
    json_int_t offset = json_is_integer(off) ? json_integer_value(off) : 0;
    size_t i;
    json_t *line;
    json_array_foreach(lines, i, line)
    {
        const char *text = json_string_value(line);
        if (!text || (re && regexec(re, text, 0, NULL, 0) != 0))
            continue;
        json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:O?, s:O}", "rank", row_rank(m), "attempt",
                              row_attempt(m), "stream", row_stream(m), "offset", offset, "at",
                              m->at, "line", line);
        print_raw(o);
        json_decref(o);
    }
}

/* Prints the note for a `log_dropped` row on stderr. */
static void print_log_dropped(const struct stream_msg *m)
{
    struct strbuf sb = STRBUF_INIT;
    if (follow_format_event(&sb, m))
        fprintf(stderr, "warning: %s\n", sb_str(&sb));
    sb_free(&sb);
}

/* ---------------------------------------------------------------------------------------------
 * events
 * ------------------------------------------------------------------------------------------- */

struct events_state {
    bool json, follow;
};

static enum stream_verdict events_row(void *ud, const struct stream_msg *m, const json_t *raw)
{
    struct events_state *st = ud;
    struct strbuf sb = STRBUF_INIT;
    if (follow_format_event(&sb, m)) {
        if (st->json)
            print_raw(raw);
        else
            print_line(&sb);
    }
    sb_free(&sb);
    return st->follow && follow_is_terminal(m) ? STREAM_STOP : STREAM_GO_ON;
}

int cmd_events(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    int rc;
    if ((rc = cli_parse_id(ctx, args->pos[0], "job id", &id)) != 0)
        return rc;
    struct events_state st = {ctx->cfg.output == CLI_OUTPUT_JSON, args_flag(args, "follow")};
    struct stream_follow_opts o = {
        .job = id, .until_head = !st.follow, .on_event = events_row, .ud = &st};
    return outcome_exit(stream_follow(ctx, &o));
}

/* ---------------------------------------------------------------------------------------------
 * metrics --follow
 * ------------------------------------------------------------------------------------------- */

struct metrics_state {
    bool json;
    const char *name;
    long rank;
};

static enum stream_verdict metrics_row(void *ud, const struct stream_msg *m, const json_t *raw)
{
    struct metrics_state *st = ud;
    struct strbuf sb = STRBUF_INIT;
    if (follow_format_report(&sb, m, st->name, st->rank)) {
        if (st->json)
            print_raw(raw);
        else
            print_line(&sb);
    }
    sb_free(&sb);
    return follow_is_terminal(m) ? STREAM_DRAIN : STREAM_GO_ON;
}

int cli_follow_metrics(struct cli_ctx *ctx, long id, const char *name, long rank)
{
    struct metrics_state st = {ctx->cfg.output == CLI_OUTPUT_JSON, name, rank};
    struct stream_follow_opts o = {.job = id, .on_event = metrics_row, .ud = &st};
    return outcome_exit(stream_follow(ctx, &o));
}

/* ---------------------------------------------------------------------------------------------
 * logs --follow
 * ------------------------------------------------------------------------------------------- */

struct logs_state {
    bool json;
    long rank, attempt;
    const regex_t *re;
    const char *stream; /* only this stream's lines; NULL: both */
};

static enum stream_verdict logs_row(void *ud, const struct stream_msg *m, const json_t *raw)
{
    struct logs_state *st = ud;
    bool is_log = m->kind && strcmp(m->kind, "log") == 0;
    bool dropped = m->kind && strcmp(m->kind, "log_dropped") == 0;
    if ((is_log || dropped) && (st->attempt < 0 || row_attempt(m) == st->attempt) &&
        (st->rank < 0 || row_rank(m) == st->rank || (dropped && row_rank(m) < 0)) &&
        (!is_log || !st->stream || strcmp(row_stream(m), st->stream) == 0)) {
        if (st->json && is_log)
            print_log_json(m, st->re);
        else if (st->json)
            print_raw(raw);
        else if (is_log)
            print_log_lines(m, st->re, st->rank < 0, st->stream == NULL);
        else
            print_log_dropped(m);
    }
    return follow_is_terminal(m) ? STREAM_DRAIN : STREAM_GO_ON;
}

int cli_follow_logs(struct cli_ctx *ctx, long id, long rank, long attempt, const char *grep,
                    const char *stream)
{
    regex_t re;
    if (grep) {
        int err = regcomp(&re, grep, REG_EXTENDED | REG_NOSUB);
        if (err != 0) {
            char why[256];
            regerror(err, &re, why, sizeof why);
            return cli_usage_error(ctx, "--grep: '%s': %s", grep, why);
        }
    }
    struct logs_state st = {ctx->cfg.output == CLI_OUTPUT_JSON, rank, attempt, grep ? &re : NULL,
                            stream};
    struct stream_follow_opts o = {.job = id, .on_event = logs_row, .ud = &st};
    int rc = outcome_exit(stream_follow(ctx, &o));
    if (grep)
        regfree(&re);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * wait --follow, submit --wait --follow
 * ------------------------------------------------------------------------------------------- */

struct wait_state {
    long id;
    bool json;
    char status[32]; /* the last status seen */
    bool ended;      /* a terminal status was seen */
};

static enum stream_verdict wait_row(void *ud, const struct stream_msg *m, const json_t *raw)
{
    struct wait_state *st = ud;
    struct strbuf sb = STRBUF_INIT;
    const char *status = follow_event_status(m);
    if (st->json) {
        if ((m->kind && strcmp(m->kind, "log") == 0) || follow_format_rank0_report(&sb, m))
            print_raw(raw);
    } else if (m->kind && strcmp(m->kind, "log") == 0) {
        print_log_lines(m, NULL, true, true);
    } else if (follow_format_rank0_report(&sb, m)) {
        print_line(&sb);
    } else if (m->kind && strcmp(m->kind, "log_dropped") == 0) {
        print_log_dropped(m);
    }
    sb_free(&sb);
    if (!status)
        return STREAM_GO_ON;
    struct strbuf line = STRBUF_INIT;
    sb_printf(&line, "job %ld ", st->id);
    out_value(&line, json_object_get(m->data, "status"));
    const json_t *msg = json_object_get(m->data, "message");
    if (!follow_is_terminal(m) && json_is_string(msg) && json_string_length(msg)) {
        sb_puts(&line, ": ");
        out_value(&line, msg);
    }
    fflush(stdout);
    fprintf(stderr, "%s\n", sb_str(&line));
    sb_free(&line);
    snprintf(st->status, sizeof st->status, "%s", status);
    if (!follow_is_terminal(m))
        return STREAM_GO_ON;
    st->ended = true;
    return STREAM_DRAIN;
}

int cli_follow_wait(struct cli_ctx *ctx, long id, long timeout_s, bool print_status)
{
    struct wait_state st = {.id = id, .json = ctx->cfg.output == CLI_OUTPUT_JSON};
    struct stream_follow_opts o = {.job = id, .on_event = wait_row, .ud = &st};
    if (timeout_s > 0)
        o.deadline = util_mono_ms() + timeout_s * 1000LL;
    enum stream_outcome out = stream_follow(ctx, &o);
    fflush(stdout);
    if (out == STREAM_TIMED_OUT && !st.ended) {
        fprintf(stderr, "error: timed out after %ld s waiting for job %ld (last status %s)\n",
                timeout_s, id, st.status[0] ? st.status : "unknown");
        return CLI_EXIT_TIMEOUT;
    }
    if (!st.ended)
        return outcome_exit(out);

    /* The job ended: its record gives the final word (result, error) when it can be read. */
    char path[64];
    snprintf(path, sizeof path, "/api/v1/jobs/%ld", id);
    struct http_response resp;
    json_t *job = NULL;
    if (api_send(ctx, "GET", path, NULL, 0, true, &resp, NULL, 0) == CLI_EXIT_OK) {
        job = resp.len ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
        http_response_free(&resp);
    }
    int rc = cli_wait_finish(ctx, id, job, st.status, print_status);
    json_decref(job);
    return rc;
}
