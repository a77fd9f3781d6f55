/* Checkpoint queries: registering checkpoint k of an attempt once every rank made its k-th report
 * (DESIGN.md section 4, control_report.c), and listing a job's checkpoints (REST). */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Registration                                                                                 */
/* ------------------------------------------------------------------------------------------ */

struct round_txn {
    const struct store_checkpoint_round *in;
    bool *registered, *refreshed;
    char *sqlstate; /* 6 bytes */
};

/* Keeps the SQLSTATE of a hard error: read before db_run_txn's ROLLBACK clears it. */
static int keep_state(struct round_txn *t, struct db_conn *c, int qs)
{
    if (qs == DB_HARD_ERROR)
        snprintf(t->sqlstate, 6, "%s", db_last_sqlstate(c));
    return qs;
}

/* Two statements in one transaction, so the second sees what the first wrote:
 *
 * bytes: this report's checkpoint_bytes (when the agent sent it);
 * reg:   checkpoint k, when round k is complete (a report with seq k from each of world_size
 *        ranks) and one of its reports has a checkpoint_dir. step: rank 0's report k; metrics:
 *        rank 0's values of report k (reports.metrics); location: JSON text of the distinct
 *        (node_id, checkpoint_dir) pairs, ordered; size_bytes: per pair, checkpoint_bytes of its
 *        latest report (the agent's merged directory only grows as its ranks report), summed.
 *        A resend finds the row and refreshes size and location, so a report whose bytes
 *        arrived late (its first delivery failed) still counts; a DELETED row is left alone. */
static int round_body(struct db_conn *c, void *arg)
{
    static const struct db_stmt bytes = {
        "checkpoint_report_bytes",
        "UPDATE reports SET checkpoint_bytes = $5::bigint "
        " WHERE job_id = $1::bigint AND attempt = $2::int AND rank = $3::int AND seq = $4::bigint "
        "   AND checkpoint_dir IS NOT NULL AND checkpoint_bytes IS DISTINCT FROM $5::bigint",
        5, false};
    static const struct db_stmt reg = {
        "checkpoint_register",
        "WITH rd AS (SELECT rank, step, node_id, checkpoint_dir, checkpoint_bytes, reported_at "
        "              FROM reports WHERE job_id = $1::bigint AND attempt = $2::int "
        "               AND seq = $3::bigint), "
        "     ok AS (SELECT 1 WHERE (SELECT count(*) FROM rd) >= "
        "                           (SELECT world_size FROM attempts "
        "                             WHERE job_id = $1::bigint AND attempt = $2::int) "
        "              AND EXISTS (SELECT 1 FROM rd WHERE checkpoint_dir IS NOT NULL)), "
        "     loc AS (SELECT DISTINCT ON (node_id, checkpoint_dir) node_id, checkpoint_dir, "
        "                    checkpoint_bytes FROM rd WHERE checkpoint_dir IS NOT NULL "
        "              ORDER BY node_id, checkpoint_dir, reported_at DESC, "
        "                       checkpoint_bytes DESC NULLS LAST) "
        "INSERT INTO checkpoints (job_id, attempt, idx, step, metrics, size_bytes, location, "
        "                         status) "
        "SELECT $1::bigint, $2::int, $3::bigint, (SELECT step FROM rd WHERE rank = 0), "
        "       (SELECT coalesce(jsonb_object_agg(e.key, ty_metric_value(e.value)), '{}'::jsonb) "
        "          FROM reports r, jsonb_each(r.metrics) e "
        "         WHERE r.job_id = $1::bigint AND r.attempt = $2::int AND r.rank = 0 "
        "           AND r.seq = $3::bigint), "
        "       (SELECT sum(checkpoint_bytes) FROM loc), "
        "       (SELECT jsonb_agg(jsonb_build_object('node_id', node_id, 'path', checkpoint_dir) "
        "                         ORDER BY node_id, checkpoint_dir) FROM loc)::text, "
        "       'COMMITTED' FROM ok "
        "ON CONFLICT (job_id, attempt, idx) DO UPDATE "
        "   SET size_bytes = EXCLUDED.size_bytes, location = EXCLUDED.location "
        " WHERE checkpoints.status = 'COMMITTED' "
        "   AND (checkpoints.size_bytes, checkpoints.location) IS DISTINCT FROM "
        "       (EXCLUDED.size_bytes, EXCLUDED.location) "
        "RETURNING (xmax = 0) AS inserted",
        3, false};
    struct round_txn *t = arg;
    const struct store_checkpoint_round *in = t->in;
    *t->registered = *t->refreshed = false;
    char job[32], attempt[32], rank[32], k[32], b[32];
    STORE_NUM(job, in->job);
    STORE_NUM(attempt, in->attempt);
    STORE_NUM(rank, in->rank);
    STORE_NUM(k, in->k);
    if (in->bytes) {
        STORE_NUM(b, *in->bytes);
        const char *p[] = {job, attempt, rank, k, b};
        int qs = keep_state(t, c, db_exec(c, &bytes, p, NULL));
        if (qs < 0)
            return qs;
    }
    if (!in->try_register)
        return DB_NO_RESULTS;
    const char *p[] = {job, attempt, k};
    PGresult *res = NULL;
    int qs = keep_state(t, c, db_exec(c, &reg, p, &res));
    if (qs > 0) {
        /* xmax is 0 in a row this statement inserted, our xid in one it updated. */
        bool inserted = false;
        if (db_col_bool(res, 0, "inserted", &inserted) != 0)
            qs = DB_HARD_ERROR;
        else if (inserted)
            *t->registered = true;
        else
            *t->refreshed = true;
    }
    if (res)
        PQclear(res);
    return qs;
}

