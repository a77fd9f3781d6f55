/* Counters every layer of the server bumps and GET /metrics (Prometheus text format) reports.
 * One instance lives in struct srv; all fields are atomics, so any thread may update them without
 * a lock (relaxed ordering: they are statistics, not synchronisation). Counters only grow;
 * gauges go up and down. */
#ifndef SRV_TELEMETRY_H
#define SRV_TELEMETRY_H

#include <stdatomic.h>
#include <stdint.h>

/* A latency histogram (Prometheus `histogram`): observations in buckets of upper bounds
 * SRV_HISTOGRAM_BOUNDS seconds (not cumulative here; GET /metrics sums them), their count and
 * their sum in microseconds. */
#define SRV_HISTOGRAM_BOUNDS                                                                       \
    {                                                                                              \
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0       \
    }
#define SRV_HISTOGRAM_NBOUNDS 14
struct srv_histogram {
    atomic_uint_fast64_t buckets[SRV_HISTOGRAM_NBOUNDS + 1]; /* the last one: +Inf */
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_us;
};
/* Adds one observation of `seconds`. Lock-free. */
void srv_histogram_observe(struct srv_histogram *h, double seconds);

/* HTTP requests of one route of the routing table (http/routes.c), by status class. */
#define SRV_TELEMETRY_MAX_ROUTES 64
struct srv_route_stats {
    atomic_uint_fast64_t by_class[6]; /* [2] = 2xx ... [5] = 5xx; [0] others */
    struct srv_histogram latency;
};

struct srv_telemetry_http {
    /* [i]: route i of srv_routes; [SRV_TELEMETRY_MAX_ROUTES]: requests that matched no route */
    struct srv_route_stats routes[SRV_TELEMETRY_MAX_ROUTES + 1];
};

struct srv_telemetry {
    /* ingestion (control thread) */
    atomic_uint_fast64_t reports_ingested;       /* counter: report messages committed */
    atomic_uint_fast64_t metric_points_ingested; /* counter: metric points committed */
    atomic_uint_fast64_t log_lines_ingested;     /* counter: log lines committed */
    atomic_uint_fast64_t log_bytes_ingested;     /* counter: log bytes committed */
    atomic_uint_fast64_t log_bytes_dropped;      /* counter: log bytes removed by the log cap */
    /* streams (stream thread) */
    atomic_int_fast64_t stream_subscribers;  /* gauge: open /stream connections */
    atomic_uint_fast64_t stream_dropped;     /* counter: connections closed for being slow */
    atomic_uint_fast64_t stream_events_sent; /* counter: events queued to subscribers */
    /* scheduling (control thread) */
    struct srv_histogram sched_pass; /* duration of each scheduling pass */
    /* HTTP (server/http/http.c: every request, when it completes) */
    struct srv_telemetry_http http;
};

#define SRV_COUNT(t, field, n) atomic_fetch_add_explicit(&(t)->field, (n), memory_order_relaxed)

#endif
