/* Code packages: a job's working directory, packed by the submitting machine (tar.gz), uploaded
 * once to the artifact store and named by its SHA-256 (issue 15, docs/python-api.md):
 *   GET  /api/v1/code/{sha256}                  {"state": "missing"|"uploading"|"complete",
 *                                                "offset": bytes held, "size", "owned"}
 *   PUT  /api/v1/code/{sha256}?offset=N         one chunk (X-Content-SHA256), appended at N
 *   POST /api/v1/code/{sha256}/complete         the server hashes what it holds: equal, stored
 *   GET  /api/v1/agent/code/{sha256}            the tar.gz, for a node
 * Users (role user) upload and ask; viewers may not. A node (its credential, as for checkpoint
 * parts) may fetch only the packages of jobs that have workers placed on it. A package also
 * carries checkpoint directories to resume from (a spec's resume_from_package), which only a
 * user who uploaded the bytes may name: GET says "owned", and a user who does not own a stored
 * package uploads it like a missing one (the server hashes it) to become one of its owners.
 * The chunked protocol is upload.c's, as for checkpoint parts; this file says who may upload
 * which package, its replies and what the completion records. */
#include "artifact.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"
#include "upload.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct code_call {
    struct upload up; /* staging key "code-<sha256>" */
    const char *sha256;
    const char *node;
    struct store_code code;
    const char *who; /* the caller's name */
    bool may, stored, owned;
    int qs; /* code_lookup's result */
    /* completion */
    int64_t size;
    const char *location;
};

static int code_lookup(struct db_conn *c, void *arg)
{
    struct code_call *cc = arg;
    int qs = store_code_get(c, cc->sha256, &cc->code);
    if (qs <= 0)
        return qs;
    int oq = store_code_owned(c, cc->sha256, cc->who, &cc->owned);
    return oq < 0 ? oq : qs;
}

static int code_node_lookup(struct db_conn *c, void *arg)
{
    struct code_call *cc = arg;
    int qs = store_code_node_may_fetch(c, cc->sha256, cc->node, &cc->may);
    if (qs < 0 || !cc->may)
        return qs;
    return store_code_get(c, cc->sha256, &cc->code);
}

static int code_record(struct db_conn *c, void *arg)
{
    struct code_call *cc = arg;
    return store_code_insert(c, cc->sha256, cc->size, cc->location, cc->who);
}

/* ---- the upload's kind (upload.h) ---- */

enum code_refusal { CODE_BAD_NAME = 1, CODE_DB };

/* Reads {sha256} (argument 0), whether the package is stored and whether the caller owns it. */
static int code_identify(struct srv_request *req, struct upload *u)
{
    struct code_call *cc = (struct code_call *)u;
    cc->sha256 = req->args[0];
    if (cc->sha256 == NULL || !artifact_sha256_valid(cc->sha256))
        return CODE_BAD_NAME;
    snprintf(u->key, sizeof(u->key), "code-%s", cc->sha256);
    cc->who = req->who.name[0] ? req->who.name : "anonymous";
    cc->qs = db_with_conn(req->srv->db, code_lookup, cc);
    if (cc->qs < 0)
        return CODE_DB;
    cc->stored = cc->qs > 0;
    return 0;
}

static enum MHD_Result code_refuse(struct srv_request *req, struct upload *u, int why)
{
    struct code_call *cc = (struct code_call *)u;
    if (why == CODE_DB)
        return srv_reply_db_error(req, cc->qs);
    return srv_reply_field_problem(req, SRV_P_NOT_FOUND, "sha256",
                                   "a code package is named by its SHA-256, 64 lowercase hex "
                                   "digits");
}

/* Stored and the caller's: a user who does not own a stored package uploads it to own it. */
static bool code_finished(const struct upload *u)
{
    const struct code_call *cc = (const struct code_call *)u;
    return cc->stored && cc->owned;
}

