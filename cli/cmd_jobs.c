/*
 * cmd_jobs.c - submit, list, get, stop, delete.
 */
#include "api.h"
#include "code_pack.h"
#include "gate.h"
#include "cli.h"
#include "output.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Shared job formatting
 * ------------------------------------------------------------------------------------------- */

/* Appends the worker count from the job's spec: "4", "2-8" for elastic jobs, or "-". */
static void job_workers_text(struct strbuf *sb, const json_t *job)
{
    const json_t *n = json_object_get(
        json_object_get(json_object_get(job, "spec"), "scaling_config"), "num_workers");
    if (json_is_object(n)) {
        out_value(sb, json_object_get(n, "min"));
        sb_puts(sb, "-");
        out_value(sb, json_object_get(n, "max"));
    } else {
        out_value(sb, n);
    }
}

/* Appends the entrypoint: an argv array joined by spaces, or the shell string. */
static void job_entrypoint_text(struct strbuf *sb, const json_t *job)
{
    const json_t *e = json_object_get(json_object_get(job, "spec"), "entrypoint");
    size_t i;
    json_t *arg;
    if (!json_is_array(e)) {
        out_value(sb, e);
        return;
    }
    json_array_foreach(e, i, arg)
    {
        if (i)
            sb_puts(sb, " ");
        out_value(sb, arg);
    }
}

/* Builds "/api/v1/jobs/{id}{suffix}". */
static void job_path(struct strbuf *sb, long id, const char *suffix)
{
    sb_printf(sb, "/api/v1/jobs/%ld%s", id, suffix);
}

/* ---------------------------------------------------------------------------------------------
 * submit
 * ------------------------------------------------------------------------------------------- */

/* Checks that the spec text is one JSON object; prints line and column of a syntax error. */
static int check_spec(const char *name, const struct strbuf *spec)
{
    const char *shown = strcmp(name, "-") == 0 ? "<stdin>" : name;
    json_error_t jerr;
    json_t *v =
        json_loadb(sb_str(spec), spec->len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!v)
        return cli_input_error("%s:%d:%d: invalid JSON: %s", shown, jerr.line, jerr.column,
                               jerr.text);
    bool is_object = json_is_object(v);
    json_decref(v);
    if (!is_object)
        return cli_input_error("%s: a job spec must be a JSON object", shown);
    return 0;
}

/*
 * --working-dir DIR: packs and uploads DIR (code_pack.h), then rewrites the spec text in `spec`
 * with its code_package set and its working_dir (if any) dropped. Returns 0 or an exit code
 * (printed).
 */
/* Sets spec's top-level `key` to the string `value` (and removes `drop` when not NULL). Returns
 * 0, or an exit code (printed). */
static int spec_set_string(struct strbuf *spec, const char *key, const char *value,
                           const char *drop)
{
    json_t *o = json_loadb(sb_str(spec), spec->len, 0, NULL);
    if (o == NULL || json_object_set_new(o, key, json_string(value)) != 0) {
        json_decref(o);
        return cli_input_error("cannot add %s to the job spec", key);
    }
    if (drop)
        json_object_del(o, drop);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text == NULL)
        return cli_input_error("cannot add %s to the job spec", key);
    sb_free(spec);
    sb_append(spec, text, strlen(text));
    free(text);
    return 0;
}

static int with_code_package(struct cli_ctx *ctx, const struct cli_args *args, const char *dir,
                             struct strbuf *spec)
{
    long max_mb = CODE_PACK_DEFAULT_MAX_MB;
    int rc = cli_flag_long(ctx, args, "max-package-mb", 1, 1L << 20, &max_mb);
    if (rc != 0)
        return rc;
    char sha[65];
    if ((rc = code_pack_upload(ctx, dir, (long long)max_mb << 20, sha)) != CLI_EXIT_OK)
        return rc;
    return spec_set_string(spec, "code_package", sha, "working_dir");
}

