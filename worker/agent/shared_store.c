/* Checkpoints on shared storage (run_config.storage_path, docs/artifacts.md): instead of
 * uploading a node's part, the uploader thread copies the node's merged directory of a round to
 *     <storage_path>/job-<job>/attempt-<a>/checkpoint-<k>/node-<node>/
 * (a filesystem the server and every node mount) and registers it by its manifest
 * (dir_manifest.h); a node resuming without a copy of its own copies the node-* directories
 * into its private cache, without going through the server. */
#include "agent.h"

#include "dir_manifest.h"
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

/* Runs argv (a PATH lookup of argv[0]) to completion. 0 when it exits 0, else -1. */
static int run(char *const argv[])
{
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
        return -1;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The owner given to every entry of a copy (nftw has no context pointer: per thread). */
static _Thread_local uid_t own_uid;
static _Thread_local gid_t own_gid;

/* nftw callback: gives the entry to own_uid:own_gid (when set) and fsyncs files and
 * directories (a link is neither followed nor synced). */
static int own_and_sync(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)f;
    if (own_uid != AGENT_NO_UID && lchown(path, own_uid, own_gid) != 0)
        return -1;
    if (S_ISLNK(sb->st_mode))
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (flag == FTW_DP ? O_DIRECTORY : 0));
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* fsyncs directory `path`. */
static void sync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int agent__shared_put(const char *src, const char *dest, uid_t uid, gid_t gid, char sha[65],
                      int64_t *files)
{
    char parent[PATH_MAX], tmp[PATH_MAX + 32];
    snprintf(parent, sizeof(parent), "%s", dest);
    char *slash = strrchr(parent, '/');
    if (slash == NULL || slash == parent)
        return -1;
    *slash = '\0';
    snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", dest, (long)getpid());
    if (util_mkdir_p(parent, 0755) != 0) {
        TY_WARN("upload", "cannot create %s: %s", parent, strerror(errno));
        return -1;
    }
    agent__remove_tree(tmp); /* left by a copy that was cut */
    char *cp[] = {"cp", "-a", "--reflink=auto", (char *)src, tmp, NULL};
    own_uid = uid;
    own_gid = gid;
    int rc = run(cp);
    if (rc == 0)
        rc = nftw(tmp, own_and_sync, 16, FTW_PHYS | FTW_DEPTH) == 0 ? 0 : -1;
    if (rc == 0) {
        agent__remove_tree(dest); /* an earlier copy the server refused */
        rc = rename(tmp, dest);
    }
    if (rc == 0) {
        sync_dir(parent);
        rc = dir_manifest(dest, sha, &(int64_t){0}, files);
    }
    if (rc != 0) {
        TY_WARN("upload", "cannot copy %s to %s: %s", src, dest, strerror(errno));
        agent__remove_tree(tmp);
    }
    return rc;
}

/* Copies regular file `name` of srcfd (not followed if a link) into dstfd, mode masked to 0755
 * plus the owner's read and write, times kept. 0 or -1 (errno). */
static int copy_file_at(int srcfd, const char *name, int dstfd)
{
    int in = openat(srcfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (in < 0)
        return -1;
    struct stat st;
    if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(in);
        errno = EINVAL;
        return -1;
    }
    int out = openat(dstfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                     (st.st_mode & 0755) | 0600);
    if (out < 0) {
        close(in);
        return -1;
    }
    int rc = 0;
    bool plain = false; /* copy_file_range (a reflink where the filesystem can) failed: read */
    for (;;) {
        ssize_t n;
        if (!plain) {
            n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
            if (n < 0 &&
                (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                plain = true;
                continue;
            }
        } else {
            char buf[65536];
            n = read(in, buf, sizeof(buf));
            if (n > 0 && util_write_all(out, buf, (size_t)n) != 0)
                n = -1;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
    }
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    if (rc == 0)
        futimens(out, times);
    if (close(out) != 0)
        rc = -1;
    close(in);
    return rc;
}

/* Copies directory srcfd into dstfd by descriptor (a directory swapped for a link meanwhile is
 * not followed): directories and regular files only, links and special files skipped (logged).
 * Takes ownership of both descriptors. 0 or -1 (logged). */
static int copy_tree_at(int srcfd, int dstfd, const char *shown, int depth)
{
    DIR *d = fdopendir(srcfd);
    if (d == NULL || depth > 64) {
        if (d)
            closedir(d);
        else
            close(srcfd);
        close(dstfd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(srcfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(srcfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            int dsub = -1;
            if (sub >= 0 && (mkdirat(dstfd, e->d_name, 0700) == 0 || errno == EEXIST))
                dsub = openat(dstfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0 || dsub < 0) {
                if (sub >= 0)
                    close(sub);
                rc = -1;
            } else {
                rc = copy_tree_at(sub, dsub, shown, depth + 1);
            }
        } else if (S_ISREG(st.st_mode)) {
            rc = copy_file_at(srcfd, e->d_name, dstfd);
        } else {
            TY_WARN("upload", "%s: skipping %s (not a regular file or directory)", shown,
                    e->d_name);
        }
    }
    closedir(d);
    close(dstfd);
    return rc;
}

int agent__shared_fetch(const char *shared, const char *dir)
{
    int rc = 0, n = 0;
    DIR *d = opendir(shared);
    if (d == NULL) {
        TY_WARN("upload", "cannot read %s: %s", shared, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "node-", 5) != 0 || strstr(e->d_name, ".tmp-"))
            continue;
        /* Not cp: the copy belongs to the agent, not to whichever uid wrote it on its node (on
         * this node that uid may be another job's), and holds only what a checkpoint may: a
         * job's uid owns the stored files and could have left links or special files there. */
        int src = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int dst = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0 || dst < 0) {
            if (src >= 0)
                close(src);
            if (dst >= 0)
                close(dst);
            rc = -1;
        } else {
            rc = copy_tree_at(src, dst, shared, 0);
        }
        n++;
    }
    closedir(d);
    if (rc != 0 || n == 0)
        TY_WARN("upload", "cannot copy the parts of %s", shared);
    return rc == 0 && n > 0 ? 0 : -1;
}
