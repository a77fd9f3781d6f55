/* The control thread's sweeps over running jobs: timeouts, and STOPPING jobs to settle. */
#include "store.h"

#include "db_query.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>

/* Runs a parameterless statement whose one value is a count. Returns the count or an error. */
static int count_of(struct db_conn *c, const struct db_stmt *st)
{
    char *text = NULL;
    int qs = db_exec_text(c, st, NULL, &text);
    int64_t n = 0;
    if (qs > 0 && (text == NULL || util_parse_int64(text, 0, INT32_MAX, &n) != 0))
        qs = DB_HARD_ERROR;
    free(text);
    return qs < 0 ? qs : (int)n;
}

int store_jobs_timed_out(struct db_conn *c)
{
    static const struct db_stmt st = {"jobs_timed_out", "SELECT ty_jobs_timed_out()", 0, false};
    return count_of(c, &st);
}

int store_jobs_stopping(struct db_conn *c, int64_t **ids, size_t *n)
{
    static const struct db_stmt st = {
        "jobs_stopping", "SELECT id FROM jobs WHERE status IN ('STOPPING', 'RESTARTING')", 0, true};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, NULL, &res);
    *ids = NULL;
    *n = 0;
    if (qs <= 0)
        return qs;
    *ids = calloc((size_t)qs, sizeof(int64_t));
    for (int i = 0; *ids && i < qs; i++)
        if (db_col_int64(res, i, "id", &(*ids)[i]) != 0)
            qs = DB_HARD_ERROR;
    PQclear(res);
    if (*ids == NULL || qs < 0) {
        free(*ids);
        *ids = NULL;
        return DB_HARD_ERROR;
    }
    *n = (size_t)qs;
    return qs;
}

int store_jobs_settle_stopping(struct db_conn *c)
{
    static const struct db_stmt st = {"jobs_settle_stopping", "SELECT ty_jobs_settle_stopping()", 0,
                                      false};
    return count_of(c, &st);
}

int store_jobs_drop_disconnected(struct db_conn *c)
{
    static const struct db_stmt st = {"jobs_drop_disconnected",
                                      "SELECT ty_jobs_drop_disconnected()", 0, false};
    return count_of(c, &st);
}
