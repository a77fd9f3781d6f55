/*
 * cmd_wait.c - following a job to its end: `wait ID` and `submit --wait`.
 */
#include "api.h"
#include "cli.h"
#include "job_status.h"
#include "output.h"
#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Poll interval: starts short so quick jobs return quickly, then backs off. */
#define POLL_FIRST_MS 250
#define POLL_MAX_MS 2000

static void sleep_ms(long long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A status this CLI does not know (a newer server's) is not terminal: the wait goes on. */
static bool is_terminal(const char *status)
{
    enum job_status s;
    return job_status_from_string(status, &s) == 0 && job_status_is_terminal(s);
}

int cli_wait_finish(struct cli_ctx *ctx, long id, const json_t *job, const char *status,
                    bool print_status)
{
    if (ctx->cfg.output == CLI_OUTPUT_JSON && job)
        api_print_json(job);
    else if (print_status)
        printf("%s\n", status);
    enum job_status s;
    bool known = job_status_from_string(status, &s) == 0;
    if (known && s == JOB_STATUS_SUCCEEDED)
        return CLI_EXIT_OK;

    const json_t *why = json_object_get(json_object_get(job, "result"), "error");
    if (!json_is_string(why))
        why = json_object_get(job, "status_message");
    struct strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "error: job %ld %s", id, status);
    if (json_is_string(why) && json_string_length(why)) {
        sb_puts(&sb, ": ");
        out_value(&sb, why);
    }
    fprintf(stderr, "%s\n", sb_str(&sb));
    sb_free(&sb);
    return known && s == JOB_STATUS_STOPPED ? CLI_EXIT_STOPPED : CLI_EXIT_FAILED;
}

int cli_wait_for_job(struct cli_ctx *ctx, long id, long timeout_s, bool print_status, bool follow)
{
    if (follow)
        return cli_follow_wait(ctx, id, timeout_s, print_status);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/jobs/%ld", id);
    long long start = util_mono_ms();
    long long deadline = timeout_s > 0 ? start + (long long)timeout_s * 1000 : LLONG_MAX;
    long long lost_since = -1;
    long long interval = POLL_FIRST_MS;
    char last[32] = "";

    for (;;) {
        struct http_response resp;
        char why[HTTP_ERROR_MAX];
        int rc = api_send(ctx, "GET", path, NULL, 0, true, &resp, why, sizeof why);
        long long now = util_mono_ms();
        if (rc == CLI_EXIT_UNREACHABLE) {
            if (lost_since < 0) {
                lost_since = now;
                fprintf(stderr, "warning: cannot reach the server at %s (%s); retrying\n",
                        http_client_base(ctx->http), why);
            } else if (now - lost_since >= ctx->cfg.reconnect_s * 1000LL) {
                fprintf(stderr, "error: cannot reach the server at %s for %ld s (GET %s): %s\n",
                        http_client_base(ctx->http), ctx->cfg.reconnect_s, path, why);
                return CLI_EXIT_UNREACHABLE;
            }
        } else if (rc != CLI_EXIT_OK) {
            return rc; /* the server refused (job gone, token revoked): already reported */
        } else {
            lost_since = -1;
            json_t *job = resp.len ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
            const json_t *st = json_object_get(job, "status");
            if (!json_is_string(st)) {
                out_odd_reply(&resp, "no job status");
                http_response_free(&resp);
                json_decref(job);
                return CLI_EXIT_FAILED;
            }
            http_response_free(&resp);
            const char *status = json_string_value(st);
            if (strcmp(status, last) != 0) {
                struct strbuf sb = STRBUF_INIT;
                const json_t *msg = json_object_get(job, "status_message");
                sb_printf(&sb, "job %ld ", id);
                out_value(&sb, st);
                if (!is_terminal(status) && json_is_string(msg) && json_string_length(msg)) {
                    sb_puts(&sb, ": ");
                    out_value(&sb, msg);
                }
                fprintf(stderr, "%s\n", sb_str(&sb));
                sb_free(&sb);
                snprintf(last, sizeof last, "%s", status);
            }
            if (is_terminal(status)) {
                rc = cli_wait_finish(ctx, id, job, status, print_status);
                json_decref(job);
                return rc;
            }
            json_decref(job);
        }
        if (now >= deadline) {
            fprintf(stderr, "error: timed out after %ld s waiting for job %ld (last status %s)\n",
                    timeout_s, id, last[0] ? last : "unknown");
            return CLI_EXIT_TIMEOUT;
        }
        sleep_ms(interval < deadline - now ? interval : deadline - now);
        interval = interval * 2 < POLL_MAX_MS ? interval * 2 : POLL_MAX_MS;
    }
}

int cmd_wait(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id, timeout_s = 0;
    int rc;
    if ((rc = cli_parse_id(ctx, args->pos[0], "job id", &id)) != 0)
        return rc;
    if ((rc = cli_flag_long(ctx, args, "timeout", 1, LONG_MAX / 1000, &timeout_s)) != 0)
        return rc;
    return cli_wait_for_job(ctx, id, timeout_s, true, args_flag(args, "follow") != NULL);
}
