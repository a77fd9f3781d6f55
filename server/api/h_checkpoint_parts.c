/* The agents' upload of checkpoint parts to the artifact store (issue 11, docs/artifacts.md):
 *   GET  /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part           resume point
 *   PUT  /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part?offset=N  one chunk (streamed)
 *   POST /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part/complete  {"sha256","file_count"}
 *   POST /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part/failed    {"reason"}
 * A rejected chunk, a store that cannot write (disk full) and a part the agent cannot read
 * (part/failed) each leave a job event naming the checkpoint, the node's ranks and the reason.
 * Authenticated as a node, not a user: X-Trainyard-Node names it and the bearer is its node
 * credential (with --auth none only the name). A node may upload only for attempts it ran
 * workers of. Each reply is {"state","offset"} (offset: bytes the server holds). */
#include "artifact.h"
#include "db.h"
#include "handlers.h"
#include "retire.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct part_call {
    struct store_part_key key;
    struct store_part part;
    const char *credential; /* NULL with --auth none */
    bool proven;
    /* progress / completion */
    int64_t received, size, files;
    const char *sha256, *staging_key;
    const char *event; /* part_event's reason */
    struct artifact_store *artifacts;
    int store_rc;
    char location_buf[ARTIFACT_LOCATION_MAX];
};

static const char *header(struct srv_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* Checks the node's credential and reads its part, on one pooled connection. */
static int part_lookup(struct db_conn *c, void *arg)
{
    struct part_call *pc = arg;
    pc->proven = pc->credential == NULL;
    if (!pc->proven) {
        char *hash = NULL;
        bool alive = false;
        int qs = store_node_auth(c, pc->key.node, &hash, &alive);
        if (qs < 0)
            return qs;
        char h[65];
        util_sha256_hex(pc->credential, strlen(pc->credential), h);
        pc->proven = qs > 0 && hash != NULL && strcmp(h, hash) == 0;
        free(hash);
        if (!pc->proven)
            return DB_ONE_RESULT;
    }
    return store_part_get(c, &pc->key, &pc->part);
}

static int part_progress(struct db_conn *c, void *arg)
{
    struct part_call *pc = arg;
    return store_part_progress(c, &pc->key, pc->received);
}

static int part_event(struct db_conn *c, void *arg)
{
    struct part_call *pc = arg;
    return store_part_event(c, &pc->key, pc->event);
}

/* Records `fmt` as a job event on the part (best effort: the reply does not depend on it). */
static void note_event(struct srv_request *req, struct part_call *pc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_event(struct srv_request *req, struct part_call *pc, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pc->event = msg;
    if (db_with_conn(req->srv->db, part_event, pc) < 0)
        TY_WARN("artifacts", "job %lld: cannot record the event \"%s\"", (long long)pc->key.job,
                msg);
    pc->event = NULL;
}

/* Stores the staged part as its object and marks the part complete, under the object's lock
 * (store_artifact_lock: a retention pass cannot remove the object in between), then applies
 * the job's num_to_keep, since its checkpoint may have just become complete. pc->store_rc: the
 * artifact store's result. */
static int part_complete(struct db_conn *c, void *arg)
{
    struct part_call *pc = arg;
    struct artifact_store *st = pc->artifacts;
    int qs = store_artifact_lock(c, pc->sha256, true);
    if (qs < 0)
        return qs;
    pc->store_rc =
        st->ops->commit(st->be, pc->staging_key, pc->sha256, pc->location_buf, &pc->size);
    if (pc->store_rc == ARTIFACT_ENOTFOUND) {
        /* Committed by an earlier call whose database write failed: the object is there. */
        snprintf(pc->location_buf, sizeof(pc->location_buf), "sha256/%.2s/%s", pc->sha256,
                 pc->sha256);
        int fd = st->ops->open_read(st->be, pc->location_buf);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0) {
            pc->size = sb.st_size;
            pc->store_rc = 0;
        }
        if (fd >= 0)
            close(fd);
    }
    if (pc->store_rc == 0)
        qs = store_part_complete(c, &pc->key, pc->size, pc->files, pc->sha256, pc->location_buf);
    store_artifact_lock(c, pc->sha256, false);
    if (pc->store_rc == 0 && qs >= 0)
        artifact_retire(c, st, pc->key.job);
    return qs;
}

/* Why part_identify refused a request (PART_OK: it did not). */
enum part_refusal { PART_OK, PART_NO_PATH, PART_NO_NODE, PART_DB, PART_UNPROVEN, PART_NOT_RAN };

/* Parses the path and authenticates the node; fills pc->part and the staging key. *qs: the
 * database result for PART_DB. */
static enum part_refusal part_identify(struct srv_request *req, struct part_call *pc, char key[256],
                                       int *qs)
{
    int64_t job, attempt, idx;
    if (srv_arg_id(req, 0, &job) != 0 || srv_arg_id(req, 1, &attempt) != 0 ||
        srv_arg_id(req, 2, &idx) != 0 || attempt > INT32_MAX || idx > INT32_MAX)
        return PART_NO_PATH;
    const char *node = header(req, "X-Trainyard-Node");
    if (node == NULL || !artifact_key_valid(node))
        return PART_NO_NODE;
    pc->key = (struct store_part_key){job, (int)attempt, idx, node};
    pc->credential = NULL;
    if (req->srv->cfg.auth_mode == SRV_AUTH_TOKEN) {
        const char *a = header(req, MHD_HTTP_HEADER_AUTHORIZATION);
        pc->credential = a && strncmp(a, "Bearer ", 7) == 0 ? a + 7 : "";
    }
    *qs = db_with_conn(req->srv->db, part_lookup, pc);
    if (*qs < 0)
        return PART_DB;
    if (!pc->proven)
        return PART_UNPROVEN;
    if (!pc->part.node_ran_attempt)
        return PART_NOT_RAN;
    snprintf(key, 256, "%lld-%lld-%lld-%s", (long long)job, (long long)attempt, (long long)idx,
             node);
    return PART_OK;
}

/* part_identify, answering a refusal. Returns 0, or -1 after queuing the reply (*res). */
static int part_begin(struct srv_request *req, struct part_call *pc, char key[256],
                      enum MHD_Result *res)
{
    int qs = 0;
    switch (part_identify(req, pc, key, &qs)) {
    case PART_OK:
        return 0;
    case PART_NO_PATH:
        *res = srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no such checkpoint part");
        break;
    case PART_NO_NODE:
        *res = srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL,
                                 "X-Trainyard-Node must name the uploading node");
        break;
    case PART_DB:
        *res = srv_reply_db_error(req, qs);
        break;
    case PART_UNPROVEN:
        *res = srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL,
                                 "the bearer must be node %s's credential", pc->key.node);
        break;
    case PART_NOT_RAN:
        *res = srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "node %s ran no worker of job %lld attempt %lld", pc->key.node,
                                 (long long)pc->key.job, (long long)pc->key.attempt);
        break;
    }
    return -1;
}

