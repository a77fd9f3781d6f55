/* Code packages (issue 15, docs/python-api.md): a job whose spec names a code_package runs its
 * workers in a private copy of that package on each node. The node fetches the package (tar.gz)
 * from the server once, checks that it hashes to its name and keeps it in its cache
 * <data>/code/<sha256>/package.tar.gz (the agent's alone). Each attempt's copy,
 * <data>/code/run/<job>/<attempt>, is unpacked from there by agent__code_unpack (unpack.c: as the
 * job's uid, regular files, directories and links inside the tree only, within
 * --unpack-max-bytes and --unpack-max-entries) before the attempt's first worker on the node
 * starts; it is the workers' working directory, removed when the attempt's last worker on the
 * node is gone. Nothing of the job's is ever copied or chowned by the agent as root. A
 * checkpoint directory uploaded as a package (the spec's resume_from_package) travels the same
 * way: cached once, and each attempt's workers get their own unpacked copy, <attempt>.checkpoint
 * beside the code's, as their TRAINYARD_CHECKPOINT_DIR. The cache is kept under
 * --code-cache-bytes (of packages as fetched) by removing the least recently used packages
 * (agent__code_trim), never one a running worker was launched with. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The cached package's file in its cache directory. */
#define PACKAGE_FILE "package.tar.gz"

