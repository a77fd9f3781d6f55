/* The agents' upload of checkpoint parts to the artifact store (issue 11, docs/artifacts.md):
 *   GET  /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part           resume point
 *   PUT  /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part?offset=N  one chunk (streamed)
 *   POST /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part/complete  {"sha256","file_count"}
 *   POST /api/v1/agent/checkpoints/{job}/{attempt}/{index}/part/failed    {"reason"}
 * A rejected chunk, a store that cannot write (disk full) and a part the agent cannot read
 * (part/failed) each leave a job event naming the checkpoint, the node's ranks and the reason.
 * Authenticated as a node, not a user: X-Trainyard-Node names it and the bearer is its node
 * credential (with --auth none only the name). A node may upload only for attempts it ran
 * workers of. Each reply is {"state","offset"} (offset: bytes the server holds). The chunked
 * protocol itself (resume point, chunks at an offset, streamed bodies, commit) is upload.c's, as
 * for code packages; this file says who may upload which part, its replies, and what a chunk and
 * the completion leave in the database. */
#include "artifact.h"
#include "db.h"
#include "handlers.h"
#include "retire.h"
#include "server.h"
#include "store.h"
#include "upload.h"
#include "util.h"

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct part_call {
    struct upload up; /* staging key "<job>-<attempt>-<index>-<node>" */
    struct store_part_key key;
    struct store_part part;
    const char *credential; /* NULL with --auth none */
    bool proven;
    int qs; /* part_lookup's result */
    /* progress / completion */
    int64_t received, size, files;
    const char *sha256;
    const char *event; /* part_event's reason */
    struct artifact_store *artifacts;
    int store_rc;
    char location_buf[ARTIFACT_LOCATION_MAX];
    /* the job owner's artifact quota, checked before a part's upload goes on */
    const struct srv_config *cfg;
    bool over_quota;
    char quota_detail[512];
};

