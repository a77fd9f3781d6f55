/* Taking ownership of checkpoint directories (DESIGN.md section 4, docs/report-protocol.md): before
 * a report with a checkpoint_dir is acked, the files of that directory are moved into
 * <data>/checkpoints/<job>/<attempt>/<k>/, the directory of round k on this node, which collects
 * the parts of every local rank. After the ack the worker may delete or reuse its directory: it
 * is left with its subdirectories and no files.
 *
 * Moved, not copied: a rename takes a file of any size in microseconds, so report() does not
 * block training (the goal is 5 ms at any size; Ray's copying report blocked a 13 GB checkpoint
 * for 20 minutes). Only across filesystems is a file copied (and fsync'ed). What the ack promises
 * is ownership against a crash of the worker or the agent, not against a power loss before the
 * upload (docs/decisions.md, "Checkpoints are moved").
 *
 * What is taken: regular files of the worker's own uid, in subdirectories recursively. Symbolic
 * links and special files are skipped with a warning: following them could take files from
 * anywhere, or loop. The walk is by directory descriptor and every file is checked again after
 * it moved, so a worker that swaps entries mid-merge cannot make the agent take what it does not
 * own. Staged files become the agent's, 0600; directories 0700.
 *
 * Merging the ranks of one node: on a name clash the lower rank's file wins, whichever rank
 * reported first (the higher rank's file stays where it was). The rank that wrote each file is
 * kept in <k>.owners.json beside the directory (an object: path relative to <k> -> rank), so the
 * rule also holds when the lower rank reports second, or after an agent restart. A file with no
 * recorded owner is overwritten.
 *
 * This runs inside the agent's event loop; with moves that costs a few system calls per file. A
 * merge that fails half-way leaves the files taken so far (the worker gets an error and the
 * report is not acked). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct merge {
    int64_t rank;
    long long owner; /* only files and directories of this uid are taken; -1: any */
    json_t *owners;  /* relative path -> rank */
    bool owners_changed;
    char *err;
    size_t errlen;
    const char *dest; /* the staging directory, named when writing there fails (ENOSPC) */
};

/* "a/b" (malloc'd), or NULL when out of memory. */
static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", a, b);
    return p;
}

char *agent_checkpoint_path(const char *data_dir, const char *job_id, int64_t attempt, int64_t k)
{
    if (!data_dir || aproto_job_id_valid(job_id) != 0 || attempt < 0 || k < 1)
        return NULL;
    size_t n = strlen(data_dir) + strlen(job_id) + 80;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/checkpoints/%s/%lld/%lld", data_dir, job_id, (long long)attempt,
                 (long long)k);
    return p;
}

/* The one reply for a checkpoint_dir the worker may not have the agent take: the same whether it
 * is missing, not a directory, unreadable or another user's, so a worker cannot use the agent
 * (root) to learn what exists where it cannot look itself (issue 22, finding 17). */
static void not_readable(const char *src, char *err, size_t errlen)
{
    snprintf(err, errlen, "checkpoint_dir '%s' is not a directory the worker can read", src);
}

int agent_checkpoint_check_src(const char *src, char *err, size_t errlen)
{
    struct stat st;
    if (!src || src[0] != '/') {
        snprintf(err, errlen, "checkpoint_dir '%s' is not an absolute path", src ? src : "");
        return -1;
    }
    if (stat(src, &st) != 0 || !S_ISDIR(st.st_mode) || access(src, R_OK | X_OK) != 0) {
        not_readable(src, err, errlen);
        return -1;
    }
    return 0;
}

/* Makes staged file `name` in dstfd the agent's own, private file (as a copy would be).
 * 0, or -1 with the reason in m->err. */
static int make_private(struct merge *m, int dstfd, const char *name, const char *what)
{
    if ((geteuid() == 0 && fchownat(dstfd, name, 0, 0, AT_SYMLINK_NOFOLLOW) != 0) ||
        fchmodat(dstfd, name, 0600, 0) != 0) {
        snprintf(m->err, m->errlen, "cannot make '%s' private: %s", what, strerror(errno));
        return -1;
    }
    return 0;
}

/* Copies regular file `name` of srcfd to `tmp` in dstfd (fsync'ed): the fallback when the two
 * directories are on different filesystems. `what` names the source in messages. 0 or -1. */