static bool is_file(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

bool agent__code_cached(const struct agent *a, const char *sha256)
{
    char path[PATH_MAX + 120];
    snprintf(path, sizeof(path), "%s/code/%s/" PACKAGE_FILE, a->data_dir, sha256);
    return is_file(path);
}

/* Makes <data>/code/<sha256> hold the verified package for (job_id, attempt), fetching it when
 * absent. 0, or -1 with *why set; a full disk is told to the server (agent__disk_full). */
static int code_cache(struct agent *a, const char *job_id, int64_t attempt, const char *sha256,
                      const char *dir, const char **why)
{
    char tmp[PATH_MAX + 400], tgz[PATH_MAX + 420], url[120];
    snprintf(tgz, sizeof(tgz), "%s/" PACKAGE_FILE, dir);
    if (is_file(tgz))
        return 0;
    agent__remove_tree(dir); /* an unpacked tree an earlier version of the agent kept */
    snprintf(tmp, sizeof(tmp), "%s.part", dir);
    snprintf(tgz, sizeof(tgz), "%s/" PACKAGE_FILE, tmp);
    snprintf(url, sizeof(url), "/api/v1/agent/code/%s", sha256);
    agent__remove_tree(tmp);
    if (mkdir(tmp, 0700) != 0) {
        *why = "cannot create the code cache directory";
        return -1;
    }
    int rc = agent__fetch_to_file(a, url, tgz);
    if (rc != 0 && errno == ENOSPC) {
        *why = "cannot write the code package into this node's cache: No space left on device";
        agent__disk_full(a, job_id, attempt, tgz, "code package fetch");
    } else if (rc != 0)
        *why = "cannot fetch the code package from the server";
    char got[65] = "";
    int64_t size = 0;
    if (rc == 0 && (agent__sha256_file(tgz, got, &size) != 0 || strcmp(got, sha256) != 0)) {
        TY_WARN("code", "code package %s: the download hashes to %s", sha256, got);
        *why = "the code package fetched does not hash to its name";
        rc = -1;
    }
    if (rc == 0 && rename(tmp, dir) != 0) {
        *why = "cannot move the code package into the cache";
        rc = -1;
    }
    if (rc != 0) {
        agent__remove_tree(tmp);
        return -1;
    }
    TY_INFO("code", "code package %s (%lld bytes) fetched into %s", sha256, (long long)size, dir);
    return 0;
}

int agent__code_fetch(struct agent *a, const char *job_id, int64_t attempt, const char *sha256,
                      const char **why)
{
    char root[PATH_MAX], cache[PATH_MAX + 80];
    snprintf(root, sizeof(root), "%s/code", a->data_dir);
    snprintf(cache, sizeof(cache), "%s/%s", root, sha256);
    if (util_mkdir_p(root, 0711) != 0) {
        *why = "cannot create the code directory";
        return -1;
    }
    return code_cache(a, job_id, attempt, sha256, cache, why);
}

/* agent__code_prepare and agent__code_checkpoint_prepare: the path of the private copy of
 * package sha256 at <data>/code/run/<job>/<attempt><suffix>, its package in the cache. */
static char *private_copy(struct agent *a, const char *job_id, int64_t attempt, const char *sha256,
                          const char *suffix, bool may_fetch, const char **why)
{
    char root[PATH_MAX], cache[PATH_MAX + 80], run[PATH_MAX + 8], job[PATH_MAX + 200],
        copy[PATH_MAX + 240];
    snprintf(root, sizeof(root), "%s/code", a->data_dir);
    snprintf(cache, sizeof(cache), "%s/%s", root, sha256);
    snprintf(run, sizeof(run), "%s/run", root);
    snprintf(job, sizeof(job), "%s/%s", run, job_id);
    if ((size_t)snprintf(copy, sizeof(copy), "%s/%lld%s", job, (long long)attempt, suffix) >=
        sizeof(copy)) {
        *why = "the code directory's path is too long";
        return NULL;
    }
    /* Search (not read) access for the workers' uids down to their copy. */
    if (util_mkdir_p(job, 0711) != 0 || chmod(root, 0711) != 0 || chmod(run, 0711) != 0 ||
        chmod(job, 0711) != 0) {
        *why = "cannot create the code directory";
        TY_WARN("code", "cannot create %s: %s", job, strerror(errno));
        return NULL;
    }
    if (!may_fetch && !agent__code_cached(a, sha256)) {
        *why = "the code package could not be fetched to this node";
        return NULL;
    }
    if (code_cache(a, job_id, attempt, sha256, cache, why) != 0)
        return NULL;
    if (utimensat(AT_FDCWD, cache, NULL, 0) != 0) /* its last use, for agent__code_trim */
        TY_WARN("code", "cannot touch %s: %s", cache, strerror(errno));
    return strdup(copy);
}

/* Tells the server that unpacking `what` into `part` for w's attempt ran out of space. */
static void disk_full_unpack(struct agent *a, const struct agent_worker *w, const char *part,
                             const char *what)
{
    char doing[APROTO_MAX_DISK_WHAT + 1];
    snprintf(doing, sizeof(doing), "%s unpack", what);
    agent__disk_full(a, w->job_id, w->attempt, part, doing);
}

int agent__code_unpack(struct agent *a, const struct agent_worker *w, const char *dir,
                       const char *sha256, const char *what, char *err, size_t errlen)
{
    uid_t owner = w->uid == AGENT_NO_UID ? geteuid() : w->uid;
    struct stat sb;
    if (lstat(dir, &sb) == 0) {
        if (S_ISDIR(sb.st_mode) && sb.st_uid == owner)
            return 0;            /* another worker of the attempt on this node unpacked it */
        agent__remove_tree(dir); /* a repeated launch under another uid */
    }
    char part[PATH_MAX + 300], archive[PATH_MAX + 200];
    if ((size_t)snprintf(part, sizeof(part), "%s.part", dir) >= sizeof(part) ||
        (size_t)snprintf(archive, sizeof(archive), "%s/code/%s/" PACKAGE_FILE, a->data_dir,
                         sha256) >= sizeof(archive)) {
        snprintf(err, errlen, "%s: the code directory's path is too long", what);
        return -1;
    }
    agent__remove_tree(part);
    if (mkdir(part, 0700) != 0) {
        int e = errno;
        snprintf(err, errlen, "%s: cannot create the job's directory: %s", what, strerror(e));
        if (e == ENOSPC)
            disk_full_unpack(a, w, part, what);
        return -1;
    }
    struct agent_unpack u = {.archive = archive,
                             .dir = part,
                             .uid = w->uid,
                             .gid = w->gid,
                             .max_bytes = a->cfg->unpack_max_bytes,
                             .max_entries = a->cfg->unpack_max_entries,
                             .what = what,
                             .bytes_flag = "--unpack-max-bytes",
                             .entries_flag = "--unpack-max-entries"};
    int rc = agent__unpack(&u, err, errlen);
    if (rc != 0 && errno == ENOSPC)
        disk_full_unpack(a, w, part, what);
    if (rc == 0 && rename(part, dir) != 0) {
        snprintf(err, errlen, "%s: cannot move the job's copy into place: %s", what,
                 strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        TY_WARN("code", "job %s: %s %s not unpacked into %s: %s", w->job_id, what, sha256, dir,
                err);
        agent__remove_tree(part);
    }
    return rc;
}

/* The bytes nftw's callback adds up (the event loop is the only caller). */
static int64_t tree_bytes;

static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)path;
    (void)f;
    if (flag == FTW_F)
        tree_bytes += st->st_size;
    return 0;
}

struct cache_entry {
    char sha256[65];
    int64_t bytes;
    struct timespec used; /* the directory's mtime, set at each use */
};

