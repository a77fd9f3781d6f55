/* Histograms of telemetry.h. */
#include "telemetry.h"

#include <stddef.h>

void srv_histogram_observe(struct srv_histogram *h, double seconds)
{
    static const double bounds[SRV_HISTOGRAM_NBOUNDS] = SRV_HISTOGRAM_BOUNDS;
    size_t b = 0;
    while (b < SRV_HISTOGRAM_NBOUNDS && seconds > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->buckets[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    uint64_t us = seconds > 0 ? (uint64_t)(seconds * 1e6 + 0.5) : 0;
    atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}
