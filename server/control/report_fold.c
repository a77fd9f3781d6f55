/* Blocks of report_blocks summed up as their reports are sent (report_fold.h): per series (job,
 * attempt, rank) the block being summed up, its reports and, per name, what
 * ty_report_blocks_of (store/sql/) sums up from the stored reports: how many carry it, the first
 * and last (their report's seq, time and step, and the value) and the least and greatest. The
 * series live in an open-addressing table; each series' names in an array in the order first
 * seen, found through the report's own order (a worker reports the same names in the same order)
 * or else through an index of hashes. */
#include "report_fold.h"

#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_FOLD_MAX 4096 /* series (~2 KB each and their names); then it starts over */
#define NAMES_MAX 1024       /* names of a series; past them its blocks go to the maintenance */
#define BLOCK 16             /* reports a block: seq >> 4 (migration 0046) */
#define TIME_MAX 48          /* bytes of an RFC 3339 time, with its NUL */

struct name {
    char *name;
    uint64_t hash;
    int64_t count; /* reports of the block carrying it; 0: none (yet) */
    int first, last;
    double v_first, v_last, v_min, v_max;
};

struct fold_report {
    int64_t seq, step; /* step -1: none */
    char time[TIME_MAX];
};

struct series {
    int64_t job;
    int attempt, rank;
    int64_t block, last_seq;
    bool started; /* block and last_seq hold a report's */
    bool whole;   /* every report of the block seen so far is summed up */
    int n;        /* reports of the block summed up */
    struct fold_report reports[BLOCK];
    struct name *names;
    size_t nnames, names_cap;
    uint32_t *index; /* index_cap slots: a name's place + 1, 0 empty */
    size_t index_cap;
};

struct report_fold {
    struct series **slots;
    size_t cap, n; /* cap: a power of two, or 0 */
};

static uint64_t hash_series(int64_t job, int attempt, int rank)
{
    uint64_t h = (uint64_t)job * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)(uint32_t)attempt << 32 | (uint32_t)rank) * 0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 29);
}

struct report_fold *report_fold_new(void)
{
    return calloc(1, sizeof(struct report_fold));
}

static void series_free(struct series *s)
{
    for (size_t i = 0; i < s->nnames; i++)
        free(s->names[i].name);
    free(s->names);
    free(s->index);
    free(s);
}

void report_fold_clear(struct report_fold *f)
{
    for (size_t i = 0; i < f->cap; i++)
        if (f->slots[i] != NULL)
            series_free(f->slots[i]);
    free(f->slots);
    f->slots = NULL;
    f->cap = f->n = 0;
}

void report_fold_free(struct report_fold *f)
{
    if (f == NULL)
        return;
    report_fold_clear(f);
    free(f);
}

/* The slot of the series: its own, or the empty one where it would go. */
static struct series **slot_of(const struct report_fold *f, int64_t job, int attempt, int rank)
{
    for (size_t i = hash_series(job, attempt, rank) & (f->cap - 1);; i = (i + 1) & (f->cap - 1)) {
        struct series *s = f->slots[i];
        if (s == NULL || (s->job == job && s->attempt == attempt && s->rank == rank))
            return &f->slots[i];
    }
}

/* Doubles the table. -1 on OOM (the table is unchanged). */
static int grow(struct report_fold *f)
{
    size_t cap = f->cap ? f->cap * 2 : 64;
    struct series **slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return -1;
    struct report_fold old = *f;
    f->slots = slots;
    f->cap = cap;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i] != NULL)
            *slot_of(f, old.slots[i]->job, old.slots[i]->attempt, old.slots[i]->rank) =
                old.slots[i];
    free(old.slots);
    return 0;
}

/* The series' state, made when `create` (NULL: none, or out of memory). */
static struct series *series_of(struct report_fold *f, const struct store_report *r, bool create)
{
    if (f->cap > 0) {
        struct series *s = *slot_of(f, r->job, r->attempt, r->rank);
        if (s != NULL || !create)
            return s;
    } else if (!create)
        return NULL;
    if ((f->n + 1) * 2 > f->cap && grow(f) != 0)
        return NULL;
    struct series *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->job = r->job;
    s->attempt = r->attempt;
    s->rank = r->rank;
    *slot_of(f, r->job, r->attempt, r->rank) = s;
    f->n++;
    return s;
}

