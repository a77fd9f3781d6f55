/* GET /api/v1/jobs/{id}/logs?rank=R[,R...]&attempt=N&offset=B&tail=N&grep=RE&stream=S
 *     &format=text|jsonl
 * A job's worker output, line by line, as stored from its agents (docs/streams.md): of one attempt
 * (default: the current one), every rank or the ranks listed, of both output streams or only
 * stream S (stdout or stderr), from the chunks at or after byte offset B (of their stream), only
 * lines matching RE (a PostgreSQL regular expression), only the last N; in the order the chunks
 * were stored. text/plain by default: the lines as they are when one rank is asked, else each
 * prefixed by "[rank R] "; application/x-ndjson (Accept, or format=jsonl): one {rank, attempt,
 * stream, offset, at, line} object per line, offset being the byte offset of the chunk that holds
 * the line and at the time that chunk was stored (the dashboard's timestamps). */
#include "agent_proto.h"
#include "db.h"
#include "handlers.h"
#include "query.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOGS_MAX_GREP 1024

struct logs_read {
    int64_t job;
    const struct store_logs_query *q;
    struct store_log_line *lines;
    size_t n;
    char sqlstate[6];
};

static int logs_read(struct db_conn *c, void *arg)
{
    struct logs_read *a = arg;
    return store_logs_read(c, a->job, a->q, &a->lines, &a->n, a->sqlstate);
}

/* Appends s (len bytes) to the growing buffer. 0 or -1. */
static int put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 4096;
        while (nc < *len + n + 1)
            nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    return 0;
}

/* The reply body (malloc'd, *len bytes) or NULL when out of memory. */
static char *render(const struct logs_read *a, bool jsonl, bool prefix, size_t *len)
{
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    if (put(&buf, len, &cap, "", 0) != 0)
        return NULL;
    for (size_t i = 0; i < a->n; i++) {
        const struct store_log_line *l = &a->lines[i];
        int rc = 0;
        if (jsonl) {
            json_t *o = json_pack("{s:I, s:I, s:s, s:I, s:s, s:s}", "rank", (json_int_t)l->rank,
                                  "attempt", (json_int_t)l->attempt, "stream", l->stream, "offset",
                                  (json_int_t)l->offset, "at", l->at, "line", l->line);
            char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
            json_decref(o);
            rc = s ? put(&buf, len, &cap, s, strlen(s)) : -1;
            free(s);
        } else if (prefix) {
            char p[40];
            int n = snprintf(p, sizeof(p), "[rank %lld] ", (long long)l->rank);
            rc = put(&buf, len, &cap, p, (size_t)n);
        }
        if (rc == 0 && !jsonl)
            rc = put(&buf, len, &cap, l->line, strlen(l->line));
        if (rc == 0)
            rc = put(&buf, len, &cap, "\n", 1);
        if (rc != 0) {
            free(buf);
            return NULL;
        }
    }
    return buf;
}

enum MHD_Result h_jobs_logs(struct srv_request *req)
{
    int64_t id;
    if (srv_arg_id(req, 0, &id) != 0)
        return srv_reply_bad_job_id(req);
    const char *rank_s = srv_query(req, "rank");
    const char *offset_s = srv_query(req, "offset");
    const char *tail_s = srv_query(req, "tail");
    const char *grep = srv_query(req, "grep");
    const char *format = srv_query(req, "format");
    const char *stream = srv_query(req, "stream");
    const char *accept = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Accept");
    struct store_logs_query q = {0};
    char ranks[SRV_QUERY_RANKS_LEN];
    int n_ranks = 0;
    if (rank_s && srv_query_ranks_array(rank_s, ranks, sizeof(ranks), &n_ranks) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "rank",
                                       "must be a rank (0 or more) or ranks separated by commas");
    enum MHD_Result r;
    if (srv_query_int(req, "attempt", 1, INT32_MAX, SRV_MUST_ATTEMPT, &q.attempt, &r) != 0)
        return r;
    if (offset_s && util_parse_int64(offset_s, 0, INT64_MAX, &q.offset) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "offset",
                                       "must be a byte offset, 0 or more");
    if (tail_s && util_parse_int64(tail_s, 1, 10000000, &q.tail) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "tail",
                                       "must be a number of lines from 1 to 10000000");
    if (grep && (grep[0] == '\0' || strlen(grep) > LOGS_MAX_GREP))
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "grep",
                                       "must be a regular expression of 1 to 1024 bytes");
    if (format && strcmp(format, "text") != 0 && strcmp(format, "jsonl") != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "format",
                                       "must be text or jsonl");
    if (stream && aproto_log_stream_from_string(stream) < 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "stream",
                                       "must be stdout or stderr");
    bool jsonl = format ? strcmp(format, "jsonl") == 0
                        : accept && strstr(accept, "application/x-ndjson") != NULL;
    q.ranks = rank_s ? ranks : NULL;
    q.grep = grep;
    q.stream = stream;
    struct logs_read a = {.job = id, .q = &q};
    int qs = db_with_conn(req->srv->db, logs_read, &a);
    if (qs < 0 && strcmp(a.sqlstate, "2201B") == 0) {
        store_log_lines_free(a.lines, a.n);
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "grep",
                                       "is not a valid regular expression");
    }
    if (qs < 0) {
        store_log_lines_free(a.lines, a.n);
        return srv_reply_db_error(req, qs);
    }
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "there is no job %lld",
                                 (long long)id);
    size_t len;
    char *body = render(&a, jsonl, n_ranks != 1, &len);
    store_log_lines_free(a.lines, a.n);
    if (!body)
        return srv_reply_db_error(req, DB_HARD_ERROR);
    return srv_reply_steal(req, 200, jsonl ? "application/x-ndjson" : "text/plain; charset=utf-8",
                           body, len, NULL);
}
