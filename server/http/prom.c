/* Prometheus text format writer (prom.h). */
#include "prom.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_escaped(struct textbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            textbuf_puts(b, "\\\\");
        else if (*s == '"')
            textbuf_puts(b, "\\\"");
        else if (*s == '\n')
            textbuf_puts(b, "\\n");
        else
            textbuf_append(b, s, 1);
    }
}

/* The same for help text, where only backslash and newline are escaped. */
static void put_help(struct textbuf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            textbuf_puts(b, "\\\\");
        else if (*s == '\n')
            textbuf_puts(b, "\\n");
        else
            textbuf_append(b, s, 1);
    }
}

static void put_value(struct textbuf *b, double v)
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
    textbuf_puts(b, num);
}

void prom_family(struct textbuf *b, const char *name, const char *type, const char *help)
{
    textbuf_puts(b, "# HELP ");
    textbuf_puts(b, name);
    textbuf_puts(b, " ");
    put_help(b, help);
    textbuf_puts(b, "\n# TYPE ");
    textbuf_puts(b, name);
    textbuf_puts(b, " ");
    textbuf_puts(b, type);
    textbuf_puts(b, "\n");
}

/* name{labels[,extra_key="extra_value"]} */
static void put_series(struct textbuf *b, const char *name, const char *const *labels,
                       const char *extra_key, const char *extra_value)
{
    textbuf_puts(b, name);
    bool any = (labels && labels[0]) || extra_key;
    if (!any)
        return;
    textbuf_puts(b, "{");
    bool first = true;
    for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
        textbuf_puts(b, first ? "" : ",");
        first = false;
        textbuf_puts(b, labels[i]);
        textbuf_puts(b, "=\"");
        put_escaped(b, labels[i + 1]);
        textbuf_puts(b, "\"");
    }
    if (extra_key) {
        textbuf_puts(b, first ? "" : ",");
        textbuf_puts(b, extra_key);
        textbuf_puts(b, "=\"");
        put_escaped(b, extra_value);
        textbuf_puts(b, "\"");
    }
    textbuf_puts(b, "}");
}

void prom_sample(struct textbuf *b, const char *name, const char *const *labels, double value)
{
    put_series(b, name, labels, NULL, NULL);
    textbuf_puts(b, " ");
    put_value(b, value);
    textbuf_puts(b, "\n");
}

void prom_histogram(struct textbuf *b, const char *name, const char *const *labels,
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
        textbuf_puts(b, " ");
        put_value(b, (double)cumulative);
        textbuf_puts(b, "\n");
    }
    uint64_t sum_us =
        atomic_load_explicit(&((struct srv_histogram *)h)->sum_us, memory_order_relaxed);
    snprintf(series, sizeof(series), "%s_sum", name);
    prom_sample(b, series, labels, (double)sum_us / 1e6);
    snprintf(series, sizeof(series), "%s_count", name);
    prom_sample(b, series, labels, (double)cumulative);
}
