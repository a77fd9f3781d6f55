/* The local backend of the artifact store: content-addressed files under one directory.
 *   <dir>/uploads/<key>              staged bytes of an upload in progress (append-only)
 *   <dir>/sha256/<ab>/<ab...64 hex>  committed objects, named by their SHA-256
 * Each call on a key, and each append from its begin to its end, holds an exclusive flock on the
 * staged file, so two requests for one upload cannot interleave; a second one gets
 * ARTIFACT_EBUSY at once instead of blocking (the holder may be waiting for more of its body on
 * the same HTTP thread). An append takes its bytes as they arrive, gathered in blocks of
 * APPEND_BLOCK: each full block is added to the upload's running SHA-256 (one hash pass over the
 * bytes, none at commit) and written, so the work overlaps the transfer of the rest of the
 * chunk; an append that is dropped (bad checksum, cut request) is cut off the file and the hash
 * set back to where it began. Appends are written without a sync: the staged file is fsync'd
 * once, at commit, before it becomes an object. Block-aligned writes at block-aligned offsets
 * go with O_DIRECT (no page-cache pages: on this project's VMs, filling new page-cache pages
 * cost 3-4 s per GiB against 0.5 s direct; docs/bench-checkpoints.md), the rest buffered. A server
 * restart (the page cache survives it) loses nothing acknowledged; the first append after it
 * re-hashes what is on disk once. After a machine crash the staged size is the resume point, and
 * any bytes the crash damaged fail the commit's hash check, which discards the staging (the agent
 * starts again). */
#include "artifact.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
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

/* Opens (flags) and locks the staged file of `key`: an fd, or an error (ARTIFACT_EBUSY while
 * another request holds it). */
