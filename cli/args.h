/*
 * args.h - command line parsing: global options anywhere, then a command (or "group command"),
 * its flags and its positional arguments. The command table itself is in commands.c.
 */
#ifndef TY_CLI_ARGS_H
#define TY_CLI_ARGS_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

struct cli_ctx;
struct cli_args;

/* A command's own flag; metavar NULL makes it a boolean switch. */
struct cli_flag {
    const char *name; /* without "--" */
    const char *metavar;
    const char *help;
    bool required; /* the command cannot run without it (checked by args_parse) */
};

typedef int (*cli_run_fn)(struct cli_ctx *ctx, const struct cli_args *args);

struct cli_command {
    const char *group; /* "token" for "token create"; NULL for top-level commands */
    const char *name;
    const char *pos_usage;        /* positional part of the usage line, e.g. "ID" or "FILE|-" */
    const char *summary;          /* one line for the command list */
    const char *description;      /* extra paragraph for `CMD --help`, or NULL */
    int min_pos, max_pos;         /* how many positional arguments it takes */
    const struct cli_flag *flags; /* terminated by {NULL} */
    cli_run_fn run;
};

#define CLI_MAX_POSITIONAL 4
#define CLI_MAX_FLAGS 8
#define CLI_MAX_VALUES 32 /* values of command flags kept for args_flag_values */

/* The parsed line; strings point into argv. */
struct cli_args {
    const char *global[CLI_OPT_COUNT]; /* raw global option values, by enum cli_option_id */
    bool help;                         /* -h/--help seen */
    bool version;                      /* --version seen */
    const struct cli_command *cmd;     /* NULL when none was named */
    const char *group;                 /* group word when a group was named */
    const char *pos[CLI_MAX_POSITIONAL];
    int npos;
    const char *flag_value[CLI_MAX_FLAGS]; /* "" for a boolean that was given */
    /* Every value of a flag given several times (--assert A --assert B), in order. */
    const char *all_values[CLI_MAX_VALUES];
    int all_flag[CLI_MAX_VALUES]; /* the flag index of each */
    int n_values;
};

/*
 * Parses argv into out. Returns 0, or -1 with the first problem in err ("unknown command 'x'",
 * "option --status needs a value", ...). Parsing goes on after a problem, so that with --help
 * the caller can still show the help of the command that was named.
 */
int args_parse(int argc, char **argv, struct cli_args *out, char *err, size_t errlen);

/* The value of command flag `name`, "" for a boolean that was given, or NULL. */
const char *args_flag(const struct cli_args *args, const char *name);

/* The values of command flag `name`, each time it was given (at most max, in order) into
 * values. Returns how many. */
int args_flag_values(const struct cli_args *args, const char *name, const char **values, int max);

/*
 * Parses s as a decimal integer in [min, max] (no sign games, no trailing junk, no overflow).
 * Returns 0 and sets *out, or -1.
 */
int parse_long(const char *s, long min, long max, long *out);

#endif
