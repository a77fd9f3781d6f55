/* See options.h for what this module does and its contract. */
#include "options.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

void options_usage(const struct option_def *opts, size_t n, const char *prog, FILE *out)
{
    fprintf(out, "usage: %s [OPTIONS]\n\nOptions (flag, environment variable, default):\n", prog);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "  --%-22s %-34s %s\n  %25s %s\n", opts[i].flag, opts[i].env,
                opts[i].def ? opts[i].def : "(unset)", "", opts[i].help);
    fprintf(out, "  --%-22s print this help\n", "help");
}

static int set_option(const struct option_def *o, void *dst, const char *value, const char *prog,
                      const char *source)
{
    char *base = (char *)dst + o->offset;
    if (o->type == TY_OPT_STRING) {
        char **slot = (char **)base;
        free(*slot);
        *slot = strdup(value);
        return *slot ? 0 : -1;
    }
    int64_t v;
    if (util_parse_int64(value, o->min, o->max, &v) != 0) {
        fprintf(stderr, "%s: %s: '%s' is not an integer in [%lld, %lld]\n", prog, source, value,
                (long long)o->min, (long long)o->max);
        return -1;
    }
    *(int64_t *)base = v;
    return 0;
}

static const struct option_def *find_flag(const struct option_def *opts, size_t n, const char *name,
                                          size_t nlen)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].flag) == nlen && strncmp(opts[i].flag, name, nlen) == 0)
            return &opts[i];
    return NULL;
}

int options_load(const struct option_def *opts, size_t n, void *dst, const char *prog, int argc,
                 char **argv)
{
    for (size_t i = 0; i < n; i++) {
        const char *env = getenv(opts[i].env);
        const char *v = env && *env ? env : opts[i].def;
        if (v && set_option(&opts[i], dst, v, prog, env && *env ? opts[i].env : "default") != 0)
            goto fail;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            options_usage(opts, n, prog, stdout);
            options_free(opts, n, dst);
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", prog, arg);
            goto fail;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        const struct option_def *o =
            find_flag(opts, n, name, eq ? (size_t)(eq - name) : strlen(name));
        if (o == NULL) {
            fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, arg);
            goto fail;
        }
        const char *value = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (value == NULL) {
            fprintf(stderr, "%s: option --%s needs a value\n", prog, o->flag);
            goto fail;
        }
        if (set_option(o, dst, value, prog, arg) != 0)
            goto fail;
    }
    return 0;
fail:
    options_free(opts, n, dst);
    return -1;
}

void options_free(const struct option_def *opts, size_t n, void *dst)
{
    for (size_t i = 0; i < n; i++) {
        if (opts[i].type == TY_OPT_STRING) {
            char **slot = (char **)((char *)dst + opts[i].offset);
            UTIL_FREE(*slot);
        }
    }
}