int store_checkpoint_round(struct db_conn *c, const struct store_checkpoint_round *in,
                           bool *registered, bool *refreshed, char sqlstate[6])
{
    struct round_txn t = {in, registered, refreshed, sqlstate};
    sqlstate[0] = '\0';
    return db_run_txn(c, round_body, &t);
}

/* ------------------------------------------------------------------------------------------ */
/* Listing                                                                                      */
/* ------------------------------------------------------------------------------------------ */

int store_checkpoint_list(struct db_conn *c, int64_t job, char **json_out)
{
    static const struct db_stmt exists = {"checkpoints_job_exists",
                                          "SELECT 1 FROM jobs WHERE id = $1::bigint", 1, true};
    /* location is stored as JSON text (migration 0004); a value that is not JSON would make the
     * cast fail, and only this server writes it. */
    static const struct db_stmt list = {
        "checkpoints_list",
        "SELECT coalesce(jsonb_agg(jsonb_build_object("
        "         'id', c.id, 'attempt', c.attempt, 'index', c.idx, 'step', c.step, "
        "         'metrics', c.metrics, 'size_bytes', c.size_bytes, "
        "         'location', coalesce(c.location::jsonb, '[]'::jsonb), "
        "         'created_at', ty_ts(c.created_at), 'artifact', jsonb_build_object("
        "           'state', c.artifact_state, 'file_count', c.file_count, 'sha256', c.sha256, "
        "           'uploaded_bytes', (SELECT sum(p.received_bytes) FROM checkpoint_parts p "
        "             WHERE p.job_id = c.job_id AND p.attempt = c.attempt AND p.idx = c.idx))) "
        "         ORDER BY c.attempt, c.idx), "
        "       '[]'::jsonb)::text "
        "  FROM checkpoints c WHERE c.job_id = $1::bigint AND c.status = 'COMMITTED'",
        1, true};
    *json_out = NULL;
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    int qs = db_exec(c, &exists, p, NULL);
    if (qs <= 0)
        return qs;
    PGresult *res = NULL;
    qs = db_exec(c, &list, p, &res);
    if (qs < 0)
        return qs;
    if (qs == 0 || res == NULL) {
        PQclear(res);
        return DB_HARD_ERROR; /* an aggregate always returns one row */
    }
    *json_out = strdup(PQgetvalue(res, 0, 0));
    PQclear(res);
    return *json_out ? DB_ONE_RESULT : DB_HARD_ERROR;
}

/* ------------------------------------------------------------------------------------------ */
/* Resuming (resume_from_checkpoint)                                                            */
/* ------------------------------------------------------------------------------------------ */

/* One statement: n pairs each launched node (in the order of nodes_json) with the path of the
 * checkpoint's location entry on that node (the first by path should there be several); m words
 * the warning for a node without one; ev records each warning once per attempt as a job event
 * (status: the job's current one), so a launch resent after a reconnect adds nothing. */
