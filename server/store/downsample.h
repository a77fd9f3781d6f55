/* Metric downsampling: a pure function (no I/O, no allocation, no globals), so that
 * GET /api/v1/jobs/{id}/metrics can send a chart-sized series and tests/unit/test_downsample.c can
 * check it alone.
 *
 * The algorithm is Largest-Triangle-Three-Buckets (S. Steinarsson, "Downsampling Time Series for
 * Visual Representation", 2013): the first and last points are always kept; the points between
 * are cut into max_points - 2 buckets of (almost) equal count, and from each bucket the one point
 * is kept that forms the largest triangle with the point kept from the previous bucket and the
 * mean of the next bucket. Unlike every-k-th-point thinning it keeps spikes (a loss blow-up), and
 * unlike min/max bucketing it never invents a point: every point it returns was reported. */
#ifndef SRV_DOWNSAMPLE_H
#define SRV_DOWNSAMPLE_H

#include <stdbool.h>
#include <stddef.h>

/* Chooses at most `max_points` of the `n` points (x[i], y[i]) of one series, x ascending (ties
 * allowed), and writes their indices, strictly ascending, to `out_idx`, which must have room for
 * min(n, max_points) entries. Returns how many it wrote:
 *   n <= max_points   -> every index 0..n-1;
 *   max_points == 0   -> none;
 *   max_points == 1   -> the last point only (the most recent value);
 *   max_points == 2   -> the first and the last;
 *   otherwise         -> exactly max_points indices, including 0 and n-1.
 * Non-finite coordinates never make it fail: a bucket whose areas are all NaN keeps its first
 * point. x and y may be NULL only when n == 0. */
size_t srv_downsample_lttb(const double *x, const double *y, size_t n, size_t max_points,
                           size_t *out_idx);

#endif