static int older_first(const void *x, const void *y)
{
    const struct cache_entry *a = x, *b = y;
    if (a->used.tv_sec != b->used.tv_sec)
        return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
    if (a->used.tv_nsec != b->used.tv_nsec)
        return a->used.tv_nsec < b->used.tv_nsec ? -1 : 1;
    return strcmp(a->sha256, b->sha256);
}

static bool is_sha256(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

/* Whether a running worker was launched with package sha256, or a pending launch needs it. */
static bool package_in_use(struct agent *a, const char *sha256)
{
    for (const struct agent_worker *w = a->workers; w; w = w->next) {
        if (w->status != AGENT_WORKER_RUNNING)
            continue;
        for (size_t i = 0; i < 2; i++)
            if (w->packages[i] && strcmp(w->packages[i], sha256) == 0)
                return true;
    }
    return agent__prepare_wants(a, sha256);
}

/* The packages of <data>/code (sha256, size, last use): a malloc'd array of *n, or NULL. */
static struct cache_entry *cache_list(const char *root, size_t *n)
{
    *n = 0;
    DIR *d = opendir(root);
    if (d == NULL)
        return NULL;
    struct cache_entry *list = NULL;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char path[PATH_MAX + 80];
        struct stat sb;
        if (!is_sha256(de->d_name) ||
            (size_t)snprintf(path, sizeof(path), "%s/%.64s", root, de->d_name) >= sizeof(path) ||
            lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (*n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            struct cache_entry *grown = realloc(list, ncap * sizeof(*list));
            if (grown == NULL)
                break;
            list = grown;
            cap = ncap;
        }
        struct cache_entry *e = &list[(*n)++];
        snprintf(e->sha256, sizeof(e->sha256), "%s", de->d_name);
        e->used = sb.st_mtim;
        tree_bytes = 0;
        nftw(path, count_entry, 16, FTW_PHYS);
        e->bytes = tree_bytes;
    }
    closedir(d);
    return list;
}

void agent__code_trim(struct agent *a)
{
    char root[PATH_MAX];
    snprintf(root, sizeof(root), "%s/code", a->data_dir);
    size_t n;
    struct cache_entry *list = cache_list(root, &n);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += list[i].bytes;
    qsort(list, n, sizeof(*list), older_first);
    for (size_t i = 0; i < n && total > a->cfg->code_cache_bytes; i++) {
        if (package_in_use(a, list[i].sha256))
            continue;
        char path[PATH_MAX + 80];
        snprintf(path, sizeof(path), "%s/%s", root, list[i].sha256);
        agent__remove_tree(path);
        total -= list[i].bytes;
        TY_INFO("code", "code cache over --code-cache-bytes %lld: removed package %s (%lld bytes)",
                (long long)a->cfg->code_cache_bytes, list[i].sha256, (long long)list[i].bytes);
    }
    if (total > a->cfg->code_cache_bytes)
        TY_INFO("code", "code cache holds %lld bytes, over --code-cache-bytes, all in use",
                (long long)total);
    free(list);
}

void agent__code_track(struct agent_worker **workers, size_t n, const char *code_sha256,
                       const char *ckpt_sha256)
{
    for (size_t i = 0; i < n; i++) {
        if (workers[i] && code_sha256)
            workers[i]->packages[0] = strdup(code_sha256);
        if (workers[i] && ckpt_sha256)
            workers[i]->packages[1] = strdup(ckpt_sha256);
    }
}

char *agent__code_prepare(struct agent *a, const char *job_id, int64_t attempt, const char *sha256,
                          bool may_fetch, const char **why)
{
    return private_copy(a, job_id, attempt, sha256, "", may_fetch, why);
}

char *agent__code_checkpoint_prepare(struct agent *a, const char *job_id, int64_t attempt,
                                     const char *sha256, bool may_fetch, const char **why)
{
    return private_copy(a, job_id, attempt, sha256, AGENT_CHECKPOINT_COPY_SUFFIX, may_fetch, why);
}

void agent__code_release(struct agent *a, const char *job_id, int64_t attempt)
{
    static const char *const suffixes[] = {"", ".part", AGENT_CHECKPOINT_COPY_SUFFIX,
                                           AGENT_CHECKPOINT_COPY_SUFFIX ".part"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        char copy[PATH_MAX];
        if ((size_t)snprintf(copy, sizeof(copy), "%s/code/run/%s/%lld%s", a->data_dir, job_id,
                             (long long)attempt, suffixes[i]) >= sizeof(copy))
            continue;
        struct stat sb;
        if (lstat(copy, &sb) != 0)
            continue;
        agent__remove_tree(copy);
        TY_DEBUG("code", "removed %s", copy);
    }
}