static int open_staged(const struct local_be *be, const char *key, int flags)
{
    char path[4096];
    int rc = staged_path(be, key, path, sizeof(path));
    if (rc != 0)
        return rc;
    int fd = open(path, flags | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == ENOENT ? ARTIFACT_ENOTFOUND : ARTIFACT_EIO;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        close(fd);
        return err == EWOULDBLOCK ? ARTIFACT_EBUSY : ARTIFACT_EIO;
    }
    /* local_gc_staged may have removed the file between the open and the lock: retry then. */
    struct stat held, named;
    if (fstat(fd, &held) != 0 || stat(path, &named) != 0 || held.st_ino != named.st_ino) {
        close(fd);
        return ARTIFACT_EBUSY;
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

/* Bytes of an append gathered before they are hashed and written: a multiple of DIRECT_ALIGN,
 * large enough for few system calls, small enough that hashing and writing follow the transfer
 * closely. */
#define APPEND_BLOCK (1024 * 1024)

/* Blocks in flight per append: one being gathered, one being hashed, one being written, and
 * one spare so that none of the three waits for another's block. */
#define APPEND_BLOCKS 4

/* An append in progress: a pipeline of three stages over a ring of blocks. The caller's thread
 * (the HTTP thread) gathers the pieces into a block and hands it on full; a hasher thread adds
 * each block to the running hash, in order; a writer thread writes each hashed block, in
 * order. So receiving, hashing and the disk's time overlap (on one thread the write waited for
 * the hash and the receiving for both). Blocks are numbered in sequence; block n lives in
 * block[n % APPEND_BLOCKS], and the caller reuses it only once it is written. */
struct artifact_append {
    int fd; /* the staged file, locked, positioned at start + written */
    struct running_hash *h;
    EVP_MD_CTX *undo; /* h->ctx as it was at begin: restored when the bytes are dropped */
    int64_t start;    /* the staged size at begin */
    unsigned char *block[APPEND_BLOCKS]; /* APPEND_BLOCK bytes each, DIRECT_ALIGN-aligned */
    size_t fill;                         /* bytes gathered in block `gathered` */
    pthread_t hasher, writer;
    bool hashing, writing; /* the hasher, the writer thread is running */
    pthread_mutex_t mu;    /* guards the fields below */
    pthread_cond_t cv;
    size_t len[APPEND_BLOCKS];          /* bytes of each handed-on block */
    uint64_t gathered, hashed, flushed; /* blocks handed on, hashed, written */
    bool closing;                       /* no more blocks: the threads exit when done */
    int64_t written;                    /* bytes written after start */
    bool failed; /* a write failed: later blocks are not written, and end drops the bytes */
};

static void *append_hasher(void *arg)
{
    struct artifact_append *ap = arg;
    pthread_mutex_lock(&ap->mu);
    for (;;) {
        while (ap->hashed == ap->gathered && !ap->closing)
            pthread_cond_wait(&ap->cv, &ap->mu);
        if (ap->hashed == ap->gathered)
            break;
        size_t i = ap->hashed % APPEND_BLOCKS, len = ap->len[i];
        pthread_mutex_unlock(&ap->mu);
        EVP_DigestUpdate(ap->h->ctx, ap->block[i], len);
        pthread_mutex_lock(&ap->mu);
        ap->hashed++;
        pthread_cond_broadcast(&ap->cv);
    }
    pthread_mutex_unlock(&ap->mu);
    return NULL;
}

/* Writes block i (len bytes) at start + written, unless a write failed already. */
static void append_write(struct artifact_append *ap, size_t i, size_t len)
{
    pthread_mutex_lock(&ap->mu);
    bool skip = ap->failed;
    int64_t at = ap->start + ap->written;
    pthread_mutex_unlock(&ap->mu);
    int rc = skip ? 0 : write_staged(ap->fd, at, ap->block[i], len);
    if (rc != 0)
        TY_WARN("artifacts", "cannot append to staged upload %s: %s", ap->h->key, strerror(errno));
    pthread_mutex_lock(&ap->mu);
    if (rc != 0)
        ap->failed = true;
    else if (!skip)
        ap->written += (int64_t)len;
    pthread_mutex_unlock(&ap->mu);
}

static void *append_writer(void *arg)
{
    struct artifact_append *ap = arg;
    pthread_mutex_lock(&ap->mu);
    for (;;) {
        while (ap->flushed == ap->hashed && !(ap->closing && ap->flushed == ap->gathered))
            pthread_cond_wait(&ap->cv, &ap->mu);
        if (ap->flushed == ap->hashed)
            break; /* closing, and every block written */
        size_t i = ap->flushed % APPEND_BLOCKS, len = ap->len[i];
        pthread_mutex_unlock(&ap->mu);
        append_write(ap, i, len);
        pthread_mutex_lock(&ap->mu);
        ap->flushed++;
        pthread_cond_broadcast(&ap->cv);
    }
    pthread_mutex_unlock(&ap->mu);
    return NULL;
}

/* Hands the gathered block on and waits, if need be, until the next block is free to gather
 * into. */
static void append_hand_over(struct artifact_append *ap)
{
    if (ap->fill == 0)
        return;
    pthread_mutex_lock(&ap->mu);
    ap->len[ap->gathered % APPEND_BLOCKS] = ap->fill;
    ap->gathered++;
    pthread_cond_broadcast(&ap->cv);
    while (ap->gathered - ap->flushed >= APPEND_BLOCKS) /* the next block is still in flight */
        pthread_cond_wait(&ap->cv, &ap->mu);
    pthread_mutex_unlock(&ap->mu);
    ap->fill = 0;
}

/* Lets the threads finish the blocks handed on, and joins them. */
static void append_stop_threads(struct artifact_append *ap)
{
    pthread_mutex_lock(&ap->mu);
    ap->closing = true;
    pthread_cond_broadcast(&ap->cv);
    pthread_mutex_unlock(&ap->mu);
    if (ap->hashing)
        pthread_join(ap->hasher, NULL);
    if (ap->writing)
        pthread_join(ap->writer, NULL);
    ap->hashing = ap->writing = false;
}

static void append_free(struct artifact_append *ap)
{
    append_stop_threads(ap);
    if (ap->fd >= 0)
        close(ap->fd);
    EVP_MD_CTX_free(ap->undo);
    for (size_t i = 0; i < APPEND_BLOCKS; i++)
        free(ap->block[i]);
    pthread_cond_destroy(&ap->cv);
    pthread_mutex_destroy(&ap->mu);
    free(ap);
}

static int local_append_begin(void *arg, const char *key, int64_t offset,
                              struct artifact_append **out, int64_t *size)
{
    struct local_be *be = arg;
    *out = NULL;
    *size = 0;
    struct artifact_append *ap = calloc(1, sizeof(*ap));
    if (ap == NULL)
        return ARTIFACT_EIO;
    pthread_mutex_init(&ap->mu, NULL);
    pthread_cond_init(&ap->cv, NULL);
    ap->fd = open_staged(be, key, O_RDWR | O_CREAT);
    if (ap->fd < 0) {
        int rc = ap->fd;
        ap->fd = -1;
        append_free(ap);
        return rc;
    }
    struct stat sb;
    int rc = 0;
    if ((ap->h = running_get(be, key)) == NULL || fstat(ap->fd, &sb) != 0 ||
        (ap->undo = EVP_MD_CTX_new()) == NULL)
        rc = ARTIFACT_EIO;
    for (size_t i = 0; i < APPEND_BLOCKS && rc == 0; i++) {
        void *b = NULL;
        if (posix_memalign(&b, DIRECT_ALIGN, APPEND_BLOCK) != 0)
            rc = ARTIFACT_EIO;
        ap->block[i] = b;
    }
    if (rc == 0 && sb.st_size != offset) {
        *size = sb.st_size;
        rc = ARTIFACT_EOFFSET;
    }
    if (rc == 0 && (running_sync(ap->h, ap->fd, sb.st_ino, offset) != 0 ||
                    EVP_MD_CTX_copy_ex(ap->undo, ap->h->ctx) != 1 ||
                    lseek(ap->fd, offset, SEEK_SET) != offset))
        rc = ARTIFACT_EIO;
    if (rc != 0) {
        append_free(ap);
        return rc;
    }
    ap->start = offset;
    ap->hashing = pthread_create(&ap->hasher, NULL, append_hasher, ap) == 0;
    ap->writing = ap->hashing && pthread_create(&ap->writer, NULL, append_writer, ap) == 0;
    if (!ap->writing) {
        TY_WARN("artifacts", "cannot start the threads of an append to %s", key);
        append_free(ap);
        return ARTIFACT_EIO;
    }
    *size = offset;
    *out = ap;
    return 0;
}

static int local_append_data(struct artifact_append *ap, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        size_t n = APPEND_BLOCK - ap->fill < len ? APPEND_BLOCK - ap->fill : len;
        memcpy(ap->block[ap->gathered % APPEND_BLOCKS] + ap->fill, p, n);
        ap->fill += n;
        p += n;
        len -= n;
        if (ap->fill == APPEND_BLOCK)
            append_hand_over(ap);
    }
    pthread_mutex_lock(&ap->mu);
    bool failed = ap->failed;
    pthread_mutex_unlock(&ap->mu);
    return failed ? ARTIFACT_EIO : 0;
}

static int local_append_end(struct artifact_append *ap, int keep, int64_t *size)
{
    if (keep)
        append_hand_over(ap);
    append_stop_threads(ap);
    int rc = 0;
    if (keep && !ap->failed) {
        ap->h->hashed = ap->start + ap->written;
    } else {
        /* Dropped, or a write failed (disk full): cut what was written so that the staged size
         * stays what was acknowledged, and set the hash back to match. */
        if (ftruncate(ap->fd, ap->start) != 0)
            TY_WARN("artifacts", "cannot cut staged upload %s back: %s", ap->h->key,
                    strerror(errno));
        ap->h->hashed =
            EVP_MD_CTX_copy_ex(ap->h->ctx, ap->undo) == 1 ? ap->start : -1; /* -1: re-hash */
        if (keep)
            rc = ARTIFACT_EIO;
    }
    *size = ap->h->hashed >= 0 ? ap->h->hashed : ap->start;
    append_free(ap);
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

static int local_gc_staged(void *arg, int64_t older_than_s, int64_t *removed)
{
    struct local_be *be = arg;
    *removed = 0;
    char dir[4096];
    int w = snprintf(dir, sizeof(dir), "%s/uploads", be->dir);
    if (w < 0 || (size_t)w >= sizeof(dir))
        return ARTIFACT_EINVAL;
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : ARTIFACT_EIO;
    time_t before = time(NULL) - (time_t)older_than_s;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!artifact_key_valid(e->d_name))
            continue;
        /* Locked first: an upload being written is never removed, however old it is. */
        int fd = open_staged(be, e->d_name, O_RDONLY);
        if (fd < 0)
            continue;
        struct stat sb;
        char path[4096];
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_mtime < before &&
            staged_path(be, e->d_name, path, sizeof(path)) == 0 && unlink(path) == 0) {
            running_drop(be, e->d_name);
            (*removed)++;
            TY_INFO("artifacts",
                    "removed the abandoned upload %s (%lld bytes, untouched for "
                    "over %lld s)",
                    e->d_name, (long long)sb.st_size, (long long)older_than_s);
        }
        close(fd);
    }
    closedir(d);
    return 0;
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
    .name = "local",
    .staged_size = local_staged_size,
    .append_begin = local_append_begin,
    .append_data = local_append_data,
    .append_end = local_append_end,
    .commit = local_commit,
    .open_read = local_open_read,
    .remove = local_remove,
    .gc_staged = local_gc_staged,
    .destroy = local_destroy,
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
