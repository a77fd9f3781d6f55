/* Chunked uploads to the artifact store: the protocol code packages and checkpoint parts share
 * (upload.h, docs/artifacts.md). */
#include "upload.h"

#include "db.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *header(struct srv_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* Zeroes and identifies the call: 0 or the kind's refusal. */
static int upload_identify(struct srv_request *req, const struct upload_kind *kind,
                           struct upload *u)
{
    memset(u, 0, kind->call_size);
    u->kind = kind;
    return kind->identify(req, u);
}

int upload_begin(struct srv_request *req, const struct upload_kind *kind, struct upload *u,
                 enum MHD_Result *res)
{
    int why = upload_identify(req, kind, u);
    if (why == 0)
        return 0;
    *res = kind->refuse(req, u, why);
    return -1;
}

enum MHD_Result upload_reply_store_error(struct srv_request *req, const struct upload_kind *kind,
                                         int rc, int64_t staged)
{
    if (rc == ARTIFACT_EOFFSET)
        return srv_reply_problem(req, SRV_P_UPLOAD_OFFSET, NULL,
                                 "the server holds %lld bytes of this %s: resume there%s",
                                 (long long)staged, kind->noun, kind->resume_hint);
    if (rc == ARTIFACT_EBUSY)
        return srv_reply_problem(req, SRV_P_UPLOAD_BUSY, NULL,
                                 "another request is writing this %s: retry shortly", kind->noun);
    if (rc == ARTIFACT_ECORRUPT)
        return srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                                 "%s: upload the %s again from offset 0", artifact_strerror(rc),
                                 kind->noun);
    if (rc == ARTIFACT_EINVAL)
        return srv_reply_field_problem(req, SRV_P_INVALID_BODY, "sha256", artifact_strerror(rc));
    if (rc ==
        ARTIFACT_ENOTFOUND) /* the client's mistake (or its staging expired), not the store's */
        return srv_reply_problem(req, SRV_P_UPLOAD_OFFSET, NULL,
                                 "nothing of this %s is staged (never uploaded, or removed as "
                                 "abandoned): PUT it from offset 0%s",
                                 kind->noun, kind->resume_hint);
    return srv_reply_problem(req, SRV_P_ARTIFACT_STORE_FAILED, NULL, "%s", artifact_strerror(rc));
}

enum MHD_Result upload_status(struct srv_request *req, const struct upload_kind *kind,
                              struct upload *u)
{
    enum MHD_Result res;
    if (upload_begin(req, kind, u, &res) != 0)
        return res;
    if (kind->finished(u))
        return kind->reply(req, u, UPLOAD_FINISHED, 0);
    struct artifact_store *st = req->srv->artifacts;
    int64_t staged = 0;
    int rc = st->ops->staged_size(st->be, u->key, &staged);
    if (rc != 0)
        return upload_reply_store_error(req, kind, rc, 0);
    return kind->reply(req, u, UPLOAD_STAGED, staged);
}

/* ---- the artifact quota ---- */

int upload_quota_check(struct db_conn *c, const struct srv_config *cfg, enum store_quota_kind kind,
                       const char *subject, int64_t adding, char *detail, size_t n)
{
    if (cfg->auth_mode == SRV_AUTH_NONE)
        return 0;
    int64_t used = 0, limit = 0;
    bool project = kind == STORE_QUOTA_PROJECT;
    int qs = store_artifact_quota(c, kind, subject, project ? 0 : cfg->artifact_quota_bytes, &used,
                                  &limit, NULL);
    if (qs < 0)
        return qs;
    if (limit == 0 || (adding <= limit && used <= limit - adding))
        return 0;
    if (project)
        snprintf(detail, n,
                 "project %s's artifact quota is %lld bytes and %lld are stored (checkpoints of "
                 "its jobs); %lld more do not fit: delete finished jobs, lower "
                 "checkpoint_config.num_to_keep, or ask an admin for a larger project quota",
                 subject, (long long)limit, (long long)used, (long long)adding);
    else
        snprintf(detail, n,
                 "user %s's artifact quota is %lld bytes and %lld are stored (code packages "
                 "they uploaded, checkpoints of their jobs); %lld more do not fit: delete "
                 "finished jobs, lower checkpoint_config.num_to_keep, or ask an admin for a "
                 "larger quota",
                 subject, (long long)limit, (long long)used, (long long)adding);
    return 1;
}

struct quota_call {
    const struct srv_config *cfg;
    const char *user;
    int64_t adding;
    int over;
    char detail[512];
};

static int quota_run(struct db_conn *c, void *arg)
{
    struct quota_call *q = arg;
    int rc = upload_quota_check(c, q->cfg, STORE_QUOTA_USER, q->user, q->adding, q->detail,
                                sizeof(q->detail));
    if (rc < 0)
        return rc;
    q->over = rc;
    return 1;
}

