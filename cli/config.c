/*
 * config.c - the declarative table of global options and their resolution.
 */
#include "config.h"

#include "args.h"
#include "strbuf.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum opt_type {
    OPT_URL,     /* char *: http:// or https:// URL, trailing '/' removed */
    OPT_STRING,  /* char *: any text; empty means unset */
    OPT_ENUM,    /* int: index into choices */
    OPT_SECONDS, /* long: whole seconds within [min, max] */
};

struct option_spec {
    const char *flag; /* --flag */
    char short_flag;  /* -x, or 0 */
    const char *env;  /* environment variable */
    const char *def;  /* default, in the same text form as user input; NULL: unset */
    enum opt_type type;
    long min, max;              /* OPT_SECONDS bounds */
    const char *const *choices; /* OPT_ENUM values, NULL-terminated */
    size_t offset;              /* field in struct cli_config */
    const char *metavar;
    const char *help;
};

static const char *const output_choices[] = {"table", "json", NULL};

/* The one place global options are declared; indices follow enum cli_option_id. */
static const struct option_spec options[CLI_OPT_COUNT] = {
    [CLI_OPT_SERVER] = {"server", 0, "TRAINYARD_SERVER", "http://127.0.0.1:8080", OPT_URL, 0, 0,
                        NULL, offsetof(struct cli_config, server), "URL",
                        "base URL of trainyard-server"},
    [CLI_OPT_TOKEN] = {"token", 0, "TRAINYARD_TOKEN", NULL, OPT_STRING, 0, 0, NULL,
                       offsetof(struct cli_config, token), "TOKEN",
                       "API token, sent as 'Authorization: Bearer TOKEN'"},
    [CLI_OPT_OUTPUT] = {"output", 'o', "TRAINYARD_OUTPUT", "table", OPT_ENUM, 0, 0, output_choices,
                        offsetof(struct cli_config, output), "table|json",
                        "table: aligned columns; json: the server's JSON, pretty-printed"},
    [CLI_OPT_CONNECT_TIMEOUT] = {"connect-timeout", 0, "TRAINYARD_CONNECT_TIMEOUT", "5",
                                 OPT_SECONDS, 1, 600, NULL,
                                 offsetof(struct cli_config, connect_timeout_s), "S",
                                 "seconds to wait for a connection to the server"},
    [CLI_OPT_REQUEST_TIMEOUT] = {"request-timeout", 0, "TRAINYARD_REQUEST_TIMEOUT", "30",
                                 OPT_SECONDS, 1, 3600, NULL,
                                 offsetof(struct cli_config, request_timeout_s), "S",
                                 "seconds one request may take in all"},
    [CLI_OPT_STREAM_URL] = {"stream-url", 0, "TRAINYARD_STREAM_URL", NULL, OPT_STRING, 0, 0, NULL,
                            offsetof(struct cli_config, stream_url), "URL",
                            "ws:// URL of the live stream (default: from GET /api/v1/version)"},
    [CLI_OPT_RECONNECT_TIMEOUT] = {"reconnect-timeout", 0, "TRAINYARD_RECONNECT_TIMEOUT", "60",
                                   OPT_SECONDS, 1, 86400, NULL,
                                   offsetof(struct cli_config, reconnect_s), "S",
                                   "seconds --wait/--follow keep retrying a lost server (exit 3)"},
    [CLI_OPT_CA_FILE] = {"ca-file", 0, "TRAINYARD_CA_FILE", NULL, OPT_STRING, 0, 0, NULL,
                         offsetof(struct cli_config, ca_file), "FILE",
                         "https://: PEM file of the CA(s) the server's certificate must chain to "
                         "(default: the system's)"},
};

int config_find_flag(const char *name)
{
    for (int i = 0; i < CLI_OPT_COUNT; i++)
        if (strcmp(options[i].flag, name) == 0)
            return i;
    return -1;
}

int config_find_short(char letter)
{
    for (int i = 0; i < CLI_OPT_COUNT; i++)
        if (letter && options[i].short_flag == letter)
            return i;
    return -1;
}

/*
 * Parses `text` for option o into cfg. `source` names where it came from ("--server",
 * "TRAINYARD_SERVER", "default") for the error message. Returns 0 or -1 with err filled.
 */
static int option_set(struct cli_config *cfg, const struct option_spec *o, const char *text,
                      const char *source, char *err, size_t errlen)
{
    char *field = (char *)cfg + o->offset;
    switch (o->type) {
    case OPT_URL: {
        if (strncmp(text, "http://", 7) != 0 && strncmp(text, "https://", 8) != 0) {
            snprintf(err, errlen, "%s: '%s' is not an http:// or https:// URL", source, text);
            return -1;
        }
        char *url = xstrdup(text);
        size_t len = strlen(url);
        while (len > 0 && url[len - 1] == '/')
            url[--len] = '\0';
        free(*(char **)field);
        *(char **)field = url;
        return 0;
    }
    case OPT_STRING:
        free(*(char **)field);
        *(char **)field = text[0] ? xstrdup(text) : NULL;
        return 0;
    case OPT_ENUM:
        for (int i = 0; o->choices[i]; i++) {
            if (strcmp(o->choices[i], text) == 0) {
                *(int *)field = i;
                return 0;
            }
        }
        snprintf(err, errlen, "%s: '%s' is not one of %s", source, text, o->metavar);
        return -1;
    case OPT_SECONDS: {
        long v;
        if (parse_long(text, o->min, o->max, &v) != 0) {
            snprintf(err, errlen, "%s: '%s' is not a whole number of seconds from %ld to %ld",
                     source, text, o->min, o->max);
            return -1;
        }
        *(long *)field = v;
        return 0;
    }
    }
    return -1;
}

int config_resolve(struct cli_config *cfg, const char *const flag_values[CLI_OPT_COUNT], char *err,
                   size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        const struct option_spec *o = &options[i];
        char source[64];
        if (o->def && option_set(cfg, o, o->def, "default", err, errlen) != 0)
            return -1;
        const char *env = getenv(o->env);
        /* An empty variable counts as unset, so `TRAINYARD_TOKEN= trainyard ...` clears it. */
        if (env && env[0] && option_set(cfg, o, env, o->env, err, errlen) != 0)
            return -1;
        if (flag_values && flag_values[i]) {
            snprintf(source, sizeof source, "--%s", o->flag);
            if (option_set(cfg, o, flag_values[i], source, err, errlen) != 0)
                return -1;
        }
    }
    return 0;
}

void config_free(struct cli_config *cfg)
{
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        if (options[i].type == OPT_URL || options[i].type == OPT_STRING) {
            char **field = (char **)((char *)cfg + options[i].offset);
            free(*field);
            *field = NULL;
        }
    }
}

void config_print_help(FILE *f)
{
    fputs("Global options (allowed anywhere on the line):\n", f);
    for (int i = 0; i < CLI_OPT_COUNT; i++) {
        const struct option_spec *o = &options[i];
        char left[64];
        if (o->short_flag)
            snprintf(left, sizeof left, "-%c, --%s %s", o->short_flag, o->flag, o->metavar);
        else
            snprintf(left, sizeof left, "--%s %s", o->flag, o->metavar);
        fprintf(f, "  %-28s %s\n  %-28s [env %s%s%s]\n", left, o->help, "", o->env,
                o->def ? ", default " : "", o->def ? o->def : "");
    }
    fprintf(f, "  %-28s %s\n", "-h, --help", "show help (after a command: that command's help)");
    fprintf(f, "  %-28s %s\n", "--version", "print the client version and exit");
}
