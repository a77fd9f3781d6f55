/*
 * args.c - one pass over argv. Global options are accepted anywhere; a command's own flags only
 * after the command (so their arity is known); "--" ends option parsing.
 */
#include "args.h"

#include "commands.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s || *s == ' ' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Records the first problem only. */
static void fail(char *err, size_t errlen, int *rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(char *err, size_t errlen, int *rc, const char *fmt, ...)
{
    if (*rc != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    *rc = -1;
}

static int flag_index(const struct cli_command *cmd, const char *name, size_t len)
{
    for (int i = 0; cmd->flags && cmd->flags[i].name; i++)
        if (strlen(cmd->flags[i].name) == len && strncmp(cmd->flags[i].name, name, len) == 0)
            return i;
    return -1;
}

/* Handles the option argv[*i] (starts with '-'); may consume argv[*i + 1] as its value. */
static void parse_option(int argc, char **argv, int *i, struct cli_args *out, char *err,
                         size_t errlen, int *rc)
{
    const char *a = argv[*i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
        out->help = true;
        return;
    }
    if (strcmp(a, "--version") == 0) {
        out->version = true;
        return;
    }
    if (a[1] != '-') {
        /* One-letter global options: "-o json" or "-ojson". */
        int g = config_find_short(a[1]);
        if (g < 0) {
            fail(err, errlen, rc, "unknown option '%s'", a);
        } else if (a[2]) {
            out->global[g] = a + 2;
        } else if (*i + 1 < argc) {
            out->global[g] = argv[++*i];
        } else {
            fail(err, errlen, rc, "option '-%c' needs a value", a[1]);
        }
        return;
    }
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
    const char *inline_value = eq ? eq + 1 : NULL;

    char flag[64];
    if (name_len == 0 || name_len >= sizeof flag) {
        fail(err, errlen, rc, "unknown option '%s'", a);
        return;
    }
    memcpy(flag, name, name_len);
    flag[name_len] = '\0';

    int g = config_find_flag(flag);
    int c = (g < 0 && out->cmd) ? flag_index(out->cmd, name, name_len) : -1;
    bool takes_value = g >= 0 || (c >= 0 && out->cmd->flags[c].metavar);
    if (g < 0 && c < 0) {
        if (out->cmd)
            fail(err, errlen, rc, "unknown option '--%s' for '%s%s%s'", flag,
                 out->cmd->group ? out->cmd->group : "", out->cmd->group ? " " : "",
                 out->cmd->name);
        else
            fail(err, errlen, rc, "unknown option '--%s' (command options go after the command)",
                 flag);
        return;
    }
    const char *value = "";
    if (takes_value) {
        if (inline_value) {
            value = inline_value;
        } else if (*i + 1 < argc) {
            value = argv[++*i];
        } else {
            fail(err, errlen, rc, "option '--%s' needs a value", flag);
            return;
        }
    } else if (inline_value) {
        fail(err, errlen, rc, "option '--%s' takes no value", flag);
        return;
    }
    if (g >= 0) {
        out->global[g] = value;
        return;
    }
    out->flag_value[c] = value;
    if (out->n_values >= CLI_MAX_VALUES) {
        fail(err, errlen, rc, "too many options (at most %d)", CLI_MAX_VALUES);
        return;
    }
    out->all_flag[out->n_values] = c;
    out->all_values[out->n_values++] = value;
}

/* Handles the positional word a: the command, the group's subcommand, or an argument. */
static void parse_word(const char *a, struct cli_args *out, bool *unknown_cmd, char *err,
                       size_t errlen, int *rc)
{
    if (*unknown_cmd)
        return;
    if (!out->cmd && !out->group) {
        if (!out->help && strcmp(a, "help") == 0) { /* "trainyard help submit" */
            out->help = true;
            return;
        }
        if (commands_is_group(a)) {
            out->group = a;
            return;
        }
        out->cmd = commands_find(NULL, a);
        if (!out->cmd) {
            *unknown_cmd = true;
            fail(err, errlen, rc, "unknown command '%s'", a);
        }
        return;
    }
    if (!out->cmd) {
        out->cmd = commands_find(out->group, a);
        if (!out->cmd) {
            *unknown_cmd = true;
            fail(err, errlen, rc, "unknown command '%s %s'", out->group, a);
        }
        return;
    }
    if (out->npos >= out->cmd->max_pos || out->npos >= CLI_MAX_POSITIONAL) {
        fail(err, errlen, rc, "unexpected argument '%s'", a);
        return;
    }
    out->pos[out->npos++] = a;
}

int args_parse(int argc, char **argv, struct cli_args *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = 0;
    bool dashdash = false, unknown_cmd = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && strcmp(a, "--") == 0)
            dashdash = true;
        else if (!dashdash && a[0] == '-' && a[1] != '\0')
            parse_option(argc, argv, &i, out, err, errlen, &rc);
        else
            parse_word(a, out, &unknown_cmd, err, errlen, &rc);
    }
    if (out->help || out->version || unknown_cmd)
        return rc;
    if (!out->cmd && out->group)
        fail(err, errlen, &rc, "missing subcommand for '%s'", out->group);
    else if (!out->cmd)
        fail(err, errlen, &rc, "no command given");
    else if (out->npos < out->cmd->min_pos)
        fail(err, errlen, &rc, "missing argument %s for '%s%s%s'", out->cmd->pos_usage,
             out->cmd->group ? out->cmd->group : "", out->cmd->group ? " " : "", out->cmd->name);
    for (int i = 0; out->cmd && out->cmd->flags[i].name; i++)
        if (out->cmd->flags[i].required && !out->flag_value[i])
            fail(err, errlen, &rc, "missing option --%s for '%s%s%s'", out->cmd->flags[i].name,
                 out->cmd->group ? out->cmd->group : "", out->cmd->group ? " " : "",
                 out->cmd->name);
    return rc;
}

const char *args_flag(const struct cli_args *args, const char *name)
{
    if (!args->cmd)
        return NULL;
    int i = flag_index(args->cmd, name, strlen(name));
    return i >= 0 ? args->flag_value[i] : NULL;
}

int args_flag_values(const struct cli_args *args, const char *name, const char **values, int max)
{
    if (!args->cmd)
        return 0;
    int idx = flag_index(args->cmd, name, strlen(name)), n = 0;
    for (int i = 0; idx >= 0 && i < args->n_values && n < max; i++)
        if (args->all_flag[i] == idx)
            values[n++] = args->all_values[i];
    return n;
}
