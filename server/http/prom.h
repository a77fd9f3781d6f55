/* Prometheus text exposition format 0.0.4, written into a growing buffer: what GET /metrics
 * sends. Pure (no I/O): tests/unit/test_prom.c checks its output. A failed allocation turns the
 * buffer's text into NULL and makes every later call a no-op; the caller checks once at the end. */
#ifndef SRV_PROM_H
#define SRV_PROM_H

#include "telemetry.h"

#include <stddef.h>

struct prom_buf {
    char *text; /* NUL-terminated, malloc'd; NULL after a failed allocation */
    size_t len, cap;
};

/* An empty buffer (text "" or NULL when out of memory). */
void prom_init(struct prom_buf *b);
/* Starts metric family `name`: its # HELP and # TYPE lines (type: counter, gauge, histogram). */
void prom_family(struct prom_buf *b, const char *name, const char *type, const char *help);
/* One sample `name{labels} value`. labels: NULL, or pairs "k", "v", ... ended by NULL, values
 * escaped as the format asks (backslash, double quote, newline). */
void prom_sample(struct prom_buf *b, const char *name, const char *const *labels, double value);
/* The samples of histogram `name` (its family started by the caller): one cumulative
 * name_bucket{...,le="bound"} per bound and +Inf, then name_sum (seconds) and name_count; the
 * +Inf bucket and the count are the sum of the buckets read, so they always agree. */
void prom_histogram(struct prom_buf *b, const char *name, const char *const *labels,
                    const struct srv_histogram *h);

#endif
