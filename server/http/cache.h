/* A small read-through cache for hot GETs (a job's JSON, a token's identity).
 *
 * Direct-mapped by a hash of the key; each entry remembers the data generation it was read at
 * and expires after `ttl_s`. A write anywhere in this process bumps the generation (db.h), which
 * invalidates every entry at once, so this server never serves its own stale data; another
 * server's writes show up within ttl_s. Thread-safe (striped locks). */
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
