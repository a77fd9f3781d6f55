/* GET /api/v1/jobs?status=A,B&owner=O&name=N&project=P&tag=T&limit=N&cursor=C: newest first, cursor
 * paging; only the jobs of projects the caller may see (ty_project_visible). */
#include "db.h"
#include "handlers.h"
#include "jobspec.h"
#include "job_status.h"
#include "query.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct job_list {
    struct store_job_filter filter;
    int64_t before_id;
    int limit;
    char *jobs;
    int64_t min_id;
};

static int job_list(struct db_conn *c, void *arg)
{
    struct job_list *a = arg;
    return store_job_list(c, &a->filter, a->before_id, a->limit, &a->jobs, &a->min_id);
}

enum MHD_Result h_jobs_list(struct srv_request *req)
{
    const char *status = srv_query(req, "status");
    const char *limit_s = srv_query(req, "limit");
    const char *cursor_s = srv_query(req, "cursor");
    const char *owner = srv_query(req, "owner");
    const char *name = srv_query(req, "name");
    const char *project = srv_query(req, "project");
    const char *tag = srv_query(req, "tag");
    const char *bad_project = project ? jobspec_project_name_problem(project) : NULL;
    if (bad_project)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "project", bad_project);
    if (owner && (owner[0] == '\0' || strlen(owner) > 128))
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "owner",
                                       "must be a token name of 1 to 128 characters");
    if (tag) {
        json_t *one = json_pack("[s]", tag);
        const char *bad_tag = one ? jobspec_tags_problem(one) : "cannot be read";
        json_decref(one);
        if (bad_tag)
            return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "tag",
                                           "must be one tag: 1 to 64 letters, digits or -_.:/=+@");
    }
    if (name && strlen(name) > 128)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "name",
                                       "must be at most 128 characters");
    char statuses[256], bad[40];
    if (status &&
        srv_query_statuses_array(status, statuses, sizeof(statuses), bad, sizeof(bad)) != 0) {
        char names[160], detail[240];
        job_status_names_text(names, sizeof(names));
        snprintf(detail, sizeof(detail), "unknown status '%s'; use %s (comma separated)", bad,
                 names);
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "status", detail);
    }
    int64_t limit = 50, cursor = 0;
    if (limit_s && util_parse_int64(limit_s, 1, 1000, &limit) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "limit",
                                       "must be an integer from 1 to 1000");
    if (cursor_s && util_parse_int64(cursor_s, 1, INT64_MAX, &cursor) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "cursor",
                                       "is not a cursor returned by this endpoint");
    struct job_list a = {
        {status ? statuses : NULL, owner, name && name[0] ? name : NULL, project, &req->who, tag},
        cursor,
        (int)limit,
        NULL,
        0};
    int qs = db_with_conn(req->srv->db, job_list, &a);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    char *jobs = a.jobs;
    int64_t min_id = a.min_id;
    char next[48] = "null";
    if (qs == limit && min_id > 1)
        snprintf(next, sizeof(next), "\"%lld\"", (long long)min_id);
    size_t len = strlen(jobs) + strlen(next) + 32;
    char *body = malloc(len);
    if (body == NULL) {
        free(jobs);
        return MHD_NO;
    }
    int n = snprintf(body, len, "{\"jobs\":%s,\"next_cursor\":%s}", jobs, next);
    free(jobs);
    return srv_reply_steal(req, MHD_HTTP_OK, "application/json", body, (size_t)n, NULL);
}
