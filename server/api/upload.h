/* Chunked uploads to the artifact store (docs/artifacts.md): the one protocol behind code packages
 * (h_code.c) and checkpoint parts (h_checkpoint_parts.c). An upload is staged under a key and
 *   GET                the resume point: the bytes staged (upload_status)
 *   PUT ?offset=N      one chunk with its checksum header, appended where the staging ends
 *                      (upload_put: buffered, or written as it arrives, upload_stream_*)
 *   POST .../complete  the store hashes what it holds and commits it under its SHA-256
 *                      (upload_commit; what the completion records is the endpoint's)
 * An endpoint describes its uploads with a `struct upload_kind`: who may upload what under which
 * staging key (identify, refuse), when an upload is finished already, the JSON of its 200
 * replies, and what a chunk leaves in the database (events, progress). Its per-request call
 * struct begins with a `struct upload`, which the kind's callbacks get back and may cast to it. */
#ifndef SRV_UPLOAD_H
#define SRV_UPLOAD_H

#include "artifact.h"
#include "http.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UPLOAD_KEY_MAX 256

/* The first member of an endpoint's call struct. */
struct upload {
    const struct upload_kind *kind;
    char key[UPLOAD_KEY_MAX]; /* the staging key: identify fills it */
};

/* What a 200 reply answers. */
enum upload_step {
    UPLOAD_FINISHED, /* the upload was finished before the request (kind->finished): offset 0 */
    UPLOAD_STAGED,   /* GET: offset = the bytes staged, the resume point */
    UPLOAD_CHUNK     /* a chunk was appended: offset = the bytes staged now */
};

struct upload_kind {
    const char *noun;        /* the upload in problem texts: "package", "part" */
    const char *resume_hint; /* ends the 409 upload-offset text ("" for none) */
    /* Chunks may carry X-Chunk-CRC32C (such a chunk is written as it arrives, when the route
     * streams its body) or X-Content-SHA256; false: X-Content-SHA256 only. */
    bool crc32c;
    size_t call_size; /* sizeof the endpoint's call struct, zeroed before identify */
    /* Reads the request's path and caller, whether the caller may upload, and fills u->key and
     * the rest of the call. 0, or a refusal (> 0, the endpoint's own numbering) that `refuse`
     * answers. Queues no reply: a streamed PUT calls it before the body has arrived. */
    int (*identify)(struct srv_request *req, struct upload *u);
    enum MHD_Result (*refuse)(struct srv_request *req, struct upload *u, int why);
    /* Whether the upload was finished (stored) before: every GET and PUT answers UPLOAD_FINISHED.
     */
    bool (*finished)(const struct upload *u);
    /* Queues the 200 reply (the upload's state as JSON). */
    enum MHD_Result (*reply)(struct srv_request *req, struct upload *u, enum upload_step step,
                             int64_t offset);
    /* Optional: a chunk at `offset` was refused, rc 0 because it failed its checksum, else the
     * store's error (never ARTIFACT_EOFFSET or ARTIFACT_EBUSY: the protocol's, not failures).
     * Best effort: the reply does not depend on it. */
    void (*chunk_failed)(struct srv_request *req, struct upload *u, int64_t offset, int rc);
    /* Optional: a chunk at `offset` was staged, `staged` bytes now. 0, or a database error (< 0)
     * answered as such (the bytes stay staged: a resend finds them). */
    int (*chunk_stored)(struct srv_request *req, struct upload *u, int64_t offset, int64_t staged);
    /* Optional: the user whose artifact quota each chunk counts against (upload_quota_check
     * with the staged bytes the chunk would make: a chunk past the quota is refused with 403
     * artifact-quota-exceeded); NULL: no check per chunk. */
    const char *(*quota_user)(const struct upload *u);
};

struct db_conn;
struct srv_config;
/* Whether `subject` (a user, or a project: kind) may keep `adding` more bytes in the artifact
 * store (a user: --artifact-quota-bytes, or the user's row in the quotas table; a project: its
 * row only; never limited under --auth none): 0 yes; 1 no, with `detail` (n bytes) naming the
 * quota, what is used and how to free it; or a db error (< 0). Runs on connection c. */
int upload_quota_check(struct db_conn *c, const struct srv_config *cfg, enum store_quota_kind kind,
                       const char *subject, int64_t adding, char *detail, size_t n);

/* Zeroes the call (kind->call_size bytes from u), identifies it and answers a refusal. 0, or -1
 * after queuing the reply (*res). */
int upload_begin(struct srv_request *req, const struct upload_kind *kind, struct upload *u,
                 enum MHD_Result *res);

/* GET: the resume point. u: the endpoint's call, uninitialised (upload_begin fills it). */
enum MHD_Result upload_status(struct srv_request *req, const struct upload_kind *kind,
                              struct upload *u);

/* PUT ?offset=N: one chunk, the request's body, appended at N; a streamed body's chunk is already
 * written and kept here if its CRC32C matches (u is then unused: the stream has its own call). */
enum MHD_Result upload_put(struct srv_request *req, const struct upload_kind *kind,
                           struct upload *u);

/* A PUT's body written as it arrives (srv_body_stream, server/http/http.h), for kinds with
 * crc32c: begin takes the body when everything but the body is known to be right (a valid
 * offset and X-Chunk-CRC32C, the caller identified, the upload not finished, the staging taken
 * at that offset); a caller the kind refuses (identify) is answered at once, before any of the
 * body is read (1, *answered: the reply's MHD result); otherwise -1, the body is buffered and
 * upload_put answers as for any chunk. The stream owns its own call (freed by release). */
int upload_stream_begin(struct srv_request *req, const struct upload_kind *kind,
                        enum MHD_Result *answered);
int upload_stream_piece(struct srv_request *req, const char *data, size_t len);
void upload_stream_release(struct srv_request *req);

/* Commits staging `key` under `sha256` (the store hashes it: ARTIFACT_ECORRUPT and the staging
 * discarded when it differs). With `adopt`, a staging that is gone (ARTIFACT_ENOTFOUND) whose
 * object is already stored counts as committed: an earlier completion committed it and then
 * failed to record it. 0 with location (ARTIFACT_LOCATION_MAX bytes) and *size, or the store's
 * error. Needs no request: it may run inside a database transaction. */
int upload_commit(struct artifact_store *st, const char *key, const char *sha256, bool adopt,
                  char *location, int64_t *size);

/* The problem reply for the store's error rc; staged: the staged size for ARTIFACT_EOFFSET. */
enum MHD_Result upload_reply_store_error(struct srv_request *req, const struct upload_kind *kind,
                                         int rc, int64_t staged);

#endif