static int copy_file(struct merge *m, int srcfd, const char *name, int dstfd, const char *tmp,
                     const char *what)
{
    int in = openat(srcfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0) {
        snprintf(m->err, m->errlen, "cannot read '%s': %s", what, strerror(errno));
        return -1;
    }
    struct stat ist;
    if (fstat(in, &ist) != 0 || !S_ISREG(ist.st_mode) ||
        (m->owner >= 0 && (long long)ist.st_uid != m->owner)) {
        snprintf(m->err, m->errlen, "'%s' is not the worker's own file", what);
        close(in);
        return -1;
    }
    int out = openat(dstfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        snprintf(m->err, m->errlen, "cannot stage '%s' in %s: %s", what, m->dest, strerror(errno));
        close(in);
        return -1;
    }
    char buf[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0) {
                snprintf(m->err, m->errlen, "cannot read '%s': %s", what, strerror(errno));
                rc = -1;
            }
            break;
        }
        if (util_write_all(out, buf, (size_t)n) != 0) {
            snprintf(m->err, m->errlen, "cannot stage '%s' in %s: %s", what, m->dest,
                     strerror(errno));
            rc = -1;
            break;
        }
    }
    close(in);
    if (rc == 0 && fsync(out) != 0) {
        snprintf(m->err, m->errlen, "cannot stage '%s' in %s: %s", what, m->dest, strerror(errno));
        rc = -1;
    }
    if (close(out) != 0 && rc == 0) {
        snprintf(m->err, m->errlen, "cannot stage '%s' in %s: %s", what, m->dest, strerror(errno));
        rc = -1;
    }
    return rc;
}

/*
 * Takes regular file `name` of srcfd as `name` in dstfd: moved (renameat: no bytes copied, so a
 * report of any size returns at once) when both are on one filesystem, else copied. Moved first
 * to a temporary name and checked there (a regular file of the worker's own), since the worker
 * may have swapped the entry after it was looked at. 0 or -1.
 */
