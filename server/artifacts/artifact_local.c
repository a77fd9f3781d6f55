/* The local backend of the artifact store: content-addressed files under one directory.
 *   <dir>/uploads/<key>              staged bytes of an upload in progress (append-only)
 *   <dir>/sha256/<ab>/<ab...64 hex>  committed objects, named by their SHA-256
 * Each call on a key takes an exclusive flock on its staged file, so two requests for one upload
 * cannot interleave. The SHA-256 of a staged upload is kept running as chunks are appended (one
 * hash pass over the bytes, none at commit), and appends are written without a sync: the staged
 * file is fsync'd once, at commit, before it becomes an object. The block-aligned part of an
 * append whose offset and buffer are block-aligned is written with O_DIRECT (no page-cache
 * pages: on this project's VMs, filling new page-cache pages cost 3-4 s per GiB against 0.5 s
 * direct; docs/bench-checkpoints.md), the rest buffered. A server restart (the page cache
 * survives it) loses nothing acknowledged; the first append after it re-hashes what is on disk
 * once. After a machine crash the staged size is the resume point, and any bytes the crash
 * damaged fail the commit's hash check, which discards the staging (the agent starts again). */
#include "artifact.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The running SHA-256 of one staged upload: `ctx` has hashed its first `hashed` bytes. Trusted
 * only while the staged file is the same inode and exactly `hashed` bytes long. */
struct running_hash {
    struct running_hash *next;
    char *key;
    EVP_MD_CTX *ctx;
    int64_t hashed;
    ino_t ino;
};

struct local_be {
    char *dir;
    pthread_mutex_t mu; /* guards the list `hashes`; each entry is used under its key's flock */
    struct running_hash *hashes;
};

static int staged_path(const struct local_be *be, const char *key, char *out, size_t n)
{
    if (!artifact_key_valid(key))
        return ARTIFACT_EINVAL;
    int w = snprintf(out, n, "%s/uploads/%s", be->dir, key);
    return w < 0 || (size_t)w >= n ? ARTIFACT_EINVAL : 0;
}

