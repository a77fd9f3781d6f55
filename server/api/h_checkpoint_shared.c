/* A node registers its part of a checkpoint written to shared storage (run_config.storage_path,
 * server/artifacts/shared.h, docs/artifacts.md):
 *   POST /api/v1/agent/checkpoints/{job}/{attempt}/{index}/shared  {"sha256","file_count"}
 * sha256 is the manifest digest (dir_manifest.h) of what the node copied to its part directory,
 * whose path the server derives from the job's own storage_path (never from the request). The
 * server recomputes the manifest there: equal, the part is complete with that directory as its
 * location; different or missing, 422 and the agent copies again. Authenticated like the
 * uploads (h_checkpoint_parts.c): X-Trainyard-Node and the node's credential, and the node must
 * have run workers of the attempt (403 otherwise). Reply {"state","offset": bytes}. */
#include "dir_manifest.h"
#include "artifact.h"
#include "db.h"
#include "handlers.h"
#include "retire.h"
#include "server.h"
#include "shared.h"
#include "store.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct shared_call {
    struct store_part_key key;
    struct store_part part;
    char *storage_path;
    int dir_fd; /* the part's directory, opened by shared_open_dir (-1: not open) */
    /* completion */
    const char *sha256, *dir;
    int64_t bytes, files;
    struct artifact_store *artifacts;
};

/* Reads the part and the job's storage_path on one pooled connection. */
static int shared_lookup(struct db_conn *c, void *arg)
{
    struct shared_call *sc = arg;
    int qs = store_job_storage_path(c, sc->key.job, &sc->storage_path);
    if (qs <= 0)
        return qs;
    return store_part_get(c, &sc->key, &sc->part);
}

/* Marks the part complete, then applies the job's num_to_keep (its checkpoint may have just
 * become complete). */
static int shared_complete(struct db_conn *c, void *arg)
{
    struct shared_call *sc = arg;
    int qs = store_part_complete(c, &sc->key, sc->bytes, sc->files, sc->sha256, sc->dir);
    if (qs >= 0)
        artifact_retire(c, sc->artifacts, sc->key.job);
    return qs;
}

/* Checks the request up to the manifest: fills sc and dir, or queues a reply (-1, *res). */
static int shared_begin(struct srv_request *req, struct shared_call *sc, char *dir, size_t len,
                        enum MHD_Result *res)
{
    int64_t job, attempt, idx;
    if (srv_arg_id(req, 0, &job) != 0 || srv_arg_id(req, 1, &attempt) != 0 ||
        srv_arg_id(req, 2, &idx) != 0 || attempt > INT32_MAX || idx > INT32_MAX) {
        *res = srv_reply_problem(req, SRV_P_NOT_FOUND, NULL, "no such checkpoint part");
        return -1;
    }
    if (srv_node_auth(req, res) != 0)
        return -1;
    const char *node = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "X-Trainyard-Node");
    sc->key = (struct store_part_key){job, (int)attempt, idx, node};
    int qs = db_with_conn(req->srv->db, shared_lookup, sc);
    if (qs < 0) {
        *res = srv_reply_db_error(req, qs);
        return -1;
    }
    if (qs == 0) {
        *res =
            srv_reply_problem(req, SRV_P_JOB_NOT_FOUND, NULL, "job %lld not found", (long long)job);
        return -1;
    }
    if (!sc->part.node_ran_attempt) {
        *res = srv_reply_problem(req, SRV_P_FORBIDDEN, NULL,
                                 "node %s ran no worker of job %lld attempt %lld", node,
                                 (long long)job, (long long)attempt);
        return -1;
    }
    if (sc->storage_path == NULL) {
        *res = srv_reply_problem(req, SRV_P_BAD_REQUEST, NULL,
                                 "job %lld has no run_config.storage_path: upload the part",
                                 (long long)job);
        return -1;
    }
    if (shared_part_dir(sc->storage_path, job, attempt, idx, node, dir, len) != 0 ||
        strlen(dir) >= ARTIFACT_LOCATION_MAX) {
        *res = srv_reply_problem(req, SRV_P_BAD_REQUEST, NULL,
                                 "the part's directory under %s would exceed %d bytes",
                                 sc->storage_path, ARTIFACT_LOCATION_MAX - 1);
        return -1;
    }
    sc->dir_fd = shared_open_dir(req->srv->cfg.storage_path_allow, dir);
    if (sc->dir_fd < 0) {
        *res = srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                                 "%s is missing, not under --storage-path-allow, or reached "
                                 "through a symbolic link",
                                 dir);
        return -1;
    }
    return 0;
}

enum MHD_Result h_checkpoint_shared(struct srv_request *req)
{
    struct shared_call sc;
    memset(&sc, 0, sizeof(sc));
    char dir[PATH_MAX] = "";
    enum MHD_Result res;
    if (shared_begin(req, &sc, dir, sizeof(dir), &res) != 0) {
        free(sc.storage_path);
        return res;
    }
    free(sc.storage_path);
    json_t *body = srv_body_json(req, &res);
    if (body == NULL) {
        close(sc.dir_fd);
        return res;
    }
    const char *sha;
    int64_t files;
    if (h_part_completion(req, body, "the part's manifest SHA-256, 64 lowercase hex digits",
                          &sc.part, &sha, &files, &res) != 0) {
        json_decref(body);
        close(sc.dir_fd);
        return res;
    }
    /* The directory opened above, not its path again: a link swapped in since is not followed. */
    char found[65], pinned[64];
    snprintf(pinned, sizeof(pinned), "/proc/self/fd/%d/.", sc.dir_fd);
    int mrc = dir_manifest(pinned, found, &sc.bytes, &sc.files);
    close(sc.dir_fd);
    if (mrc != 0 || strcmp(found, sha) != 0 || sc.files != files) {
        json_decref(body);
        return srv_reply_problem(req, SRV_P_UPLOAD_CORRUPT, NULL,
                                 "the files in %s do not match the manifest's SHA-256: copy "
                                 "the part again",
                                 dir);
    }
    sc.sha256 = sha;
    sc.dir = dir;
    sc.artifacts = req->srv->artifacts;
    int qs = db_with_conn(req->srv->db, shared_complete, &sc);
    json_decref(body);
    if (qs < 0)
        return srv_reply_db_error(req, qs);
    return h_part_reply_state(req, "complete", sc.bytes);
}
