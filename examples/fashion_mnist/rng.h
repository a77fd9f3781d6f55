/* Deterministic pseudo-random numbers (splitmix64).
 *
 * The same seed gives the same sequence on every rank and every platform, which is what keeps
 * data-parallel workers in lock step: identical initial weights and identical per-epoch shuffles.
 */
#ifndef FM_RNG_H
#define FM_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct rng {
    uint64_t state;
} rng;

/* rng_seed: starts a generator from (seed, stream); different streams give unrelated sequences
 * (used as "epoch" for shuffles, "layer" for init). */
void rng_seed(rng *r, uint64_t seed, uint64_t stream);

uint64_t rng_next(rng *r);

/* rng_uniform: a double in [0, 1) with 53 random bits. */
double rng_uniform(rng *r);

/* rng_normal: a standard normal deviate (Box-Muller; one value per call, the pair's second
 * value is discarded to keep the generator stateless beyond `state`). */
double rng_normal(rng *r);

/* rng_below: a uniform integer in [0, n); n > 0 (Lemire's multiply-shift, unbiased). */
uint64_t rng_below(rng *r, uint64_t n);

/* rng_permutation: fills perm[0..n) with a uniformly random permutation of 0..n-1
 * (Fisher-Yates). */
void rng_permutation(rng *r, uint32_t *perm, size_t n);

#endif
