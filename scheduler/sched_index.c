/* Bucket index: schedulable nodes by (class, key), for placement scans that touch only the nodes
 * that can matter (e.g. a 4-GPU worker looks only at nodes with 4 or more GPUs free).
 *
 * Each bucket is a bitmap over node indices plus a summary bitmap of its non-zero words, so
 * moving a node is O(1) and a scan returns nodes of a bucket in ascending index order, which
 * makes every tie-break "lowest node index first" and the pass deterministic. */
#include "sched_internal.h"

#include <stdlib.h>
#include <string.h>

int sched__index_init(struct sched__index *ix, size_t n, int nclass, int nkey)
{
    memset(ix, 0, sizeof *ix);
    ix->nclass = nclass;
    ix->nkey = nkey;
    ix->n = n;
    ix->nwords = (n + 63) / 64;
    ix->nsum = (ix->nwords + 63) / 64;
    size_t nb = (size_t)nclass * (size_t)nkey;
    ix->bits = calloc(nb * ix->nwords + 1, sizeof *ix->bits);
    ix->sum = calloc(nb * ix->nsum + 1, sizeof *ix->sum);
    ix->count = calloc(nb, sizeof *ix->count);
    ix->key = malloc((n + 1) * sizeof *ix->key);
    ix->cls = malloc((n + 1) * sizeof *ix->cls);
    if (!ix->bits || !ix->sum || !ix->count || !ix->key || !ix->cls) {
        sched__index_free(ix);
        return SCHED_ENOMEM;
    }
    memset(ix->key, 0xff, (n + 1) * sizeof *ix->key);
    return SCHED_OK;
}

void sched__index_free(struct sched__index *ix)
{
    free(ix->bits);
    free(ix->sum);
    free(ix->count);
    free(ix->key);
    free(ix->cls);
    memset(ix, 0, sizeof *ix);
}

static void bucket_remove(struct sched__index *ix, size_t b, size_t node)
{
    uint64_t *w = ix->bits + b * ix->nwords + node / 64;
    *w &= ~(UINT64_C(1) << (node % 64));
    if (!*w)
        ix->sum[b * ix->nsum + node / 4096] &= ~(UINT64_C(1) << ((node / 64) % 64));
    ix->count[b]--;
}

static void bucket_add(struct sched__index *ix, size_t b, size_t node)
{
    ix->bits[b * ix->nwords + node / 64] |= UINT64_C(1) << (node % 64);
    ix->sum[b * ix->nsum + node / 4096] |= UINT64_C(1) << ((node / 64) % 64);
    ix->count[b]++;
}

void sched__index_set(struct sched__index *ix, size_t node, int cls, int key)
{
    int old = ix->key[node];
    if (old == key && ix->cls[node] == cls)
        return;
    if (old >= 0)
        bucket_remove(ix, (size_t)ix->cls[node] * ix->nkey + old, node);
    bucket_add(ix, (size_t)cls * ix->nkey + key, node);
    ix->key[node] = (int16_t)key;
    ix->cls[node] = (int16_t)cls;
}

/* The first node >= from in bucket b, or -1. */
static long bucket_next(const struct sched__index *ix, size_t b, size_t from)
{
    if (from >= ix->n)
        return -1;
    const uint64_t *w = ix->bits + b * ix->nwords;
    size_t wi = from / 64;
    uint64_t x = w[wi] & (~UINT64_C(0) << (from % 64));
    if (x)
        return (long)(wi * 64 + (size_t)__builtin_ctzll(x));
    if (++wi >= ix->nwords)
        return -1;
    const uint64_t *s = ix->sum + b * ix->nsum;
    size_t si = wi / 64;
    uint64_t y = s[si] & (~UINT64_C(0) << (wi % 64));
    while (!y) {
        if (++si >= ix->nsum)
            return -1;
        y = s[si];
    }
    wi = si * 64 + (size_t)__builtin_ctzll(y);
    return (long)(wi * 64 + (size_t)__builtin_ctzll(w[wi]));
}

void sched__scan_init(struct sched__scan *s, const struct sched__index *ix, int cls_lo, int cls_hi,
                      int key_from, int key_to)
{
    s->ix = ix;
    s->cls_lo = cls_lo;
    s->cls_hi = cls_hi;
    s->cls = cls_lo;
    s->key = key_from;
    s->step = key_to >= key_from ? 1 : -1;
    s->key_end = key_to + s->step;
    s->node = -1;
    /* An empty key range (from outside 0..nkey-1) scans nothing. */
    if (key_from < 0 || key_from >= ix->nkey || key_to < 0 || key_to >= ix->nkey)
        s->key = s->key_end;
}

long sched__scan_next(struct sched__scan *s)
{
    const struct sched__index *ix = s->ix;
    while (s->key != s->key_end) {
        size_t b = (size_t)s->cls * ix->nkey + s->key;
        if (ix->count[b]) {
            long nd = bucket_next(ix, b, (size_t)(s->node + 1));
            if (nd >= 0)
                return s->node = nd;
        }
        s->node = -1;
        if (++s->cls > s->cls_hi) {
            s->cls = s->cls_lo;
            s->key += s->step;
        }
    }
    return -1;
}
