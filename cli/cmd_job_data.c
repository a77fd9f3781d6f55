/*
 * cmd_job_data.c - what a job's workers produced: workers and metrics.
 */
#include "api.h"
#include "cli.h"
#include "output.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/*
 * A worker's usage (its `usage` object, or null: no cgroup, or not sampled yet) as one cell:
 * `cpu` its CPU time ("12.3s"), `mem` / `mem_peak` its memory now / at most ("104.9MiB").
 */
static void table_cell_usage(struct out_table *t, const json_t *usage, const char *what)
{
    char text[64];
    if (strcmp(what, "cpu") == 0) {
        const json_t *v = json_object_get(usage, "cpu_seconds");
        if (!json_is_number(v)) {
            table_cell(t, NULL);
            return;
        }
        snprintf(text, sizeof text, "%.1fs", json_number_value(v));
    } else {
        const json_t *v =
            json_object_get(usage, strcmp(what, "mem") == 0 ? "memory_bytes" : "memory_peak_bytes");
        if (!json_is_integer(v)) {
            table_cell(t, NULL);
            return;
        }
        snprintf(text, sizeof text, "%.1fMiB", (double)json_integer_value(v) / (1024.0 * 1024.0));
    }
    table_cell(t, text);
}

/*
 * GETs path, expects an object holding the array `key`, and prints it: the reply as is in json
 * mode, else a table with one row per element and one column per field in `fields`.
 */
static int print_collection(struct cli_ctx *ctx, const char *path, const char *key,
                            const char *const *headers, const char *const *fields, size_t ncols)
{
    json_t *reply;
    const json_t *items;
    int rc = api_get_list(ctx, path, key, &reply, &items);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
    } else {
        struct out_table t;
        size_t i;
        json_t *item;
        table_init(&t, headers, ncols);
        json_array_foreach(items, i, item)
        {
            for (size_t c = 0; c < ncols; c++) {
                const json_t *v = json_object_get(item, fields[c]);
                if (strcmp(fields[c], "time") == 0)
                    table_cell_time(&t, v);
                else if (strncmp(fields[c], "usage.", 6) == 0)
                    table_cell_usage(&t, json_object_get(item, "usage"), fields[c] + 6);
                else
                    table_cell_json(&t, v);
            }
        }
        table_print(&t, stdout);
        table_free(&t);
    }
    json_decref(reply);
    return CLI_EXIT_OK;
}

static const char *const worker_headers[] = {"RANK",      "NODE", "PID", "GPUS",    "STATUS",
                                             "EXIT_CODE", "CPU",  "MEM", "MEM_PEAK"};
static const char *const worker_fields[] = {"rank",      "node_id",   "pid",
                                            "gpus",      "status",    "exit_code",
                                            "usage.cpu", "usage.mem", "usage.mem_peak"};

int cmd_workers(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    int rc;
    if ((rc = cli_parse_id(ctx, args->pos[0], "job id", &id)) != 0)
        return rc;
    char path[64];
    snprintf(path, sizeof path, "/api/v1/jobs/%ld/workers", id);
    return print_collection(ctx, path, "workers", worker_headers, worker_fields,
                            sizeof worker_headers / sizeof worker_headers[0]);
}

static const char *const metric_headers[] = {"NAME", "RANK", "STEP", "VALUE", "TIME"};
static const char *const metric_fields[] = {"name", "rank", "step", "value", "time"};

int cmd_metrics(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id, rank = -1;
    int rc;
    if ((rc = cli_parse_id(ctx, args->pos[0], "job id", &id)) != 0 ||
        (rc = cli_flag_long(ctx, args, "rank", 0, INT_MAX, &rank)) != 0)
        return rc;
    if (args_flag(args, "follow"))
        return cli_follow_metrics(ctx, id, args_flag(args, "name"), rank);
    char rank_text[32];
    snprintf(rank_text, sizeof rank_text, "%ld", rank);
    struct strbuf path = STRBUF_INIT;
    sb_printf(&path, "/api/v1/jobs/%ld/metrics", id);
    api_query(ctx, &path, "name", args_flag(args, "name"));
    api_query(ctx, &path, "rank", rank >= 0 ? rank_text : NULL);
    rc = print_collection(ctx, sb_str(&path), "metrics", metric_headers, metric_fields,
                          sizeof metric_headers / sizeof metric_headers[0]);
    sb_free(&path);
    return rc;
}
