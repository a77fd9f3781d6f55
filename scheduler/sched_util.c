/* Small helpers: error texts, strategy names, growable arrays, interned names, amounts. */
#include "sched_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *sched_strerror(int code)
{
    switch (code) {
#define SCHED__ERRNO_TEXT(name, num, text)                                                         \
    case num:                                                                                      \
        return text;
        SCHED_ERRNO_MAP(SCHED__ERRNO_TEXT)
#undef SCHED__ERRNO_TEXT
    }
    return "unknown error";
}

static const char *const strategy_names[] = {
#define SCHED__STRATEGY_NAME(name) #name,
    JOBSPEC_STRATEGY_MAP(SCHED__STRATEGY_NAME)
#undef SCHED__STRATEGY_NAME
};

int sched_strategy_from_string(const char *s, sched_strategy *out)
{
    if (!s || !out)
        return SCHED_EINVAL;
    for (size_t i = 0; i < sizeof strategy_names / sizeof strategy_names[0]; i++) {
        if (strcmp(s, strategy_names[i]) == 0) {
            *out = (sched_strategy)i;
            return SCHED_OK;
        }
    }
    return SCHED_EINVAL;
}

const char *sched_strategy_name(sched_strategy s)
{
    if ((unsigned)s >= sizeof strategy_names / sizeof strategy_names[0])
        return "?";
    return strategy_names[s];
}

/* `arrp` is the address of the array pointer (T **). Capacity doubles from 16. */
int sched__grow(void *arrp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return SCHED_OK;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem)
            return SCHED_ENOMEM;
        ncap *= 2;
    }
    void *old;
    memcpy(&old, arrp, sizeof old);
    void *nu = realloc(old, ncap * elem);
    if (!nu)
        return SCHED_ENOMEM;
    memcpy(arrp, &nu, sizeof nu);
    *cap = ncap;
    return SCHED_OK;
}

/* Linear: a cluster has a handful of GPU types and custom resource names. */
int sched__names_find(const struct sched__names *names, const char *s, bool nocase)
{
    for (size_t i = 0; i < names->n; i++) {
        if ((nocase ? strcasecmp(names->v[i], s) : strcmp(names->v[i], s)) == 0)
            return (int)i;
    }
    return -1;
}

/* The next token of *s (advancing *s past it): its start, its length in *len; NULL at the end. */
static const char *next_token(const char **s, size_t *len)
{
    const char *p = *s + strspn(*s, " -_\t");
    size_t n = strcspn(p, " -_\t");
    *s = p + n;
    *len = n;
    return n ? p : NULL;
}

bool sched__type_tokens_match(const char *want, const char *have)
{
    const char *w = want;
    size_t wl;
    const char *wt;
    bool any = false;
    while ((wt = next_token(&w, &wl))) {
        any = true;
        const char *h = have;
        size_t hl;
        const char *ht;
        bool found = false;
        while (!found && (ht = next_token(&h, &hl)))
            found = hl == wl && strncasecmp(ht, wt, wl) == 0;
        if (!found)
            return false;
    }
    return any;
}

int sched__names_intern(struct sched__names *names, const char *s, bool nocase)
{
    int id = sched__names_find(names, s, nocase);
    if (id >= 0)
        return id;
    if (names->n >= INT32_MAX || sched__grow(&names->v, &names->cap, names->n + 1, sizeof(char *)))
        return SCHED_ENOMEM;
    char *copy = strdup(s);
    if (!copy)
        return SCHED_ENOMEM;
    names->v[names->n] = copy;
    return (int)names->n++;
}

void sched__names_free(struct sched__names *names)
{
    for (size_t i = 0; i < names->n; i++)
        free(names->v[i]);
    free(names->v);
    names->v = NULL;
    names->n = names->cap = 0;
}

const char *sched__fmt_milli(char *buf, size_t len, int64_t milli)
{
    int64_t whole = milli / 1000, frac = milli % 1000;
    if (frac == 0) {
        snprintf(buf, len, "%" PRId64, whole);
    } else {
        char f[8];
        snprintf(f, sizeof f, "%03" PRId64, frac < 0 ? -frac : frac);
        for (int i = 2; i > 0 && f[i] == '0'; i--)
            f[i] = '\0';
        snprintf(buf, len, "%s%" PRId64 ".%s", milli < 0 && whole == 0 ? "-" : "", whole, f);
    }
    return buf;
}
