/* Checkpoint retention applied to the artifact store (retire.h). */
#include "retire.h"

#include "log.h"
#include "retention.h"
#include "shared.h"
#include "store.h"

#include <stdbool.h>
#include <stdlib.h>

/* Removes the object of each ref that no complete part uses, under the address's lock. */
static void remove_unused(struct db_conn *c, struct artifact_store *st, int64_t job,
                          const struct store_artifact_ref *refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (refs[i].location[0] == '/') { /* a part's own directory on shared storage */
            if (shared_remove(st->shared_allow, refs[i].location) != 0)
                TY_WARN("artifacts", "job %lld: cannot remove %s", (long long)job,
                        refs[i].location);
            continue;
        }
        if (store_artifact_lock(c, refs[i].sha256, true) < 0) {
            TY_WARN("artifacts", "job %lld: cannot lock %s; it stays", (long long)job,
                    refs[i].location);
            continue;
        }
        bool in_use = true;
        if (store_artifact_in_use(c, refs[i].sha256, &in_use) >= 0 && !in_use) {
            int rc = st->ops->remove(st->be, refs[i].location);
            if (rc != 0)
                TY_WARN("artifacts", "job %lld: cannot remove %s: %s", (long long)job,
                        refs[i].location, artifact_strerror(rc));
        }
        store_artifact_lock(c, refs[i].sha256, false);
    }
}

int artifact_retire(struct db_conn *c, struct artifact_store *st, int64_t job)
{
    struct store_retention r;
    int qs = store_retention_load(c, job, &r);
    if (qs <= 0 || r.num_to_keep <= 0 || r.n <= (size_t)r.num_to_keep) {
        store_retention_free(&r);
        return qs < 0 ? qs : 0;
    }
    struct retention_ckpt *in = calloc(r.n, sizeof(*in));
    bool *del = calloc(r.n, sizeof(*del));
    int64_t *ids = calloc(r.n, sizeof(*ids));
    size_t nids = 0;
    if (in == NULL || del == NULL || ids == NULL) {
        qs = DB_HARD_ERROR;
        goto out;
    }
    for (size_t i = 0; i < r.n; i++)
        in[i] = (struct retention_ckpt){(int64_t)i, r.ckpts[i].has_score, r.ckpts[i].score};
    retention_select(in, r.n, r.num_to_keep, r.use_score,
                     r.minimize ? RETENTION_MIN : RETENTION_MAX, del);
    for (size_t i = 0; i < r.n; i++)
        if (del[i])
            ids[nids++] = r.ckpts[i].id;
    struct store_artifact_ref *refs = NULL;
    size_t nrefs = 0;
    qs = store_checkpoints_retire(c, job, ids, nids, &refs, &nrefs);
    if (qs < 0) {
        TY_WARN("artifacts", "job %lld: cannot retire %zu checkpoints (num_to_keep %lld)",
                (long long)job, nids, (long long)r.num_to_keep);
    } else if (nids > 0) {
        remove_unused(c, st, job, refs, nrefs);
        TY_INFO("artifacts", "job %lld: deleted %zu checkpoints beyond num_to_keep %lld",
                (long long)job, nids, (long long)r.num_to_keep);
        qs = (int)nids;
    }
    free(refs);
out:
    free(in);
    free(del);
    free(ids);
    store_retention_free(&r);
    return qs;
}