/* The kind's quota check for a chunk that would make `staged` bytes: 0 go on, or -1 after
 * queuing the refusal (*res). */
static int chunk_quota(struct srv_request *req, struct upload *u, int64_t staged,
                       enum MHD_Result *res)
{
    const char *user = u->kind->quota_user ? u->kind->quota_user(u) : NULL;
    if (user == NULL)
        return 0;
    struct quota_call q = {.cfg = &req->srv->cfg, .user = user, .adding = staged};
    int qs = db_with_conn(req->srv->db, quota_run, &q);
    if (qs < 0) {
        *res = srv_reply_db_error(req, qs);
        return -1;
    }
    if (!q.over)
        return 0;
    *res = srv_reply_problem(req, SRV_P_ARTIFACT_QUOTA, NULL, "%s", q.detail);
    return -1;
}

/* ---- chunks ---- */

/* The chunk's checksum header: X-Chunk-CRC32C (8 lowercase hex digits, one cheap pass; kinds
 * with crc32c only) or X-Content-SHA256 (64). NULL with *bad naming the header when neither is
 * sent or the one sent is malformed. *is_crc: which one. */
static const char *chunk_checksum(struct srv_request *req, const struct upload_kind *kind,
                                  bool *is_crc, const char **bad)
{
    const char *crc = kind->crc32c ? header(req, "X-Chunk-CRC32C") : NULL;
    *is_crc = crc != NULL;
    if (crc != NULL) {
        *bad = "X-Chunk-CRC32C";
        return strlen(crc) == 8 && strspn(crc, "0123456789abcdef") == 8 ? crc : NULL;
    }
    const char *sum = header(req, "X-Content-SHA256");
    *bad = sum == NULL && kind->crc32c ? "X-Chunk-CRC32C" : "X-Content-SHA256";
    return sum != NULL && artifact_sha256_valid(sum) ? sum : NULL;
}

static bool crc_matches(uint32_t crc, const char *want)
{
    char got[9];
    snprintf(got, sizeof(got), "%08x", crc);
    return strcmp(got, want) == 0;
}

/* Whether the buffered chunk (the body) matches its checksum (chunk_checksum's `sum`). */
static bool chunk_intact(struct srv_request *req, const char *sum, bool is_crc)
{
    const void *body = req->body ? req->body : "";
    if (is_crc)
        return crc_matches(util_crc32c(0, body, req->body_len), sum);
    char got[65];
    util_sha256_hex(body, req->body_len, got);
    return strcmp(got, sum) == 0;
}

/* Answers a chunk whose bytes failed their checksum. */
static enum MHD_Result reply_chunk_corrupt(struct srv_request *req, struct upload *u,
                                           int64_t offset)
{
    const struct upload_kind *kind = u->kind;
    if (kind->chunk_failed)
        kind->chunk_failed(req, u, offset, 0);
    return srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                             "the chunk at offset %lld %s: send it again", (long long)offset,
                             kind->crc32c ? "does not match its checksum (X-Chunk-CRC32C or "
                                            "X-Content-SHA256)"
                                          : "does not hash to X-Content-SHA256");
}

/* Answers a chunk at `offset` the store took (rc 0, `staged` bytes now) or refused. */
static enum MHD_Result reply_chunk_stored(struct srv_request *req, struct upload *u, int rc,
                                          int64_t offset, int64_t staged)
{
    const struct upload_kind *kind = u->kind;
    if (rc != 0 && rc != ARTIFACT_EOFFSET && rc != ARTIFACT_EBUSY && kind->chunk_failed)
        kind->chunk_failed(req, u, offset, rc);
    if (rc != 0)
        return upload_reply_store_error(req, kind, rc, staged);
    int qs = kind->chunk_stored ? kind->chunk_stored(req, u, offset, staged) : 0;
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    return kind->reply(req, u, UPLOAD_CHUNK, staged);
}

/* ---- a chunk written as it arrives ---- */

/* The PUT's body stream: each piece goes into the staging (and the upload's running SHA-256)
 * while the rest is still on the wire; the chunk's CRC32C is kept running, and upload_put keeps
 * the bytes only if it matches at the end (else they are cut off again). */
struct upload_stream {
    struct upload *u; /* the stream's call (kind->call_size bytes) */
    int64_t offset;
    struct artifact_append *ap; /* NULL once ended */
    uint32_t crc;               /* of the pieces so far */
    int rc;                     /* the store's error on a piece, 0 none */
};

