/* The set of (job, name) known stored in report_names (report_names.h): open addressing over
 * FNV-1a hashes, each entry owning a copy of its name. */
#include "report_names.h"

#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_NAMES_MAX (1u << 16) /* entries (a name is up to 256 bytes); then it starts over */

struct entry {
    uint64_t hash; /* 0: empty slot */
    int64_t job;
    char *name;
};

struct report_names {
    struct entry *slots;
    size_t cap, n; /* cap: a power of two, or 0 */
};

static uint64_t hash_of(int64_t job, const char *name)
{
    uint64_t h = util_fnv1a(UTIL_FNV1A_BASIS ^ (uint64_t)job, name);
    return h ? h : 1;
}

struct report_names *report_names_new(void)
{
    return calloc(1, sizeof(struct report_names));
}

static void clear(struct report_names *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slots[i].name);
    free(s->slots);
    s->slots = NULL;
    s->cap = s->n = 0;
}

void report_names_free(struct report_names *s)
{
    if (s == NULL)
        return;
    clear(s);
    free(s);
}

/* The slot of (job, name): its entry, or the empty slot where it would go. */
static struct entry *slot_of(const struct report_names *s, uint64_t h, int64_t job,
                             const char *name)
{
    for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        struct entry *e = &s->slots[i];
        if (e->hash == 0 || (e->hash == h && e->job == job && strcmp(e->name, name) == 0))
            return e;
    }
}

static bool known(const struct report_names *s, int64_t job, const char *name)
{
    return s->cap > 0 && slot_of(s, hash_of(job, name), job, name)->hash != 0;
}

/* Doubles the table. -1 on OOM (the set is unchanged). */
static int grow(struct report_names *s)
{
    size_t cap = s->cap ? s->cap * 2 : 1024;
    struct entry *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return -1;
    struct report_names old = *s;
    s->slots = slots;
    s->cap = cap;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].hash != 0)
            *slot_of(s, old.slots[i].hash, old.slots[i].job, old.slots[i].name) = old.slots[i];
    free(old.slots);
    return 0;
}

/* Notes (job, name) as known. -1 on OOM (then it is not: it is sent again). */
static int add(struct report_names *s, int64_t job, const char *name)
{
    if (s->n >= REPORT_NAMES_MAX)
        clear(s);
    if ((s->n + 1) * 2 > s->cap && grow(s) != 0)
        return -1;
    uint64_t h = hash_of(job, name);
    struct entry *e = slot_of(s, h, job, name);
    if (e->hash != 0)
        return 0;
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    *e = (struct entry){h, job, copy};
    s->n++;
    return 0;
}

void report_names_list_free(struct store_report_names *out)
{
    free(out->name);
    free(out->at);
    *out = (struct store_report_names){0};
}

static int push(struct store_report_names *out, const char *name, size_t at)
{
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 256;
        const char **name_grown = realloc(out->name, cap * sizeof(*name_grown));
        if (name_grown == NULL)
            return -1;
        out->name = name_grown;
        size_t *at_grown = realloc(out->at, cap * sizeof(*at_grown));
        if (at_grown == NULL)
            return -1;
        out->at = at_grown;
        out->cap = cap;
    }
    out->name[out->n] = name;
    out->at[out->n++] = at;
    return 0;
}

/* The series of rows[i] (job, attempt, rank, node) among the first ones of rows[0..i): the index
 * of its first report. A batch holds few series; the scan is cheap next to a report's names. */
static size_t series_of(const struct store_report *rows, size_t i, const size_t *firsts,
                        size_t n_firsts)
{
    for (size_t k = 0; k < n_firsts; k++) {
        const struct store_report *a = &rows[firsts[k]], *b = &rows[i];
        if (a->job == b->job && a->attempt == b->attempt && a->rank == b->rank &&
            strcmp(a->node_id, b->node_id) == 0)
            return firsts[k];
    }
    return SIZE_MAX;
}

int report_names_list(const struct report_names *s, const struct store_report *rows, size_t n,
                      struct store_report_names *out)
{
    /* Each name once per series: its reports are all of a known worker or none are (what the
     * batch checks), so its first report that carries the name stands for them all. listed holds
     * (the series' first report, name) pairs. */
    struct report_names *listed = report_names_new();
    size_t *firsts = malloc((n ? n : 1) * sizeof(*firsts)), n_firsts = 0;
    int rc = listed && firsts ? 0 : -1;
    out->n = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t first = series_of(rows, i, firsts, n_firsts);
        if (first == SIZE_MAX)
            first = firsts[n_firsts++] = i;
        for (size_t m = 0; m < rows[i].n_metrics; m++) {
            const char *name = rows[i].metrics[m].name;
            if (known(s, rows[i].job, name) || known(listed, (int64_t)first, name))
                continue;
            if (add(listed, (int64_t)first, name) != 0 || push(out, name, i) != 0) {
                rc = -1;
                break;
            }
        }
    }
    report_names_free(listed);
    free(firsts);
    if (rc != 0)
        out->n = 0;
    return rc;
}

void report_names_settle(struct report_names *s, const struct store_report *rows,
                         const struct store_report_names *listed,
                         const struct store_report_outcome *outs)
{
    for (size_t k = 0; k < listed->n; k++)
        if (outs[listed->at[k]].known_worker)
            (void)add(s, rows[listed->at[k]].job, listed->name[k]); /* OOM: sent again */
}
