/* Code packages (issue 15, docs/python-api.md): a job whose spec names a code_package runs its
 * workers in a private copy of that package on each node. The node fetches the package (tar.gz)
 * from the server once, checks that it hashes to its name, unpacks it into its cache
 * <data>/code/<sha256> (the agent's alone), and copies the cache into
 * <data>/code/run/<job>/<attempt> for each attempt: the workers' working directory, owned by
 * the job's uid when workers run under uids of their own, removed when the attempt's last
 * worker on the node is gone. A checkpoint directory uploaded as a package (the spec's
 * resume_from_package) travels the same way: cached once, and each attempt's workers get a
 * private copy, <attempt>.checkpoint beside the code's, as their TRAINYARD_CHECKPOINT_DIR.
 * The cache is kept under --code-cache-bytes by removing the least recently used packages
 * (agent__code_trim), never one a running worker was launched with. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Runs argv (looked up in PATH) and waits. 0 when it exits 0, else -1. */
static int run_argv(char *const argv[])
{
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Makes <data>/code/<sha256> hold the unpacked package, fetching it when absent. 0, or -1 with
 * *why set. */
static int code_cache(struct agent *a, const char *sha256, const char *dir, const char **why)
{
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        return 0;
    char tmp[PATH_MAX + 400], tgz[PATH_MAX + 400], url[120];
    snprintf(tmp, sizeof(tmp), "%s.part", dir);
    snprintf(tgz, sizeof(tgz), "%s.tar.gz", dir);
    snprintf(url, sizeof(url), "/api/v1/agent/code/%s", sha256);
    agent__remove_tree(tmp);
    if (mkdir(tmp, 0700) != 0) {
        *why = "cannot create the code cache directory";
        return -1;
    }
    int rc = agent__fetch_to_file(a, url, tgz);
    if (rc != 0)
        *why = "cannot fetch the code package from the server";
    char got[65] = "";
    int64_t size = 0;
    if (rc == 0 && (agent__sha256_file(tgz, got, &size) != 0 || strcmp(got, sha256) != 0)) {
        TY_WARN("code", "code package %s: the download hashes to %s", sha256, got);
        *why = "the code package fetched does not hash to its name";
        rc = -1;
    }
    char *tar_argv[] = {"tar", "-xzf", tgz, "-C", tmp, "--no-same-owner", NULL};
    if (rc == 0 && run_argv(tar_argv) != 0) {
        *why = "cannot unpack the code package";
        rc = -1;
    }
    if (rc == 0 && chmod(tmp, 0700) != 0) { /* the archive's "." may have carried 0755 */
        *why = "cannot make the code cache private";
        rc = -1;
    }
    if (rc == 0 && rename(tmp, dir) != 0) {
        *why = "cannot move the code package into the cache";
        rc = -1;
    }
    unlink(tgz);
    if (rc != 0) {
        agent__remove_tree(tmp);
        return -1;
    }
    TY_INFO("code", "code package %s (%lld bytes) fetched into %s", sha256, (long long)size, dir);
    return 0;
}

int agent__code_fetch(struct agent *a, const char *sha256, const char **why)
{
    char root[PATH_MAX], cache[PATH_MAX + 80];
    snprintf(root, sizeof(root), "%s/code", a->data_dir);
    snprintf(cache, sizeof(cache), "%s/%s", root, sha256);
    if (util_mkdir_p(root, 0711) != 0) {
        *why = "cannot create the code directory";
        return -1;
    }
    return code_cache(a, sha256, cache, why);
}

/* agent__code_prepare and agent__code_checkpoint_prepare: the private copy of package sha256 at
 * <data>/code/run/<job>/<attempt><suffix>. */
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
    struct stat sb;
    if (!may_fetch && !(stat(cache, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        *why = "the code package could not be fetched to this node";
        return NULL;
    }
    if (code_cache(a, sha256, cache, why) != 0)
        return NULL;
    if (utimensat(AT_FDCWD, cache, NULL, 0) != 0) /* its last use, for agent__code_trim */
        TY_WARN("code", "cannot touch %s: %s", cache, strerror(errno));
    if (stat(copy, &sb) == 0)
        return strdup(copy); /* a repeated launch of the same attempt */
    char src[PATH_MAX + 90];
    snprintf(src, sizeof(src), "%s/.", cache);
    char *cp_argv[] = {"cp", "-R", src, copy, NULL};
    if (mkdir(copy, 0700) != 0 || run_argv(cp_argv) != 0) {
        agent__remove_tree(copy);
        *why = "cannot copy the code package for the job";
        return NULL;
    }
    return strdup(copy);
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

/* The owner nftw's callback gives (the agent is single-threaded). */
static uid_t grant_uid;
static gid_t grant_gid;

static int grant_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    if (lchown(path, grant_uid, grant_gid) != 0)
        TY_WARN("code", "cannot give %s to uid %ld: %s", path, (long)grant_uid, strerror(errno));
    return 0;
}

int agent__code_grant(const struct agent_worker *w, const char *dir)
{
    if (w->uid == AGENT_NO_UID || dir == NULL)
        return 0;
    struct stat sb;
    if (lstat(dir, &sb) != 0)
        return -1;
    if (sb.st_uid == w->uid)
        return 0; /* another worker of the job on this node already took it */
    grant_uid = w->uid;
    grant_gid = w->gid;
    return nftw(dir, grant_entry, 16, FTW_PHYS) == 0 ? 0 : -1;
}

void agent__code_release(struct agent *a, const char *job_id, int64_t attempt)
{
    static const char *const suffixes[] = {"", AGENT_CHECKPOINT_COPY_SUFFIX};
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