/* Opens (flags) and locks the staged file of `key`: an fd, or an error. */
static int open_staged(const struct local_be *be, const char *key, int flags)
{
    char path[4096];
    int rc = staged_path(be, key, path, sizeof(path));
    if (rc != 0)
        return rc;
    int fd = open(path, flags | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == ENOENT ? ARTIFACT_ENOTFOUND : ARTIFACT_EIO;
    if (flock(fd, LOCK_EX) != 0) {
        close(fd);
        return ARTIFACT_EIO;
    }
    return fd;
}

/* The running hash of `key` (created empty when missing; NULL without memory). */
static struct running_hash *running_get(struct local_be *be, const char *key)
{
    pthread_mutex_lock(&be->mu);
    struct running_hash *h = be->hashes;
    while (h && strcmp(h->key, key) != 0)
        h = h->next;
    if (h == NULL && (h = calloc(1, sizeof(*h))) != NULL) {
        h->key = strdup(key);
        h->ctx = EVP_MD_CTX_new();
        if (h->key == NULL || h->ctx == NULL) {
            free(h->key);
            EVP_MD_CTX_free(h->ctx);
            free(h);
            h = NULL;
        } else {
            h->hashed = -1;
            h->next = be->hashes;
            be->hashes = h;
        }
    }
    pthread_mutex_unlock(&be->mu);
    return h;
}

/* Forgets the running hash of `key` (committed or discarded). */
static void running_drop(struct local_be *be, const char *key)
{
    pthread_mutex_lock(&be->mu);
    for (struct running_hash **pp = &be->hashes, *h; (h = *pp) != NULL; pp = &h->next) {
        if (strcmp(h->key, key) == 0) {
            *pp = h->next;
            free(h->key);
            EVP_MD_CTX_free(h->ctx);
            free(h);
            break;
        }
    }
    pthread_mutex_unlock(&be->mu);
}

/* Brings h to the first `upto` bytes of the staged file fd (inode ino): nothing to do when it is
 * there already, else a re-hash from disk (after a server restart, or when another process
 * wrote the staging). 0 or ARTIFACT_EIO (then h is reset). */
static int running_sync(struct running_hash *h, int fd, ino_t ino, int64_t upto)
{
    if (h->hashed == upto && h->ino == ino)
        return 0;
    h->hashed = -1;
    if (EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
        return ARTIFACT_EIO;
    static __thread unsigned char buf[1 << 16];
    for (int64_t off = 0; off < upto;) {
        size_t want = upto - off < (int64_t)sizeof(buf) ? (size_t)(upto - off) : sizeof(buf);
        ssize_t r = pread(fd, buf, want, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return ARTIFACT_EIO;
        EVP_DigestUpdate(h->ctx, buf, (size_t)r);
        off += r;
    }
    h->hashed = upto;
    h->ino = ino;
    return 0;
}

#define DIRECT_ALIGN 4096

/* Writes `len` bytes of data at fd's current offset `offset`: the 4096-aligned prefix with
 * O_DIRECT when offset and data are aligned and the filesystem takes it, the rest (or all, if
 * not) through the page cache. fd's O_DIRECT flag is off again on return. 0 or -1 with errno. */
static int write_staged(int fd, int64_t offset, const void *data, size_t len)
{
    size_t direct = len & ~(size_t)(DIRECT_ALIGN - 1);
    if (direct > 0 && offset % DIRECT_ALIGN == 0 && (uintptr_t)data % DIRECT_ALIGN == 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
            int rc = util_write_all(fd, data, direct);
            int err = errno;
            fcntl(fd, F_SETFL, fl);
            if (rc == 0) {
                data = (const char *)data + direct;
                len -= direct;
            } else if (err != EINVAL || lseek(fd, offset, SEEK_SET) != offset) {
                errno = err;
                return -1;
            } /* EINVAL: the device wants another alignment; all of it through the page cache */
        }
    }
    return util_write_all(fd, data, len);
}

static int local_staged_size(void *arg, const char *key, int64_t *size)
{
    *size = 0;
    int fd = open_staged(arg, key, O_RDONLY);
    if (fd == ARTIFACT_ENOTFOUND)
        return 0;
    if (fd < 0)
        return fd;
    struct stat sb;
    int rc = fstat(fd, &sb) == 0 ? 0 : ARTIFACT_EIO;
    if (rc == 0)
        *size = sb.st_size;
    close(fd);
    return rc;
}

static int local_append(void *arg, const char *key, int64_t offset, const void *data, size_t len,
                        int64_t *size)
{
    struct local_be *be = arg;
    *size = 0;
    int fd = open_staged(be, key, O_RDWR | O_CREAT);
    if (fd < 0)
        return fd;
    struct stat sb;
    struct running_hash *h = running_get(be, key);
    int rc = h ? 0 : ARTIFACT_EIO;
    if (rc == 0 && fstat(fd, &sb) != 0) {
        rc = ARTIFACT_EIO;
    } else if (rc == 0 && sb.st_size != offset) {
        *size = sb.st_size;
        rc = ARTIFACT_EOFFSET;
    } else if (rc == 0 && (running_sync(h, fd, sb.st_ino, offset) != 0 ||
                           lseek(fd, offset, SEEK_SET) != offset ||
                           write_staged(fd, offset, data, len) != 0)) {
        /* A short write (disk full) leaves a tail: cut it so the staged size stays what was
         * acknowledged. */
        TY_WARN("artifacts", "cannot append to staged upload %s: %s", key, strerror(errno));
        if (ftruncate(fd, offset) != 0)
            TY_WARN("artifacts", "cannot cut staged upload %s back: %s", key, strerror(errno));
        *size = offset;
        rc = ARTIFACT_EIO;
    } else if (rc == 0) {
        EVP_DigestUpdate(h->ctx, data, len);
        h->hashed = offset + (int64_t)len;
        *size = h->hashed;
    }
    close(fd);
    return rc;
}

/* Hashes fd from its start into hex (65 bytes) and *size. */
static int hash_fd(int fd, char hex[65], int64_t *size)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return ARTIFACT_EIO;
    }
    static __thread unsigned char buf[1 << 16];
    int64_t total = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = pread(fd, buf, sizeof(buf), total);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = ARTIFACT_EIO;
            break;
        }
        if (r == 0)
            break;
        EVP_DigestUpdate(ctx, buf, (size_t)r);
        total += r;
    }
    unsigned char md[32];
    unsigned mdlen = 0;
    if (rc == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
        rc = ARTIFACT_EIO;
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; rc == 0 && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    *size = total;
    return rc;
}

/* The SHA-256 (hex) and size of staged file fd: from the running hash when it covers the whole
 * file, else hashed from disk. */