/* {"state", "offset", "size" (when known), "owned"}. */
static enum MHD_Result reply_state(struct srv_request *req, const char *state, int64_t offset,
                                   int64_t size, bool owned)
{
    json_t *o =
        json_pack("{s:s, s:I, s:b}", "state", state, "offset", (json_int_t)offset, "owned", owned);
    if (o && size >= 0)
        json_object_set_new(o, "size", json_integer(size));
    return srv_reply_json(req, MHD_HTTP_OK, o);
}

static enum MHD_Result code_reply(struct srv_request *req, struct upload *u, enum upload_step step,
                                  int64_t offset)
{
    struct code_call *cc = (struct code_call *)u;
    if (step == UPLOAD_FINISHED)
        return reply_state(req, "complete", cc->code.size, cc->code.size, true);
    if (step == UPLOAD_STAGED && cc->stored) /* the caller's own upload (to own it) is at offset */
        return reply_state(req, "complete", offset, cc->code.size, false);
    if (step == UPLOAD_STAGED && offset <= 0)
        return reply_state(req, "missing", offset, -1, false);
    return reply_state(req, "uploading", offset, -1, false);
}

/* A package's bytes count against the quota of the user who sends them. */
static const char *code_quota_user(const struct upload *u)
{
    return ((const struct code_call *)u)->who;
}

static const struct upload_kind code_upload = {
    .noun = "package",
    .resume_hint = "",
    .crc32c = false,
    .call_size = sizeof(struct code_call),
    .identify = code_identify,
    .refuse = code_refuse,
    .finished = code_finished,
    .reply = code_reply,
    .quota_user = code_quota_user,
};

enum MHD_Result h_code_get(struct srv_request *req)
{
    struct code_call cc;
    return upload_status(req, &code_upload, &cc.up);
}

enum MHD_Result h_code_put(struct srv_request *req)
{
    struct code_call cc;
    return upload_put(req, &code_upload, &cc.up);
}

enum MHD_Result h_code_complete(struct srv_request *req)
{
    struct code_call cc;
    enum MHD_Result res;
    if (upload_begin(req, &code_upload, &cc.up, &res) != 0)
        return res;
    if (code_finished(&cc.up))
        return code_reply(req, &cc.up, UPLOAD_FINISHED, 0);
    char location[ARTIFACT_LOCATION_MAX];
    /* A stored package's owners are those who sent its bytes: no shortcut for the others. */
    int rc =
        upload_commit(req->srv->artifacts, cc.up.key, cc.sha256, !cc.stored, location, &cc.size);
    if (rc != 0)
        return upload_reply_store_error(req, &code_upload, rc, 0);
    cc.location = location;
    int qs = db_with_conn(req->srv->db, code_record, &cc);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    return reply_state(req, "complete", cc.size, cc.size, true);
}

enum MHD_Result h_agent_code(struct srv_request *req)
{
    enum MHD_Result res;
    if (srv_node_auth(req, &res) != 0)
        return res;
    struct code_call cc;
    memset(&cc, 0, sizeof(cc));
    cc.sha256 = req->args[0];
    cc.node = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "X-Trainyard-Node");
    if (cc.sha256 == NULL || !artifact_sha256_valid(cc.sha256))
        return srv_reply_field_problem(req, SRV_P_NOT_FOUND, "sha256",
                                       "a code package is named by its SHA-256");
    int qs = db_with_conn(req->srv->db, code_node_lookup, &cc);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    if (!cc.may)
        return srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "node %s runs no job whose code_package is %s", cc.node,
                                 cc.sha256);
    if (qs == 0)
        return srv_reply_problem(req, SRV_P_CODE_PACKAGE_NOT_FOUND, NULL,
                                 "code package %s is not in the artifact store", cc.sha256);
    struct artifact_store *st = req->srv->artifacts;
    int fd = st->ops->open_read(st->be, cc.code.location);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0)
            close(fd);
        return srv_reply_problem(req, SRV_P_ARTIFACT_STORE_FAILED, NULL,
                                 "the artifact store cannot read code package %s", cc.sha256);
    }
    struct MHD_Response *r = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
    if (r == NULL) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/gzip");
    enum MHD_Result ret = MHD_queue_response(req->conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    req->status = MHD_HTTP_OK;
    return ret;
}