static const char *header(struct srv_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
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

/* Checks the node's credential and reads its part, on one pooled connection. */
static int part_lookup(struct db_conn *c, void *arg)
{
    struct part_call *pc = arg;
    struct node_proof np = {pc->key.node, pc->credential, pc->credential == NULL};
    if (!np.proven) {
        int qs = node_prove(c, &np);
        if (qs < 0)
            return qs;
    }
    pc->proven = np.proven;
    if (!pc->proven)
        return DB_ONE_RESULT;
    int qs = store_part_get(c, &pc->key, &pc->part);
    if (qs <= 0 || !pc->part.node_ran_attempt || strcmp(pc->part.state, "complete") == 0 ||
        strcmp(pc->part.state, "deleted") == 0)
        return qs;
    /* Soft: a part is taken whole once its owner and its project are under quota when it
     * starts or resumes. */
    char *owner = NULL, *project = NULL;
    int oq = store_job_owner(c, pc->key.job, &owner);
    int over = oq > 0 && owner ? upload_quota_check(c, pc->cfg, STORE_QUOTA_USER, owner, 1,
                                                    pc->quota_detail, sizeof(pc->quota_detail))
                               : 0;
    free(owner);
    if (oq < 0 || over < 0)
        return oq < 0 ? oq : over;
    if (over == 0) {
        oq = store_job_project(c, pc->key.job, &project);
        over = oq > 0 && project ? upload_quota_check(c, pc->cfg, STORE_QUOTA_PROJECT, project, 1,
                                                      pc->quota_detail, sizeof(pc->quota_detail))
                                 : 0;
        free(project);
        if (oq < 0 || over < 0)
            return oq < 0 ? oq : over;
    }
    pc->over_quota = over == 1;
    return qs;
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
    pc->store_rc = upload_commit(st, pc->up.key, pc->sha256, true, pc->location_buf, &pc->size);
    if (pc->store_rc == 0)
        qs = store_part_complete(c, &pc->key, pc->size, pc->files, pc->sha256, pc->location_buf);
    store_artifact_lock(c, pc->sha256, false);
    if (pc->store_rc == 0 && qs >= 0)
        artifact_retire(c, st, pc->key.job);
    return qs;
}

/* ---- the upload's kind (upload.h) ---- */

/* Why part_identify refused a request. */
enum part_refusal {
    PART_NO_PATH = 1,
    PART_NO_NODE,
    PART_DB,
    PART_UNPROVEN,
    PART_NOT_RAN,
    PART_OVER_QUOTA
};

/* Parses the path and authenticates the node; fills pc->part and the staging key. */
static int part_identify(struct srv_request *req, struct upload *u)
{
    struct part_call *pc = (struct part_call *)u;
    int64_t job, attempt, idx;
    if (srv_arg_id(req, 0, &job) != 0 || srv_arg_id(req, 1, &attempt) != 0 ||
        srv_arg_id(req, 2, &idx) != 0 || attempt > INT32_MAX || idx > INT32_MAX)
        return PART_NO_PATH;
    const char *node = header(req, "X-Trainyard-Node");
    if (node == NULL || !artifact_key_valid(node))
        return PART_NO_NODE;
    pc->key = (struct store_part_key){job, (int)attempt, idx, node};
    pc->credential = NULL;
    pc->cfg = &req->srv->cfg;
    if (req->srv->cfg.auth_mode == SRV_AUTH_TOKEN) {
        const char *a = header(req, MHD_HTTP_HEADER_AUTHORIZATION);
        pc->credential = a && strncmp(a, "Bearer ", 7) == 0 ? a + 7 : "";
    }
    pc->qs = db_with_conn(req->srv->db, part_lookup, pc);
    if (pc->qs < 0)
        return PART_DB;
    if (!pc->proven)
        return PART_UNPROVEN;
    if (!pc->part.node_ran_attempt)
        return PART_NOT_RAN;
    if (pc->over_quota)
        return PART_OVER_QUOTA;
    snprintf(u->key, sizeof(u->key), "%lld-%lld-%lld-%s", (long long)job, (long long)attempt,
             (long long)idx, node);
    return 0;
}

static enum MHD_Result part_refuse(struct srv_request *req, struct upload *u, int why)
{
    struct part_call *pc = (struct part_call *)u;
    switch ((enum part_refusal)why) {
    case PART_NO_PATH:
        return srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no such checkpoint part");
    case PART_NO_NODE:
        return srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL,
                                 "X-Trainyard-Node must name the uploading node");
    case PART_DB:
        return srv_reply_db_error(req, pc->qs);
    case PART_UNPROVEN:
        return srv_reply_problem(req, SRV_P_UNAUTHORIZED, NULL,
                                 "the bearer must be node %s's credential", pc->key.node);
    case PART_OVER_QUOTA: /* the agent gives the part up on a 403 */
        note_event(req, pc, "not stored: %s", pc->quota_detail);
        return srv_reply_problem(req, SRV_P_ARTIFACT_QUOTA, NULL, "%s", pc->quota_detail);
    case PART_NOT_RAN:
        break;
    }
    return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                             "node %s ran no worker of job %lld attempt %lld", pc->key.node,
                             (long long)pc->key.job, (long long)pc->key.attempt);
}

static bool part_finished(const struct upload *u)
{
    const struct part_call *pc = (const struct part_call *)u;
    return strcmp(pc->part.state, "complete") == 0 || strcmp(pc->part.state, "deleted") == 0;
}

static enum MHD_Result part_reply(struct srv_request *req, struct upload *u, enum upload_step step,
                                  int64_t offset)
{
    struct part_call *pc = (struct part_call *)u;
    if (step == UPLOAD_FINISHED)
        return h_part_reply_state(req, pc->part.state, pc->part.received);
    return h_part_reply_state(req, "uploading", offset);
}