static int running_digest(struct local_be *be, const char *key, int fd, char hex[65], int64_t *size)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return ARTIFACT_EIO;
    struct running_hash *h = running_get(be, key);
    if (h == NULL || h->hashed != sb.st_size || h->ino != sb.st_ino)
        return hash_fd(fd, hex, size);
    unsigned char md[32];
    unsigned mdlen = 0;
    if (EVP_DigestFinal_ex(h->ctx, md, &mdlen) != 1)
        return ARTIFACT_EIO;
    h->hashed = -1;
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    *size = sb.st_size;
    return 0;
}

static int local_commit(void *arg, const char *key, const char *sha256, char *location,
                        int64_t *size)
{
    struct local_be *be = arg;
    location[0] = '\0';
    *size = 0;
    if (!artifact_sha256_valid(sha256))
        return ARTIFACT_EINVAL;
    char staged[4096], dir[4096], obj[4096];
    int rc = staged_path(be, key, staged, sizeof(staged));
    if (rc != 0)
        return rc;
    int fd = open_staged(be, key, O_RDONLY);
    if (fd < 0)
        return fd;
    char got[65];
    rc = running_digest(be, key, fd, got, size);
    running_drop(be, key);
    if (rc == 0 && strcmp(got, sha256) != 0) {
        rc = ARTIFACT_ECORRUPT;
        if (unlink(staged) != 0)
            rc = ARTIFACT_EIO;
    }
    if (rc == 0) {
        snprintf(location, ARTIFACT_LOCATION_MAX, "sha256/%.2s/%s", sha256, sha256);
        snprintf(dir, sizeof(dir), "%s/sha256/%.2s", be->dir, sha256);
        snprintf(obj, sizeof(obj), "%s/%s", be->dir, location);
        /* The same content twice is one object: the second staging just goes. */
        if (util_mkdir_p(dir, 0700) != 0 || fsync(fd) != 0 || rename(staged, obj) != 0 ||
            util_fsync_dir(dir) != 0) {
            TY_WARN("artifacts", "cannot commit %s as %s: %s", key, obj, strerror(errno));
            location[0] = '\0';
            rc = ARTIFACT_EIO;
        }
    }
    close(fd);
    return rc;
}

static int object_path(const struct local_be *be, const char *location, char *out, size_t n)
{
    if (strncmp(location, "sha256/", 7) != 0 || strlen(location) != 7 + 3 + 64 ||
        location[9] != '/' || !artifact_sha256_valid(location + 10) ||
        strncmp(location + 7, location + 10, 2) != 0)
        return ARTIFACT_EINVAL;
    int w = snprintf(out, n, "%s/%s", be->dir, location);
    return w < 0 || (size_t)w >= n ? ARTIFACT_EINVAL : 0;
}

static int local_open_read(void *arg, const char *location)
{
    char path[4096];
    int rc = object_path(arg, location, path, sizeof(path));
    if (rc != 0)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? ARTIFACT_ENOTFOUND : ARTIFACT_EIO;
    return fd;
}

static int local_remove(void *arg, const char *location)
{
    char path[4096];
    int rc = object_path(arg, location, path, sizeof(path));
    if (rc != 0)
        return rc;
    return unlink(path) == 0 || errno == ENOENT ? 0 : ARTIFACT_EIO;
}

static void local_destroy(void *arg)
{
    struct local_be *be = arg;
    if (be == NULL)
        return;
    while (be->hashes) {
        struct running_hash *h = be->hashes;
        be->hashes = h->next;
        free(h->key);
        EVP_MD_CTX_free(h->ctx);
        free(h);
    }
    pthread_mutex_destroy(&be->mu);
    free(be->dir);
    free(be);
}

static const struct artifact_backend local_backend = {
    "local",         local_staged_size, local_append,  local_commit,
    local_open_read, local_remove,      local_destroy,
};

struct artifact_store *artifact_store_open_local(const char *dir)
{
    char uploads[4096];
    int w = snprintf(uploads, sizeof(uploads), "%s/uploads", dir);
    if (w < 0 || (size_t)w >= sizeof(uploads) || util_mkdir_p(uploads, 0700) != 0) {
        TY_ERROR("artifacts", "cannot create %s: %s", uploads, strerror(errno));
        return NULL;
    }
    struct artifact_store *st = calloc(1, sizeof(*st));
    struct local_be *be = calloc(1, sizeof(*be));
    if (st == NULL || be == NULL || (be->dir = strdup(dir)) == NULL) {
        free(st);
        free(be);
        return NULL;
    }
    pthread_mutex_init(&be->mu, NULL);
    st->ops = &local_backend;
    st->be = be;
    return st;
}
