/* See options.h for what this module does and its contract. */
#include "options.h"

#include "util.h"

#include <stdbool.h>
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

/* Sets one option from `value`; append: a repeated TY_OPT_LIST flag, joined with ','. */
static int set_option(const struct option_def *o, void *dst, const char *value, const char *prog,
                      const char *source, bool append)
{
    char *base = (char *)dst + o->offset;
    if (o->type == TY_OPT_LIST && append && *(char **)base) {
        char **slot = (char **)base;
        size_t len = strlen(*slot) + 1 + strlen(value) + 1;
        char *joined = malloc(len);
        if (joined == NULL)
            return -1;
        snprintf(joined, len, "%s,%s", *slot, value);
        free(*slot);
        *slot = joined;
        return 0;
    }
    if (o->type == TY_OPT_STRING || o->type == TY_OPT_LIST) {
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
    bool *flagged = NULL; /* [i]: option i was set by a flag already */
    for (size_t i = 0; i < n; i++) {
        const char *env = getenv(opts[i].env);
        const char *v = env && *env ? env : opts[i].def;
        if (v &&
            set_option(&opts[i], dst, v, prog, env && *env ? opts[i].env : "default", false) != 0)
            goto fail;
    }
    flagged = calloc(n + 1, sizeof(*flagged));
    if (flagged == NULL)
        goto fail;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            options_usage(opts, n, prog, stdout);
            options_free(opts, n, dst);
            free(flagged);
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
        size_t k = (size_t)(o - opts);
        if (set_option(o, dst, value, prog, arg, flagged[k]) != 0)
            goto fail;
        flagged[k] = true;
    }
    free(flagged);
    return 0;
fail:
    free(flagged);
    options_free(opts, n, dst);
    return -1;
}

void options_free(const struct option_def *opts, size_t n, void *dst)
{
    for (size_t i = 0; i < n; i++) {
        if (opts[i].type == TY_OPT_STRING || opts[i].type == TY_OPT_LIST) {
            char **slot = (char **)((char *)dst + opts[i].offset);
            UTIL_FREE(*slot);
        }
    }
}