/* A refused chunk is a job event. */
static void part_chunk_failed(struct srv_request *req, struct upload *u, int64_t offset, int rc)
{
    struct part_call *pc = (struct part_call *)u;
    if (rc == 0)
        note_event(req, pc,
                   "the chunk at offset %lld failed its checksum (corrupted on the way): the "
                   "agent sends it again",
                   (long long)offset);
    else
        note_event(req, pc, "the server cannot store it (%s): the agent retries later",
                   artifact_strerror(rc));
}

/* The part's received_bytes in the database follows its upload in steps of this many bytes (and
 * its first chunk): the progress the API shows, not the resume point (the staged size is), so
 * one database write per step rather than per chunk. */
#define PART_PROGRESS_STEP (64 * 1024 * 1024)

static int part_chunk_stored(struct srv_request *req, struct upload *u, int64_t offset,
                             int64_t staged)
{
    struct part_call *pc = (struct part_call *)u;
    pc->received = staged;
    bool step = offset == 0 || offset / PART_PROGRESS_STEP != staged / PART_PROGRESS_STEP;
    return step ? db_with_conn(req->srv->db, part_progress, pc) : DB_NO_RESULTS;
}

static const struct upload_kind part_upload = {
    .noun = "part",
    .resume_hint = " (GET the part says so too)",
    .crc32c = true,
    .call_size = sizeof(struct part_call),
    .identify = part_identify,
    .refuse = part_refuse,
    .finished = part_finished,
    .reply = part_reply,
    .chunk_failed = part_chunk_failed,
    .chunk_stored = part_chunk_stored,
};

/* ---- node authentication and completion bodies, shared with h_checkpoint_shared.c ---- */

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

/* ---- the endpoints ---- */

enum MHD_Result h_checkpoint_part_status(struct srv_request *req)
{
    struct part_call pc;
    return upload_status(req, &part_upload, &pc.up);
}

static int part_stream_begin(struct srv_request *req, enum MHD_Result *answered)
{
    return upload_stream_begin(req, &part_upload, answered);
}

const struct srv_body_stream h_checkpoint_part_stream = {part_stream_begin, upload_stream_piece,
                                                         upload_stream_release};

enum MHD_Result h_checkpoint_part_put(struct srv_request *req)
{
    struct part_call pc;
    return upload_put(req, &part_upload, &pc.up);
}

/* upload_begin, then the request's JSON body (*body, the caller decrefs it). 0, or -1 after
 * queuing the reply (*res). */
static int part_begin_json(struct srv_request *req, struct part_call *pc, json_t **body,
                           enum MHD_Result *res)
{
    if (upload_begin(req, &part_upload, &pc->up, res) != 0)
        return -1;
    *body = srv_body_json(req, res);
    return *body != NULL ? 0 : -1;
}

enum MHD_Result h_checkpoint_part_complete(struct srv_request *req)
{
    struct part_call pc;
    json_t *body;
    enum MHD_Result res;
    if (part_begin_json(req, &pc, &body, &res) != 0)
        return res;
    const char *sha;
    if (h_part_completion(req, body, "the part's SHA-256, 64 lowercase hex digits", &pc.part, &sha,
                          &pc.files, &res) != 0) {
        json_decref(body);
        return res;
    }
    pc.sha256 = sha;
    pc.artifacts = req->srv->artifacts;
    int qs = db_with_conn(req->srv->db, part_complete, &pc);
    json_decref(body);
    if (qs >= 0 && pc.store_rc == ARTIFACT_ENOTFOUND) /* nothing staged: the agent's to resend */
        return upload_reply_store_error(req, &part_upload, pc.store_rc, 0);
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
        return upload_reply_store_error(req, &part_upload, pc.store_rc, 0);
    }
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    return h_part_reply_state(req, "complete", pc.size);
}

enum MHD_Result h_checkpoint_part_failed(struct srv_request *req)
{
    struct part_call pc;
    json_t *body;
    enum MHD_Result res;
    if (part_begin_json(req, &pc, &body, &res) != 0)
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
