/*
 * cmd_sweeps.c - sweeps (Ray Tune on the server, docs/sweeps.md): sweep submit FILE|- [--wait
 * [--wait-timeout S] [--assert COND]], sweep list, sweep get ID, sweep stop ID.
 */
#include "api.h"
#include "cli.h"
#include "gate.h"
#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SWEEP_POLL_MS 500

/* Prints one sweep: a summary line, its best trial, its events and a table of its trials. */
static void print_sweep(const json_t *s)
{
    struct strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "sweep %lld ", (long long)json_integer_value(json_object_get(s, "id")));
    out_value(&sb, json_object_get(s, "name"));
    sb_puts(&sb, ": ");
    out_value(&sb, json_object_get(s, "status"));
    sb_printf(&sb, ", %lld trials",
              (long long)json_integer_value(json_object_get(s, "num_trials")));
    const json_t *best = json_object_get(s, "best_trial");
    if (json_is_object(best)) {
        sb_printf(&sb, ", best trial %lld (",
                  (long long)json_integer_value(json_object_get(best, "index")));
        out_value(&sb, json_object_get(s, "metric"));
        sb_puts(&sb, " ");
        out_value(&sb, json_object_get(best, "best_metric"));
        sb_puts(&sb, ")");
    }
    printf("%s\n", sb_str(&sb));
    sb_free(&sb);
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(s, "events"), i, ev)
    {
        const char *msg = json_string_value(json_object_get(ev, "message"));
        printf("%s\n", msg ? msg : "");
    }
    const json_t *trials = json_object_get(s, "trials");
    if (!json_is_array(trials))
        return;
    static const char *const headers[] = {"TRIAL", "JOB",  "STATUS", "T",
                                          "LAST",  "BEST", "CONFIG", "STOPPED BY"};
    struct out_table t;
    table_init(&t, headers, sizeof headers / sizeof headers[0]);
    json_t *tr;
    json_array_foreach(trials, i, tr)
    {
        table_cell_json(&t, json_object_get(tr, "index"));
        table_cell_json(&t, json_object_get(tr, "job_id"));
        table_cell_json(&t, json_object_get(tr, "status"));
        table_cell_json(&t, json_object_get(tr, "last_t"));
        table_cell_json(&t, json_object_get(tr, "last_metric"));
        table_cell_json(&t, json_object_get(tr, "best_metric"));
        char *config = json_dumps(json_object_get(tr, "config"), JSON_COMPACT);
        table_cell(&t, config ? config : "-");
        free(config);
        table_cell_json(&t, json_object_get(tr, "stopped_by"));
    }
    table_print(&t, stdout);
    table_free(&t);
}

/* GETs or POSTs path and prints the sweep it answers. */
static int sweep_request(struct cli_ctx *ctx, const char *method, const char *path)
{
    json_t *s = NULL;
    int rc = api_json(ctx, method, path, NULL, 0, &s);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON)
        api_print_json(s);
    else
        print_sweep(s);
    json_decref(s);
    return CLI_EXIT_OK;
}

