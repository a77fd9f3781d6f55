/* Checkpoint parts in the artifact store (migrations/0013_artifacts.sql): an agent's upload of
 * its merged checkpoint directory, its progress, and its completion. Whether the checkpoint as a
 * whole is complete is decided by the migration's triggers, in the same transaction. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Text parameters of a part key: job, attempt, idx, node. */
struct part_params {
    char job[32], attempt[32], idx[32];
    const char *node;
};

static void part_params(struct part_params *p, const struct store_part_key *k)
{
    STORE_NUM(p->job, k->job);
    STORE_NUM(p->attempt, k->attempt);
    STORE_NUM(p->idx, k->idx);
    p->node = k->node;
}

int store_part_get(struct db_conn *c, const struct store_part_key *k, struct store_part *out)
{
    static const struct db_stmt st = {
        "part_get",
        "SELECT EXISTS (SELECT 1 FROM workers w WHERE w.job_id = $1::bigint "
        "                  AND w.attempt = $2::int AND w.node_id = $4), "
        "       p.state, p.received_bytes, p.sha256, p.location "
        "  FROM (SELECT 1) one LEFT JOIN checkpoint_parts p ON p.job_id = $1::bigint "
        "   AND p.attempt = $2::int AND p.idx = $3::int AND p.node_id = $4",
        4, true};
    memset(out, 0, sizeof(*out));
    struct part_params pp;
    part_params(&pp, k);
    const char *p[] = {pp.job, pp.attempt, pp.idx, pp.node};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs < 0 ? qs : DB_HARD_ERROR;
    out->node_ran_attempt = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, 0, 1));
    out->received = PQgetisnull(res, 0, 2) ? 0 : strtoll(PQgetvalue(res, 0, 2), NULL, 10);
    snprintf(out->sha256, sizeof(out->sha256), "%s", PQgetvalue(res, 0, 3));
    snprintf(out->location, sizeof(out->location), "%s", PQgetvalue(res, 0, 4));
    PQclear(res);
    return DB_ONE_RESULT;
}

int store_part_progress(struct db_conn *c, const struct store_part_key *k, int64_t received)
{
    static const struct db_stmt st = {
        "part_progress",
        "INSERT INTO checkpoint_parts (job_id, attempt, idx, node_id, received_bytes) "
        "VALUES ($1::bigint, $2::int, $3::int, $4, $5::bigint) "
        "ON CONFLICT (job_id, attempt, idx, node_id) DO UPDATE "
        "   SET received_bytes = EXCLUDED.received_bytes, updated_at = now() "
        " WHERE checkpoint_parts.state = 'uploading'",
        5, false};
    struct part_params pp;
    part_params(&pp, k);
    char r[32];
    STORE_NUM(r, received);
    const char *p[] = {pp.job, pp.attempt, pp.idx, pp.node, r};
    return db_exec(c, &st, p, NULL);
}

int store_part_event(struct db_conn *c, const struct store_part_key *k, const char *reason)
{
    static const struct db_stmt st = {
        "part_event",
        "WITH m AS (SELECT 'checkpoint ' || $3::int::text || "
        "                  coalesce(' (id ' || (SELECT ck.id FROM checkpoints ck "
        "                     WHERE ck.job_id = $1::bigint AND ck.attempt = $2::int "
        "                       AND ck.idx = $3::int)::text || ')', '') || "
        "                  ' of attempt ' || $2::int::text || ', part of node ' || $4 || "
        "                  coalesce(' (rank ' || (SELECT string_agg(w.rank::text, ', ' "
        "                     ORDER BY w.rank) FROM workers w WHERE w.job_id = $1::bigint "
        "                       AND w.attempt = $2::int AND w.node_id = $4) || ')', '') || "
        "                  ': ' || $5 AS message) "
        "INSERT INTO job_events (job_id, attempt, status, message) "
        "SELECT j.id, $2::int, j.status, m.message FROM jobs j, m "
        " WHERE j.id = $1::bigint AND NOT EXISTS (SELECT 1 FROM job_events e "
        "       WHERE e.job_id = $1::bigint AND e.message = m.message)",
        5, false};
    struct part_params pp;
    part_params(&pp, k);
    const char *p[] = {pp.job, pp.attempt, pp.idx, pp.node, reason};
    return db_exec(c, &st, p, NULL);
}