int upload_stream_begin(struct srv_request *req, const struct upload_kind *kind,
                        enum MHD_Result *answered)
{
    struct upload *u = calloc(1, kind->call_size);
    if (u == NULL)
        return -1;
    /* Who calls first: a caller refused is answered before a byte of its body is read. */
    if (upload_begin(req, kind, u, answered) != 0) {
        free(u);
        return 1;
    }
    const char *o = srv_query(req, "offset"), *bad;
    bool is_crc = false;
    int64_t offset;
    struct upload_stream *us = NULL;
    struct artifact_store *st = req->srv->artifacts;
    int64_t staged = 0;
    if (!kind->crc32c || o == NULL || util_parse_int64(o, 0, INT64_MAX / 2, &offset) != 0 ||
        chunk_checksum(req, kind, &is_crc, &bad) == NULL || !is_crc || kind->finished(u) ||
        (us = calloc(1, sizeof(*us))) == NULL ||
        st->ops->append_begin(st->be, u->key, offset, &us->ap, &staged) != 0) {
        free(u);
        free(us);
        return -1;
    }
    us->u = u;
    us->offset = offset;
    req->stream = us;
    return 0;
}

int upload_stream_piece(struct srv_request *req, const char *data, size_t len)
{
    struct upload_stream *us = req->stream;
    struct artifact_store *st = req->srv->artifacts;
    us->crc = util_crc32c(us->crc, data, len);
    us->rc = st->ops->append_data(us->ap, data, len);
    return us->rc == 0 ? 0 : -1;
}

/* Ends the stream's append: kept, or dropped. The store's result; *staged: the staged size. */
static int stream_end(struct srv_request *req, bool keep, int64_t *staged)
{
    struct upload_stream *us = req->stream;
    struct artifact_store *st = req->srv->artifacts;
    int rc = us->ap ? st->ops->append_end(us->ap, keep, staged) : ARTIFACT_EIO;
    us->ap = NULL;
    return rc;
}

void upload_stream_release(struct srv_request *req)
{
    struct upload_stream *us = req->stream;
    int64_t staged;
    if (us->ap)
        stream_end(req, false, &staged); /* cut mid-body, or refused: nothing kept */
    free(us->u);
    free(us);
    req->stream = NULL;
}

/* The end of a streamed chunk: every byte is written; kept if the CRC matches. */
static enum MHD_Result put_streamed(struct srv_request *req)
{
    struct upload_stream *us = req->stream;
    int64_t staged = us->offset;
    if (us->rc != 0) {
        stream_end(req, false, &staged);
        return reply_chunk_stored(req, us->u, us->rc, us->offset, us->offset);
    }
    if (!crc_matches(us->crc, header(req, "X-Chunk-CRC32C"))) {
        stream_end(req, false, &staged);
        return reply_chunk_corrupt(req, us->u, us->offset);
    }
    int rc = stream_end(req, true, &staged);
    return reply_chunk_stored(req, us->u, rc, us->offset, staged);
}

enum MHD_Result upload_put(struct srv_request *req, const struct upload_kind *kind,
                           struct upload *u)
{
    if (req->stream != NULL)
        return put_streamed(req);
    enum MHD_Result res;
    if (upload_begin(req, kind, u, &res) != 0)
        return res;
    if (kind->finished(u))
        return kind->reply(req, u, UPLOAD_FINISHED, 0);
    int64_t offset;
    const char *o = srv_query(req, "offset");
    if (o == NULL || util_parse_int64(o, 0, INT64_MAX / 2, &offset) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "offset",
                                       "offset must be the byte position of this chunk");
    const char *bad = NULL;
    bool is_crc = false;
    const char *sum = chunk_checksum(req, kind, &is_crc, &bad);
    if (sum == NULL)
        return srv_reply_field_problem(req, SRV_P_BAD_REQUEST, bad,
                                       kind->crc32c
                                           ? "X-Chunk-CRC32C: the chunk's CRC32C, 8 lowercase hex "
                                             "digits (or X-Content-SHA256: its SHA-256, 64)"
                                           : "the chunk's SHA-256, 64 lowercase hex digits");
    if (!chunk_intact(req, sum, is_crc))
        return reply_chunk_corrupt(req, u, offset);
    if (chunk_quota(req, u, offset + (int64_t)req->body_len, &res) != 0)
        return res;
    int64_t staged = 0;
    int rc = artifact_append(req->srv->artifacts, u->key, offset, req->body ? req->body : "",
                             req->body_len, &staged);
    return reply_chunk_stored(req, u, rc, offset, staged);
}

/* ---- completion ---- */

int upload_commit(struct artifact_store *st, const char *key, const char *sha256, bool adopt,
                  char *location, int64_t *size)
{
    int rc = st->ops->commit(st->be, key, sha256, location, size);
    if (rc != ARTIFACT_ENOTFOUND || !adopt)
        return rc;
    snprintf(location, ARTIFACT_LOCATION_MAX, "sha256/%.2s/%s", sha256, sha256);
    int fd = st->ops->open_read(st->be, location);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0) {
        *size = sb.st_size;
        rc = 0;
    }
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        location[0] = '\0';
    return rc;
}
