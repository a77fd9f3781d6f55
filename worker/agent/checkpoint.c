/* Taking ownership of checkpoint directories (DESIGN.md section 4, docs/report-protocol.md): before
 * a report with a checkpoint_dir is acked, the files of that directory are copied into
 * <data>/checkpoints/<job>/<attempt>/<k>/, the directory of round k on this node, which collects
 * the parts of every local rank. After the ack the worker may delete or overwrite its directory.
 *
 * What is copied: regular files and subdirectories, recursively. Symbolic links (a link to a
 * directory too) and special files are skipped with a warning: following them could copy data
 * from anywhere, or loop. Files are written to a temporary name, fsync'ed and renamed; every
 * directory written to is fsync'ed after its entries.
 *
 * Merging the ranks of one node: on a name clash the lower rank's file wins, whichever rank
 * reported first. The rank that wrote each file is kept in <k>.owners.json beside the directory
 * (an object: path relative to <k> -> rank), so the rule also holds when the lower rank reports
 * second, or after an agent restart. A file with no recorded owner (left by a copy that crashed)
 * is overwritten.
 *
 * This runs inside the agent's single-threaded event loop, so a big checkpoint stalls the loop
 * (heartbeats, other workers' reports) while it is copied: acceptable for now; moving the copy to
 * a thread is a later change. A copy that fails half-way leaves the files copied so far (the
 * worker gets an error and the report is not acked). */
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

/* The directory part of `path` (malloc'd; "/" for "/x"), or NULL. */
static char *parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash && slash != path ? (size_t)(slash - path) : 1;
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, slash ? path : "/", n);
        p[n] = '\0';
    }
    return p;
}

char *agent_checkpoint_path(const char *data_dir, const char *job_id, int64_t attempt, int64_t k)
{
    if (!data_dir || agent_job_id_valid(job_id) != 0 || attempt < 0 || k < 1)
        return NULL;
    size_t n = strlen(data_dir) + strlen(job_id) + 80;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/checkpoints/%s/%lld/%lld", data_dir, job_id, (long long)attempt,
                 (long long)k);
    return p;
}

int agent_checkpoint_check_src(const char *src, char *err, size_t errlen)
{
    struct stat st;
    if (!src || src[0] != '/') {
        snprintf(err, errlen, "checkpoint_dir '%s' is not an absolute path", src ? src : "");
        return -1;
    }
    if (stat(src, &st) != 0) {
        snprintf(err, errlen, "checkpoint_dir '%s': %s", src, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "checkpoint_dir '%s' is not a directory", src);
        return -1;
    }
    if (access(src, R_OK | X_OK) != 0) {
        snprintf(err, errlen, "checkpoint_dir '%s' cannot be read: %s", src, strerror(errno));
        return -1;
    }
    return 0;
}

