/* GET /api/v1/jobs/{id}/usage?attempt=N&max_points=M: each worker's CPU and memory over time,
 * {"usage": [{attempt, rank, node_id, time, cpu_seconds, cpu_percent, memory_bytes}]} ordered
 * by attempt, rank, time; each (attempt, rank) series thinned to about max_points (default 500).
 * GET /api/v1/nodes/{id}/usage?minutes=M: the node's workers together over the last M minutes
 * (default 60), {"usage": [{time, cpu_percent, memory_bytes, workers}]}. From the samples the
 * agents send (store_usage.c); workers without a cgroup have none. */
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdint.h>

struct usage_query {
    int64_t job;
    const char *node;
    int attempt;
    int n; /* max_points for a job, minutes for a node */
    char *json;
};

static int job_usage(struct db_conn *c, void *arg)
{
    struct usage_query *a = arg;
    return store_job_usage(c, a->job, a->attempt, a->n, &a->json);
}

static int node_usage(struct db_conn *c, void *arg)
{
    struct usage_query *a = arg;
    return store_node_usage(c, a->node, a->n, &a->json);
}

enum MHD_Result h_jobs_usage(struct srv_request *req)
{
    int64_t id, attempt = 0, max_points = 500;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    enum MHD_Result r;
    if (srv_query_int(req, "attempt", 1, INT32_MAX, SRV_MUST_ATTEMPT, &attempt, &r) != 0 ||
        srv_query_int(req, "max_points", 1, SRV_MAX_POINTS, SRV_MUST_MAX_POINTS, &max_points, &r) !=
            0)
        return r;
    struct usage_query a = {.job = id, .attempt = (int)attempt, .n = (int)max_points};
    int qs = db_with_conn(req->srv->db, job_usage, &a);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (a.json == NULL)
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    return srv_reply_wrapped(req, "usage", a.json);
}

enum MHD_Result h_nodes_usage(struct srv_request *req)
{
    int64_t minutes = 60;
    const char *minutes_s = srv_query(req, "minutes");
    if (minutes_s && util_parse_int64(minutes_s, 1, 10080, &minutes) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "minutes",
                                       "must be an integer from 1 to 10080 (a week)");
    struct usage_query a = {.node = req->args[0], .n = (int)minutes};
    int qs = db_with_conn(req->srv->db, node_usage, &a);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (a.json == NULL)
        return srv_reply_problem(req, SRV_P_NODE_NOT_FOUND, NULL, "there is no node '%s'",
                                 req->args[0]);
    return srv_reply_wrapped(req, "usage", a.json);
}