struct node_proof {
    const char *node, *credential;
    bool proven;
};

static int node_prove(struct db_conn *c, void *arg)
{
    struct node_proof *np = arg;
    char *hash = NULL;
    bool alive = false;
    int qs = store_node_auth(c, np->node, &hash, &alive);
    if (qs < 0)
        return qs;
    char h[65];
    util_sha256_hex(np->credential, strlen(np->credential), h);
    np->proven = qs > 0 && hash != NULL && strcmp(h, hash) == 0;
    free(hash);
    return DB_ONE_RESULT;
}

int srv_node_auth(struct srv_request *req, enum MHD_Result *res)
{
    const char *node = header(req, "X-Trainyard-Node");
    if (node == NULL || !artifact_key_valid(node)) {
        *res = srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL,
                                 "X-Trainyard-Node must name the calling node");
        return -1;
    }
    if (req->srv->cfg.auth_mode != SRV_AUTH_TOKEN)
        return 0;
    const char *a = header(req, MHD_HTTP_HEADER_AUTHORIZATION);
    struct node_proof np = {node, a && strncmp(a, "Bearer ", 7) == 0 ? a + 7 : "", false};
    int qs = db_with_conn(req->srv->db, node_prove, &np);
    if (qs < 0) {
        *res = srv_reply_db_error(req, qs);
        return -1;
    }
    if (!np.proven) {
        *res = srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL,
                                 "the bearer must be node %s's credential", node);
        return -1;
    }
    return 0;
}

enum MHD_Result h_part_reply_state(struct srv_request *req, const char *state, int64_t offset)
{
    return srv_reply_json(req, MHD_HTTP_OK,
                          json_pack("{s:s, s:I}", "state", state, "offset", (json_int_t)offset));
}

