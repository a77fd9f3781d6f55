/* A small read-through cache for hot GETs (a job's JSON, a token's identity).
 *
 * Direct-mapped by a hash of the key; each entry remembers the generation it was read at and
 * expires after `ttl_s`. The caller names the generation (db.h): the data generation, which a
 * write anywhere in this process bumps (jobs), or the token generation, which only writes to API
 * tokens bump (identities). A bump invalidates every entry read before it, so this server never
 * serves its own stale data; another server's writes show up within ttl_s. Thread-safe (striped
 * locks). */
#ifndef SRV_CACHE_H
#define SRV_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct cache;

struct cache *cache_create(size_t slots, double ttl_s);
void cache_destroy(struct cache *c);
/* A malloc'd copy of the value for `key` read at generation `gen`, or NULL on a miss. */
char *cache_get(struct cache *c, const char *key, uint64_t gen, size_t *len);
/* Stores a copy of `value` for `key`, read at generation `gen`. */
void cache_put(struct cache *c, const char *key, uint64_t gen, const char *value, size_t len);

#endif
