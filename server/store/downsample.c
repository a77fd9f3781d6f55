/* Largest-Triangle-Three-Buckets downsampling (see downsample.h). */
#include "downsample.h"

#include <math.h>
#include <stdint.h>

/* Start of bucket `i` of the `nb` buckets that split the interior points 1..n-2: bucket i is
 * [bucket_start(i), bucket_start(i + 1)). Integer arithmetic, so the buckets tile the interior
 * exactly and each holds at least one point when n - 2 >= nb. */
static size_t bucket_start(size_t i, size_t nb, size_t n)
{
    return 1 + (size_t)(((uint64_t)i * (uint64_t)(n - 2)) / (uint64_t)nb);
}

size_t srv_downsample_lttb(const double *x, const double *y, size_t n, size_t max_points,
                           size_t *out_idx)
{
    if (max_points == 0 || n == 0)
        return 0;
    if (n <= max_points) {
        for (size_t i = 0; i < n; i++)
            out_idx[i] = i;
        return n;
    }
    if (max_points == 1) {
        out_idx[0] = n - 1;
        return 1;
    }
    size_t out = 0;
    out_idx[out++] = 0;
    size_t nb = max_points - 2; /* buckets between the first and last point; 0 when max is 2 */
    size_t prev = 0;            /* the point kept from the previous bucket */
    for (size_t b = 0; b < nb; b++) {
        size_t lo = bucket_start(b, nb, n), hi = bucket_start(b + 1, nb, n);
        /* The third corner: the mean of the next bucket, or the last point after the last one. */
        size_t next_lo = hi, next_hi = b + 1 < nb ? bucket_start(b + 2, nb, n) : n;
        double mx = 0, my = 0;
        for (size_t j = next_lo; j < next_hi; j++) {
            mx += x[j];
            my += y[j];
        }
        mx /= (double)(next_hi - next_lo);
        my /= (double)(next_hi - next_lo);
        size_t best = lo;
        double best_area = -1.0;
        for (size_t j = lo; j < hi; j++) {
            /* Twice the triangle's area; the factor does not change which point wins. */
            double area =
                fabs((x[prev] - mx) * (y[j] - y[prev]) - (x[prev] - x[j]) * (my - y[prev]));
            if (area > best_area) { /* false for NaN: the bucket keeps its first point */
                best_area = area;
                best = j;
            }
        }
        out_idx[out++] = best;
        prev = best;
    }
    out_idx[out++] = n - 1;
    return out;
}