int h_part_completion(struct srv_request *req, json_t *body, const char *what,
                      const struct store_part *part, const char **sha, int64_t *files,
                      enum MHD_Result *res)
{
    *sha = json_string_value(json_object_get(body, "sha256"));
    json_t *n = json_object_get(body, "file_count");
    if (*sha == NULL || !artifact_sha256_valid(*sha)) {
        *res = srv_reply_field_problem(req, SRV_P_INVALID_BODY, "sha256", what);
        return -1;
    }
    if (!json_is_integer(n) || json_integer_value(n) < 0 || json_integer_value(n) > INT32_MAX) {
        *res = srv_reply_field_problem(req, SRV_P_INVALID_BODY, "file_count",
                                       "the number of regular files in the part");
        return -1;
    }
    *files = json_integer_value(n);
    if (strcmp(part->state, "complete") != 0 && strcmp(part->state, "deleted") != 0)
        return 0;
    if (strcmp(part->sha256, *sha) != 0)
        *res = srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                                 "the part is already %s with another SHA-256", part->state);
    else
        *res = h_part_reply_state(req, part->state, part->received);
    return -1;
}

/* The reply for an artifact store error; staged: the staged size for ARTIFACT_EOFFSET. */
static enum MHD_Result reply_store_error(struct srv_request *req, int rc, int64_t staged)
{
    if (rc == ARTIFACT_EOFFSET)
        return srv_reply_problem(req, SRV_P_UPLOAD_OFFSET, NULL,
                                 "the server holds %lld bytes of this part: resume there (GET "
                                 "the part says so too)",
                                 (long long)staged);
    if (rc == ARTIFACT_EBUSY)
        return srv_reply_problem(req, SRV_P_UPLOAD_BUSY, NULL,
                                 "another request is writing this part: retry shortly");
    if (rc == ARTIFACT_ECORRUPT)
        return srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                                 "%s: upload the part again from offset 0", artifact_strerror(rc));
    if (rc == ARTIFACT_EINVAL)
        return srv_reply_field_problem(req, SRV_P_INVALID_BODY, "sha256", artifact_strerror(rc));
    return srv_reply_problem(req, SRV_P_ARTIFACT_STORE_FAILED, NULL, "%s", artifact_strerror(rc));
}

enum MHD_Result h_checkpoint_part_status(struct srv_request *req)
{
    struct part_call pc;
    memset(&pc, 0, sizeof(pc));
    char key[256];
    enum MHD_Result res;
    if (part_begin(req, &pc, key, &res) != 0)
        return res;
    if (strcmp(pc.part.state, "complete") == 0 || strcmp(pc.part.state, "deleted") == 0)
        return h_part_reply_state(req, pc.part.state, pc.part.received);
    struct artifact_store *st = req->srv->artifacts;
    int64_t staged = 0;
    int rc = st->ops->staged_size(st->be, key, &staged);
    if (rc != 0)
        return reply_store_error(req, rc, 0);
    return h_part_reply_state(req, "uploading", staged);
}

/* The chunk's checksum header: X-Chunk-CRC32C (8 lowercase hex digits, one cheap pass) or,
 * from older agents, X-Content-SHA256 (64). NULL with *bad naming the header when neither is
 * sent or the one sent is malformed. *is_crc: which one. */
