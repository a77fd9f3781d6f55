/* Concatenating checkpoint parts into one tar stream (archive.h). */
#include "archive.h"

#include "artifact.h"
#include "shared.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TAR_BLOCK 512

/* A member's size from its header's size field: octal text, or GNU base-256 (first byte 0x80). */
static int header_size(const unsigned char *h, int64_t *size)
{
    const unsigned char *f = h + 124;
    int64_t v = 0;
    if (f[0] & 0x80) {
        for (int i = 1; i < 12; i++) {
            if (v > (INT64_MAX >> 8))
                return -1;
            v = (v << 8) | f[i];
        }
    } else {
        for (int i = 0; i < 12 && f[i] != '\0' && f[i] != ' '; i++) {
            if (f[i] < '0' || f[i] > '7' || v > (INT64_MAX >> 3))
                return -1;
            v = v * 8 + (f[i] - '0');
        }
    }
    *size = v;
    return 0;
}

int artifact_tar_data_len(int fd, int64_t *len)
{
    unsigned char h[TAR_BLOCK];
    int64_t off = 0;
    for (;;) {
        ssize_t r = pread(fd, h, TAR_BLOCK, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            *len = off;
            return 0;
        }
        if (r != TAR_BLOCK)
            return -1;
        bool zero = true;
        for (int i = 0; i < TAR_BLOCK && zero; i++)
            zero = h[i] == 0;
        if (zero) {
            *len = off;
            return 0;
        }
        if (memcmp(h + 257, "ustar", 5) != 0)
            return -1;
        int64_t size;
        if (header_size(h, &size) != 0 || size > INT64_MAX / 2)
            return -1;
        off += TAR_BLOCK + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
    }
}

struct artifact_archive {
    size_t n;
    int *fds;
    int64_t *lens; /* member bytes of each part */
    int64_t total; /* sum of lens + the two end blocks */
};

struct artifact_archive *artifact_archive_open(struct artifact_store *st,
                                               const char *const *locations, size_t n,
                                               int64_t *total)
{
    struct artifact_archive *ar = calloc(1, sizeof(*ar));
    if (ar == NULL)
        return NULL;
    ar->fds = calloc(n ? n : 1, sizeof(int));
    ar->lens = calloc(n ? n : 1, sizeof(int64_t));
    if (ar->fds == NULL || ar->lens == NULL) {
        artifact_archive_free(ar);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        int fd = locations[i][0] == '/' ? shared_open_tar(st->shared_allow, locations[i])
                                        : st->ops->open_read(st->be, locations[i]);
        if (fd < 0) {
            artifact_archive_free(ar);
            return NULL;
        }
        ar->fds[ar->n++] = fd;
        if (artifact_tar_data_len(fd, &ar->lens[i]) != 0) {
            artifact_archive_free(ar);
            return NULL;
        }
        ar->total += ar->lens[i];
    }
    ar->total += 2 * TAR_BLOCK;
    *total = ar->total;
    return ar;
}

ssize_t artifact_archive_read(struct artifact_archive *ar, int64_t pos, char *buf, size_t max)
{
    if (pos >= ar->total || max == 0)
        return 0;
    int64_t base = 0;
    for (size_t i = 0; i < ar->n; i++) {
        if (pos < base + ar->lens[i]) {
            int64_t want = base + ar->lens[i] - pos;
            size_t len = (int64_t)max < want ? max : (size_t)want;
            ssize_t r;
            do
                r = pread(ar->fds[i], buf, len, pos - base);
            while (r < 0 && errno == EINTR);
            return r > 0 ? r : -1; /* a part shorter than its headers said */
        }
        base += ar->lens[i];
    }
    int64_t left = ar->total - pos;
    size_t len = (int64_t)max < left ? max : (size_t)left;
    memset(buf, 0, len);
    return (ssize_t)len;
}

void artifact_archive_free(struct artifact_archive *ar)
{
    if (ar == NULL)
        return;
    for (size_t i = 0; i < ar->n; i++)
        close(ar->fds[i]);
    free(ar->fds);
    free(ar->lens);
    free(ar);
}
