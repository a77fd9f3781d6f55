/*
 * commands.c - the command table, help text, and small helpers shared by the handlers.
 */
#include "commands.h"

#include "cli.h"
#include "strbuf.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Flags per command
 * ------------------------------------------------------------------------------------------- */

static const struct cli_flag no_flags[] = {{NULL, NULL, NULL, false}};

static const struct cli_flag events_flags[] = {
    {"follow", NULL, "keep printing as they happen, until the job ends", false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag submit_flags[] = {
    {"wait", NULL, "wait until the job finishes; exit 0 only if it SUCCEEDED", false},
    {"wait-timeout", "S", "with --wait, give up after S seconds (exit 5); default: no limit",
     false},
    {"follow", NULL, "with --wait, print log lines and rank-0 reports as they arrive", false},
    {"working-dir", "DIR",
     "pack DIR (.gitignore and .trainyardignore patterns left out), upload it unless the server "
     "has it, and run the workers in a copy of it (sets the spec's code_package)",
     false},
    {"max-package-mb", "N", "with --working-dir, refuse a package over N MiB (default 100)", false},
    {"project", "P", "submit into project P (sets the spec's \"project\"; default: \"default\")",
     false},
    {"assert", "COND",
     "with --wait, a quality gate such as 'accuracy>=0.85' on the final rank-0 metrics (repeat "
     "for several); a miss exits 6 naming the metric and its value",
     false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag list_flags[] = {
    {"status", "S[,S...]", "only jobs in these statuses (PENDING, RUNNING, SUCCEEDED, ...)", false},
    {"limit", "N", "jobs per page (server default when absent)", false},
    {"cursor", "C", "start from this page cursor (printed when more jobs exist)", false},
    {"all", NULL, "follow next_cursor and list every matching job", false},
    {"project", "P", "only jobs of project P", false},
    {"tag", "T", "only jobs tagged T", false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag tag_flags[] = {
    {"notes", "TEXT", "set the job's notes", false},
    {"clear", NULL, "remove every tag", false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag drain_flags[] = {
    {"no-preempt", NULL,
     "let the jobs running on the node finish there instead of checkpointing and moving them",
     false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag wait_flags[] = {
    {"timeout", "S", "give up after S seconds (exit 5); default: no limit", false},
    {"follow", NULL, "print log lines and rank-0 reports as they arrive", false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag metrics_flags[] = {
    {"name", "N", "only the metric called N", false},
    {"rank", "R", "only metrics reported by this rank", false},
    {"follow", NULL, "print a line per report as it arrives, until the job ends", false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag logs_flags[] = {
    {"rank", "R", "only this rank's lines (default: every rank, each line prefixed by its rank)",
     false},
    {"attempt", "N", "this attempt (default: the job's current one)", false},
    {"tail", "N", "only the last N lines", false},
    {"grep", "RE", "only lines matching the regular expression RE (PostgreSQL syntax)", false},
    {"stderr", NULL, "only what the workers wrote to stderr", false},
    {"stdout", NULL, "only what the workers wrote to stdout", false},
    {"follow", NULL,
     "print lines as they arrive, from the first, until the job ends (not with --tail)", false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag token_create_flags[] = {
    {"name", "N", "who or what the token is for", true},
    {"role", "R", "viewer, user or admin", true},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag sweep_submit_flags[] = {
    {"wait", NULL, "wait until the sweep finishes; exit 0 only if it SUCCEEDED", false},
    {"wait-timeout", "S", "with --wait, give up after S seconds (exit 5); default: no limit",
     false},
    {"assert", "COND",
     "with --wait, a quality gate such as 'acc>=0.85' on the best trial's final metrics (repeat "
     "for several); a miss exits 6",
     false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag project_create_flags[] = {
    {"private", NULL, "only members and admins see its jobs (the default)", false},
    {"shared", NULL, "every role sees its jobs", false},
    {"member", "USER", "another member besides you (repeat for several)", false},
    {NULL, NULL, NULL, false},
};

static const struct cli_flag project_quota_flags[] = {
    {"cpus", "N", "CPUs the project's running workers may hold (0 or none: no project limit)",
     false},
    {"gpus", "N", "GPUs the project's running workers may hold (0 or none: no project limit)",
     false},
    {"artifact-bytes", "N",
     "bytes the checkpoints of the project's jobs may keep in the artifact store (0 or none: no "
     "project limit)",
     false},
    {NULL, NULL, NULL, false},
};

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------- */

static const struct cli_command commands[] = {
    {NULL, "submit", "FILE|-", "submit a job spec (JSON file, or - for stdin); prints the job id",
     "The spec is checked locally for JSON syntax, then sent as is. With --wait the command\n"
     "follows the job and exits with its outcome (0 SUCCEEDED, 1 FAILED, 4 STOPPED, 5 timed\n"
     "out, 6 a missed --assert), for CI pipelines; --follow also prints its log lines ('[rank R] "
     "...') and one\n"
     "line per rank-0 report ('[report] step S name=value ...') as they arrive.",
     1, 1, submit_flags, cmd_submit},
    {NULL, "list", "", "list jobs, newest first", NULL, 0, 0, list_flags, cmd_list},
    {NULL, "get", "ID", "show one job: status, times, result", NULL, 1, 1, no_flags, cmd_get},
    {NULL, "stop", "ID", "stop a job", NULL, 1, 1, no_flags, cmd_stop},
    {NULL, "tag", "ID [TAG...]", "set a job's tags (replacing them) and notes",
     "Tags are 1 to 64 letters, digits or -_.:/=+@, at most 32; `trainyard list --tag T` finds\n"
     "the jobs tagged T. The job's owner and admins may change them.",
     1, CLI_MAX_POSITIONAL, tag_flags, cmd_tag},
    {NULL, "delete", "ID", "delete a finished job and its records", NULL, 1, 1, no_flags,
     cmd_delete},
    {NULL, "wait", "ID", "wait until a job finishes; exit 0 only if it SUCCEEDED",
     "Prints status changes on stderr and the final status on stdout; exits 0 SUCCEEDED,\n"
     "1 FAILED, 4 STOPPED, 5 timed out. With --follow, log lines ('[rank R] ...') and\n"
     "rank-0 reports ('[report] step S ...') go to stdout as they arrive.",
     1, 1, wait_flags, cmd_wait},
    {NULL, "events", "ID", "a job's status changes, worker changes and checkpoints",
     "One line each: 'TIME status S (attempt N): message', 'TIME worker rank R S ...',\n"
     "'TIME checkpoint I S ...'. Read from the live stream (-o json: one stream message per\n"
     "line); with --follow it keeps going and exits 0 when the job ends.",
     1, 1, events_flags, cmd_events},
    {NULL, "workers", "ID",
     "list a job's workers: rank, node, pid, GPUs, exit code, CPU and memory",
     "CPU is the worker's CPU time, MEM its memory now and MEM_PEAK the most it used, from its\n"
     "cgroup (sampled every second; the totals are kept once it ended); - where it has none.",
     1, 1, no_flags, cmd_workers},
    {NULL, "metrics", "ID", "list the metrics a job reported", NULL, 1, 1, metrics_flags,
     cmd_metrics},
    {NULL, "logs", "ID", "print what a job's workers wrote to stdout and stderr",
     "Lines as the server stored them, one rank's as they are, several ranks' prefixed by\n"
     "'[rank R] '; lines of stderr are marked '[stderr] ' ('[rank R stderr] '), and red on a\n"
     "terminal, unless --stderr or --stdout picks one stream; -o json prints JSON lines\n"
     "{rank, attempt, stream, offset, at, line}.",
     1, 1, logs_flags, cmd_logs},
    {NULL, "attempts", "ID", "list a job's attempts: status, workers, times, Slurm job id, error",
     NULL, 1, 1, no_flags, cmd_attempts},
    {NULL, "checkpoints", "ID", "list a job's checkpoints and whether the server stores them", NULL,
     1, 1, no_flags, cmd_checkpoints},
    {"checkpoint", "download", "CID DIR",
     "download checkpoint CID from the artifact store and unpack it into DIR",
     "DIR is created when missing; the files land as the workers wrote them (every node's\n"
     "part). Fails (exit 1) while the checkpoint is not completely uploaded yet.",
     2, 2, no_flags, cmd_checkpoint_download},
    {NULL, "nodes", "", "list cluster nodes and their free resources", NULL, 0, 0, no_flags,
     cmd_nodes},
    {NULL, "drain", "NODE",
     "stop placing workers on a node and move its running jobs elsewhere (admin)",
     "New workers are no longer placed on NODE. Each job running there is asked to checkpoint\n"
     "(ty_should_checkpoint(), trainyard.should_checkpoint()), stopped after its\n"
     "failure_config.preemption_grace_s and restarted elsewhere from its latest checkpoint\n"
     "(counted in its preemptions, not its failures). With --no-preempt running jobs finish on\n"
     "NODE. 'trainyard undrain NODE' takes it back.",
     1, 1, drain_flags, cmd_drain},
    {NULL, "undrain", "NODE", "place new workers on a drained node again (admin)", NULL, 1, 1,
     no_flags, cmd_undrain},
    {"token", "create", "", "create an API token (admin); prints the token, shown only once", NULL,
     0, 0, token_create_flags, cmd_token_create},
    {"token", "list", "", "list API tokens (admin)", NULL, 0, 0, no_flags, cmd_token_list},
    {"token", "delete", "ID", "revoke an API token (admin)", NULL, 1, 1, no_flags,
     cmd_token_delete},
    {"sweep", "submit", "FILE|-", "submit a sweep (Ray Tune: job, param_space, tune_config)",
     "FILE is the JSON body of POST /api/v1/sweeps (docs/sweeps.md); prints the sweep's id.", 1, 1,
     sweep_submit_flags, cmd_sweep_submit},
    {"sweep", "list", "", "list the sweeps you may see", NULL, 0, 0, no_flags, cmd_sweep_list},
    {"sweep", "get", "ID", "show a sweep and its trials (config, status, metric, stopped by)", NULL,
     1, 1, no_flags, cmd_sweep_get},
    {"sweep", "stop", "ID", "stop a sweep and its unfinished trials", NULL, 1, 1, no_flags,
     cmd_sweep_stop},
    {"project", "create", "NAME", "create a project; you are a member of it",
     "A private project's jobs (spec, logs, metrics, events, checkpoints, list entries, stream)\n"
     "are seen only by its members and admins; a shared one's by every role. Jobs go into a\n"
     "project with 'trainyard submit --project NAME' or the spec's \"project\".",
     1, 1, project_create_flags, cmd_project_create},
    {"project", "list", "", "list the projects you may see", NULL, 0, 0, no_flags,
     cmd_project_list},
    {"project", "add-member", "NAME USER", "add USER to project NAME (members and admins)", NULL, 2,
     2, no_flags, cmd_project_add_member},
    {"project", "remove-member", "NAME USER",
     "remove USER from project NAME (members and admins; yourself to leave it)",
     "The last member of a private project stays: add another member first, or delete it.", 2, 2,
     no_flags, cmd_project_remove_member},
    {"project", "delete", "NAME", "delete project NAME, which must have no jobs (members, admins)",
     NULL, 1, 1, no_flags, cmd_project_delete},
    {"project", "quota", "NAME",
     "show project NAME's quotas and what its jobs use (members, admins)", NULL, 1, 1, no_flags,
     cmd_project_quota},
    {"project", "set-quota", "NAME", "set project NAME's quotas (admin)",
     "Fields not given keep their value. Code packages count against the users who upload\n"
     "them, not against projects.",
     1, 1, project_quota_flags, cmd_project_set_quota},
    {NULL, "health", "", "check that the server and its database are up", NULL, 0, 0, no_flags,
     cmd_health},
    {NULL, "version", "", "print client and server versions", NULL, 0, 0, no_flags, cmd_version},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static bool same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

const struct cli_command *commands_find(const char *group, const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (same(commands[i].group, group) && strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

bool commands_is_group(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (commands[i].group && strcmp(commands[i].group, name) == 0)
            return true;
    return false;
}

/* ---------------------------------------------------------------------------------------------
 * Help
 * ------------------------------------------------------------------------------------------- */

static void print_usage_line(FILE *f, const struct cli_command *c)
{
    fprintf(f, "trainyard %s%s%s%s%s", c->group ? c->group : "", c->group ? " " : "", c->name,
            c->pos_usage[0] ? " " : "", c->pos_usage);
    for (int i = 0; c->flags[i].name; i++)
        fprintf(f, " %s--%s%s%s%s", c->flags[i].required ? "" : "[", c->flags[i].name,
                c->flags[i].metavar ? " " : "", c->flags[i].metavar ? c->flags[i].metavar : "",
                c->flags[i].required ? "" : "]");
    fputc('\n', f);
}

static void print_command_row(FILE *f, const struct cli_command *c)
{
    char left[64];
    snprintf(left, sizeof left, "%s%s%s%s%s", c->group ? c->group : "", c->group ? " " : "",
             c->name, c->pos_usage[0] ? " " : "", c->pos_usage);
    fprintf(f, "  %-22s %s\n", left, c->summary);
}

static void print_exit_codes(FILE *f)
{
    fputs("Exit codes: 0 ok (--wait: the job SUCCEEDED); 1 the server refused (4xx/5xx)\n"
          "            or the job FAILED; 2 usage or local input error; 3 the server cannot\n"
          "            be reached (--wait/--follow: for --reconnect-timeout seconds);\n"
          "            4 the job was STOPPED; 5 --wait timed out; 6 --wait --assert: the job\n"
          "            SUCCEEDED but a final metric missed its bound.\n",
          f);
}

void commands_print_overview(FILE *f)
{
    fputs("trainyard - command line client for the Trainyard training service\n\n"
          "Usage: trainyard [global options] COMMAND [arguments] [options]\n\nCommands:\n",
          f);
    for (size_t i = 0; i < N_COMMANDS; i++)
        print_command_row(f, &commands[i]);
    fputc('\n', f);
    config_print_help(f);
    fputc('\n', f);
    print_exit_codes(f);
    fputs("Run 'trainyard COMMAND --help' for a command's options.\n", f);
}

void commands_print_group(FILE *f, const char *group)
{
    fprintf(f, "Usage: trainyard %s SUBCOMMAND [options]\n\nSubcommands:\n", group);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (commands[i].group && strcmp(commands[i].group, group) == 0)
            print_command_row(f, &commands[i]);
    fprintf(f, "\nRun 'trainyard %s SUBCOMMAND --help' for its options.\n", group);
}

void commands_print_command(FILE *f, const struct cli_command *c)
{
    fputs("Usage: ", f);
    print_usage_line(f, c);
    fprintf(f, "\n%s.\n", c->summary);
    if (c->description)
        fprintf(f, "\n%s\n", c->description);
    if (c->flags[0].name) {
        fputs("\nOptions:\n", f);
        for (int i = 0; c->flags[i].name; i++) {
            char left[64];
            snprintf(left, sizeof left, "--%s%s%s", c->flags[i].name,
                     c->flags[i].metavar ? " " : "",
                     c->flags[i].metavar ? c->flags[i].metavar : "");
            fprintf(f, "  %-28s %s\n", left, c->flags[i].help);
        }
    }
    /* The global options are the same for every command: listed once, in 'trainyard --help'. */
    fputs("\nGlobal options (--server, --token, --output, ...): see 'trainyard --help'.\n\n", f);
    print_exit_codes(f);
}

/* ---------------------------------------------------------------------------------------------
 * Helpers for handlers
 * ------------------------------------------------------------------------------------------- */

int cli_usage_error(const struct cli_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    fputs("error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (ctx && ctx->cmd)
        fprintf(stderr, "\nRun 'trainyard %s%s%s --help' for usage.\n",
                ctx->cmd->group ? ctx->cmd->group : "", ctx->cmd->group ? " " : "", ctx->cmd->name);
    else
        fputs("\nRun 'trainyard --help' for usage.\n", stderr);
    return CLI_EXIT_USAGE;
}

int cli_input_error(const char *fmt, ...)
{
    va_list ap;
    fputs("error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_USAGE;
}

int cli_read_input(const char *what, const char *name, struct strbuf *sb)
{
    bool is_stdin = strcmp(name, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(name, "rb");
    if (!f)
        return cli_input_error("cannot open %s '%s': %s", what, name, strerror(errno));
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        sb_append(sb, chunk, n);
    int failed = ferror(f) ? errno : 0;
    if (!is_stdin)
        fclose(f);
    if (failed)
        return cli_input_error("cannot read %s '%s': %s", what, is_stdin ? "<stdin>" : name,
                               strerror(failed));
    return 0;
}

int cli_parse_id(const struct cli_ctx *ctx, const char *text, const char *what, long *out)
{
    if (parse_long(text, 1, LONG_MAX, out) != 0)
        return cli_usage_error(ctx, "invalid %s '%s' (expected a positive integer)", what, text);
    return 0;
}

int cli_flag_long(const struct cli_ctx *ctx, const struct cli_args *args, const char *name,
                  long min, long max, long *out)
{
    const char *v = args_flag(args, name);
    if (!v)
        return 0;
    if (parse_long(v, min, max, out) != 0)
        return cli_usage_error(ctx, "--%s: '%s' is not a whole number from %ld to %ld", name, v,
                               min, max);
    return 0;
}
