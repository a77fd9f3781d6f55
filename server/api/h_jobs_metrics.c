/* GET /api/v1/jobs/{id}/metrics?name=a,b&rank=R&attempt=N&max_points=M&mode=points|band
 *     &step_min=S&step_max=S&time_min=T&time_max=T
 * Reported metrics as points {name, rank, attempt, step, value, time}, ordered by name, rank,
 * time; each (name, rank) series cut to at most max_points (default 1000) by downsample.c. With
 * mode=band, each series is cut into at most max_points buckets of first, last, min and max
 * (cut in SQL, store_metrics.c) instead. Points of attempts older than the job's current one are
 * marked "superseded": true. step_min/step_max keep only points whose step is in that range, and
 * time_min/time_max (epoch seconds, fractions to the microsecond) those reported in that time
 * range: a chart's zoom on its step or wall-time axis. */
#include "db.h"
#include "handlers.h"
#include "query.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metrics_series {
    int64_t job;
    const struct store_metrics_query *q;
    char *points;
};

/* Reads the optional epoch-seconds query parameter `field` into *us (microseconds; untouched
 * when absent). Returns 0, or -1 when it is not a number of seconds within years 1970..9999. */
static int metrics_time_param(struct srv_request *req, const char *field, int64_t *us)
{
    const char *s = srv_query(req, field);
    double secs;
    if (s == NULL)
        return 0;
    if (util_parse_double(s, 0.0, 253402300799.0, &secs) != 0)
        return -1;
    *us = (int64_t)(secs * 1e6 + 0.5);
    return 0;
}

static int metrics_series(struct db_conn *c, void *arg)
{
    struct metrics_series *a = arg;
    return store_metrics_series(c, a->job, a->q, &a->points);
}

enum MHD_Result h_jobs_metrics(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    const char *names = srv_query(req, "name");
    const char *mode = srv_query(req, "mode");
    char detail[120];
    if (names && srv_query_names_valid(names, detail, sizeof(detail)) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "name", detail);
    int64_t rank = -1, attempt = 0, max_points = 1000;
    enum MHD_Result r;
    if (srv_query_int(req, "rank", 0, INT32_MAX, "must be an integer rank, 0 or more", &rank, &r) !=
            0 ||
        srv_query_int(req, "attempt", 1, INT32_MAX, SRV_MUST_ATTEMPT, &attempt, &r) != 0 ||
        srv_query_int(req, "max_points", 1, SRV_MAX_POINTS, SRV_MUST_MAX_POINTS, &max_points, &r) !=
            0)
        return r;
    if (mode && strcmp(mode, "points") != 0 && strcmp(mode, "band") != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "mode",
                                       "must be points or band");
    const char *smin_s = srv_query(req, "step_min");
    const char *smax_s = srv_query(req, "step_max");
    int64_t step_min = INT64_MIN, step_max = INT64_MAX;
    if (smin_s && util_parse_int64(smin_s, INT64_MIN, INT64_MAX, &step_min) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "step_min",
                                       "must be an integer step");
    if (smax_s && util_parse_int64(smax_s, INT64_MIN, INT64_MAX, &step_max) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "step_max",
                                       "must be an integer step");
    if (step_min > step_max)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "step_max",
                                       "must not be below step_min");
    int64_t time_min = INT64_MIN, time_max = INT64_MAX;
    if (metrics_time_param(req, "time_min", &time_min) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "time_min",
                                       "must be a time in seconds since the epoch");
    if (metrics_time_param(req, "time_max", &time_max) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "time_max",
                                       "must be a time in seconds since the epoch");
    if (time_min > time_max)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "time_max",
                                       "must not be before time_min");
    bool band = mode && strcmp(mode, "band") == 0;
    bool too_many = false;
    struct store_metrics_query q = {.names = names,
                                    .rank = rank,
                                    .attempt = attempt,
                                    .max_points = (size_t)max_points,
                                    .band = band,
                                    .max_rows = req->srv->cfg.max_metric_rows,
                                    .too_many = &too_many,
                                    .step_range = smin_s || smax_s,
                                    .step_min = step_min,
                                    .step_max = step_max,
                                    .time_range = time_min != INT64_MIN || time_max != INT64_MAX,
                                    .time_min_us = time_min,
                                    .time_max_us = time_max};
    struct metrics_series a = {id, &q, NULL};
    int qs = db_with_conn(req->srv->db, metrics_series, &a);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    if (too_many) {
        free(a.points);
        return srv_reply_problem(
            req, SRV_P_INVALID_PARAMETER, NULL,
            "more than %lld metric rows match (--max-metric-rows); narrow the query with name=, "
            "rank= or attempt=",
            (long long)req->srv->cfg.max_metric_rows);
    }
    return srv_reply_wrapped(req, "metrics", a.points);
}
