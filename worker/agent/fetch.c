/* Fetching a checkpoint to resume from when this node holds no copy (issue 11,
 * docs/artifacts.md): its archive from the server's artifact store (or its parts from the job's
 * shared storage_path; from the server when this node cannot read that path), unpacked into
 * <data>/checkpoints/fetched/<sha256>, kept as the node's cache. Runs on prepare.c's thread; the
 * HTTP set-up (URL, node credential, TLS trust) is the uploader's (upload.c). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fetch_file {
    FILE *f;
    int write_errno; /* the first failed write's errno; 0: none */
};

static size_t on_file(char *p, size_t sz, size_t n, void *arg)
{
    struct fetch_file *ff = arg;
    size_t done = fwrite(p, sz, n, ff->f);
    if (done < n && ff->write_errno == 0)
        ff->write_errno = errno ? errno : EIO;
    return done * sz;
}

int agent__fetch_to_file(struct agent *a, const char *url_path, const char *path)
{
    FILE *f = fopen(path, "wbe");
    struct fetch_file ff = {.f = f};
    struct curl_slist *hs = NULL;
    CURL *h = f ? agent__server_request(a, url_path, &hs) : NULL;
    if (h == NULL) {
        if (f)
            fclose(f);
        curl_slist_free_all(hs);
        return -1;
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_file);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &ff);
    char ebuf[CURL_ERROR_SIZE] = "", err[CURL_ERROR_SIZE + 32];
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
    long status = -1;
    CURLcode cc = curl_easy_perform(h);
    if (cc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    const char *url = NULL;
    curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &url);
    char where[APROTO_MAX_URL + 200];
    snprintf(where, sizeof(where), "%s", url ? url : url_path);
    curl_easy_cleanup(h);
    curl_slist_free_all(hs);
    if (fclose(f) != 0 && ff.write_errno == 0)
        ff.write_errno = errno;
    bool ok = ff.write_errno == 0 && status == 200;
    if (ff.write_errno != 0) { /* this node's disk, not the store: no condition */
        TY_WARN("upload", "fetching %s: cannot write %s: %s", where, path,
                strerror(ff.write_errno));
        errno = ff.write_errno;
        return -1;
    }
    if (cc != CURLE_OK)
        snprintf(err, sizeof(err), "%s", ebuf[0] ? ebuf : curl_easy_strerror(cc));
    else
        snprintf(err, sizeof(err), "HTTP %ld", status);
    if (!ok)
        TY_WARN("upload", "fetching %s: %s", where, err);
    /* A refusal (403, 404) is the object's, not the store's: no condition. */
    if (cc != CURLE_OK || status >= 500 || status == 401)
        agent__fetch_noted(a, where, err);
    else if (status == 200)
        agent__fetch_noted(a, where, NULL);
    errno = 0;
    return ok ? 0 : -1;
}

/* Unpacks the checkpoint archive `tar` into `dir` (unpack.c's rules; as the agent's user: the
 * node's cache is no job's). The archive is a plain tar of the checkpoint's files, so what it
 * unpacks to is capped at its own size. 0 or -1 (logged). */
static int unpack_checkpoint(int64_t id, const char *tar, const char *dir)
{
    struct stat sb;
    if (stat(tar, &sb) != 0)
        return -1;
    struct agent_unpack u = {.archive = tar,
                             .dir = dir,
                             .uid = AGENT_NO_UID,
                             .gid = AGENT_NO_UID,
                             .max_bytes = sb.st_size > 0 ? (int64_t)sb.st_size : 1,
                             .what = "checkpoint archive"};
    char err[600];
    if (agent__unpack(&u, err, sizeof(err)) == 0)
        return 0;
    TY_WARN("upload", "checkpoint %lld: %s", (long long)id, err);
    return -1;
}

char *agent__checkpoint_fetch(struct agent *a, int64_t id, const char *sha256, const char *shared,
                              bool may_fetch)
{
    if (a->uploader == NULL || sha256 == NULL || strlen(sha256) != 64)
        return NULL;
    char dir[1200], tmp[1300], tar[1300], parent[1100];
    snprintf(parent, sizeof(parent), "%s/checkpoints/fetched", a->data_dir);
    snprintf(dir, sizeof(dir), "%s/%s", parent, sha256);
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        return strdup(dir); /* fetched before: the cache is keyed by the artifact's sha256 */
    if (!may_fetch) {
        TY_WARN("upload", "checkpoint %lld is not in this node's cache %s", (long long)id, dir);
        return NULL;
    }
    snprintf(tmp, sizeof(tmp), "%s.part", dir);
    snprintf(tar, sizeof(tar), "%s/uploads/fetch-%s.tar", a->data_dir, sha256);
    int rc = util_mkdir_p(parent, 0700) == 0 ? 0 : -1;
    if (rc == 0 && stat(tmp, &sb) == 0)
        agent__remove_tree(tmp); /* left by a fetch that was cut */
    if (rc == 0)
        rc = mkdir(tmp, 0700) == 0 ? 0 : -1;
    char url_path[100];
    snprintf(url_path, sizeof(url_path), "/api/v1/agent/checkpoint-archives/%lld", (long long)id);
    bool copied = false;
    if (rc == 0 && shared && !(copied = agent__shared_fetch(shared, tmp) == 0)) {
        /* This node does not see the job's storage path (not mounted here, or not readable):
         * the server, which does, serves the same parts as an archive. */
        TY_WARN("upload",
                "checkpoint %lld: %s is not readable on this node: fetching it from "
                "the server instead",
                (long long)id, shared);
        agent__remove_tree(tmp);
        rc = mkdir(tmp, 0700) == 0 ? 0 : -1;
    }
    if (rc == 0 && !copied && (rc = agent__fetch_to_file(a, url_path, tar)) == 0)
        rc = unpack_checkpoint(id, tar, tmp);
    if (rc == 0)
        rc = rename(tmp, dir);
    unlink(tar);
    if (rc != 0) {
        TY_WARN("upload", "cannot fetch checkpoint %lld into %s", (long long)id, dir);
        return NULL;
    }
    TY_INFO("upload", "checkpoint %lld %s into %s", (long long)id,
            copied ? "copied from shared storage" : "fetched from the server", dir);
    return strdup(dir);
}
