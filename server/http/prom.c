/* Prometheus text format writer (prom.h). */
#include "prom.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prom_init(struct prom_buf *b)
{
    b->cap = 8192;
    b->len = 0;
    b->text = malloc(b->cap);
    if (b->text)
        b->text[0] = '\0';
}

static void put(struct prom_buf *b, const char *s, size_t n)
{
    if (b->text == NULL)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap * 2 > b->len + n + 1 ? b->cap * 2 : b->len + n + 1;
        char *t = realloc(b->text, cap);
        if (t == NULL) {
            free(b->text);
            b->text = NULL;
            return;
        }
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
}

static void puts_(struct prom_buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* A label value, escaped: \\ for backslash, \" for a double quote, \n for a newline. */
static void put_escaped(struct prom_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            puts_(b, "\\\\");
        else if (*s == '"')
            puts_(b, "\\\"");
        else if (*s == '\n')
            puts_(b, "\\n");
        else
            put(b, s, 1);
    }
}

/* The same for help text, where only backslash and newline are escaped. */
static void put_help(struct prom_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            puts_(b, "\\\\");
        else if (*s == '\n')
            puts_(b, "\\n");
        else
            put(b, s, 1);
    }
}

static void put_value(struct prom_buf *b, double v)
{
    char num[64];
    if (isnan(v))
        snprintf(num, sizeof(num), "NaN");
    else if (isinf(v))
        snprintf(num, sizeof(num), v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(num, sizeof(num), "%.0f", v);
    else if (snprintf(num, sizeof(num), "%.15g", v), strtod(num, NULL) != v)
        snprintf(num, sizeof(num), "%.17g", v); /* the shortest of the two that reads back */
    puts_(b, num);
}

void prom_family(struct prom_buf *b, const char *name, const char *type, const char *help)
{
    puts_(b, "# HELP ");
    puts_(b, name);
    puts_(b, " ");
    put_help(b, help);
    puts_(b, "\n# TYPE ");
    puts_(b, name);
    puts_(b, " ");
    puts_(b, type);
    puts_(b, "\n");
}

/* name{labels[,extra_key="extra_value"]} */
static void put_series(struct prom_buf *b, const char *name, const char *const *labels,
                       const char *extra_key, const char *extra_value)
{
    puts_(b, name);
    bool any = (labels && labels[0]) || extra_key;
    if (!any)
        return;
    puts_(b, "{");
    bool first = true;
    for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
        puts_(b, first ? "" : ",");
        first = false;
        puts_(b, labels[i]);
        puts_(b, "=\"");
        put_escaped(b, labels[i + 1]);
        puts_(b, "\"");
    }
    if (extra_key) {
        puts_(b, first ? "" : ",");
        puts_(b, extra_key);
        puts_(b, "=\"");
        put_escaped(b, extra_value);
        puts_(b, "\"");
    }
    puts_(b, "}");
}

void prom_sample(struct prom_buf *b, const char *name, const char *const *labels, double value)
{
    put_series(b, name, labels, NULL, NULL);
    puts_(b, " ");
    put_value(b, value);
    puts_(b, "\n");
}

void prom_histogram(struct prom_buf *b, const char *name, const char *const *labels,
                    const struct srv_histogram *h)
{
    static const double bounds[SRV_HISTOGRAM_NBOUNDS] = SRV_HISTOGRAM_BOUNDS;
    char series[256], le[32];
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= SRV_HISTOGRAM_NBOUNDS; i++) {
        cumulative +=
            atomic_load_explicit(&((struct srv_histogram *)h)->buckets[i], memory_order_relaxed);
        if (i < SRV_HISTOGRAM_NBOUNDS)
            snprintf(le, sizeof(le), "%g", bounds[i]);
        else
            snprintf(le, sizeof(le), "+Inf");
        snprintf(series, sizeof(series), "%s_bucket", name);
        put_series(b, series, labels, "le", le);
        puts_(b, " ");
        put_value(b, (double)cumulative);
        puts_(b, "\n");
    }
    uint64_t sum_us =
        atomic_load_explicit(&((struct srv_histogram *)h)->sum_us, memory_order_relaxed);
    snprintf(series, sizeof(series), "%s_sum", name);
    prom_sample(b, series, labels, (double)sum_us / 1e6);
    snprintf(series, sizeof(series), "%s_count", name);
    prom_sample(b, series, labels, (double)cumulative);
}
