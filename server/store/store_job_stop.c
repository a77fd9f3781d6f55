/* Stopping criteria of a plain job: see store_job_stop.h. */
#include "store_job_stop.h"

#include "db_query.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

void store_job_stop_reports_free(struct store_job_stop_report *rs, int n)
{
    for (int i = 0; rs && i < n; i++) {
        json_decref(rs[i].metrics);
        json_decref(rs[i].stop);
    }
    free(rs);
}

int store_job_stop_new_reports(struct db_conn *c, int limit, struct store_job_stop_report **out)
{
    static const struct db_stmt st = {"job_stop_new_results",
                                      "SELECT job_id, attempt, seq, metrics::text AS metrics, "
                                      "stop::text AS stop FROM ty_job_stop_new_results($1::int)",
                                      1, true};
    char lim[32];
    STORE_NUM(lim, limit);
    const char *p[] = {lim};
    PGresult *res = NULL;
    *out = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    *out = calloc((size_t)qs, sizeof(**out));
    for (int i = 0; *out && i < qs; i++) {
        struct store_job_stop_report *r = &(*out)[i];
        const char *metrics, *stop;
        if (db_col_int64(res, i, "job_id", &r->job) != 0 ||
            db_col_int(res, i, "attempt", &r->attempt) != 0 ||
            db_col_int64(res, i, "seq", &r->seq) != 0 ||
            db_col_text(res, i, "metrics", &metrics) != 0 ||
            db_col_text(res, i, "stop", &stop) != 0 ||
            (r->metrics = json_loads(metrics, 0, NULL)) == NULL ||
            (r->stop = json_loads(stop, 0, NULL)) == NULL) {
            qs = DB_HARD_ERROR;
            break;
        }
    }
    int n = PQntuples(res);
    PQclear(res);
    if (*out == NULL || qs < 0) {
        store_job_stop_reports_free(*out, n);
        *out = NULL;
        return DB_HARD_ERROR;
    }
    return qs;
}

int store_job_stop_record(struct db_conn *c, const struct store_job_stop_report *r,
                          const char *reason)
{
    static const struct db_stmt st = {"job_stop_record",
                                      "SELECT ty_job_stop_record($1, $2::int, $3, $4)", 4, false};
    char job[32], attempt[32], seq[32];
    STORE_NUM(job, r->job);
    STORE_NUM(attempt, r->attempt);
    STORE_NUM(seq, r->seq);
    const char *p[] = {job, attempt, seq, reason};
    char *out = NULL;
    int qs = db_exec_text(c, &st, p, &out);
    int stopped = out && strcmp(out, "t") == 0;
    free(out);
    return qs < 0 ? qs : stopped;
}
