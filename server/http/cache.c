/* See cache.h for what this module does and its contract. */
#include "cache.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CACHE_STRIPES 64
#define CACHE_KEY_MAX 72

struct entry {
    char key[CACHE_KEY_MAX];
    uint64_t gen;
    double expires;
    char *value;
    size_t len;
};

struct cache {
    size_t slots;
    double ttl;
    pthread_mutex_t locks[CACHE_STRIPES];
    struct entry *entries;
};

static size_t hash_key(const char *key)
{
    return (size_t)util_fnv1a(UTIL_FNV1A_BASIS, key);
}

struct cache *cache_create(size_t slots, double ttl_s)
{
    struct cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->entries = calloc(slots, sizeof(*c->entries));
    if (c->entries == NULL) {
        free(c);
        return NULL;
    }
    c->slots = slots;
    c->ttl = ttl_s;
    for (int i = 0; i < CACHE_STRIPES; i++)
        pthread_mutex_init(&c->locks[i], NULL);
    return c;
}

void cache_destroy(struct cache *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->slots; i++)
        free(c->entries[i].value);
    for (int i = 0; i < CACHE_STRIPES; i++)
        pthread_mutex_destroy(&c->locks[i]);
    free(c->entries);
    free(c);
}

char *cache_get(struct cache *c, const char *key, uint64_t gen, size_t *len)
{
    if (strlen(key) >= CACHE_KEY_MAX)
        return NULL;
    size_t slot = hash_key(key) % c->slots;
    pthread_mutex_t *lock = &c->locks[slot % CACHE_STRIPES];
    struct entry *e = &c->entries[slot];
    char *copy = NULL;
    pthread_mutex_lock(lock);
    if (e->value && e->gen == gen && strcmp(e->key, key) == 0 && util_mono_s() < e->expires) {
        copy = malloc(e->len + 1);
        if (copy) {
            memcpy(copy, e->value, e->len + 1);
            *len = e->len;
        }
    }
    pthread_mutex_unlock(lock);
    return copy;
}

void cache_put(struct cache *c, const char *key, uint64_t gen, const char *value, size_t len)
{
    if (strlen(key) >= CACHE_KEY_MAX)
        return;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return;
    memcpy(copy, value, len);
    copy[len] = '\0';
    size_t slot = hash_key(key) % c->slots;
    pthread_mutex_t *lock = &c->locks[slot % CACHE_STRIPES];
    struct entry *e = &c->entries[slot];
    pthread_mutex_lock(lock);
    free(e->value);
    memcpy(e->key, key, strlen(key) + 1);
    e->gen = gen;
    e->expires = util_mono_s() + c->ttl;
    e->value = copy;
    e->len = len;
    pthread_mutex_unlock(lock);
}
