/* Naming hangs: see hang.h. */
#include "hang.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A heartbeat is relayed about every 2 s (1 s in the SDK, 1 s in the agent): a rank is silent
 * only after this long, or hang_warn_s when that is longer. */
#define HANG_SILENT_MIN_S 10.0

/* An append-only text of at most cap - 1 bytes; `full` once something did not fit. */
struct hang_text {
    char *buf;
    size_t cap, len;
    bool full;
};

static void text_add(struct hang_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void text_add(struct hang_text *t, const char *fmt, ...)
{
    if (t->full || t->cap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= t->cap - t->len) {
        t->full = true;
        t->len = t->cap - 1;
        static const char dots[] = "...";
        if (t->cap > sizeof(dots))
            memcpy(t->buf + t->cap - sizeof(dots), dots, sizeof(dots));
        return;
    }
    t->len += (size_t)n;
}

static int cmp_int64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

size_t hang_format_ranks(const int64_t *ranks, size_t n, char *out, size_t outlen)
{
    int64_t *s = n ? malloc(n * sizeof(*s)) : NULL;
    if (n && !s) {
        if (outlen)
            out[0] = '\0';
        return 0;
    }
    if (n)
        memcpy(s, ranks, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_int64);
    size_t need = 0;
    char piece[64];
    if (outlen)
        out[0] = '\0';
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && (s[j + 1] == s[j] || s[j + 1] == s[j] + 1))
            j++;
        int len = s[j] == s[i]
                      ? snprintf(piece, sizeof(piece), "%s%lld", need ? ", " : "", (long long)s[i])
                      : snprintf(piece, sizeof(piece), "%s%lld-%lld", need ? ", " : "",
                                 (long long)s[i], (long long)s[j]);
        if (need + (size_t)len < outlen)
            memcpy(out + need, piece, (size_t)len + 1);
        else if (outlen && need < outlen)
            out[need] = '\0';
        need += (size_t)len;
        i = j + 1;
    }
    free(s);
    return need;
}

/* Position order: collective number, then inside before done with it, then report number. A
 * rank inside collective k is behind one that left it. */
static int cmp_position(const struct hang_rank *a, const struct hang_rank *b)
{
    if (a->coll_seq != b->coll_seq)
        return a->coll_seq < b->coll_seq ? -1 : 1;
    if (a->in_collective != b->in_collective)
        return a->in_collective ? -1 : 1;
    if (a->report_seq != b->report_seq)
        return a->report_seq < b->report_seq ? -1 : 1;
    return 0;
}

/* Same place and the same words: position, collective name and silence. */
static bool same_group(const struct hang_rank *a, const struct hang_rank *b, double silent_s)
{
    const char *x = a->op ? a->op : "", *y = b->op ? b->op : "";
    return cmp_position(a, b) == 0 && strcmp(x, y) == 0 &&
           (a->heartbeat_age_s >= silent_s) == (b->heartbeat_age_s >= silent_s);
}

static int cmp_rank_order(const void *pa, const void *pb)
{
    const struct hang_rank *a = pa, *b = pb;
    int c = cmp_position(a, b);
    if (c != 0)
        return c;
    const char *x = a->op ? a->op : "", *y = b->op ? b->op : "";
    c = strcmp(x, y);
    if (c != 0)
        return c;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Where the ranks of one group are. */
static void describe(struct hang_text *t, const struct hang_rank *g, bool behind, bool reports,
                     double silent_s)
{
    if (g->in_collective)
        text_add(t, " %s %s #%lld", behind ? "in" : "waiting in", g->op, (long long)g->coll_seq);
    else if (g->coll_seq > 0)
        text_add(t, " after %s #%lld", g->op ? g->op : "collective", (long long)g->coll_seq);
    else if (!reports)
        text_add(t, " before any collective");
    if (reports)
        text_add(t, "%s report #%lld", g->in_collective || g->coll_seq > 0 ? ", after" : " after",
                 (long long)g->report_seq);
    if (g->heartbeat_age_s >= silent_s)
        text_add(t, " (no heartbeat for %.0f s)", g->heartbeat_age_s);
}

bool hang_analyze(struct hang_rank *r, size_t n, double warn_s, double *stalled_s, char *out,
                  size_t outlen)
{
    if (n == 0)
        return false;
    double silent_s = warn_s > HANG_SILENT_MIN_S ? warn_s : HANG_SILENT_MIN_S;
    double stalled = r[0].progress_age_s;
    bool waiting = false, differ = false, silent = false, any_coll = false, reports_differ = false;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].known)
            return false;
        if (r[i].progress_age_s < stalled)
            stalled = r[i].progress_age_s;
        waiting |= r[i].in_collective;
        differ |= cmp_position(&r[i], &r[0]) != 0;
        silent |= r[i].heartbeat_age_s >= silent_s;
        any_coll |= r[i].coll_seq > 0;
        reports_differ |= r[i].report_seq != r[0].report_seq;
    }
    if (stalled < warn_s || !(waiting || differ || silent))
        return false;
    qsort(r, n, sizeof(*r), cmp_rank_order);
    bool reports = reports_differ || !any_coll;
    struct hang_text t = {.buf = out, .cap = outlen};
    if (outlen)
        out[0] = '\0';
    text_add(&t, "no progress for %.0f s:", stalled);
    int64_t *ranks = malloc(n * sizeof(*ranks));
    bool *used = calloc(n, sizeof(*used));
    for (size_t i = 0; ranks && used && i < n; i++) {
        if (used[i])
            continue;
        size_t k = 0; /* the group of r[i]: every later rank at the same place, in rank order */
        for (size_t j = i; j < n && cmp_position(&r[j], &r[i]) == 0; j++)
            if (!used[j] && same_group(&r[j], &r[i], silent_s)) {
                used[j] = true;
                ranks[k++] = r[j].rank;
            }
        char list[256];
        hang_format_ranks(ranks, k, list, sizeof(list));
        text_add(&t, "%s %s %s", i ? ";" : "", k == 1 ? "rank" : "ranks", list);
        describe(&t, &r[i], cmp_position(&r[i], &r[0]) == 0, reports, silent_s);
    }
    free(used);
    free(ranks);
    *stalled_s = stalled;
    return true;
}