static const char *chunk_checksum(struct srv_request *req, bool *is_crc, const char **bad)
{
    const char *crc = header(req, "X-Chunk-CRC32C");
    *is_crc = crc != NULL;
    if (crc != NULL) {
        *bad = "X-Chunk-CRC32C";
        return strlen(crc) == 8 && strspn(crc, "0123456789abcdef") == 8 ? crc : NULL;
    }
    const char *sum = header(req, "X-Content-SHA256");
    *bad = sum == NULL ? "X-Chunk-CRC32C" : "X-Content-SHA256";
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

/* A chunk written to the store as it arrives (the PUT's body stream, srv_body_stream): each
 * piece goes into the staged file and the part's running SHA-256 while the rest is still on
 * the wire; the chunk's CRC32C is kept running, and the handler keeps the bytes only if it
 * matches at the end (else they are cut off again). Streamed only when everything but the body
 * is already known to be right (node proven, offset where the staging ends, a CRC32C header);
 * any other request is buffered and answered by the handler as before. */
struct part_stream {
    struct part_call pc;
    char key[256];
    int64_t offset;
    struct artifact_append *ap; /* NULL once ended */
    uint32_t crc;               /* of the pieces so far */
    int rc;                     /* the store's error on a piece, 0 none */
};

static int part_stream_begin(struct srv_request *req)
{
    struct part_stream *ps = calloc(1, sizeof(*ps));
    if (ps == NULL)
        return -1;
    const char *o = srv_query(req, "offset"), *bad;
    bool is_crc = false;
    int qs = 0;
    if (o == NULL || util_parse_int64(o, 0, INT64_MAX / 2, &ps->offset) != 0 ||
        chunk_checksum(req, &is_crc, &bad) == NULL || !is_crc ||
        part_identify(req, &ps->pc, ps->key, &qs) != PART_OK ||
        strcmp(ps->pc.part.state, "complete") == 0 || strcmp(ps->pc.part.state, "deleted") == 0) {
        free(ps);
        return -1;
    }
    struct artifact_store *st = req->srv->artifacts;
    int64_t staged = 0;
    if (st->ops->append_begin(st->be, ps->key, ps->offset, &ps->ap, &staged) != 0) {
        free(ps);
        return -1;
    }
    req->stream = ps;
    return 0;
}

static int part_stream_piece(struct srv_request *req, const char *data, size_t len)
{
    struct part_stream *ps = req->stream;
    struct artifact_store *st = req->srv->artifacts;
    ps->crc = util_crc32c(ps->crc, data, len);
    ps->rc = st->ops->append_data(ps->ap, data, len);
    return ps->rc == 0 ? 0 : -1;
}

/* Ends the stream's append: kept, or dropped. The store's result; *staged: the staged size. */
static int part_stream_end(struct srv_request *req, bool keep, int64_t *staged)
{
    struct part_stream *ps = req->stream;
    struct artifact_store *st = req->srv->artifacts;
    int rc = ps->ap ? st->ops->append_end(ps->ap, keep, staged) : ARTIFACT_EIO;
    ps->ap = NULL;
    return rc;
}

static void part_stream_release(struct srv_request *req)
{
    struct part_stream *ps = req->stream;
    int64_t staged;
    if (ps->ap)
        part_stream_end(req, false, &staged); /* cut mid-body, or refused: nothing kept */
    free(ps);
    req->stream = NULL;
}

const struct srv_body_stream h_checkpoint_part_stream = {part_stream_begin, part_stream_piece,
                                                         part_stream_release};

/* Answers a chunk whose bytes failed their checksum (with a job event). */
static enum MHD_Result reply_chunk_corrupt(struct srv_request *req, struct part_call *pc,
                                           int64_t offset)
{
    note_event(req, pc,
               "the chunk at offset %lld failed its checksum (corrupted on the way): the "
               "agent sends it again",
               (long long)offset);
    return srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                             "the chunk at offset %lld does not match its checksum "
                             "(X-Chunk-CRC32C or X-Content-SHA256): send it again",
                             (long long)offset);
}

/* The part's received_bytes in the database follows its upload in steps of this many bytes (and
 * its first chunk): the progress the API shows, not the resume point (the staged size is), so
 * one database write per step rather than per chunk. */
#define PART_PROGRESS_STEP (64 * 1024 * 1024)

/* Answers a chunk the store took (rc 0) at `offset` or refused, recording the progress or the
 * event. */
static enum MHD_Result reply_chunk_stored(struct srv_request *req, struct part_call *pc, int rc,
                                          int64_t offset, int64_t staged)
{
    if (rc != 0 && rc != ARTIFACT_EOFFSET && rc != ARTIFACT_EBUSY)
        note_event(req, pc, "the server cannot store it (%s): the agent retries later",
                   artifact_strerror(rc));
    if (rc != 0)
        return reply_store_error(req, rc, staged);
    pc->received = staged;
    bool step = offset == 0 || offset / PART_PROGRESS_STEP != staged / PART_PROGRESS_STEP;
    int qs = step ? db_with_conn(req->srv->db, part_progress, pc) : DB_NO_RESULTS;
    if (qs < 0)
        return srv_reply_db_error(req, qs); /* the bytes are staged: a resend finds them */
    return h_part_reply_state(req, "uploading", staged);
}

