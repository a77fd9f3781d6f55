/* Min/max band downsampling (see downsample.h). */
#include "downsample.h"

#include <math.h>
#include <stdint.h>

size_t srv_downsample_band(const double *y, size_t n, size_t buckets, struct srv_band *out)
{
    if (buckets == 0 || n == 0)
        return 0;
    size_t nb = n < buckets ? n : buckets;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = (size_t)(((uint64_t)b * n) / nb);
        size_t hi = (size_t)(((uint64_t)(b + 1) * n) / nb);
        struct srv_band *o = &out[b];
        o->first = lo;
        o->last = hi - 1;
        o->count = hi - lo;
        o->min = o->max = lo;
        bool seen = false; /* a finite value */
        for (size_t i = lo; i < hi; i++) {
            if (!isfinite(y[i]))
                continue;
            if (!seen) {
                o->min = o->max = i;
                seen = true;
                continue;
            }
            if (y[i] < y[o->min])
                o->min = i;
            if (y[i] > y[o->max])
                o->max = i;
        }
    }
    return nb;
}