static int take_file(struct merge *m, int srcfd, const char *name, int dstfd, const char *what)
{
    size_t tn = strlen(name) + 8;
    char *tmp = malloc(tn);
    if (!tmp) {
        snprintf(m->err, m->errlen, "out of memory");
        return -1;
    }
    snprintf(tmp, tn, "%s.ty-tmp", name);
    int rc = 0;
    if (renameat(srcfd, name, dstfd, tmp) == 0) {
        struct stat st;
        if (fstatat(dstfd, tmp, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            (m->owner >= 0 && (long long)st.st_uid != m->owner)) {
            snprintf(m->err, m->errlen, "'%s' is not the worker's own file", what);
            rc = -1;
        }
    } else if (errno == EXDEV) {
        rc = copy_file(m, srcfd, name, dstfd, tmp, what);
        if (rc == 0)
            unlinkat(srcfd, name, 0); /* taken, as a move would have */
    } else {
        snprintf(m->err, m->errlen, "cannot take '%s': %s", what, strerror(errno));
        free(tmp);
        return -1;
    }
    if (rc == 0)
        rc = make_private(m, dstfd, tmp, what);
    if (rc == 0) {
        if (renameat(dstfd, tmp, dstfd, name) != 0) {
            snprintf(m->err, m->errlen, "cannot stage '%s' in %s: %s", what, m->dest,
                     strerror(errno));
            rc = -1;
        }
    }
    if (rc != 0)
        unlinkat(dstfd, tmp, 0);
    free(tmp);
    return rc;
}

/* Merges directory srcfd (`src` in messages) into dstfd; rel is its path relative to the top (""
 * for the top). Walks by descriptor, never by path, so a worker that swaps a directory for a
 * symbolic link mid-merge cannot redirect it. Takes ownership of both descriptors. 0 or -1. */
static int merge_dir(struct merge *m, int srcfd, int dstfd, const char *src, const char *rel)
{
    DIR *d = fdopendir(srcfd);
    if (!d) {
        snprintf(m->err, m->errlen, "cannot read '%s': %s", src, strerror(errno));
        close(srcfd);
        close(dstfd);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        char *s = join(src, name);
        char *r = rel[0] ? join(rel, name) : strdup(name);
        struct stat st;
        if (!s || !r) {
            snprintf(m->err, m->errlen, "out of memory");
            rc = -1;
        } else if (fstatat(srcfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            snprintf(m->err, m->errlen, "cannot read '%s': %s", s, strerror(errno));
            rc = -1;
        } else if (S_ISLNK(st.st_mode)) {
            TY_WARN("report", "checkpoint: skipping symbolic link %s", s);
        } else if (m->owner >= 0 && (long long)st.st_uid != m->owner) {
            snprintf(m->err, m->errlen, "'%s' is not the worker's own", s);
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            struct stat dt;
            if (mkdirat(dstfd, name, 0700) != 0 &&
                (errno != EEXIST || fstatat(dstfd, name, &dt, AT_SYMLINK_NOFOLLOW) != 0 ||
                 !S_ISDIR(dt.st_mode))) {
                snprintf(m->err, m->errlen, "cannot create directory '%s': %s", r,
                         errno == EEXIST ? "a file of another rank has that name"
                                         : strerror(errno));
                rc = -1;
            } else {
                int sub = openat(srcfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int dsub = openat(dstfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0 || dsub < 0) {
                    snprintf(m->err, m->errlen, "cannot open directory '%s': %s", s,
                             strerror(errno));
                    if (sub >= 0)
                        close(sub);
                    if (dsub >= 0)
                        close(dsub);
                    rc = -1;
                } else {
                    rc = merge_dir(m, sub, dsub, s, r);
                }
            }
        } else if (S_ISREG(st.st_mode)) {
            json_t *owner = json_object_get(m->owners, r);
            if (json_is_integer(owner) && json_integer_value(owner) < m->rank) {
                TY_WARN("report", "checkpoint: %s of rank %lld not taken: rank %lld has a file %s",
                        s, (long long)m->rank, (long long)json_integer_value(owner), r);
            } else if ((rc = take_file(m, srcfd, name, dstfd, s)) == 0) {
                if (json_object_set_new(m->owners, r, json_integer(m->rank)) != 0) {
                    snprintf(m->err, m->errlen, "out of memory");
                    rc = -1;
                }
                m->owners_changed = true;
            }
        } else {
            TY_WARN("report", "checkpoint: skipping %s (not a regular file or directory)", s);
        }
        free(s);
        free(r);
    }
    if (rc == 0 && errno != 0 && de == NULL) {
        snprintf(m->err, m->errlen, "cannot read '%s': %s", src, strerror(errno));
        rc = -1;
    }
    closedir(d);
    close(dstfd);
    return rc;
}

/* Adds the sizes of the regular files under dir to *sum. 0 or -1. */
static int dir_bytes(const char *dir, int64_t *sum)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *p = join(dir, de->d_name);
        struct stat st;
        if (!p || lstat(p, &st) != 0)
            rc = -1;
        else if (S_ISDIR(st.st_mode))
            rc = dir_bytes(p, sum);
        else if (S_ISREG(st.st_mode))
            *sum += (int64_t)st.st_size;
        free(p);
    }
    closedir(d);
    return rc;
}

/* Replaces the owners file at path with the owners object (written to a temporary name, then
 * renamed: a crash leaves the old file or the new one). 0 or -1. */
static int owners_save(struct merge *m, const char *path)
{
    char *text = json_dumps(m->owners, JSON_COMPACT | JSON_SORT_KEYS);
    size_t tn = strlen(path) + 8;
    char *tmp = malloc(tn);
    int rc = -1;
    if (!text || !tmp) {
        snprintf(m->err, m->errlen, "out of memory");
        goto out;
    }
    snprintf(tmp, tn, "%s.ty-tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        rc = util_write_all(fd, text, strlen(text));
        if (close(fd) != 0 || rc != 0 || rename(tmp, path) != 0)
            rc = -1;
    }
    if (rc != 0) {
        snprintf(m->err, m->errlen, "cannot stage the checkpoint on this node: %s",
                 strerror(errno));
        unlink(tmp);
    }
out:
    free(text);
    free(tmp);
    return rc;
}

int agent_checkpoint_merge(const char *src, const char *dest, int64_t rank, int64_t *bytes,
                           char *err, size_t errlen)
{
    return agent_checkpoint_merge_as(src, dest, rank, -1, bytes, err, errlen);
}

int agent_checkpoint_merge_as(const char *src, const char *dest, int64_t rank, long long owner,
                              int64_t *bytes, char *err, size_t errlen)
{
    struct merge m = {rank, owner, NULL, false, err, errlen, dest};
    *bytes = 0;
    size_t on = strlen(dest) + 16;
    char *owners_path = malloc(on);
    int rc = -1;
    if (!owners_path) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    snprintf(owners_path, on, "%s.owners.json", dest);
    if (util_mkdir_p(dest, 0700) != 0) {
        snprintf(err, errlen, "cannot stage the checkpoint on this node: %s", strerror(errno));
        goto out;
    }
    m.owners = json_load_file(owners_path, 0, NULL);
    if (!json_is_object(m.owners)) { /* none yet (or unreadable: start again) */
        json_decref(m.owners);
        m.owners = json_object();
        if (!m.owners) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    int srcfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int dstfd = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (srcfd < 0 || dstfd < 0 || fstat(srcfd, &st) != 0 ||
        (owner >= 0 && (long long)st.st_uid != owner)) {
        /* Nothing under a directory that is not the worker's is named to it. */
        if (srcfd < 0 || dstfd >= 0)
            not_readable(src, err, errlen);
        else
            snprintf(err, errlen, "cannot stage the checkpoint on this node: %s", strerror(errno));
        if (srcfd >= 0)
            close(srcfd);
        if (dstfd >= 0)
            close(dstfd);
        goto out;
    }
    if (merge_dir(&m, srcfd, dstfd, src, "") != 0)
        goto out;
    if (m.owners_changed && owners_save(&m, owners_path) != 0)
        goto out;
    if (dir_bytes(dest, bytes) != 0) {
        snprintf(err, errlen, "cannot measure the staged checkpoint: %s", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    json_decref(m.owners);
    free(owners_path);
    return rc;
}

/* <k>.reports beside round k's directory (malloc'd), or NULL. */
static char *count_path(const char *data_dir, const char *job_id, int64_t attempt, int64_t k)
{
    char *dir = agent_checkpoint_path(data_dir, job_id, attempt, k);
    size_t n = dir ? strlen(dir) + 16 : 0;
    char *p = dir ? malloc(n) : NULL;
    if (p)
        snprintf(p, n, "%s.reports", dir);
    free(dir);
    return p;
}

int64_t agent_checkpoint_count_load(const char *data_dir, const char *job_id, int64_t attempt,
                                    int64_t k)
{
    char *path = count_path(data_dir, job_id, attempt, k);
    char *text = path ? util_read_file(path, NULL) : NULL;
    int64_t v = 0;
    if (text) {
        text[strcspn(text, "\n")] = '\0';
        if (util_parse_int64(text, 0, INT32_MAX, &v) != 0)
            v = 0;
    }
    free(text);
    free(path);
    return v;
}

void agent_checkpoint_count_save(const char *data_dir, const char *job_id, int64_t attempt,
                                 int64_t k, int64_t reports)
{
    char *path = count_path(data_dir, job_id, attempt, k);
    size_t len = path ? strlen(path) : 0;
    char *tmp = path ? malloc(len + 8) : NULL;
    if (tmp == NULL) {
        free(path);
        return;
    }
    struct stat sb;
    path[len - 8] = '\0'; /* the round's directory */
    bool has_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    path[len - 8] = '.';
    snprintf(tmp, len + 8, "%s.tmp", path);
    char line[32];
    int n = snprintf(line, sizeof(line), "%lld\n", (long long)reports);
    if (reports <= 0 || !has_dir) {
        if (unlink(path) != 0 && errno != ENOENT)
            TY_WARN("report", "cannot remove %s: %s", path, strerror(errno));
    } else {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        bool ok = fd >= 0 && write(fd, line, (size_t)n) == n;
        if (fd >= 0 && close(fd) != 0)
            ok = false;
        if (!ok || rename(tmp, path) != 0) {
            TY_WARN("checkpoint",
                    "cannot write %s: %s; an agent restart before the round's last local report "
                    "would leave the round unsent",
                    path, strerror(errno));
            unlink(tmp);
        }
    }
    free(tmp);
    free(path);
}
