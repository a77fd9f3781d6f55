/* IDX reader. See idx.h.
 *
 * Both entry points go through one header parser and one body copier that read from a tiny
 * "source" abstraction (memory buffer or zlib gzFile), so the memory path used by the unit tests
 * exercises the same validation as the file path used by the trainer. */
#include "idx.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fm_error.h"

/* ---- sources --------------------------------------------------------------------------- */

typedef struct idx_src {
    const uint8_t *buf; /* memory source */
    size_t len, pos;
    gzFile gz; /* file source (when non-NULL) */
    const char *name;
} idx_src;

/* src_read: reads up to n bytes into dst; returns bytes read (< n only at end of input), or
 * FM_EIO on a read error, FM_EFORMAT on corrupt or truncated gzip data (message in err). */
static long long src_read(idx_src *s, void *dst, size_t n, char *err, size_t errlen)
{
    if (s->gz == NULL) {
        size_t k = s->len - s->pos < n ? s->len - s->pos : n;
        memcpy(dst, s->buf + s->pos, k);
        s->pos += k;
        return (long long)k;
    }
    size_t done = 0;
    while (done < n) {
        size_t want = n - done;
        if (want > (1u << 30))
            want = 1u << 30;
        int got = gzread(s->gz, (uint8_t *)dst + done, (unsigned)want);
        if (got < 0) {
            int zerr = 0;
            const char *msg = gzerror(s->gz, &zerr);
            fm_seterr(err, errlen, "%s: read failed: %s", s->name,
                      zerr == Z_ERRNO ? strerror(errno) : msg);
            return zerr == Z_ERRNO ? FM_EIO : FM_EFORMAT;
        }
        if (got == 0)
            break;
        done += (size_t)got;
    }
    return (long long)done;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* ---- parsing --------------------------------------------------------------------------- */

/* idx_read: the shared parser. Validates the header, allocates and fills out->data. */
static int idx_read(idx_src *s, size_t max_items, idx_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    uint8_t head[4];
    long long got = src_read(s, head, 4, err, errlen);
    if (got < 0)
        return (int)got;
    if (got < 4) {
        fm_seterr(err, errlen, "%s: truncated IDX header", s->name);
        return FM_EFORMAT;
    }
    if (head[0] != 0 || head[1] != 0) {
        fm_seterr(err, errlen, "%s: bad IDX magic (not an IDX file)", s->name);
        return FM_EFORMAT;
    }
    if (head[2] != 0x08) {
        fm_seterr(err, errlen, "%s: unsupported IDX element type 0x%02x (want 0x08 ubyte)", s->name,
                  head[2]);
        return FM_EFORMAT;
    }
    if (head[3] == 0 || head[3] > IDX_MAX_DIMS) {
        fm_seterr(err, errlen, "%s: unsupported IDX dimension count %u", s->name, head[3]);
        return FM_EFORMAT;
    }
    uint32_t ndims = head[3];
    uint8_t dimbuf[4 * IDX_MAX_DIMS];
    got = src_read(s, dimbuf, 4 * (size_t)ndims, err, errlen);
    if (got < 0)
        return (int)got;
    if ((size_t)got < 4 * (size_t)ndims) {
        fm_seterr(err, errlen, "%s: truncated IDX header", s->name);
        return FM_EFORMAT;
    }
    size_t item_size = 1;
    uint32_t dims[IDX_MAX_DIMS] = {0};
    for (uint32_t i = 0; i < ndims; i++) {
        dims[i] = be32(dimbuf + 4 * i);
        if (i > 0) {
            if (dims[i] == 0 || item_size > SIZE_MAX / dims[i]) {
                fm_seterr(err, errlen, "%s: bad IDX dimension %u = %u", s->name, i, dims[i]);
                return FM_EFORMAT;
            }
            item_size *= dims[i];
        }
    }
    size_t count = dims[0];
    if (max_items > 0 && max_items < count)
        count = max_items;
    if (count > 0 && item_size > (SIZE_MAX / 2) / count) {
        fm_seterr(err, errlen, "%s: IDX size overflows", s->name);
        return FM_EFORMAT;
    }
    size_t bytes = count * item_size;
    uint8_t *data = NULL;
    if (bytes > 0) {
        data = malloc(bytes);
        if (data == NULL) {
            fm_seterr(err, errlen, "%s: out of memory for %zu bytes", s->name, bytes);
            return FM_ENOMEM;
        }
        got = src_read(s, data, bytes, err, errlen);
        if (got < 0) {
            free(data);
            return (int)got;
        }
        if ((size_t)got < bytes) {
            fm_seterr(err, errlen, "%s: truncated IDX data (%lld of %zu bytes)", s->name, got,
                      bytes);
            free(data);
            return FM_EFORMAT;
        }
    }
    if (count == dims[0]) {
        uint8_t extra;
        got = src_read(s, &extra, 1, err, errlen);
        if (got != 0) {
            if (got > 0)
                fm_seterr(err, errlen, "%s: trailing bytes after IDX data", s->name);
            free(data);
            return got < 0 ? (int)got : FM_EFORMAT;
        }
    }
    out->data = data;
    out->ndims = ndims;
    memcpy(out->dims, dims, sizeof dims);
    out->count = count;
    out->item_size = item_size;
    return FM_OK;
}

int idx_parse(const uint8_t *buf, size_t len, size_t max_items, idx_array *out, char *err,
              size_t errlen)
{
    idx_src s = {.buf = buf, .len = len, .name = "<memory>"};
    return idx_read(&s, max_items, out, err, errlen);
}

int idx_load(const char *path, size_t max_items, idx_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL) {
        fm_seterr(err, errlen, "%s: %s", path, errno ? strerror(errno) : "cannot open");
        return FM_EIO;
    }
    gzbuffer(gz, 1u << 17);
    idx_src s = {.gz = gz, .name = path};
    int rc = idx_read(&s, max_items, out, err, errlen);
    int crc = gzclose_r(gz);
    if (rc == FM_OK && crc != Z_OK) {
        fm_seterr(err, errlen, "%s: close failed (zlib %d)", path, crc);
        idx_free(out);
        return FM_EIO;
    }
    return rc;
}

void idx_free(idx_array *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}
