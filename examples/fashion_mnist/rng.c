/* splitmix64 generator and the few distributions the trainer needs. See rng.h. */
#include "rng.h"

#include <math.h>

void rng_seed(rng *r, uint64_t seed, uint64_t stream)
{
    r->state = seed ^ (stream * 0xD1B54A32D192ED03ull);
    (void)rng_next(r);
}

uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rng_uniform(rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

double rng_normal(rng *r)
{
    double u1 = rng_uniform(r);
    double u2 = rng_uniform(r);
    if (u1 < 0x1.0p-60)
        u1 = 0x1.0p-60; /* log(0) guard */
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

uint64_t rng_below(rng *r, uint64_t n)
{
    /* Lemire, "Fast Random Integer Generation in an Interval" (2019). */
    unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)rng_next(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

void rng_permutation(rng *r, uint32_t *perm, size_t n)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(r, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}