int store_checkpoint_launch_dirs(struct db_conn *c, int64_t ckpt, int64_t job, int attempt,
                                 const char *const *node_ids, size_t n_nodes,
                                 struct srv_resume_dir **out, size_t *n)
{
    static const struct db_stmt st = {
        "checkpoint_launch_dirs",
        "WITH ck AS (SELECT coalesce(location::jsonb, '[]'::jsonb) AS loc, "
        "                   CASE WHEN artifact_state = 'complete' THEN sha256 END AS sha, "
        "                   CASE WHEN artifact_state = 'complete' THEN "
        "                     (SELECT regexp_replace(min(p.location), '/[^/]*$', '') "
        "                        FROM checkpoint_parts p WHERE p.job_id = checkpoints.job_id "
        "                         AND p.attempt = checkpoints.attempt AND p.idx = checkpoints.idx "
        "                         AND p.state = 'complete' AND p.location LIKE '/%') END AS shared "
        "              FROM checkpoints WHERE id = $1::bigint AND status = 'COMMITTED'), "
        "     n AS (SELECT w.node_id, w.ord, "
        "                  (SELECT e->>'path' FROM ck, jsonb_array_elements(ck.loc) e "
        "                    WHERE e->>'node_id' = w.node_id ORDER BY e->>'path' LIMIT 1) AS path "
        "             FROM jsonb_array_elements_text($4::jsonb) WITH ORDINALITY "
        "                  AS w(node_id, ord)), "
        "     m AS (SELECT node_id, ord, path, "
        "                  CASE WHEN path IS NOT NULL THEN NULL "
        "                       WHEN (SELECT sha FROM ck) IS NOT NULL THEN NULL "
        "                       WHEN EXISTS (SELECT 1 FROM ck) THEN "
        "                         'node ' || node_id || ' holds no copy of checkpoint ' || "
        "                         $1::bigint::text || ': its workers start without it (the "
        "artifact store holds no complete copy)' "
        "                       ELSE 'checkpoint ' || $1::bigint::text || ' no longer exists: the "
        "workers on node ' || node_id || ' start without it' END AS message "
        "             FROM n), "
        "     ev AS (INSERT INTO job_events (job_id, attempt, status, message) "
        "            SELECT j.id, $3::int, j.status, m.message FROM m JOIN jobs j "
        "                ON j.id = $2::bigint "
        "             WHERE m.message IS NOT NULL AND NOT EXISTS "
        "                   (SELECT 1 FROM job_events e WHERE e.job_id = $2::bigint "
        "                       AND e.attempt = $3::int AND e.message = m.message)) "
        "SELECT node_id, path, message, "
        "       CASE WHEN path IS NULL THEN (SELECT sha FROM ck) END, "
        "       CASE WHEN path IS NULL THEN (SELECT shared FROM ck) END FROM m ORDER BY ord",
        4, false};
    *out = NULL;
    *n = 0;
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < n_nodes; i++)
        if (json_array_append_new(ids, json_string(node_ids[i])) != 0) {
            json_decref(ids);
            ids = NULL;
        }
    char *nodes_json = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
    json_decref(ids);
    if (nodes_json == NULL)
        return DB_HARD_ERROR;
    char id[32], j[32], a[32];
    STORE_NUM(id, ckpt);
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    const char *p[] = {id, j, a, nodes_json};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    free(nodes_json);
    if (qs <= 0)
        return qs;
    struct srv_resume_dir *dirs = calloc((size_t)qs, sizeof(*dirs));
    bool oom = dirs == NULL;
    for (int i = 0; dirs && i < qs; i++) {
        dirs[i].node_id = strdup(PQgetvalue(res, i, 0));
        dirs[i].path = PQgetisnull(res, i, 1) ? NULL : strdup(PQgetvalue(res, i, 1));
        dirs[i].message = PQgetisnull(res, i, 2) ? NULL : strdup(PQgetvalue(res, i, 2));
        if (!PQgetisnull(res, i, 3)) {
            dirs[i].fetch_id = ckpt;
            dirs[i].fetch_sha256 = strdup(PQgetvalue(res, i, 3));
            oom = oom || dirs[i].fetch_sha256 == NULL;
        }
        if (!PQgetisnull(res, i, 4)) {
            dirs[i].fetch_shared = strdup(PQgetvalue(res, i, 4));
            oom = oom || dirs[i].fetch_shared == NULL;
        }
        oom = oom || dirs[i].node_id == NULL || (!PQgetisnull(res, i, 1) && !dirs[i].path) ||
              (!PQgetisnull(res, i, 2) && !dirs[i].message);
    }
    PQclear(res);
    if (oom) {
        srv_resume_dirs_free(dirs, (size_t)qs);
        return DB_HARD_ERROR;
    }
    *out = dirs;
    *n = (size_t)qs;
    return qs;
}
