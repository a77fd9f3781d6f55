/* Applying checkpoint retention (num_to_keep) to the artifact store: choose with retention.c,
 * retire in the database, remove the objects no complete part uses any more. */
#ifndef SRV_RETIRE_H
#define SRV_RETIRE_H

#include "artifact.h"
#include "db.h"

#include <stdint.h>

/* Deletes job's stored checkpoints beyond its checkpoint_config.num_to_keep (the best by
 * checkpoint_score_attribute, else the newest, plus always the latest), on connection c: marks
 * them and their parts deleted, then removes each object from st unless another complete part
 * uses the same bytes (checked under that address's lock, see store_artifact_lock). Called after
 * a checkpoint's artifact may have become complete. Returns how many checkpoints it deleted, or
 * a negative db_qs (logged). */
int artifact_retire(struct db_conn *c, struct artifact_store *st, int64_t job);

#endif
