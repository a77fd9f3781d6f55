/* Stopping criteria of a plain job (RunConfig(stop=), spec run_config.stop, migration 0041):
 * the reports they have not been checked against, and the decisions. SQL:
 * store/sql/ty_job_stop_*.sql. */
#ifndef TY_STORE_JOB_STOP_H
#define TY_STORE_JOB_STOP_H

#include "db.h"

#include <jansson.h>
#include <stdint.h>

/* A rank-0 report of a RUNNING job with stopping criteria, not checked yet. */
struct store_job_stop_report {
    int64_t job;
    int attempt;
    int64_t seq;     /* the report's index in its attempt, from 1 (training_iteration) */
    json_t *metrics; /* the report's values (owned) */
    json_t *stop;    /* the job's run_config.stop (owned) */
};
/* At most `limit` of them, oldest first, into a malloc'd *out (free with
 * store_job_stop_reports_free). Returns how many or an error. */
int store_job_stop_new_reports(struct db_conn *c, int limit, struct store_job_stop_report **out);
void store_job_stop_reports_free(struct store_job_stop_report *rs, int n);
/* Moves the job's cursor past report r; with `reason` (NULL: go on) stops the job with it as
 * the event's message. Returns 1 when the job was stopped, 0 when not, or an error. */
int store_job_stop_record(struct db_conn *c, const struct store_job_stop_report *r,
                          const char *reason);

#endif
