/* The manifest digest of a directory (dir_manifest.h). nftw has no context pointer: the walk's
 * state is reached through a thread-local pointer, so walks in different threads are safe. */
#include "dir_manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct manifest_entry {
    char *name;
    char kind;    /* 'f' or 'l' */
    int64_t size; /* files */
    char *target; /* links */
};

struct manifest_walk {
    size_t root_len;
    struct manifest_entry *v;
    size_t n, cap;
    int error;
};

static _Thread_local struct manifest_walk *walk;

/* nftw callback: records files and links, refuses other kinds. */
static int manifest_visit(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)f;
    struct manifest_walk *w = walk;
    if (flag == FTW_D || flag == FTW_DP)
        return 0;
    if (flag != FTW_F && flag != FTW_SL) {
        w->error = EACCES;
        return -1;
    }
    if (flag == FTW_F && !S_ISREG(sb->st_mode)) {
        w->error = EINVAL;
        return -1;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        struct manifest_entry *v = realloc(w->v, cap * sizeof(*v));
        if (v == NULL) {
            w->error = ENOMEM;
            return -1;
        }
        w->v = v;
        w->cap = cap;
    }
    struct manifest_entry *e = &w->v[w->n];
    memset(e, 0, sizeof(*e));
    e->name = strdup(path + w->root_len + 1);
    e->kind = flag == FTW_F ? 'f' : 'l';
    e->size = sb->st_size;
    if (e->name == NULL) {
        w->error = ENOMEM;
        return -1;
    }
    if (e->kind == 'l') {
        char target[4096];
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n < 0 || (e->target = strndup(target, (size_t)n)) == NULL) {
            free(e->name);
            w->error = n < 0 ? errno : ENOMEM;
            return -1;
        }
    }
    w->n++;
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct manifest_entry *)a)->name,
                  ((const struct manifest_entry *)b)->name);
}

/* hex = SHA-256 of the file at root/name. 0 or -1. */
static int file_sha256(const char *root, const char *name, char hex[65])
{
    char path[8192];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", root, name) >= sizeof(path))
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    char *buf = malloc(1 << 20);
    int rc = ctx && buf && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 ? 0 : -1;
    ssize_t n = 0;
    while (rc == 0 && (n = read(fd, buf, 1 << 20)) > 0)
        rc = EVP_DigestUpdate(ctx, buf, (size_t)n) == 1 ? 0 : -1;
    unsigned char md[32];
    unsigned int len = 0;
    if (rc == 0 && (n < 0 || EVP_DigestFinal_ex(ctx, md, &len) != 1))
        rc = -1;
    for (unsigned i = 0; rc == 0 && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    free(buf);
    EVP_MD_CTX_free(ctx);
    close(fd);
    return rc;
}

int dir_manifest(const char *dir, char sha[65], int64_t *bytes, int64_t *files)
{
    struct manifest_walk w = {.root_len = strlen(dir)};
    while (w.root_len > 1 && dir[w.root_len - 1] == '/')
        w.root_len--;
    walk = &w;
    int rc = nftw(dir, manifest_visit, 16, FTW_PHYS) == 0 && w.error == 0 ? 0 : -1;
    walk = NULL;
    *bytes = *files = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        rc = -1;
    if (rc == 0 && w.n > 0)
        qsort(w.v, w.n, sizeof(*w.v), entry_cmp);
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        const struct manifest_entry *e = &w.v[i];
        char line[8400], hex[65];
        int len;
        if (e->kind == 'f') {
            if (file_sha256(dir, e->name, hex) != 0) {
                rc = -1;
                break;
            }
            len = snprintf(line, sizeof(line), "f %s %lld %s\n", hex, (long long)e->size, e->name);
            *bytes += e->size;
            ++*files;
        } else
            len = snprintf(line, sizeof(line), "l %s %s\n", e->target, e->name);
        if (len < 0 || (size_t)len >= sizeof(line) || EVP_DigestUpdate(ctx, line, (size_t)len) != 1)
            rc = -1;
    }
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (rc == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1)
        rc = -1;
    for (unsigned i = 0; rc == 0 && i < 32; i++)
        snprintf(sha + 2 * i, 3, "%02x", md[i]);
    EVP_MD_CTX_free(ctx);
    for (size_t i = 0; i < w.n; i++) {
        free(w.v[i].name);
        free(w.v[i].target);
    }
    free(w.v);
    if (rc == 0 && w.error != 0)
        rc = -1;
    if (rc != 0 && w.error != 0)
        errno = w.error;
    return rc;
}