/* Rebuilds the names' index at twice as many slots as names (and at least 64). -1 on OOM. */
static int reindex(struct series *s, size_t want)
{
    size_t cap = 64;
    while (cap < want * 2)
        cap *= 2;
    uint32_t *index = calloc(cap, sizeof(*index));
    if (index == NULL)
        return -1;
    for (size_t k = 0; k < s->nnames; k++) {
        size_t i = s->names[k].hash & (cap - 1);
        while (index[i] != 0)
            i = (i + 1) & (cap - 1);
        index[i] = (uint32_t)k + 1;
    }
    free(s->index);
    s->index = index;
    s->index_cap = cap;
    return 0;
}

/* The series' entry of `name`, which the report carries at place j: the names are looked at in
 * the order the series' reports carry them first, then by hash; a new name is added (NULL: past
 * NAMES_MAX, or out of memory). */
static struct name *name_of(struct series *s, size_t j, const char *name)
{
    if (j < s->nnames && strcmp(s->names[j].name, name) == 0)
        return &s->names[j];
    uint64_t h = util_fnv1a(UTIL_FNV1A_BASIS, name);
    size_t i = s->index_cap ? h & (s->index_cap - 1) : 0;
    for (; s->index_cap && s->index[i] != 0; i = (i + 1) & (s->index_cap - 1)) {
        struct name *e = &s->names[s->index[i] - 1];
        if (e->hash == h && strcmp(e->name, name) == 0)
            return e;
    }
    if (s->nnames == NAMES_MAX)
        return NULL;
    if (s->nnames == s->names_cap) {
        size_t cap = s->names_cap ? s->names_cap * 2 : 128;
        struct name *names = realloc(s->names, cap * sizeof(*names));
        if (names == NULL)
            return NULL;
        s->names = names;
        s->names_cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return NULL;
    if ((s->nnames + 1) * 2 > s->index_cap && reindex(s, s->nnames + 1) != 0) {
        free(copy);
        return NULL;
    }
    struct name *e = &s->names[s->nnames];
    *e = (struct name){.name = copy, .hash = h};
    for (i = h & (s->index_cap - 1); s->index[i] != 0; i = (i + 1) & (s->index_cap - 1))
        ;
    s->index[i] = (uint32_t)++s->nnames;
    return e;
}

/* Grows *p (of *cap elements of `size` bytes; `first` when none yet) by doubling until it holds
 * `need`. -1 on OOM (*p unchanged). */
static int grow_to(void **p, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Grows out's arrays to hold one more block of `rows` rows and `text` more bytes. -1 on OOM. */
static int reserve(struct store_report_blocks *out, size_t rows, size_t text)
{
    if (grow_to((void **)&out->block, &out->cap, out->n + 1, sizeof(*out->block), 16) != 0 ||
        grow_to((void **)&out->row, &out->rows_cap, out->nrows + rows, sizeof(*out->row), 1024) !=
            0)
        return -1;
    return grow_to((void **)&out->text, &out->text_cap, out->len + text, 1, 16384);
}

/* Appends s (with its NUL) to out's text, which has room; returns its offset. */
static size_t put_text(struct store_report_blocks *out, const char *s)
{
    size_t at = out->len, n = strlen(s) + 1;
    memcpy(out->text + at, s, n);
    out->len += n;
    return at;
}

/* The series' block, summed up whole, to `out` (left out when memory runs out). */
static void emit(const struct series *s, struct store_report_blocks *out)
{
    size_t rows = 0, text = 0;
    for (size_t k = 0; k < s->nnames; k++)
        if (s->names[k].count > 0) {
            rows++;
            text += strlen(s->names[k].name) + 1;
        }
    for (int i = 0; i < s->n; i++)
        text += strlen(s->reports[i].time) + 1;
    if (reserve(out, rows, text) != 0)
        return;
    size_t at = out->n++;
    out->block[at] = (struct store_block){s->job, s->block, s->attempt, s->rank, s->n};
    size_t times[BLOCK];
    for (int i = 0; i < s->n; i++)
        times[i] = put_text(out, s->reports[i].time);
    for (size_t k = 0; k < s->nnames; k++) {
        const struct name *e = &s->names[k];
        if (e->count == 0)
            continue;
        const struct fold_report *first = &s->reports[e->first], *last = &s->reports[e->last];
        out->row[out->nrows++] = (struct store_block_row){
            .at = at,
            .name = put_text(out, e->name),
            .start_at = times[e->first],
            .end_at = times[e->last],
            .count = e->count,
            .seq_first = first->seq,
            .seq_last = last->seq,
            .step_first = first->step,
            .step_last = last->step,
            .v_first = e->v_first,
            .v_last = e->v_last,
            .v_min = e->v_min,
            .v_max = e->v_max,
        };
    }
}

/* Starts the series' block `block`, empty. */
static void start_block(struct series *s, int64_t block)
{
    s->block = block;
    s->n = 0;
    s->whole = true;
    for (size_t k = 0; k < s->nnames; k++)
        s->names[k].count = 0;
}

/* Sums up r's values into the series' block as its report `at`; false when one is not a
 * number or a name cannot be kept. */
static bool fold_values(struct series *s, const struct store_report *r, int at)
{
    for (size_t j = 0; j < r->n_metrics; j++) {
        const struct aproto_metric *m = &r->metrics[j];
        if (!m->is_number)
            return false;
        double v = m->number;
        if (v == 0)
            v = 0; /* PostgreSQL's numeric has no -0 */
        struct name *e = name_of(s, j, m->name);
        if (e == NULL)
            return false;
        if (e->count++ == 0) {
            e->first = at;
            e->v_first = e->v_min = e->v_max = v;
        } else {
            e->v_min = v < e->v_min ? v : e->v_min;
            e->v_max = v > e->v_max ? v : e->v_max;
        }
        e->last = at;
        e->v_last = v;
    }
    return true;
}

void report_fold_add(struct report_fold *f, const struct store_report *r,
                     struct store_report_blocks *out)
{
    struct series *s = series_of(f, r, true);
    if (s == NULL)
        return;
    int64_t block = r->seq >> 4;
    if (s->started && r->seq <= s->last_seq) {
        /* out of order: its block is not summed up here (an older block's check fails) */
        if (block == s->block)
            s->whole = false;
        return;
    }
    if (!s->started || block != s->block) {
        if (s->started && s->whole && s->n > 0)
            emit(s, out);
        if (s->nnames >= NAMES_MAX) { /* a series of ever new names: they go */
            for (size_t k = 0; k < s->nnames; k++)
                free(s->names[k].name);
            s->nnames = 0;
            memset(s->index, 0, s->index_cap * sizeof(*s->index));
        }
        start_block(s, block);
        s->started = true;
    }
    s->last_seq = r->seq;
    if (!s->whole || s->n == BLOCK) /* (rising seqs of one block: at most BLOCK of them) */
        return;
    struct fold_report *fr = &s->reports[s->n];
    size_t tlen = r->time ? strlen(r->time) : TIME_MAX;
    if (tlen >= TIME_MAX || !fold_values(s, r, s->n)) {
        s->whole = false;
        return;
    }
    fr->seq = r->seq;
    fr->step = r->step ? *r->step : -1;
    memcpy(fr->time, r->time, tlen + 1);
    s->n++;
}

void report_fold_forget(struct report_fold *f, const struct store_report *r)
{
    struct series *s = series_of(f, r, false);
    if (s != NULL && s->started && r->seq >> 4 == s->block)
        s->whole = false;
}

void report_fold_begin(struct report_fold *f, struct store_report_blocks *out)
{
    out->n = out->nrows = out->len = 0;
    if (f->n > REPORT_FOLD_MAX)
        report_fold_clear(f);
}

void report_fold_blocks_free(struct store_report_blocks *out)
{
    free(out->block);
    free(out->row);
    free(out->text);
    *out = (struct store_report_blocks){0};
}