/* The end of a streamed chunk: every byte is written; kept if the CRC matches. */
static enum MHD_Result part_put_streamed(struct srv_request *req)
{
    struct part_stream *ps = req->stream;
    int64_t staged = ps->offset;
    if (ps->rc != 0) {
        part_stream_end(req, false, &staged);
        return reply_chunk_stored(req, &ps->pc, ps->rc, ps->offset, ps->offset);
    }
    if (!crc_matches(ps->crc, header(req, "X-Chunk-CRC32C"))) {
        part_stream_end(req, false, &staged);
        return reply_chunk_corrupt(req, &ps->pc, ps->offset);
    }
    int rc = part_stream_end(req, true, &staged);
    return reply_chunk_stored(req, &ps->pc, rc, ps->offset, staged);
}

enum MHD_Result h_checkpoint_part_put(struct srv_request *req)
{
    if (req->stream != NULL)
        return part_put_streamed(req);
    struct part_call pc;
    memset(&pc, 0, sizeof(pc));
    char key[256];
    enum MHD_Result res;
    if (part_begin(req, &pc, key, &res) != 0)
        return res;
    if (strcmp(pc.part.state, "complete") == 0 || strcmp(pc.part.state, "deleted") == 0)
        return h_part_reply_state(req, pc.part.state, pc.part.received);
    int64_t offset;
    const char *o = srv_query(req, "offset");
    if (o == NULL || util_parse_int64(o, 0, INT64_MAX / 2, &offset) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "offset",
                                       "offset must be the byte position of this chunk");
    const char *name = NULL;
    bool is_crc = false;
    const char *sum = chunk_checksum(req, &is_crc, &name);
    if (sum == NULL)
        return srv_reply_field_problem(req, SRV_P_BAD_REQUEST, name,
                                       "X-Chunk-CRC32C: the chunk's CRC32C, 8 lowercase hex "
                                       "digits (or X-Content-SHA256: its SHA-256, 64)");
    if (!chunk_intact(req, sum, is_crc))
        return reply_chunk_corrupt(req, &pc, offset);
    int64_t staged = 0;
    int rc = artifact_append(req->srv->artifacts, key, offset, req->body ? req->body : "",
                             req->body_len, &staged);
    return reply_chunk_stored(req, &pc, rc, offset, staged);
}

enum MHD_Result h_checkpoint_part_complete(struct srv_request *req)
{
    struct part_call pc;
    memset(&pc, 0, sizeof(pc));
    char key[256];
    enum MHD_Result res;
    if (part_begin(req, &pc, key, &res) != 0)
        return res;
    json_t *body = srv_body_json(req, &res);
    if (body == NULL)
        return res;
    const char *sha;
    if (h_part_completion(req, body, "the part's SHA-256, 64 lowercase hex digits", &pc.part, &sha,
                          &pc.files, &res) != 0) {
        json_decref(body);
        return res;
    }
    pc.sha256 = sha;
    pc.staging_key = key;
    pc.artifacts = req->srv->artifacts;
    int qs = db_with_conn(req->srv->db, part_complete, &pc);
    json_decref(body);
    if (qs >= 0 && pc.store_rc != 0) {
        note_event(req, &pc, "%s: %s",
                   pc.store_rc == ARTIFACT_ECORRUPT ? "the part does not hash to its SHA-256"
                                                    : "the server cannot store it",
                   pc.store_rc == ARTIFACT_ECORRUPT ? "discarded, the agent uploads it again"
                                                    : artifact_strerror(pc.store_rc));
        if (pc.store_rc == ARTIFACT_ECORRUPT) {
            pc.received = 0;
            db_with_conn(req->srv->db, part_progress, &pc);
        }
        return reply_store_error(req, pc.store_rc, 0);
    }
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    return h_part_reply_state(req, "complete", pc.size);
}

enum MHD_Result h_checkpoint_part_failed(struct srv_request *req)
{
    struct part_call pc;
    memset(&pc, 0, sizeof(pc));
    char key[256];
    enum MHD_Result res;
    if (part_begin(req, &pc, key, &res) != 0)
        return res;
    json_t *body = srv_body_json(req, &res);
    if (body == NULL)
        return res;
    const char *why = json_string_value(json_object_get(body, "reason"));
    if (why == NULL || why[0] == '\0' || strlen(why) > 500) {
        json_decref(body);
        return srv_reply_field_problem(req, SRV_P_INVALID_BODY, "reason",
                                       "why the part cannot be uploaded, 1 to 500 bytes");
    }
    note_event(req, &pc, "the agent cannot upload it (%s): the checkpoint stays incomplete", why);
    json_decref(body);
    return h_part_reply_state(req, pc.part.state[0] ? pc.part.state : "uploading",
                              pc.part.received);
}
