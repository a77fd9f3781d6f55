/*
 * cli.h - what every command sees: exit codes and the per-run context.
 */
#ifndef TY_CLI_H
#define TY_CLI_H

#include "args.h"
#include "config.h"

#include <jansson.h>
#include <stdbool.h>

/* Process exit codes; part of the CLI's contract with scripts and CI. */
enum cli_exit {
    CLI_EXIT_OK = 0,          /* done; for --wait: the job SUCCEEDED */
    CLI_EXIT_FAILED = 1,      /* the server said no (4xx/5xx), odd reply, or the job FAILED */
    CLI_EXIT_USAGE = 2,       /* bad command line or bad local input */
    CLI_EXIT_UNREACHABLE = 3, /* the server could not be reached (for --wait/--follow: for
                                 --reconnect-timeout seconds) */
    CLI_EXIT_STOPPED = 4,     /* --wait: the job was STOPPED */
    CLI_EXIT_TIMEOUT = 5,     /* --wait: the time limit passed before the job finished */
    CLI_EXIT_GATE = 6,        /* --wait --assert: the job SUCCEEDED but its final rank-0
                                 metrics missed a quality gate */
};

struct http_client;

struct cli_ctx {
    struct cli_config cfg;
    struct http_client *http;
    const struct cli_command *cmd; /* the command being run */
};

/*
 * Prints "error: <message>" and a pointer to the running command's --help on stderr, and
 * returns CLI_EXIT_USAGE, so commands can `return cli_usage_error(ctx, ...)`.
 */
int cli_usage_error(const struct cli_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "error: <message>" on stderr and returns CLI_EXIT_USAGE (bad local input, not syntax). */
int cli_input_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct strbuf;
/*
 * Reads the whole of file `name` ("-" for stdin) into sb. Returns 0, or prints why not, naming
 * `what` ("job spec", "sweep") and the file, and returns CLI_EXIT_USAGE.
 */
int cli_read_input(const char *what, const char *name, struct strbuf *sb);

/*
 * Parses a positional job id (a positive integer). On failure prints a usage error naming `what`
 * and returns CLI_EXIT_USAGE; else 0.
 */
int cli_parse_id(const struct cli_ctx *ctx, const char *text, const char *what, long *out);

/*
 * Parses the value of command flag `name` as an integer in [min, max]; leaves *out untouched when
 * the flag is absent. Returns 0, or prints a usage error and returns CLI_EXIT_USAGE.
 */
int cli_flag_long(const struct cli_ctx *ctx, const struct cli_args *args, const char *name,
                  long min, long max, long *out);

/* Command handlers, one group per file: cmd_jobs.c, cmd_wait.c, cmd_job_data.c, cmd_nodes.c,
 * cmd_tokens.c, cmd_projects.c, cmd_server.c. Each returns an enum cli_exit. */
int cmd_submit(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_list(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_get(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_stop(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_tag(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_delete(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_wait(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_workers(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_checkpoints(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_attempts(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_checkpoint_download(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_metrics(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_logs(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_nodes(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_drain(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_undrain(struct cli_ctx *ctx, const struct cli_args *args);
/* cmd_sweeps.c: sweeps (docs/sweeps.md). */
int cmd_sweep_submit(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_sweep_list(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_sweep_get(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_sweep_stop(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_project_create(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_project_list(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_project_add_member(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_project_remove_member(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_project_delete(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_project_quota(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_project_set_quota(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_token_create(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_token_list(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_token_delete(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_health(struct cli_ctx *ctx, const struct cli_args *args);
int cmd_version(struct cli_ctx *ctx, const struct cli_args *args);

/*
 * Waits for job `id` to reach a terminal status or timeout_s to pass (0: no limit). Used by
 * `wait` and `submit --wait`. Without follow it polls GET /jobs/{id}; with follow it reads the
 * job's stream (cli_follow_wait). Status changes go to stderr; the final job goes to stdout as
 * JSON in json mode, and in table mode as the status word when print_status is set.
 * Returns CLI_EXIT_OK (SUCCEEDED), CLI_EXIT_FAILED (FAILED, or the server refused),
 * CLI_EXIT_STOPPED, CLI_EXIT_TIMEOUT or CLI_EXIT_UNREACHABLE.
 */
int cli_wait_for_job(struct cli_ctx *ctx, long id, long timeout_s, bool print_status, bool follow);

/*
 * Prints the outcome of a finished job (job: its GET reply, or NULL when it could not be read;
 * status: its terminal status) and returns the exit code it stands for (see cli_wait_for_job).
 */
int cli_wait_finish(struct cli_ctx *ctx, long id, const json_t *job, const char *status,
                    bool print_status);

/* ----- cmd_follow.c: following a job's stream (docs/streams.md) ------------------------------ */

/* `events ID [--follow]`: status changes, worker changes, checkpoints, one line each. */
int cmd_events(struct cli_ctx *ctx, const struct cli_args *args);

/*
 * `wait --follow` / `submit --wait --follow`: prints the job's log lines ("[rank R] line") and
 * rank-0 reports ("[report] step S name=value ...") on stdout as they arrive, status changes on
 * stderr, until the job ends or timeout_s passes; then as cli_wait_for_job.
 */
int cli_follow_wait(struct cli_ctx *ctx, long id, long timeout_s, bool print_status);

/* `metrics ID --follow`: a line per report (filtered by name and rank, -1 for all ranks) from
 * the first one on, until the job ends (exit 0). */
int cli_follow_metrics(struct cli_ctx *ctx, long id, const char *name, long rank);

/*
 * `logs ID --follow`: the job's log lines from the first on, until the job ends (exit 0):
 * "[rank R] line" for every rank, or one rank's lines as they are when rank >= 0 (as `logs`
 * prints them). rank and attempt (-1: all) filter; grep (POSIX extended regex, or NULL) keeps
 * the matching lines. A bad regex is a usage error.
 */
/* stream: "stdout" or "stderr" (only its lines), or NULL (both). */
int cli_follow_logs(struct cli_ctx *ctx, long id, long rank, long attempt, const char *grep,
                    const char *stream);
/* Prints one log line of rank `rank` from `stream` to stdout: "[rank R] " first when prefix_rank,
 * "[stderr] " (or "[rank R stderr] ") when mark_stream and it is stderr's, the whole line red
 * when stdout is a terminal (and NO_COLOR is unset). */
void cli_print_log_line(long long rank, bool prefix_rank, const char *stream, bool mark_stream,
                        const char *text, size_t len);

#endif
