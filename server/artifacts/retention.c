/* Checkpoint retention: the selection (retention.h). */
#include "retention.h"

/* Whether a ranks above b (is kept before it). */
static bool better(const struct retention_ckpt *a, const struct retention_ckpt *b, bool use_score,
                   enum retention_order order)
{
    if (use_score) {
        if (a->has_score != b->has_score)
            return a->has_score;
        if (a->has_score && a->score != b->score)
            return order == RETENTION_MAX ? a->score > b->score : a->score < b->score;
    }
    return a->order > b->order;
}

size_t retention_select(const struct retention_ckpt *c, size_t n, int64_t num_to_keep,
                        bool use_score, enum retention_order order, bool *del)
{
    size_t latest = 0, marked = 0;
    for (size_t i = 0; i < n; i++) {
        del[i] = false;
        if (c[i].order > c[latest].order)
            latest = i;
    }
    if (num_to_keep <= 0 || (uint64_t)num_to_keep >= n)
        return 0;
    /* A checkpoint is kept when fewer than num_to_keep others rank above it: O(n^2), and a job
     * keeps few checkpoints between two passes. */
    for (size_t i = 0; i < n; i++) {
        int64_t above = 0;
        for (size_t j = 0; j < n && above < num_to_keep; j++)
            if (j != i && better(&c[j], &c[i], use_score, order))
                above++;
        if (above >= num_to_keep && i != latest) {
            del[i] = true;
            marked++;
        }
    }
    return marked;
}