int store_part_complete(struct db_conn *c, const struct store_part_key *k, int64_t size,
                        int64_t files, const char *sha256, const char *location)
{
    static const struct db_stmt st = {
        "part_complete",
        "INSERT INTO checkpoint_parts (job_id, attempt, idx, node_id, state, received_bytes, "
        "                              size_bytes, file_count, sha256, location) "
        "VALUES ($1::bigint, $2::int, $3::int, $4, 'complete', $5::bigint, $5::bigint, "
        "        $6::int, $7, $8) "
        "ON CONFLICT (job_id, attempt, idx, node_id) DO UPDATE "
        "   SET state = 'complete', received_bytes = EXCLUDED.size_bytes, "
        "       size_bytes = EXCLUDED.size_bytes, file_count = EXCLUDED.file_count, "
        "       sha256 = EXCLUDED.sha256, location = EXCLUDED.location, updated_at = now() "
        " WHERE checkpoint_parts.state = 'uploading'",
        8, false};
    struct part_params pp;
    part_params(&pp, k);
    char s[32], f[32];
    STORE_NUM(s, size);
    STORE_NUM(f, files);
    const char *p[] = {pp.job, pp.attempt, pp.idx, pp.node, s, f, sha256, location};
    return db_exec(c, &st, p, NULL);
}

/* One statement: the checkpoint object as GET /api/v1/checkpoints/{id} shows it (the fields of a
 * job's checkpoint list plus job_id and its parts), and the artifact locations of its complete
 * parts in node order. */
int store_checkpoint_get(struct db_conn *c, int64_t id, char **json_out)
{
    static const struct db_stmt st = {
        "checkpoint_get",
        "SELECT jsonb_build_object("
        "  'id', c.id, 'job_id', c.job_id, 'attempt', c.attempt, 'index', c.idx, "
        "  'step', c.step, 'metrics', c.metrics, 'size_bytes', c.size_bytes, "
        "  'location', coalesce(c.location::jsonb, '[]'::jsonb), "
        "  'created_at', ty_ts(c.created_at), "
        "  'artifact', jsonb_build_object('state', c.artifact_state, 'file_count', c.file_count, "
        "     'sha256', c.sha256, 'uploaded_bytes', "
        "     (SELECT sum(p.received_bytes) FROM checkpoint_parts p WHERE p.job_id = c.job_id "
        "         AND p.attempt = c.attempt AND p.idx = c.idx), "
        "     'parts', coalesce((SELECT jsonb_agg(jsonb_build_object('node_id', p.node_id, "
        "         'state', p.state, 'received_bytes', p.received_bytes, 'size_bytes', "
        "         p.size_bytes, 'file_count', p.file_count, 'sha256', p.sha256, 'path', "
        "         CASE WHEN p.location LIKE '/%' THEN p.location END) "
        "         ORDER BY p.node_id) FROM checkpoint_parts p WHERE p.job_id = c.job_id "
        "         AND p.attempt = c.attempt AND p.idx = c.idx), '[]'::jsonb)), "
        "  '_locations', coalesce((SELECT jsonb_agg(p.location ORDER BY p.node_id) "
        "     FROM checkpoint_parts p WHERE p.job_id = c.job_id AND p.attempt = c.attempt "
        "      AND p.idx = c.idx AND p.state = 'complete' AND c.artifact_state = 'complete'), "
        "     '[]'::jsonb))::text "
        "  FROM checkpoints c WHERE c.id = $1::bigint AND c.status = 'COMMITTED'",
        1, true};
    char i[32];
    STORE_NUM(i, id);
    const char *p[] = {i};
    *json_out = NULL;
    return db_exec_text(c, &st, p, json_out);
}
