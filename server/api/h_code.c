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
 * package uploads it like a missing one (the server hashes it) to become one of its owners. */
#include "artifact.h"
#include "db.h"
#include "handlers.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct code_call {
    const char *sha256;
    const char *node;
    struct store_code code;
    const char *who; /* the caller's name */
    bool may, owned;
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

/* Reads {sha256} (argument 0), whether the package is stored and whether the caller owns it;
 * fills the staging key. Returns 1 (stored), 0 (not stored), or -1 after queuing a reply
 * (*res). */
static int code_begin(struct srv_request *req, struct code_call *cc, char key[80],
                      enum MHD_Result *res)
{
    memset(cc, 0, sizeof(*cc));
    cc->sha256 = req->args[0];
    if (cc->sha256 == NULL || !artifact_sha256_valid(cc->sha256)) {
        *res = srv_reply_field_problem(req, SRV_P_NOT_FOUND, "sha256",
                                       "a code package is named by its SHA-256, 64 lowercase "
                                       "hex digits");
        return -1;
    }
    snprintf(key, 80, "code-%s", cc->sha256);
    cc->who = req->who.name[0] ? req->who.name : "anonymous";
    int qs = db_with_conn(req->srv->db, code_lookup, cc);
    if (qs < 0) {
        *res = srv_reply_db_error(req, qs);
        return -1;
    }
    return qs > 0 ? 1 : 0;
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

/* The reply for an artifact store error; staged: the staged size for ARTIFACT_EOFFSET. */
static enum MHD_Result reply_store_error(struct srv_request *req, int rc, int64_t staged)
{
    if (rc == ARTIFACT_EOFFSET)
        return srv_reply_problem(req, SRV_P_UPLOAD_OFFSET, NULL,
                                 "the server holds %lld bytes of this package: resume there",
                                 (long long)staged);
    if (rc == ARTIFACT_EBUSY)
        return srv_reply_problem(req, SRV_P_UPLOAD_BUSY, NULL,
                                 "another request is writing this package: retry shortly");
    if (rc == ARTIFACT_ECORRUPT)
        return srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                                 "%s: upload the package again from offset 0",
                                 artifact_strerror(rc));
    return srv_reply_problem(req, SRV_P_ARTIFACT_STORE_FAILED, NULL, "%s", artifact_strerror(rc));
}

enum MHD_Result h_code_get(struct srv_request *req)
{
    struct code_call cc;
    char key[80];
    enum MHD_Result res;
    int stored = code_begin(req, &cc, key, &res);
    if (stored < 0)
        return res;
    if (stored && cc.owned)
        return reply_state(req, "complete", cc.code.size, cc.code.size, true);
    struct artifact_store *st = req->srv->artifacts;
    int64_t staged = 0;
    int rc = st->ops->staged_size(st->be, key, &staged);
    if (rc != 0)
        return reply_store_error(req, rc, 0);
    if (stored) /* complete, but the caller's own upload (to own it) is at `offset` */
        return reply_state(req, "complete", staged, cc.code.size, false);
    return reply_state(req, staged > 0 ? "uploading" : "missing", staged, -1, false);
}

enum MHD_Result h_code_put(struct srv_request *req)
{
    struct code_call cc;
    char key[80];
    enum MHD_Result res;
    int stored = code_begin(req, &cc, key, &res);
    if (stored < 0)
        return res;
    if (stored && cc.owned)
        return reply_state(req, "complete", cc.code.size, cc.code.size, true);
    int64_t offset;
    const char *o = srv_query(req, "offset");
    if (o == NULL || util_parse_int64(o, 0, INT64_MAX / 2, &offset) != 0)
        return srv_reply_field_problem(req, SRV_P_INVALID_PARAMETER, "offset",
                                       "offset must be the byte position of this chunk");
    const char *sum = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "X-Content-SHA256");
    if (sum == NULL || !artifact_sha256_valid(sum))
        return srv_reply_field_problem(req, SRV_P_BAD_REQUEST, "X-Content-SHA256",
                                       "the chunk's SHA-256, 64 lowercase hex digits");
    char got[65];
    util_sha256_hex(req->body ? req->body : "", req->body_len, got);
    if (strcmp(got, sum) != 0)
        return srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                                 "the chunk at offset %lld does not hash to X-Content-SHA256: "
                                 "send it again",
                                 (long long)offset);
    struct artifact_store *st = req->srv->artifacts;
    int64_t staged = 0;
    int rc = artifact_append(st, key, offset, req->body ? req->body : "", req->body_len, &staged);
    if (rc != 0)
        return reply_store_error(req, rc, staged);
    return reply_state(req, "uploading", staged, -1, false);
}

enum MHD_Result h_code_complete(struct srv_request *req)
{
    struct code_call cc;
    char key[80];
    enum MHD_Result res;
    int stored = code_begin(req, &cc, key, &res);
    if (stored < 0)
        return res;
    if (stored && cc.owned)
        return reply_state(req, "complete", cc.code.size, cc.code.size, true);
    char location[ARTIFACT_LOCATION_MAX];
    struct artifact_store *st = req->srv->artifacts;
    int rc = st->ops->commit(st->be, key, cc.sha256, location, &cc.size);
    if (rc == ARTIFACT_ENOTFOUND && !stored) {
        /* Committed by an earlier call whose database write failed: the object is there. (A
         * stored package's owners are those who sent its bytes: no shortcut for the others.) */
        snprintf(location, sizeof(location), "sha256/%.2s/%s", cc.sha256, cc.sha256);
        int fd = st->ops->open_read(st->be, location);
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0) {
            cc.size = sb.st_size;
            rc = 0;
        }
        if (fd >= 0)
            close(fd);
        if (rc != 0)
            return srv_reply_problem(req, SRV_P_UPLOAD_OFFSET, NULL,
                                     "nothing of package %s was uploaded: PUT it from offset 0",
                                     cc.sha256);
    }
    if (rc == ARTIFACT_ENOTFOUND)
        return srv_reply_problem(req, SRV_P_UPLOAD_OFFSET, NULL,
                                 "nothing of package %s was uploaded: PUT it from offset 0",
                                 cc.sha256);
    if (rc != 0)
        return reply_store_error(req, rc, 0);
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
