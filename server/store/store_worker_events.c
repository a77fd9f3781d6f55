/* Workers' events sent by the agents: starts and exits, each one statement calling the state
 * machine (ty_worker_started, ty_worker_exited; docs/lifecycle.md), applied only when the worker
 * is placed on the node that sends it. */
#include "store.h"

#include "agent_proto.h"
#include "db_query.h"
#include "job_status.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>

/* Events are applied only when the worker is placed on the node that sends them. */
#define STORE_WORKER_ON_NODE(job, attempt, rank, node)                                             \
    "EXISTS (SELECT 1 FROM workers w WHERE w.job_id = " job " AND w.attempt = " attempt            \
    " AND w.rank = " rank " AND w.node_id = " node ")"

/* A step time as a parameter: NULL (SQL null) when not sent. */
static const char *secs_param(double v, char buf[32])
{
    if (v < 0)
        return NULL;
    snprintf(buf, 32, "%.6f", v);
    return buf;
}

int store_worker_started(struct db_conn *c, const struct store_worker_start *w)
{
    static const struct db_stmt st = {
        "worker_started",
        "SELECT ty_worker_started($1::bigint, $2::int, $3::int, $4::int, $6::float8, $7::float8,"
        " $8::float8) WHERE " //
        STORE_WORKER_ON_NODE("$1::bigint", "$2::int", "$3::int", "$5"),
        8, false};
    char j[32], a[16], r[16], p[32], t[3][32];
    STORE_NUM(j, w->job);
    STORE_NUM(a, w->attempt);
    STORE_NUM(r, w->rank);
    STORE_NUM(p, w->pid);
    const char *params[] = {j,
                            a,
                            r,
                            p,
                            w->node,
                            secs_param(w->code_fetch_s, t[0]),
                            secs_param(w->checkpoint_fetch_s, t[1]),
                            secs_param(w->process_start_s, t[2])};
    return db_exec(c, &st, params, NULL);
}

int store_workers_started(struct db_conn *c, const struct store_worker_start *w, size_t n)
{
    /* WITH ORDINALITY + ORDER BY: the calls run in the order of the events. */
    static const struct db_stmt st = {
        "workers_started",
        "SELECT ty_worker_started(e.job, e.attempt, e.rank, e.pid, e.code, e.ckpt, e.proc)"
        "  FROM unnest($1::bigint[], $2::int[], $3::int[], $4::int[], $5::text[], $6::float8[],"
        "              $7::float8[], $8::float8[]) WITH ORDINALITY"
        "       AS e(job, attempt, rank, pid, node, code, ckpt, proc, i)"
        " WHERE " STORE_WORKER_ON_NODE("e.job", "e.attempt", "e.rank", "e.node") //
        " ORDER BY e.i",
        8, false};
    if (n == 0)
        return 0;
    /* Eight array literals {v0,v1,...}: job, attempt, rank, pid, node, then the three step
     * times (NULL when not sent). Node ids are [A-Za-z0-9._-] (agent_proto.c), so they need no
     * quoting beyond the double quotes. */
    enum { N_INT = 4, NODE = 4, N_ARR = 8 };
    size_t cap = 3 + n * 24, ncap = 3 + n * (APROTO_MAX_NODE_ID + 3);
    char *arrays[N_ARR];
    bool ok = true;
    for (size_t k = 0; k < N_ARR; k++)
        ok = (arrays[k] = malloc(k == NODE ? ncap : cap)) != NULL && ok;
    int qs = DB_HARD_ERROR;
    if (ok) {
        size_t len[N_ARR] = {0};
        for (size_t i = 0; i < n; i++) {
            char sep = i ? ',' : '{';
            long long v[N_INT] = {w[i].job, w[i].attempt, w[i].rank, w[i].pid};
            for (size_t k = 0; k < N_INT; k++)
                len[k] += (size_t)snprintf(arrays[k] + len[k], cap - len[k], "%c%lld", sep, v[k]);
            len[NODE] += (size_t)snprintf(arrays[NODE] + len[NODE], ncap - len[NODE], "%c\"%s\"",
                                          sep, w[i].node);
            double t[3] = {w[i].code_fetch_s, w[i].checkpoint_fetch_s, w[i].process_start_s};
            for (size_t k = 0; k < 3; k++) {
                char *a = arrays[NODE + 1 + k];
                size_t *l = &len[NODE + 1 + k];
                *l += t[k] < 0 ? (size_t)snprintf(a + *l, cap - *l, "%cNULL", sep)
                               : (size_t)snprintf(a + *l, cap - *l, "%c%.6f", sep, t[k]);
            }
        }
        for (size_t k = 0; k < N_ARR; k++)
            snprintf(arrays[k] + len[k], (k == NODE ? ncap : cap) - len[k], "}");
        const char *params[N_ARR];
        for (size_t k = 0; k < N_ARR; k++)
            params[k] = arrays[k];
        qs = db_exec(c, &st, params, NULL);
        if (qs >= 0)
            qs = (int)n;
    }
    for (size_t k = 0; k < N_ARR; k++)
        free(arrays[k]);
    return qs;
}

int store_worker_exited(struct db_conn *c, const char *node, int64_t job, int attempt, int rank,
                        const int64_t *exit_code, const int64_t *signal, const char *error,
                        enum store_exit_outcome *outcome)
{
    static const struct db_stmt st = {
        "worker_exited",
        "SELECT ty_worker_exited($1::bigint, $2::int, $3::int, $4::int, $5::int, $6) WHERE " //
        STORE_WORKER_ON_NODE("$1::bigint", "$2::int", "$3::int", "$7"),
        7, false};
    char j[32], a[16], r[16], code[32], sig[32];
    STORE_NUM(j, job);
    STORE_NUM(a, attempt);
    STORE_NUM(r, rank);
    if (exit_code)
        STORE_NUM(code, *exit_code);
    if (signal)
        STORE_NUM(sig, *signal);
    const char *params[] = {j, a, r, exit_code ? code : NULL, signal ? sig : NULL, error, node};
    char *after = NULL; /* the job's status after the exit; NULL: nothing recorded */
    int qs = db_exec_text(c, &st, params, &after);
    enum job_status s = JOB_STATUS_COUNT;
    if (qs < 0)
        return qs;
    if (after && job_status_from_string(after, &s) != 0) {
        TY_ERROR("store", "worker exit of job %lld: unknown job status '%s'", (long long)job,
                 after);
        qs = DB_HARD_ERROR;
    }
    free(after);
    if (qs < 0)
        return qs;
    if (s == JOB_STATUS_COUNT)
        *outcome = STORE_EXIT_IGNORED;
    else if (job_status_is_terminal(s))
        *outcome = STORE_EXIT_SETTLED;
    else if (s == JOB_STATUS_STOPPING || s == JOB_STATUS_RESTARTING)
        *outcome = STORE_EXIT_STOP_OTHERS;
    else
        *outcome = STORE_EXIT_RECORDED;
    return qs;
}
