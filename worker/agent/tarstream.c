/* A checkpoint part as a tar stream read straight from its directory (upload.c): no tar file is
 * written. agent__tar_open walks the directory once (names sorted bytewise in each directory, as
 * `tar --sort=name`) and lays the archive out: each member's header offset and size. The bytes
 * at any offset are then made on demand: headers (GNU format: ustar fields, a ././@LongLink
 * member before a name over 100 bytes, base-256 sizes from 8 GiB) are built in memory, file
 * bodies read from the files themselves. The stream is a function of the directory alone, so an
 * upload cut at any offset resumes there with a new walk, and the archive endpoint (archive.c)
 * reads the part's members up to its two zero end blocks.
 */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAR_BLOCK 512
#define TAR_NAME_MAX 100

struct tar_member {
    char *path; /* on disk */
    char *name; /* in the archive: "./" or "./a/b" ("./d/" for a directory) */
    char *link; /* a symbolic link's target, or NULL */
    char type;  /* '0' file, '5' directory, '2' symbolic link */
    mode_t mode;
    uid_t uid;
    gid_t gid;
    int64_t mtime, size; /* size: body bytes (files only) */
    int64_t off;         /* where its first header block starts */
    int64_t hdr_len;     /* header bytes, long name members included */
};

struct agent_tar {
    struct tar_member *m;
    size_t n, cap;
    int64_t total, files;
    /* the member whose headers and file are at hand */
    size_t cur;
    unsigned char *hdr;
    int fd;
    char err[600];
};

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int64_t pad(int64_t n)
{
    return (n + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
}

static int member_add(struct agent_tar *t, const char *path, const char *name,
                      const struct stat *sb)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct tar_member *m = realloc(t->m, cap * sizeof(*m));
        if (m == NULL)
            return -1;
        t->m = m;
        t->cap = cap;
    }
    struct tar_member *m = &t->m[t->n];
    memset(m, 0, sizeof(*m));
    m->type = S_ISDIR(sb->st_mode) ? '5' : S_ISLNK(sb->st_mode) ? '2' : '0';
    m->mode = sb->st_mode & 07777;
    m->uid = sb->st_uid;
    m->gid = sb->st_gid;
    m->mtime = sb->st_mtime;
    m->size = m->type == '0' ? sb->st_size : 0;
    m->path = strdup(path);
    m->name = strdup(name);
    if (m->path == NULL || m->name == NULL)
        goto fail;
    if (m->type == '2') {
        char target[PATH_MAX];
        ssize_t r = readlink(path, target, sizeof(target) - 1);
        if (r < 0 || r >= TAR_NAME_MAX)
            goto fail; /* a target that long would need a ././@LongLink 'K' member */
        target[r] = '\0';
        if ((m->link = strdup(target)) == NULL)
            goto fail;
    }
    size_t len = strlen(name);
    m->hdr_len = TAR_BLOCK + (len > TAR_NAME_MAX ? TAR_BLOCK + pad((int64_t)len + 1) : 0);
    m->off = t->total;
    t->total += m->hdr_len + pad(m->size);
    t->files += m->type == '0';
    t->n++;
    return 0;
fail:
    free(m->path);
    free(m->name);
    free(m->link);
    return -1;
}

/* Adds directory `path` (archive name `name`, ending in '/') and everything under it, sorted. */
static int walk(struct agent_tar *t, const char *path, const char *name, int depth)
{
    struct stat sb;
    if (depth > 64 || lstat(path, &sb) != 0 || member_add(t, path, name, &sb) != 0)
        return -1;
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **nn = realloc(names, cap * sizeof(*nn));
            if (nn == NULL) {
                rc = -1;
                break;
            }
            names = nn;
        }
        if ((names[n] = strdup(e->d_name)) == NULL)
            rc = -1;
        else
            n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char p[PATH_MAX], nm[PATH_MAX];
        if (snprintf(p, sizeof(p), "%s/%s", path, names[i]) >= (int)sizeof(p) ||
            lstat(p, &sb) != 0 ||
            snprintf(nm, sizeof(nm), "%s%s%s", name, names[i], S_ISDIR(sb.st_mode) ? "/" : "") >=
                (int)sizeof(nm)) {
            rc = -1;
            break;
        }
        if (S_ISDIR(sb.st_mode))
            rc = walk(t, p, nm, depth + 1);
        else if (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode))
            rc = member_add(t, p, nm, &sb);
        /* sockets, pipes and devices are not part of a checkpoint */
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

struct agent_tar *agent__tar_open(const char *dir)
{
    struct agent_tar *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->fd = -1;
    t->cur = SIZE_MAX;
    if (walk(t, dir, "./", 0) != 0) {
        agent__tar_free(t);
        return NULL;
    }
    t->total += 2 * TAR_BLOCK;
    return t;
}

int64_t agent__tar_size(const struct agent_tar *t)
{
    return t->total;
}

int64_t agent__tar_files(const struct agent_tar *t)
{
    return t->files;
}

const char *agent__tar_error(const struct agent_tar *t)
{
    return t->err;
}

