/* Checkpoints on shared storage: path checks, packing, removal (shared.h). */
#include "shared.h"

#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* Opens the directory `rest` (components separated by '/') below directory fd `at`, one
 * component at a time with O_NOFOLLOW: a descriptor, or -1 (missing, not a directory, or a
 * symbolic link on the way). Closes `at`. */
static int open_below(int at, const char *rest)
{
    char comp[NAME_MAX + 1];
    while (at >= 0 && *rest) {
        const char *end = strchr(rest, '/');
        size_t n = end ? (size_t)(end - rest) : strlen(rest);
        int next = -1;
        if (n > 0 && n <= NAME_MAX) {
            memcpy(comp, rest, n);
            comp[n] = '\0';
            next = openat(at, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        } else if (n == 0) {
            next = dup(at); /* a doubled or trailing '/' */
        }
        close(at);
        at = next;
        rest = end ? end + 1 : rest + n;
    }
    return at;
}

int shared_open_dir(const char *allow, const char *path)
{
    if (path == NULL || path[0] != '/')
        return -1;
    for (const char *p = allow ? allow : ""; *p;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char prefix[PATH_MAX], resolved[PATH_MAX];
        if (len > 0 && p[0] == '/' && len < PATH_MAX) {
            memcpy(prefix, p, len);
            prefix[len] = '\0';
            /* The prefix as written, else its real path: the administrator's, resolved as is. */
            const char *base =
                under(path, prefix, len)                                                ? prefix
                : realpath(prefix, resolved) && under(path, resolved, strlen(resolved)) ? resolved
                                                                                        : NULL;
            if (base != NULL) {
                size_t blen = strlen(base);
                while (blen > 1 && base[blen - 1] == '/')
                    blen--;
                const char *rest = path + (blen == 1 ? 1 : blen);
                while (*rest == '/')
                    rest++;
                return open_below(open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rest);
            }
        }
        p = end ? end + 1 : p + len;
    }
    return -1;
}

int shared_open_tar(const char *allow, const char *dir)
{
    int at = shared_open_dir(allow, dir);
    if (at < 0)
        return -1;
    const char *tmpdir = getenv("TMPDIR");
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/trainyard-archive-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        close(at);
        return -1;
    }
    /* tar starts in the directory opened above (not its path, which a job's workers could have
     * pointed elsewhere since), and archives links as links. */
    char *argv[] = {"tar", "--sort=name", "-cf", tmp, ".", NULL};
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int st = 0;
    int rc = posix_spawn_file_actions_init(&fa) == 0 ? 0 : -1;
    if (rc == 0 && (posix_spawn_file_actions_addfchdir_np(&fa, at) != 0 ||
                    posix_spawnp(&pid, "tar", &fa, NULL, argv, environ) != 0))
        rc = -1;
    posix_spawn_file_actions_destroy(&fa);
    while (rc == 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    close(at);
    unlink(tmp);
    if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        TY_WARN("artifacts", "cannot pack %s (tar failed)", dir);
        close(fd);
        return -1;
    }
    return fd;
}

/* Removes everything directory fd holds, never following a link (each subdirectory opened
 * with O_NOFOLLOW from its parent's descriptor), and closes fd. 0 or -1. */
static int empty_dir(int fd)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0 || errno == ENOENT)
            continue;
        int sub = errno == EISDIR
                      ? openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                      : -1;
        if (sub < 0 || empty_dir(sub) != 0 || unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) != 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

/* Removes the empty directory `path` (its parent opened by shared_open_dir). 0 or -1. */
static int remove_empty(const char *allow, const char *path)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash == NULL || slash == parent)
        return -1;
    *slash = '\0';
    int at = shared_open_dir(allow, parent);
    int rc = at >= 0 && unlinkat(at, slash + 1, AT_REMOVEDIR) == 0 ? 0 : -1;
    if (at >= 0)
        close(at);
    return rc;
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
    int at = shared_open_dir(allow, dir);
    if (at < 0 || empty_dir(at) != 0 || remove_empty(allow, dir) != 0)
        return -1;
    /* checkpoint-<k>, attempt-<a>, job-<j>: each goes when it is empty (rmdir fails otherwise). */
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", dir);
    for (int i = 0; i < 3; i++) {
        char *slash = strrchr(parent, '/');
        if (slash == NULL || slash == parent)
            break;
        *slash = '\0';
        if (remove_empty(allow, parent) != 0)
            break;
    }
    return 0;
}