/* Parses every --assert into gates. Returns how many; *rc = 0, or an exit code (printed). */
static int parse_gates(struct cli_ctx *ctx, const struct cli_args *args, struct gate *gates,
                       int *rc)
{
    const char *texts[CLI_MAX_VALUES];
    int n = args_flag_values(args, "assert", texts, CLI_MAX_VALUES);
    *rc = 0;
    for (int i = 0; i < n; i++) {
        char err[300];
        if (gate_parse(texts[i], &gates[i], err, sizeof err) != 0) {
            *rc = cli_usage_error(ctx, "%s", err);
            return 0;
        }
    }
    return n;
}

/*
 * Checks the gates against job `id`'s final rank-0 metrics (its result.metrics). Returns
 * CLI_EXIT_OK, CLI_EXIT_GATE after printing each miss, or the API call's exit code.
 */
static int check_gates(struct cli_ctx *ctx, long id, const struct gate *gates, int n)
{
    char path[64];
    snprintf(path, sizeof path, "/api/v1/jobs/%ld", id);
    json_t *job = NULL;
    int rc = api_json(ctx, "GET", path, NULL, 0, &job);
    if (rc != CLI_EXIT_OK)
        return rc;
    const json_t *metrics = json_object_get(json_object_get(job, "result"), "metrics");
    int missed = 0;
    for (int i = 0; i < n; i++) {
        char msg[400];
        if (!gate_check(&gates[i], metrics, msg, sizeof msg)) {
            fprintf(stderr, "error: quality gate missed: %s\n", msg);
            missed++;
        }
    }
    json_decref(job);
    if (missed)
        return CLI_EXIT_GATE;
    fprintf(stderr, "quality gates passed (%d)\n", n);
    return CLI_EXIT_OK;
}

int cmd_submit(struct cli_ctx *ctx, const struct cli_args *args)
{
    bool wait = args_flag(args, "wait") != NULL;
    long timeout_s = 0;
    int rc;
    if ((rc = cli_flag_long(ctx, args, "wait-timeout", 1, LONG_MAX / 1000, &timeout_s)) != 0)
        return rc;
    bool follow = args_flag(args, "follow") != NULL;
    if (args_flag(args, "wait-timeout") && !wait)
        return cli_usage_error(ctx, "--wait-timeout only makes sense with --wait");
    if (follow && !wait)
        return cli_usage_error(ctx, "--follow only makes sense with --wait");

    struct gate gates[CLI_MAX_VALUES];
    int n_gates = parse_gates(ctx, args, gates, &rc);
    if (rc != 0)
        return rc;
    if (n_gates > 0 && !wait)
        return cli_usage_error(ctx, "--assert only makes sense with --wait");

    struct strbuf spec = STRBUF_INIT;
    if ((rc = cli_read_input("job spec", args->pos[0], &spec)) != 0 ||
        (rc = check_spec(args->pos[0], &spec)) != 0) {
        sb_free(&spec);
        return rc;
    }
    const char *project = args_flag(args, "project");
    if (project && !project[0]) {
        sb_free(&spec);
        return cli_usage_error(ctx, "--project must not be empty");
    }
    if (project && (rc = spec_set_string(&spec, "project", project, NULL)) != 0) {
        sb_free(&spec);
        return rc;
    }
    const char *wdir = args_flag(args, "working-dir");
    if (wdir && (rc = with_code_package(ctx, args, wdir, &spec)) != 0) {
        sb_free(&spec);
        return rc;
    }
    json_t *job = NULL;
    rc = api_json_idempotent(ctx, "/api/v1/jobs", sb_str(&spec), spec.len, &job);
    sb_free(&spec);
    if (rc != CLI_EXIT_OK)
        return rc;

    const json_t *id = json_object_get(job, "id");
    if (!json_is_integer(id) || json_integer_value(id) < 1 || json_integer_value(id) > LONG_MAX) {
        fputs("error: the server accepted the job but its reply has no integer \"id\"\n", stderr);
        json_decref(job);
        return CLI_EXIT_FAILED;
    }
    long job_id = (long)json_integer_value(id);
    if (!wait) {
        if (ctx->cfg.output == CLI_OUTPUT_JSON)
            api_print_json(job);
        else
            printf("%ld\n", job_id);
        json_decref(job);
        return CLI_EXIT_OK;
    }
    json_decref(job);
    if (ctx->cfg.output == CLI_OUTPUT_TABLE) {
        printf("%ld\n", job_id);
        fflush(stdout); /* scripts and CI logs see the id before the wait */
    }
    rc = cli_wait_for_job(ctx, job_id, timeout_s, false, follow);
    if (rc != CLI_EXIT_OK || n_gates == 0)
        return rc;
    return check_gates(ctx, job_id, gates, n_gates);
}

