/* Search spaces: a Ray Tune param_space in JSON (docs/sweeps.md) resolved into trial configs,
 * grid search times num_samples, random domains drawn from a seeded generator. See tune.h. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

uint64_t tune_rng_next(struct tune_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double tune_rng_unit(struct tune_rng *r)
{
    return (double)(tune_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static const char *const domain_names[] = {"grid_search", "choice",      "uniform", "quniform",
                                           "loguniform",  "qloguniform", "randint", "randn"};
#define NDOMAINS (sizeof(domain_names) / sizeof(domain_names[0]))

/* The domain's name when v is a domain object, else NULL. */
static const char *domain_of(const json_t *v)
{
    if (!json_is_object(v) || json_object_size(v) != 1)
        return NULL;
    const char *key = json_object_iter_key(json_object_iter((json_t *)v));
    for (size_t i = 0; i < NDOMAINS; i++)
        if (strcmp(key, domain_names[i]) == 0)
            return domain_names[i];
    return NULL;
}

bool tune_is_domain(const json_t *v)
{
    return domain_of(v) != NULL;
}

/* The i-th number of array a into *out; false when missing or not a finite number. */
static bool num_at(const json_t *a, size_t i, double *out)
{
    const json_t *v = json_array_get(a, i);
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return isfinite(*out);
}

/* Checks one domain's arguments. Returns NULL when valid, else what is wrong. */
static const char *domain_invalid(const char *name, const json_t *args)
{
    if (!json_is_array(args))
        return "must be an array";
    size_t n = json_array_size(args);
    if (strcmp(name, "grid_search") == 0 || strcmp(name, "choice") == 0)
        return n == 0 ? "must not be empty" : NULL;
    double lo, hi, q;
    if (strcmp(name, "randn") == 0) {
        if (n != 2 || !num_at(args, 0, &lo) || !num_at(args, 1, &hi) || hi < 0)
            return "must be [mean, sd] with sd >= 0";
        return NULL;
    }
    bool quant = name[0] == 'q';
    if (n != (quant ? 3u : 2u) || !num_at(args, 0, &lo) || !num_at(args, 1, &hi))
        return quant ? "must be [lower, upper, q]" : "must be [lower, upper]";
    if (!(lo < hi))
        return "lower must be below upper";
    if (quant && (!num_at(args, 2, &q) || q <= 0))
        return "q must be a number above 0";
    if (strstr(name, "loguniform") && lo <= 0)
        return "lower must be above 0";
    if (strcmp(name, "randint") == 0 &&
        (!json_is_integer(json_array_get(args, 0)) || !json_is_integer(json_array_get(args, 1))))
        return "bounds must be integers";
    return NULL;
}

json_t *tune_domain_sample(const json_t *domain, struct tune_rng *r)
{
    const char *name = domain_of(domain);
    if (name == NULL)
        return NULL;
    const json_t *args = json_object_get(domain, name);
    if (domain_invalid(name, args))
        return NULL;
    if (strcmp(name, "grid_search") == 0 || strcmp(name, "choice") == 0) {
        size_t n = json_array_size(args);
        size_t i = (size_t)(tune_rng_unit(r) * (double)n);
        return json_deep_copy(json_array_get(args, i < n ? i : n - 1));
    }
    double a = 0, b = 0, q = 0, u = tune_rng_unit(r);
    num_at(args, 0, &a);
    num_at(args, 1, &b);
    if (strcmp(name, "randint") == 0) {
        json_int_t lo = json_integer_value(json_array_get(args, 0));
        json_int_t hi = json_integer_value(json_array_get(args, 1));
        json_int_t v = lo + (json_int_t)(u * (double)(hi - lo));
        return json_integer(v < hi ? v : hi - 1);
    }
    if (strcmp(name, "randn") == 0) {
        double u2 = tune_rng_unit(r);
        return json_real(a + b * sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * u2));
    }
    double v = strstr(name, "loguniform") ? exp(log(a) + u * (log(b) - log(a))) : a + u * (b - a);
    if (name[0] == 'q') {
        num_at(args, 2, &q);
        v = round(v / q) * q;
    }
    return json_real(v);
}

/* ---- resolution ---- */

struct grids {
    const json_t *nodes[64]; /* the grid_search arrays, in traversal order */
    size_t n;
};

