/* Checkpoints on shared storage: path checks, packing, removal (shared.h). */
#include "shared.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Whether path is prefix or lies under it (component-wise: /mnt/a does not contain /mnt/ab). */
static bool under(const char *path, const char *prefix, size_t plen)
{
    while (plen > 1 && prefix[plen - 1] == '/')
        plen--;
    if (plen == 1 && prefix[0] == '/')
        return path[0] == '/';
    return strncmp(path, prefix, plen) == 0 && (path[plen] == '\0' || path[plen] == '/');
}

/* Whether path is under one of the ':'-separated prefixes of allow (real: each prefix resolved). */
static bool any_prefix(const char *allow, const char *path, bool real)
{
    for (const char *p = allow ? allow : ""; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && p[0] == '/' && len < PATH_MAX) {
            char prefix[PATH_MAX], resolved[PATH_MAX];
            memcpy(prefix, p, len);
            prefix[len] = '\0';
            if (!real && under(path, prefix, len))
                return true;
            if (real && realpath(prefix, resolved) && under(path, resolved, strlen(resolved)))
                return true;
        }
        p = end ? end + 1 : p + len;
    }
    return false;
}

int shared_path_check(const char *allow, const char *path, char *detail, size_t len)
{
    if (path[0] != '/') {
        snprintf(detail, len, "must be an absolute filesystem path (this server has no %s)",
                 strstr(path, "://") ? "object store backend" : "relative storage");
        return -1;
    }
    for (const char *c = path + 1;; c++) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
            if (n == 0 && end == NULL && c == path + 1)
                break; /* "/" itself */
            snprintf(detail, len,
                     "must be normalised: no empty, '.' or '..' component and no "
                     "trailing '/'");
            return -1;
        }
        if (end == NULL)
            break;
        c = end;
    }
    if (allow == NULL || allow[0] == '\0') {
        snprintf(detail, len,
                 "this server accepts no storage_path (its administrator allows "
                 "directories with --storage-path-allow)");
        return -1;
    }
    if (!any_prefix(allow, path, false)) {
        snprintf(detail, len, "must be under a directory this server allows (%s)", allow);
        return -1;
    }
    return 0;
}

int shared_part_dir(const char *sp, int64_t job, int64_t attempt, int64_t index, const char *node,
                    char *out, size_t len)
{
    int n = snprintf(out, len, "%s%sjob-%lld/attempt-%lld/checkpoint-%lld/node-%s", sp,
                     sp[strlen(sp) - 1] == '/' ? "" : "/", (long long)job, (long long)attempt,
                     (long long)index, node);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

int shared_real_allowed(const char *allow, const char *path)
{
    char real[PATH_MAX];
    return realpath(path, real) != NULL && any_prefix(allow, real, true);
}

int shared_open_tar(const char *allow, const char *dir)
{
    if (!shared_real_allowed(allow, dir))
        return -1;
    const char *tmpdir = getenv("TMPDIR");
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/trainyard-archive-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -1;
    char *argv[] = {"tar", "--sort=name", "-cf", tmp, "-C", (char *)dir, ".", NULL};
    pid_t pid;
    int st = 0;
    int rc = posix_spawnp(&pid, "tar", NULL, NULL, argv, environ) == 0 ? 0 : -1;
    while (rc == 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    unlink(tmp);
    if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        TY_WARN("artifacts", "cannot pack %s (tar failed)", dir);
        close(fd);
        return -1;
    }
    return fd;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)f;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

int shared_remove(const char *allow, const char *dir)
{
    /* Only a part directory of the layout (.../checkpoint-<k>/node-<id>), never a truncated
     * location that would name one of its ancestors. */
    const char *base = strrchr(dir, '/');
    const char *up = base && base > dir ? base - 1 : NULL;
    while (up && up > dir && *up != '/')
        up--;
    if (base == NULL || strncmp(base, "/node-", 6) != 0 || up == NULL ||
        strncmp(up, "/checkpoint-", 12) != 0)
        return -1;
    struct stat sb;
    if (lstat(dir, &sb) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(sb.st_mode) || !shared_real_allowed(allow, dir))
        return -1;
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return -1;
    /* checkpoint-<k>, attempt-<a>, job-<j>: each goes when it is empty (rmdir fails otherwise). */
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", dir);
    for (int i = 0; i < 3; i++) {
        char *slash = strrchr(parent, '/');
        if (slash == NULL || slash == parent)
            break;
        *slash = '\0';
        if (rmdir(parent) != 0)
            break;
    }
    return 0;
}