/* Copies regular file `from` to `to` (through `to`.ty-tmp, fsync'ed, renamed). 0 or -1. */
static int copy_file(struct merge *m, const char *from, const char *to, mode_t mode)
{
    size_t tn = strlen(to) + 8;
    char *tmp = malloc(tn);
    if (!tmp) {
        snprintf(m->err, m->errlen, "out of memory");
        return -1;
    }
    snprintf(tmp, tn, "%s.ty-tmp", to);
    int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0) {
        snprintf(m->err, m->errlen, "cannot read '%s': %s", from, strerror(errno));
        free(tmp);
        return -1;
    }
    struct stat ist;
    if (m->owner >= 0 && (fstat(in, &ist) != 0 || (long long)ist.st_uid != m->owner)) {
        snprintf(m->err, m->errlen, "'%s' is not the worker's own file", from);
        close(in);
        free(tmp);
        return -1;
    }
    (void)mode; /* staging is private to the agent, whatever the worker's modes */
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        snprintf(m->err, m->errlen, "cannot create '%s': %s", tmp, strerror(errno));
        close(in);
        free(tmp);
        return -1;
    }
    char buf[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(m->err, m->errlen, "cannot read '%s': %s", from, strerror(errno));
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        if (util_write_all(out, buf, (size_t)n) != 0) {
            snprintf(m->err, m->errlen, "cannot write '%s': %s", tmp, strerror(errno));
            rc = -1;
            break;
        }
    }
    close(in);
    if (rc == 0 && fsync(out) != 0) {
        snprintf(m->err, m->errlen, "cannot write '%s': %s", tmp, strerror(errno));
        rc = -1;
    }
    if (close(out) != 0 && rc == 0) {
        snprintf(m->err, m->errlen, "cannot write '%s': %s", tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(tmp, to) != 0) {
        snprintf(m->err, m->errlen, "cannot create '%s': %s", to, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* Merges directory src into dst (which exists); rel is src's path relative to the top ("" for
 * the top). 0 or -1 with m->err. */
static int merge_dir(struct merge *m, const char *src, const char *dst, const char *rel)
{
    DIR *d = opendir(src);
    if (!d) {
        snprintf(m->err, m->errlen, "cannot read '%s': %s", src, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (errno = 0, de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        char *s = join(src, name), *t = join(dst, name);
        char *r = rel[0] ? join(rel, name) : strdup(name);
        struct stat st;
        if (!s || !t || !r) {
            snprintf(m->err, m->errlen, "out of memory");
            rc = -1;
        } else if (lstat(s, &st) != 0) {
            snprintf(m->err, m->errlen, "cannot read '%s': %s", s, strerror(errno));
            rc = -1;
        } else if (S_ISLNK(st.st_mode)) {
            TY_WARN("report", "checkpoint: skipping symbolic link %s", s);
        } else if (m->owner >= 0 && (long long)st.st_uid != m->owner) {
            snprintf(m->err, m->errlen, "'%s' is not the worker's own", s);
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            struct stat dt;
            if (mkdir(t, 0700) != 0 &&
                (errno != EEXIST || lstat(t, &dt) != 0 || !S_ISDIR(dt.st_mode))) {
                snprintf(m->err, m->errlen, "cannot create directory '%s': %s", t,
                         errno == EEXIST ? "a file of another rank has that name"
                                         : strerror(errno));
                rc = -1;
            } else {
                rc = merge_dir(m, s, t, r);
            }
        } else if (S_ISREG(st.st_mode)) {
            json_t *owner = json_object_get(m->owners, r);
            if (json_is_integer(owner) && json_integer_value(owner) < m->rank) {
                TY_WARN("report", "checkpoint: %s of rank %lld not taken: rank %lld has a file %s",
                        s, (long long)m->rank, (long long)json_integer_value(owner), r);
            } else if ((rc = copy_file(m, s, t, st.st_mode)) == 0) {
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
        free(t);
        free(r);
    }
    if (rc == 0 && errno != 0 && de == NULL) {
        snprintf(m->err, m->errlen, "cannot read '%s': %s", src, strerror(errno));
        rc = -1;
    }
    closedir(d);
    if (rc == 0 && util_fsync_dir(dst) != 0) {
        snprintf(m->err, m->errlen, "cannot sync '%s': %s", dst, strerror(errno));
        rc = -1;
    }
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

/* Writes the owners object to path durably (tmp, fsync, rename, directory fsync). 0 or -1. */
static int owners_save(struct merge *m, const char *path)
{
    char *text = json_dumps(m->owners, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) {
        snprintf(m->err, m->errlen, "out of memory");
        return -1;
    }
    int rc = util_write_file_durable(path, text, strlen(text), 0600);
    if (rc != 0)
        snprintf(m->err, m->errlen, "cannot write '%s': %s", path, strerror(errno));
    free(text);
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
    struct merge m = {rank, owner, NULL, false, err, errlen};
    *bytes = 0;
    char *parent = parent_of(dest);
    size_t on = strlen(dest) + 16;
    char *owners_path = malloc(on);
    int rc = -1;
    if (!parent || !owners_path) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    snprintf(owners_path, on, "%s.owners.json", dest);
    if (util_mkdir_p(dest, 0700) != 0) {
        snprintf(err, errlen, "cannot create '%s': %s", dest, strerror(errno));
        goto out;
    }
    if (util_fsync_dir(parent) != 0) {
        snprintf(err, errlen, "cannot sync '%s': %s", parent, strerror(errno));
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
    if (merge_dir(&m, src, dest, "") != 0)
        goto out;
    if (m.owners_changed && owners_save(&m, owners_path) != 0)
        goto out;
    if (dir_bytes(dest, bytes) != 0) {
        snprintf(err, errlen, "cannot measure '%s': %s", dest, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    json_decref(m.owners);
    free(parent);
    free(owners_path);
    return rc;
}