/* Appends `key` to `path` into out. */
static void path_join(char *out, size_t len, const char *path, const char *key)
{
    snprintf(out, len, "%s.%s", path, key);
}

/* First pass: validates every domain under v and collects the grid_search arrays. */
static int collect(const json_t *v, const char *path, struct grids *g, char *field, size_t fieldlen,
                   char *why, size_t whylen)
{
    const char *name = domain_of(v);
    if (name) {
        const json_t *args = json_object_get(v, name);
        const char *bad = domain_invalid(name, args);
        if (bad) {
            path_join(field, fieldlen, path, name);
            snprintf(why, whylen, "%s %s", name, bad);
            return -1;
        }
        if (strcmp(name, "grid_search") == 0) {
            if (g->n == sizeof(g->nodes) / sizeof(g->nodes[0])) {
                snprintf(field, fieldlen, "%s", path);
                snprintf(why, whylen, "more than %zu grid_search domains",
                         sizeof(g->nodes) / sizeof(g->nodes[0]));
                return -1;
            }
            g->nodes[g->n++] = args;
        }
        return 0;
    }
    if (!json_is_object(v))
        return 0;
    const char *key;
    const json_t *sub;
    json_object_foreach((json_t *)v, key, sub)
    {
        char p[512];
        path_join(p, sizeof(p), path, key);
        if (collect(sub, p, g, field, fieldlen, why, whylen) != 0)
            return -1;
    }
    return 0;
}

/* Second pass: a copy of v with grid k set to its idx[k]-th value (k counted in traversal
 * order through *k) and the random domains sampled. NULL when out of memory. */
static json_t *build(const json_t *v, const struct grids *g, const size_t *idx, size_t *k,
                     struct tune_rng *r)
{
    const char *name = domain_of(v);
    if (name && strcmp(name, "grid_search") == 0) {
        size_t i = (*k)++;
        return json_deep_copy(json_array_get(g->nodes[i], idx[i]));
    }
    if (name)
        return tune_domain_sample(v, r);
    if (!json_is_object(v))
        return json_deep_copy(v);
    json_t *out = json_object();
    const char *key;
    const json_t *sub;
    json_object_foreach((json_t *)v, key, sub)
    {
        json_t *c = build(sub, g, idx, k, r);
        if (out == NULL || c == NULL || json_object_set_new(out, key, c) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

int tune_space_resolve(const json_t *space, int num_samples, uint64_t seed, json_t **out,
                       char *field, size_t fieldlen, char *why, size_t whylen)
{
    *out = NULL;
    if (!json_is_object(space) || json_object_size(space) == 0) {
        snprintf(field, fieldlen, "param_space");
        snprintf(why, whylen, "must be a non-empty object of hyperparameters");
        return -1;
    }
    if (num_samples < 1) {
        snprintf(field, fieldlen, "tune_config.num_samples");
        snprintf(why, whylen, "must be at least 1");
        return -1;
    }
    struct grids g = {.n = 0};
    if (collect(space, "param_space", &g, field, fieldlen, why, whylen) != 0)
        return -1;
    size_t combos = 1;
    for (size_t i = 0; i < g.n; i++) {
        combos *= json_array_size(g.nodes[i]);
        if (combos > TUNE_MAX_TRIALS)
            break;
    }
    if (combos * (size_t)num_samples > TUNE_MAX_TRIALS) {
        snprintf(field, fieldlen, "tune_config.num_samples");
        snprintf(why, whylen, "the grid times num_samples is more than %d trials", TUNE_MAX_TRIALS);
        return -1;
    }
    struct tune_rng r = {seed};
    json_t *configs = json_array();
    size_t idx[64];
    for (int s = 0; configs && s < num_samples; s++)
        for (size_t c = 0; c < combos; c++) {
            size_t rest = c;
            for (size_t i = g.n; i-- > 0;) {
                size_t len = json_array_size(g.nodes[i]);
                idx[i] = rest % len;
                rest /= len;
            }
            size_t k = 0;
            json_t *cfg = build(space, &g, idx, &k, &r);
            if (cfg == NULL || json_array_append_new(configs, cfg) != 0) {
                json_decref(configs);
                snprintf(field, fieldlen, "param_space");
                snprintf(why, whylen, "out of memory");
                return -1;
            }
        }
    *out = configs;
    return configs ? 0 : -1;
}
