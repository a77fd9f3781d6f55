/*
 * config.h - the client's global options, declared once in a table (config.c): each has a
 * --flag, an environment variable, a default and bounds. Precedence: flag > environment > default.
 */
#ifndef TY_CLI_CONFIG_H
#define TY_CLI_CONFIG_H

#include <stddef.h>
#include <stdio.h>

enum cli_output { CLI_OUTPUT_TABLE = 0, CLI_OUTPUT_JSON = 1 };

struct cli_config {
    char *server;           /* base URL without trailing '/'; owned */
    char *token;            /* bearer token or NULL when unset; owned */
    int output;             /* enum cli_output */
    long connect_timeout_s; /* per-request connect timeout */
    long request_timeout_s; /* per-request total timeout */
    char *stream_url;       /* ws:// URL of /stream, or NULL: ask GET /api/v1/version; owned */
    long reconnect_s;       /* how long --wait/--follow retry an unreachable server */
    char *ca_file;          /* https://: PEM CA file to verify the server with, or NULL; owned */
};

/* Indices into the option table; args.c stores raw flag values by these. */
enum cli_option_id {
    CLI_OPT_SERVER,
    CLI_OPT_TOKEN,
    CLI_OPT_OUTPUT,
    CLI_OPT_CONNECT_TIMEOUT,
    CLI_OPT_REQUEST_TIMEOUT,
    CLI_OPT_STREAM_URL,
    CLI_OPT_RECONNECT_TIMEOUT,
    CLI_OPT_CA_FILE,
    CLI_OPT_COUNT
};

/* Returns the option whose flag (without the leading "--") is `name`, or -1. */
int config_find_flag(const char *name);

/* Returns the option whose one-letter flag ("-o") is `letter`, or -1. */
int config_find_short(char letter);

/*
 * Fills cfg from the defaults, then the environment, then flag_values[i] (the raw text given for
 * option i on the command line, or NULL). On a bad value returns -1 with a message naming the
 * flag or variable in err, and cfg holds whatever was resolved so far (config_free it either way).
 */
int config_resolve(struct cli_config *cfg, const char *const flag_values[CLI_OPT_COUNT], char *err,
                   size_t errlen);

/* Frees what cfg owns. */
void config_free(struct cli_config *cfg);

/* Prints the "Global options" help section, one line per option with its variable and default. */
void config_print_help(FILE *f);

#endif