/* Writes v as octal text in a field of w bytes (w-1 digits and a NUL), or base-256 when it does
 * not fit. */
static void put_num(unsigned char *f, size_t w, int64_t v)
{
    int64_t max = 1;
    for (size_t i = 0; i + 1 < w; i++)
        max *= 8;
    if (v >= 0 && v < max) {
        for (size_t i = w - 1; i-- > 0; v /= 8)
            f[i] = (unsigned char)('0' + (v & 7));
        f[w - 1] = '\0';
        return;
    }
    for (size_t i = w; i-- > 1; v >>= 8)
        f[i] = (unsigned char)(v & 0xff);
    f[0] = 0x80;
}

/* One GNU tar header block for `name` (cut to 100 bytes), type, size. */
static void header_block(unsigned char *h, const struct tar_member *m, const char *name, char type,
                         int64_t size)
{
    memset(h, 0, TAR_BLOCK);
    size_t len = strlen(name);
    memcpy(h, name, len < TAR_NAME_MAX ? len : TAR_NAME_MAX);
    put_num(h + 100, 8, (int64_t)m->mode);
    put_num(h + 108, 8, (int64_t)m->uid);
    put_num(h + 116, 8, (int64_t)m->gid);
    put_num(h + 124, 12, size);
    put_num(h + 136, 12, m->mtime);
    h[156] = (unsigned char)type;
    if (m->link && type == m->type)
        memcpy(h + 157, m->link, strlen(m->link));
    memcpy(h + 257, "ustar  ", 8); /* GNU magic and version: "ustar  \0" */
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

/* Makes member i current: its header bytes built, its file open. -1 with t->err set. */
static int member_load(struct agent_tar *t, size_t i)
{
    if (t->cur == i)
        return 0;
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    t->cur = SIZE_MAX;
    struct tar_member *m = &t->m[i];
    unsigned char *h = realloc(t->hdr, (size_t)m->hdr_len);
    if (h == NULL)
        return -1;
    t->hdr = h;
    memset(h, 0, (size_t)m->hdr_len);
    size_t len = strlen(m->name);
    if (len > TAR_NAME_MAX) {
        header_block(h, m, "././@LongLink", 'L', (int64_t)len + 1);
        memcpy(h + TAR_BLOCK, m->name, len);
        h += m->hdr_len - TAR_BLOCK;
    }
    header_block(h, m, m->name, m->type, m->size);
    if (m->type == '0') {
        t->fd = open(m->path, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (t->fd < 0 || fstat(t->fd, &sb) != 0 || sb.st_size != m->size) {
            snprintf(t->err, sizeof(t->err), "file %.400s %s", m->name + 2,
                     t->fd < 0 ? strerror(errno) : "changed size");
            return -1;
        }
    }
    t->cur = i;
    return 0;
}

ssize_t agent__tar_read(struct agent_tar *t, int64_t off, char *buf, size_t len)
{
    size_t done = 0;
    while (done < len && off < t->total) {
        size_t lo = 0, hi = t->n;
        while (lo < hi) { /* the last member starting at or before off */
            size_t mid = (lo + hi) / 2;
            if (t->m[mid].off <= off)
                lo = mid + 1;
            else
                hi = mid;
        }
        int64_t end = lo ? t->m[lo - 1].off + t->m[lo - 1].hdr_len + pad(t->m[lo - 1].size) : 0;
        size_t want = len - done;
        if (lo == 0 || off >= end) { /* the end blocks */
            int64_t left = t->total - off;
            size_t k = (int64_t)want < left ? want : (size_t)left;
            memset(buf + done, 0, k);
            done += k;
            off += (int64_t)k;
            continue;
        }
        size_t i = lo - 1;
        struct tar_member *m = &t->m[i];
        if (member_load(t, i) != 0)
            return -1;
        int64_t rel = off - m->off, k;
        if (rel < m->hdr_len) {
            k = m->hdr_len - rel < (int64_t)want ? m->hdr_len - rel : (int64_t)want;
            memcpy(buf + done, t->hdr + rel, (size_t)k);
        } else if (rel - m->hdr_len < m->size) {
            int64_t body = rel - m->hdr_len;
            k = m->size - body < (int64_t)want ? m->size - body : (int64_t)want;
            ssize_t r;
            do
                r = pread(t->fd, buf + done, (size_t)k, body);
            while (r < 0 && errno == EINTR);
            if (r <= 0) {
                snprintf(t->err, sizeof(t->err), "file %.400s %s", m->name + 2,
                         r < 0 ? strerror(errno) : "shrank while it was read");
                return -1;
            }
            k = r;
        } else {
            k = end - off < (int64_t)want ? end - off : (int64_t)want;
            memset(buf + done, 0, (size_t)k);
        }
        done += (size_t)k;
        off += k;
    }
    return (ssize_t)done;
}

void agent__tar_free(struct agent_tar *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->m[i].path);
        free(t->m[i].name);
        free(t->m[i].link);
    }
    free(t->m);
    free(t->hdr);
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}
