/* Checkpoint retention in the store (num_to_keep; migrations/0019_checkpoint_retention.sql): a
 * job's settings and stored checkpoints, retiring the ones server/artifacts/retention.c chose, and
 * the per-address lock that keeps a removal from racing an upload of the same bytes. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_retention_load(struct db_conn *c, int64_t job, struct store_retention *out)
{
    static const struct db_stmt st = {
        "retention_load",
        "SELECT s.keep, s.attr IS NOT NULL, s.ord = 'min', ck.id, "
        "       CASE WHEN jsonb_typeof(ck.metrics -> s.attr) = 'number' "
        "            THEN (ck.metrics ->> s.attr)::float8 END "
        "  FROM jobs j "
        " CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(j.spec #> "
        "                                   '{run_config,checkpoint_config,num_to_keep}') = "
        "'number' "
        "                            THEN (j.spec #>> "
        "                                  '{run_config,checkpoint_config,num_to_keep}')::bigint "
        "                            ELSE 0 END AS keep, "
        "          j.spec #>> '{run_config,checkpoint_config,checkpoint_score_attribute}' AS attr, "
        "          coalesce(j.spec #>> '{run_config,checkpoint_config,checkpoint_score_order}', "
        "                   'max') AS ord) s "
        "  LEFT JOIN checkpoints ck ON ck.job_id = j.id AND ck.status = 'COMMITTED' "
        "                          AND ck.artifact_state = 'complete' "
        " WHERE j.id = $1::bigint "
        " ORDER BY ck.attempt, ck.idx",
        1, true};
    memset(out, 0, sizeof(*out));
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    int rows = PQntuples(res);
    out->num_to_keep = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    out->use_score = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    out->minimize = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
    out->ckpts = calloc((size_t)rows, sizeof(*out->ckpts));
    if (out->ckpts == NULL) {
        PQclear(res);
        return DB_HARD_ERROR;
    }
    for (int i = 0; i < rows; i++) {
        if (PQgetisnull(res, i, 3))
            continue; /* the job has no stored checkpoint: the one row of the LEFT JOIN */
        struct store_retention_ckpt *ck = &out->ckpts[out->n++];
        ck->id = strtoll(PQgetvalue(res, i, 3), NULL, 10);
        ck->has_score = !PQgetisnull(res, i, 4);
        ck->score = ck->has_score ? strtod(PQgetvalue(res, i, 4), NULL) : 0.0;
    }
    PQclear(res);
    return 1;
}

void store_retention_free(struct store_retention *r)
{
    free(r->ckpts);
    memset(r, 0, sizeof(*r));
}

struct retire_call {
    int64_t job;
    const int64_t *ids;
    size_t nids;
    struct store_artifact_ref *refs;
    size_t n;
};

static int retire_txn(struct db_conn *c, void *arg)
{
    static const struct db_stmt st = {"checkpoints_retire",
                                      "SELECT sha256, location FROM ty_checkpoints_retire("
                                      "$1::bigint, string_to_array($2, ',')::bigint[])",
                                      2, false};
    struct retire_call *rc = arg;
    free(rc->refs);
    rc->refs = NULL;
    rc->n = 0;
    size_t cap = rc->nids * 24 + 1;
    char *ids = malloc(cap), j[32];
    if (ids == NULL)
        return DB_HARD_ERROR;
    size_t len = 0;
    ids[0] = '\0';
    for (size_t i = 0; i < rc->nids; i++)
        len +=
            (size_t)snprintf(ids + len, cap - len, "%s%lld", i ? "," : "", (long long)rc->ids[i]);
    STORE_NUM(j, rc->job);
    const char *p[] = {j, ids};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    free(ids);
    if (qs <= 0)
        return qs;
    int rows = PQntuples(res);
    rc->refs = calloc((size_t)rows, sizeof(*rc->refs));
    if (rc->refs == NULL) {
        PQclear(res);
        return DB_HARD_ERROR;
    }
    for (int i = 0; i < rows; i++) {
        snprintf(rc->refs[i].sha256, sizeof(rc->refs[i].sha256), "%s", PQgetvalue(res, i, 0));
        snprintf(rc->refs[i].location, sizeof(rc->refs[i].location), "%s", PQgetvalue(res, i, 1));
    }
    rc->n = (size_t)rows;
    PQclear(res);
    return qs;
}

int store_checkpoints_retire(struct db_conn *c, int64_t job, const int64_t *ids, size_t nids,
                             struct store_artifact_ref **refs, size_t *n)
{
    struct retire_call rc = {job, ids, nids, NULL, 0};
    int qs = nids ? db_run_txn(c, retire_txn, &rc) : 0;
    if (qs < 0) {
        free(rc.refs);
        rc.refs = NULL;
        rc.n = 0;
    }
    *refs = rc.refs;
    *n = rc.n;
    return qs;
}

int store_artifact_lock(struct db_conn *c, const char *sha256, bool lock)
{
    static const struct db_stmt take = {
        "artifact_lock", "SELECT pg_advisory_lock(ty_artifact_lock_key($1))", 1, true};
    static const struct db_stmt release = {
        "artifact_unlock", "SELECT pg_advisory_unlock(ty_artifact_lock_key($1))", 1, true};
    const char *p[] = {sha256};
    return db_exec(c, lock ? &take : &release, p, NULL);
}

int store_artifact_in_use(struct db_conn *c, const char *sha256, bool *in_use)
{
    static const struct db_stmt st = {"artifact_in_use", "SELECT ty_artifact_in_use($1)", 1, true};
    const char *p[] = {sha256};
    char *v = NULL;
    int qs = db_exec_text(c, &st, p, &v);
    *in_use = qs <= 0 || v == NULL || strcmp(v, "t") == 0; /* unknown: keep the object */
    free(v);
    return qs;
}
