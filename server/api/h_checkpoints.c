/* GET /api/v1/checkpoints/{id}           one registered checkpoint, with its artifact's state
 * GET /api/v1/checkpoints/{id}/archive   its files as one tar stream (Range: bytes=N- or N-M)
 * Readable by every role, as jobs are: a viewer may read any job, so any checkpoint (its owner
 * is the job's). The archive exists once the artifact is complete (409 before); 404 for an
 * unknown or deleted checkpoint. */
#include "archive.h"
#include "artifact.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ckpt_get {
    int64_t id;
    char *json;
};

static int ckpt_get(struct db_conn *c, void *arg)
{
    struct ckpt_get *g = arg;
    return store_checkpoint_get(c, g->id, &g->json);
}

/* Loads checkpoint {id} (argument 0) into *out (the caller json_decrefs it). 0, or -1 after
 * queuing a reply (*res). */
static int load(struct srv_request *req, json_t **out, enum MHD_Result *res)
{
    struct ckpt_get g = {0, NULL};
    if (srv_arg_id(req, 0, &g.id) != 0) {
        *res = srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no such checkpoint");
        return -1;
    }
    int qs = db_with_conn(req->srv->db, ckpt_get, &g);
    if (qs < 0) {
        *res = srv_reply_db_error(req, qs);
        return -1;
    }
    *out = qs > 0 && g.json ? json_loads(g.json, 0, NULL) : NULL;
    free(g.json);
    if (*out == NULL) {
        *res = qs > 0 ? srv_reply_problem(req, SRV_P_INTERNAL, NULL, "bad checkpoint row")
                      : srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "there is no checkpoint %lld",
                                          (long long)g.id);
        return -1;
    }
    return 0;
}

enum MHD_Result h_checkpoints_get(struct srv_request *req)
{
    json_t *ck;
    enum MHD_Result res;
    if (load(req, &ck, &res) != 0)
        return res;
    json_object_del(ck, "_locations");
    return srv_reply_json(req, MHD_HTTP_OK, ck);
}

/* "bytes=N-" or "bytes=N-M" against total: *from, *to (inclusive). 0, -1 unparsable (ignored, as
 * RFC 9110 allows), -2 unsatisfiable. */
static int parse_range(const char *h, int64_t total, int64_t *from, int64_t *to)
{
    if (strncmp(h, "bytes=", 6) != 0)
        return -1;
    char *end;
    errno = 0;
    long long a = strtoll(h + 6, &end, 10);
    if (end == h + 6 || *end != '-' || a < 0 || errno)
        return -1;
    long long b = total - 1;
    if (end[1] != '\0') {
        char *e2;
        b = strtoll(end + 1, &e2, 10);
        if (*e2 != '\0' || b < a)
            return -1;
        if (b > total - 1)
            b = total - 1;
    }
    if (a >= total)
        return -2;
    *from = a;
    *to = b;
    return 0;
}

struct stream {
    struct artifact_archive *ar;
    int64_t from;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *s = cls;
    ssize_t r = artifact_archive_read(s->ar, s->from + (int64_t)pos, buf, max);
    return r == 0 ? MHD_CONTENT_READER_END_OF_STREAM
                  : (r < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : r);
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    artifact_archive_free(s->ar);
    free(s);
}

/* GET /api/v1/agent/checkpoint-archives/{id}: the same archive for a node resuming a job from
 * a checkpoint it holds no copy of (node credential instead of an API token). */
enum MHD_Result h_agent_checkpoint_archive(struct srv_request *req)
{
    enum MHD_Result res;
    if (srv_node_auth(req, &res) != 0)
        return res;
    return h_checkpoints_archive(req);
}

enum MHD_Result h_checkpoints_archive(struct srv_request *req)
{
    json_t *ck;
    enum MHD_Result res;
    if (load(req, &ck, &res) != 0)
        return res;
    json_t *locs = json_object_get(ck, "_locations");
    size_t n = json_array_size(locs);
    const char *state =
        json_string_value(json_object_get(json_object_get(ck, "artifact"), "state"));
    if (state && strcmp(state, "deleted") == 0) {
        json_decref(ck);
        return srv_reply_problem(req, SRV_P_CHECKPOINT_DELETED, NULL,
                                 "the checkpoint was deleted: the job keeps "
                                 "run_config.checkpoint_config.num_to_keep checkpoints");
    }
    if (n == 0) {
        json_decref(ck);
        return srv_reply_problem(req, SRV_P_ARCHIVE_NOT_READY, NULL,
                                 "the checkpoint's files are not (all) in the artifact store yet: "
                                 "see artifact.state");
    }
    const char **l = calloc(n, sizeof(*l));
    for (size_t i = 0; l && i < n; i++)
        l[i] = json_string_value(json_array_get(locs, i));
    int64_t total = 0;
    struct artifact_archive *ar =
        l ? artifact_archive_open(req->srv->artifacts, l, n, &total) : NULL;
    free(l);
    char etag[80];
    snprintf(etag, sizeof(etag), "\"%s\"",
             json_string_value(json_object_get(json_object_get(ck, "artifact"), "sha256")) ?: "");
    json_decref(ck);
    if (ar == NULL)
        return srv_reply_problem(req, SRV_P_ARTIFACT_STORE_FAILED, NULL,
                                 "the artifact store cannot read the checkpoint's parts");
    int64_t from = 0, to = total - 1;
    unsigned status = MHD_HTTP_OK;
    const char *range = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Range");
    if (range) {
        int rc = parse_range(range, total, &from, &to);
        if (rc == -2) {
            artifact_archive_free(ar);
            return srv_reply_problem(req, SRV_P_RANGE_NOT_SATISFIABLE, NULL,
                                     "the archive has %lld bytes", (long long)total);
        }
        if (rc == 0)
            status = MHD_HTTP_PARTIAL_CONTENT;
    }
    struct stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        artifact_archive_free(ar);
        return MHD_NO;
    }
    s->ar = ar;
    s->from = from;
    struct MHD_Response *r = MHD_create_response_from_callback((uint64_t)(to - from + 1), 1 << 16,
                                                               stream_read, s, stream_free);
    if (r == NULL) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-tar");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    if (status == MHD_HTTP_PARTIAL_CONTENT) {
        char cr[100];
        snprintf(cr, sizeof(cr), "bytes %" PRId64 "-%" PRId64 "/%" PRId64, from, to, total);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    }
    enum MHD_Result ret = MHD_queue_response(req->conn, status, r);
    MHD_destroy_response(r);
    req->status = status;
    return ret;
}