/* ---------------------------------------------------------------------------------------------
 * list
 * ------------------------------------------------------------------------------------------- */

static const char *const list_headers[] = {"ID", "NAME", "STATUS", "WORKERS", "OWNER", "CREATED"};

static void list_add_rows(struct out_table *t, const json_t *jobs)
{
    size_t i;
    json_t *job;
    json_array_foreach(jobs, i, job)
    {
        struct strbuf workers = STRBUF_INIT;
        table_cell_json(t, json_object_get(job, "id"));
        table_cell_json(t, json_object_get(job, "name"));
        table_cell_json(t, json_object_get(job, "status"));
        job_workers_text(&workers, job);
        table_cell_steal(t, sb_steal(&workers));
        table_cell_json(t, json_object_get(job, "owner"));
        table_cell_time(t, json_object_get(job, "created_at"));
    }
}

int cmd_list(struct cli_ctx *ctx, const struct cli_args *args)
{
    long limit = 0;
    int rc;
    if ((rc = cli_flag_long(ctx, args, "limit", 1, INT_MAX, &limit)) != 0)
        return rc;
    bool all = args_flag(args, "all") != NULL;
    bool json = ctx->cfg.output == CLI_OUTPUT_JSON;

    /* Statuses are upper case on the wire; accept "running" too. */
    char *status = NULL;
    if (args_flag(args, "status")) {
        status = xstrdup(args_flag(args, "status"));
        for (char *p = status; *p; p++)
            *p = (char)toupper((unsigned char)*p);
    }
    char *cursor = args_flag(args, "cursor") ? xstrdup(args_flag(args, "cursor")) : NULL;
    char limit_text[32];
    snprintf(limit_text, sizeof limit_text, "%ld", limit);

    struct out_table t;
    table_init(&t, list_headers, sizeof list_headers / sizeof list_headers[0]);
    json_t *merged = json_array();
    for (;;) {
        struct strbuf path = STRBUF_INIT;
        sb_puts(&path, "/api/v1/jobs");
        api_query(ctx, &path, "status", status);
        api_query(ctx, &path, "project", args_flag(args, "project"));
        api_query(ctx, &path, "tag", args_flag(args, "tag"));
        api_query(ctx, &path, "limit", limit ? limit_text : NULL);
        api_query(ctx, &path, "cursor", cursor);
        json_t *page = NULL;
        rc = api_json(ctx, "GET", sb_str(&path), NULL, 0, &page);
        sb_free(&path);
        if (rc != CLI_EXIT_OK)
            break;
        const json_t *jobs = json_object_get(page, "jobs");
        const json_t *next = json_object_get(page, "next_cursor");
        if (!json_is_array(jobs) || !(json_is_null(next) || json_is_string(next) || !next)) {
            fputs("error: unexpected reply from the server: no \"jobs\" array\n", stderr);
            json_decref(page);
            rc = CLI_EXIT_FAILED;
            break;
        }
        if (json && !all) {
            api_print_json(page);
            json_decref(page);
            break;
        }
        if (json)
            json_array_extend(merged, (json_t *)jobs);
        else
            list_add_rows(&t, jobs);

        const char *next_text = json_is_string(next) ? json_string_value(next) : NULL;
        /* A cursor that does not move would loop forever: stop there. */
        bool more = next_text && next_text[0] && !(cursor && strcmp(cursor, next_text) == 0);
        if (more && !all)
            fprintf(stderr, "(more jobs: run with --all, or --cursor %s for the next page)\n",
                    next_text);
        free(cursor);
        cursor = more ? xstrdup(next_text) : NULL;
        json_decref(page);
        if (!all || !more)
            break;
    }
    if (rc == CLI_EXIT_OK && all && json) {
        json_t *out = json_pack("{s:O, s:n}", "jobs", merged, "next_cursor");
        api_print_json(out);
        json_decref(out);
    } else if (rc == CLI_EXIT_OK && !json) {
        table_print(&t, stdout);
    }
    json_decref(merged);
    table_free(&t);
    free(cursor);
    free(status);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * get / stop / delete
 * ------------------------------------------------------------------------------------------- */

static void print_job(const json_t *job)
{
    struct out_table t;
    struct strbuf sb = STRBUF_INIT;
    const json_t *result = json_object_get(job, "result");
    table_init(&t, NULL, 2);
    kv_json(&t, "id", json_object_get(job, "id"));
    kv_json(&t, "name", json_object_get(job, "name"));
    kv_json(&t, "status", json_object_get(job, "status"));
    kv_json(&t, "status_message", json_object_get(job, "status_message"));
    kv_json(&t, "owner", json_object_get(job, "owner"));
    kv_json(&t, "priority", json_object_get(job, "priority"));
    kv_json(&t, "tags", json_object_get(job, "tags"));
    kv_json(&t, "notes", json_object_get(job, "notes"));
    job_workers_text(&sb, job);
    kv_text(&t, "workers", sb_str(&sb));
    sb_free(&sb);
    job_entrypoint_text(&sb, job);
    kv_text(&t, "entrypoint", sb_str(&sb));
    sb_free(&sb);
    kv_json(&t, "attempt", json_object_get(job, "attempt"));
    kv_json(&t, "created_at", json_object_get(job, "created_at"));
    kv_json(&t, "started_at", json_object_get(job, "started_at"));
    kv_json(&t, "finished_at", json_object_get(job, "finished_at"));
    kv_json(&t, "metrics", json_object_get(result, "metrics"));
    kv_json(&t, "latest_checkpoint", json_object_get(result, "latest_checkpoint"));
    kv_json(&t, "best_checkpoint", json_object_get(result, "best_checkpoint"));
    kv_json(&t, "error", json_object_get(result, "error"));
    kv_json(&t, "goodput", json_object_get(json_object_get(job, "goodput"), "ratio"));
    table_print(&t, stdout);
    table_free(&t);
}

/*
 * Sends `method` to /api/v1/jobs/<args->pos[0]><suffix> with no body. Stores the parsed job id
 * in *id and, when `out` is non-NULL, the reply in *out (the caller json_decref's it). Returns
 * the exit code (the problem already printed).
 */
static int job_call(struct cli_ctx *ctx, const struct cli_args *args, const char *method,
                    const char *suffix, long *id, json_t **out)
{
    int rc = cli_parse_id(ctx, args->pos[0], "job id", id);
    if (rc != 0)
        return rc;
    struct strbuf path = STRBUF_INIT;
    job_path(&path, *id, suffix);
    rc = api_json(ctx, method, sb_str(&path), NULL, 0, out);
    sb_free(&path);
    return rc;
}

int cmd_get(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    json_t *job = NULL;
    int rc = job_call(ctx, args, "GET", "", &id, &job);
    if (rc == CLI_EXIT_OK) {
        if (ctx->cfg.output == CLI_OUTPUT_JSON)
            api_print_json(job);
        else
            print_job(job);
    }
    json_decref(job);
    return rc;
}

int cmd_attempts(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    int rc;
    if ((rc = cli_parse_id(ctx, args->pos[0], "job id", &id)) != 0)
        return rc;
    struct strbuf path = STRBUF_INIT;
    job_path(&path, id, "/attempts");
    json_t *reply;
    const json_t *items;
    rc = api_get_list(ctx, sb_str(&path), "attempts", &reply, &items);
    sb_free(&path);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
        json_decref(reply);
        return CLI_EXIT_OK;
    }
    static const char *const headers[] = {"ATTEMPT",  "STATUS",    "WORKERS", "STARTED",
                                          "FINISHED", "SLURM JOB", "ERROR"};
    struct out_table t;
    size_t i;
    json_t *a;
    table_init(&t, headers, sizeof headers / sizeof headers[0]);
    json_array_foreach(items, i, a)
    {
        table_cell_json(&t, json_object_get(a, "attempt"));
        table_cell_json(&t, json_object_get(a, "status"));
        table_cell_json(&t, json_object_get(a, "world_size"));
        table_cell_time(&t, json_object_get(a, "created_at"));
        table_cell_time(&t, json_object_get(a, "finished_at"));
        table_cell_json(&t, json_object_get(a, "slurm_job_id"));
        table_cell_json(&t, json_object_get(a, "error"));
    }
    table_print(&t, stdout);
    table_free(&t);
    json_decref(reply);
    return CLI_EXIT_OK;
}