static int read_file(const char *name, struct strbuf *sb)
{
    bool is_stdin = strcmp(name, "-") == 0;
    int rc = cli_read_input("sweep", name, sb);
    if (rc != 0)
        return rc;
    json_error_t jerr;
    json_t *v = json_loadb(sb_str(sb), sb->len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    bool object = json_is_object(v);
    json_decref(v);
    if (!v)
        return cli_input_error("%s:%d:%d: invalid JSON: %s", is_stdin ? "<stdin>" : name, jerr.line,
                               jerr.column, jerr.text);
    if (!object)
        return cli_input_error("%s: a sweep must be a JSON object", is_stdin ? "<stdin>" : name);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Polls sweep id until it leaves RUNNING (or timeout_s passes, 0: never); then prints it and
 * checks the gates against its best trial's final metrics. */
static int wait_sweep(struct cli_ctx *ctx, long id, long timeout_s, const struct gate *gates,
                      int ngates)
{
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/sweeps/%ld", id);
    time_t start = time(NULL);
    for (;;) {
        json_t *s = NULL;
        int rc = api_json(ctx, "GET", path, NULL, 0, &s);
        if (rc != CLI_EXIT_OK)
            return rc;
        const char *status = json_string_value(json_object_get(s, "status"));
        if (status && strcmp(status, "RUNNING") != 0) {
            if (ctx->cfg.output == CLI_OUTPUT_JSON)
                api_print_json(s);
            else
                print_sweep(s);
            rc = strcmp(status, "SUCCEEDED") == 0 ? CLI_EXIT_OK : CLI_EXIT_STOPPED;
            const json_t *metrics = json_object_get(json_object_get(s, "best_trial"), "metrics");
            for (int i = 0; rc == CLI_EXIT_OK && i < ngates; i++) {
                char msg[256];
                if (!gate_check(&gates[i], json_is_object(metrics) ? metrics : NULL, msg,
                                sizeof msg)) {
                    fprintf(stderr, "error: quality gate missed by the best trial: %s\n", msg);
                    rc = CLI_EXIT_GATE;
                }
            }
            if (rc == CLI_EXIT_STOPPED)
                fprintf(stderr, "error: sweep %ld %s\n", id, status);
            json_decref(s);
            return rc;
        }
        json_decref(s);
        if (timeout_s > 0 && time(NULL) - start >= timeout_s) {
            fprintf(stderr, "error: sweep %ld still RUNNING after %ld s\n", id, timeout_s);
            return CLI_EXIT_TIMEOUT;
        }
        sleep_ms(SWEEP_POLL_MS);
    }
}

int cmd_sweep_submit(struct cli_ctx *ctx, const struct cli_args *args)
{
    bool wait = args_flag(args, "wait") != NULL;
    long timeout_s = 0;
    if (cli_flag_long(ctx, args, "wait-timeout", 1, 1L << 30, &timeout_s) != 0)
        return CLI_EXIT_USAGE;
    const char *texts[CLI_MAX_VALUES];
    int ngates = args_flag_values(args, "assert", texts, CLI_MAX_VALUES);
    struct gate gates[CLI_MAX_VALUES];
    for (int i = 0; i < ngates; i++) {
        char err[160];
        if (gate_parse(texts[i], &gates[i], err, sizeof err) != 0)
            return cli_usage_error(ctx, "--assert '%s': %s", texts[i], err);
    }
    if ((ngates > 0 || timeout_s > 0) && !wait)
        return cli_usage_error(ctx, "--assert and --wait-timeout only make sense with --wait");
    struct strbuf body = STRBUF_INIT;
    int rc = read_file(args->pos[0], &body);
    json_t *s = NULL;
    if (rc == 0)
        rc = api_json(ctx, "POST", "/api/v1/sweeps", sb_str(&body), body.len, &s);
    sb_free(&body);
    if (rc != CLI_EXIT_OK)
        return rc;
    long id = (long)json_integer_value(json_object_get(s, "id"));
    if (!wait) {
        if (ctx->cfg.output == CLI_OUTPUT_JSON)
            api_print_json(s);
        else
            printf("%ld\n", id);
        json_decref(s);
        return CLI_EXIT_OK;
    }
    json_decref(s);
    return wait_sweep(ctx, id, timeout_s, gates, ngates);
}

int cmd_sweep_list(struct cli_ctx *ctx, const struct cli_args *args)
{
    (void)args;
    json_t *reply;
    const json_t *sweeps;
    int rc = api_get_list(ctx, "/api/v1/sweeps", "sweeps", &reply, &sweeps);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
    } else {
        static const char *const headers[] = {"ID",     "NAME", "STATUS", "TRIALS",
                                              "METRIC", "BEST", "CREATED"};
        struct out_table t;
        table_init(&t, headers, sizeof headers / sizeof headers[0]);
        size_t i;
        json_t *s;
        json_array_foreach(sweeps, i, s)
        {
            table_cell_json(&t, json_object_get(s, "id"));
            table_cell_json(&t, json_object_get(s, "name"));
            table_cell_json(&t, json_object_get(s, "status"));
            table_cell_json(&t, json_object_get(s, "num_trials"));
            table_cell_json(&t, json_object_get(s, "metric"));
            table_cell_json(&t, json_object_get(json_object_get(s, "best_trial"), "best_metric"));
            table_cell_time(&t, json_object_get(s, "created_at"));
        }
        table_print(&t, stdout);
        table_free(&t);
    }
    json_decref(reply);
    return CLI_EXIT_OK;
}

int cmd_sweep_get(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    if (cli_parse_id(ctx, args->pos[0], "sweep id", &id) != 0)
        return CLI_EXIT_USAGE;
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/sweeps/%ld", id);
    return sweep_request(ctx, "GET", path);
}

int cmd_sweep_stop(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    if (cli_parse_id(ctx, args->pos[0], "sweep id", &id) != 0)
        return CLI_EXIT_USAGE;
    char path[64];
    snprintf(path, sizeof(path), "/api/v1/sweeps/%ld/stop", id);
    return sweep_request(ctx, "POST", path);
}
