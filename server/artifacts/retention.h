/* Checkpoint retention (checkpoint_config.num_to_keep, checkpoint_score_attribute,
 * checkpoint_score_order; Ray Train's CheckpointConfig): which checkpoints of a job to delete.
 * Pure: no I/O, no allocation. */
#ifndef SRV_RETENTION_H
#define SRV_RETENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct retention_ckpt {
    int64_t order;  /* registration order within the job (attempt, then index): larger is newer */
    bool has_score; /* the checkpoint's metrics hold the score attribute */
    double score;
};

enum retention_order { RETENTION_MAX, RETENTION_MIN };

/* Sets del[i] for each of the n checkpoints to delete so that at most num_to_keep remain, plus
 * the latest (largest order), which is never deleted: with use_score, the best num_to_keep by
 * score (order: larger or smaller is better; a checkpoint without a score ranks below every
 * scored one; ties keep the newer); without, the newest num_to_keep. num_to_keep <= 0 keeps all.
 * Returns how many are marked. Orders must be distinct. */
size_t retention_select(const struct retention_ckpt *c, size_t n, int64_t num_to_keep,
                        bool use_score, enum retention_order order, bool *del);

#endif