int cmd_stop(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    json_t *job = NULL;
    int rc = job_call(ctx, args, "POST", "/stop", &id, &job);
    if (rc == CLI_EXIT_OK) {
        if (ctx->cfg.output == CLI_OUTPUT_JSON) {
            api_print_json(job);
        } else {
            struct strbuf sb = STRBUF_INIT;
            out_value(&sb, json_object_get(job, "status"));
            printf("job %ld %s\n", id, sb_str(&sb));
            sb_free(&sb);
        }
    }
    json_decref(job);
    return rc;
}

/* trainyard tag ID [TAG...] [--notes TEXT]: PATCH /api/v1/jobs/ID. Tags given replace the job's
 * tags (--clear: none); --notes sets its notes. */
int cmd_tag(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    int rc = cli_parse_id(ctx, args->pos[0], "job id", &id);
    if (rc != 0)
        return rc;
    const char *notes = args_flag(args, "notes");
    bool clear = args_flag(args, "clear") != NULL;
    if (clear && args->npos > 1)
        return cli_usage_error(ctx, "give tags or --clear, not both");
    if (args->npos == 1 && !clear && !notes)
        return cli_usage_error(ctx, "give tags, --clear or --notes TEXT");
    json_t *body = json_object();
    if (args->npos > 1 || clear) {
        json_t *tags = json_array();
        for (int i = 1; i < args->npos; i++)
            json_array_append_new(tags, json_string(args->pos[i]));
        json_object_set_new(body, "tags", tags);
    }
    if (notes)
        json_object_set_new(body, "notes", json_string(notes));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (text == NULL) {
        fputs("error: a tag or the notes are not valid UTF-8\n", stderr);
        return CLI_EXIT_USAGE;
    }
    struct strbuf path = STRBUF_INIT;
    job_path(&path, id, "");
    json_t *job = NULL;
    rc = api_json(ctx, "PATCH", sb_str(&path), text, strlen(text), &job);
    sb_free(&path);
    free(text);
    if (rc == CLI_EXIT_OK) {
        if (ctx->cfg.output == CLI_OUTPUT_JSON) {
            api_print_json(job);
        } else {
            struct strbuf sb = STRBUF_INIT;
            out_value(&sb, json_object_get(job, "tags"));
            printf("job %ld tags %s\n", id, sb_str(&sb));
            sb_free(&sb);
        }
    }
    json_decref(job);
    return rc;
}

int cmd_delete(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    int rc = job_call(ctx, args, "DELETE", "", &id, NULL);
    if (rc == CLI_EXIT_OK && ctx->cfg.output == CLI_OUTPUT_TABLE)
        printf("deleted job %ld\n", id);
    return rc;
}
