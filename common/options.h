/* Command-line configuration from one declarative table (Redis config.c): each option has a
 * flag, a TRAINYARD_* environment variable, a type, a default and bounds. Defaults are applied
 * first, then the environment, then the flags (flags win). Used by the server and the agent. */
#ifndef TY_OPTIONS_H
#define TY_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum ty_opt_type { TY_OPT_STRING, TY_OPT_INT };

struct option_def {
    const char *flag; /* without the leading "--" */
    const char *env;
    enum ty_opt_type type;
    size_t offset;    /* of a `char *` (string) or `int64_t` (int) in the config struct */
    const char *def;  /* default as text; NULL: unset */
    int64_t min, max; /* bounds of an int option */
    const char *help;
};

/* Table entries: TY_OPT_S(struct srv_config, data_dir) expands to type and offset. */
#define TY_OPT_S(type, field) TY_OPT_STRING, offsetof(type, field)
#define TY_OPT_I(type, field) TY_OPT_INT, offsetof(type, field)

/* Fills the struct at `dst` (zeroed first) from the table, the environment and argv. Returns 0;
 * 1 when --help was asked for (printed to stdout); -1 when a value is out of bounds, a flag is
 * unknown or lacks its value (the problem printed to stderr, prefixed by `prog`). On 1 and -1
 * the strings are already freed. Free a loaded struct with options_free(). */
int options_load(const struct option_def *opts, size_t n, void *dst, const char *prog, int argc,
                 char **argv);
void options_usage(const struct option_def *opts, size_t n, const char *prog, FILE *out);
/* Frees the struct's string options and sets them to NULL. */
void options_free(const struct option_def *opts, size_t n, void *dst);

#endif
