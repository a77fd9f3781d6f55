/* Counters every layer of the server bumps and GET /metrics (Prometheus text format) reports.
 * One instance lives in struct srv; all fields are atomics, so any thread may update them without
 * a lock (relaxed ordering: they are statistics, not synchronisation). Counters only grow;
 * gauges go up and down. */
#ifndef SRV_TELEMETRY_H
#define SRV_TELEMETRY_H

#include <stdatomic.h>
#include <stdint.h>

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
};

#define SRV_COUNT(t, field, n) atomic_fetch_add_explicit(&(t)->field, (n), memory_order_relaxed)

#endif
