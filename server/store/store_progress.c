/* Workers' hangs: the statements behind the control loop's hang check (control_hang.c). The SQL
 * functions are store/sql/ty_progress_ingest.sql and ty_hang_*.sql; heartbeats come in through
 * store_ingest.c. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_hang_suspects(struct db_conn *c, struct store_hang_suspect **out, size_t *n)
{
    /* Only attempts whose every running worker has a heartbeat relayed in the last 10 s (an
     * agent that is away is not a hang) and none progressed for hang_warn_s. */
    static const struct db_stmt st = {
        "hang_suspects",
        "WITH j AS (SELECT id, attempt, "
        "   (spec->'run_config'->'failure_config'->>'hang_warn_s')::float8 AS warn_s, "
        "   coalesce((spec->'run_config'->'failure_config'->>'hang_timeout_s')::float8, 0) "
        "     AS timeout_s FROM jobs WHERE status = 'RUNNING') "
        "SELECT j.id, j.attempt, j.warn_s, j.timeout_s, "
        "  a.hang_warned_at IS NOT DISTINCT FROM max(p.progress_at), "
        "  jsonb_agg(jsonb_build_array(w.rank, p.op, p.coll_seq, p.in_collective, p.report_seq, "
        "    extract(epoch FROM now() - p.progress_at), "
        "    extract(epoch FROM now() - p.heartbeat_at)) ORDER BY w.rank)::text "
        "FROM j JOIN attempts a ON a.job_id = j.id AND a.attempt = j.attempt "
        "JOIN workers w ON w.job_id = j.id AND w.attempt = j.attempt AND w.status = 'RUNNING' "
        "LEFT JOIN worker_progress p ON p.job_id = w.job_id AND p.attempt = w.attempt "
        "  AND p.rank = w.rank "
        "WHERE j.warn_s IS NOT NULL "
        "GROUP BY j.id, j.attempt, j.warn_s, j.timeout_s, a.hang_warned_at "
        "HAVING count(p.rank) = count(*) AND min(p.updated_at) > now() - interval '10 s' "
        "   AND max(p.progress_at) <= now() - make_interval(secs => j.warn_s) "
        "ORDER BY j.id",
        0, true};
    *out = NULL;
    *n = 0;
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    if (qs <= 0)
        return qs;
    struct store_hang_suspect *s = calloc((size_t)qs, sizeof(*s));
    for (int i = 0; s && i < qs; i++) {
        s[i].job = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        s[i].attempt = (int)strtol(PQgetvalue(res, i, 1), NULL, 10);
        s[i].warn_s = strtod(PQgetvalue(res, i, 2), NULL);
        s[i].timeout_s = strtod(PQgetvalue(res, i, 3), NULL);
        s[i].warned = PQgetvalue(res, i, 4)[0] == 't';
        s[i].ranks_json = strdup(PQgetvalue(res, i, 5));
        if (s[i].ranks_json == NULL) {
            store_hang_suspects_free(s, (size_t)i);
            s = NULL;
        }
    }
    PQclear(res);
    if (s == NULL)
        return DB_HARD_ERROR;
    *out = s;
    *n = (size_t)qs;
    return qs;
}

void store_hang_suspects_free(struct store_hang_suspect *s, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        free(s[i].ranks_json);
    free(s);
}

/* Runs a (job, attempt, message) -> boolean function: 1 true, 0 false, or an error. */
static int hang_call(struct db_conn *c, const struct db_stmt *st, int64_t job, int attempt,
                     const char *message)
{
    char j[32], a[32];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    const char *p[] = {j, a, message};
    char *v = NULL;
    int qs = db_exec_text(c, st, p, &v);
    if (qs <= 0)
        return qs;
    int done = v && v[0] == 't';
    free(v);
    return done;
}

int store_hang_warn(struct db_conn *c, int64_t job, int attempt, const char *message)
{
    static const struct db_stmt st = {"hang_warn", "SELECT ty_hang_warn($1::bigint, $2::int, $3)",
                                      3, false};
    return hang_call(c, &st, job, attempt, message);
}

int store_hang_fail(struct db_conn *c, int64_t job, int attempt, const char *message)
{
    static const struct db_stmt st = {"hang_fail", "SELECT ty_hang_fail($1::bigint, $2::int, $3)",
                                      3, false};
    return hang_call(c, &st, job, attempt, message);
}
