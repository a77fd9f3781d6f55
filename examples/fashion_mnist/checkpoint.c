/* model.bin encoding, decoding and file I/O. See checkpoint.h for the format. */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fm_error.h"

#define CKPT_MAX_BYTES (1ull << 30)

/* ---- little-endian helpers --------------------------------------------------------------- */

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return p + 4;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return p + 8;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint8_t *put_floats(uint8_t *p, const float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        p = put32(p, u);
    }
    return p;
}

static void get_floats(const uint8_t *p, float *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = get32(p + 4 * i);
        memcpy(&f[i], &u, 4);
    }
}

/* crc32_of: zlib's crc32 over a buffer of any size (its length argument is a uInt). */
static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* ---- encode / decode --------------------------------------------------------------------- */

static size_t header_size(int ndims)
{
    return 8 + 4 + 4 + 8 + 4 + 4 * (size_t)ndims + 8;
}

int ckpt_encode(const mlp *m, const float *velocity, uint32_t epoch, uint64_t step, uint8_t **out,
                size_t *len)
{
    int ndims = m->nlayers + 1;
    size_t n = header_size(ndims) + 8 * m->nparams + 4;
    uint8_t *buf = malloc(n);
    if (buf == NULL)
        return FM_ENOMEM;
    uint8_t *p = buf;
    memcpy(p, CKPT_MAGIC, 8);
    p += 8;
    p = put32(p, CKPT_VERSION);
    p = put32(p, epoch);
    p = put64(p, step);
    p = put32(p, (uint32_t)ndims);
    for (int l = 0; l < ndims; l++)
        p = put32(p, (uint32_t)m->dims[l]);
    p = put64(p, m->nparams);
    p = put_floats(p, m->params, m->nparams);
    p = put_floats(p, velocity, m->nparams);
    p = put32(p, crc32_of(buf, (size_t)(p - buf)));
    *out = buf;
    *len = n;
    return FM_OK;
}

int ckpt_decode(const uint8_t *buf, size_t len, mlp *m, float *velocity, uint32_t *epoch,
                uint64_t *step, char *err, size_t errlen)
{
    const size_t fixed = 8 + 4 + 4 + 8 + 4;
    if (len < fixed || memcmp(buf, CKPT_MAGIC, 8) != 0) {
        fm_seterr(err, errlen, "checkpoint: bad magic (not a " CKPT_FILE " file)");
        return FM_EFORMAT;
    }
    uint32_t version = get32(buf + 8);
    if (version != CKPT_VERSION) {
        fm_seterr(err, errlen, "checkpoint: unsupported version %u (want %u)", version,
                  CKPT_VERSION);
        return FM_EFORMAT;
    }
    uint32_t ndims = get32(buf + 24);
    if (ndims < 2 || ndims > MLP_MAX_LAYERS + 1 || len < header_size((int)ndims)) {
        fm_seterr(err, errlen, "checkpoint: truncated or corrupt header");
        return FM_EFORMAT;
    }
    size_t nparams_at = fixed + 4 * (size_t)ndims;
    uint64_t nparams = get64(buf + nparams_at);
    size_t body = header_size((int)ndims);
    if (nparams > (len - body) / 8 || len != body + 8 * nparams + 4) {
        fm_seterr(err, errlen, "checkpoint: size %zu does not match its header", len);
        return FM_EFORMAT;
    }
    uint32_t want = get32(buf + len - 4);
    if (crc32_of(buf, len - 4) != want) {
        fm_seterr(err, errlen, "checkpoint: CRC mismatch (file corrupt)");
        return FM_EFORMAT;
    }
    int same = (int)ndims == m->nlayers + 1 && nparams == m->nparams;
    for (uint32_t l = 0; same && l < ndims; l++)
        same = get32(buf + fixed + 4 * l) == (uint32_t)m->dims[l];
    if (!same) {
        char shape[128] = "";
        size_t off = 0;
        for (uint32_t l = 0; l < ndims && off < sizeof shape; l++)
            off += (size_t)snprintf(shape + off, sizeof shape - off, "%s%u", l ? "-" : "",
                                    get32(buf + fixed + 4 * l));
        fm_seterr(err, errlen, "checkpoint: network shape %s does not match this model", shape);
        return FM_EINVAL;
    }
    const uint8_t *p = buf + body;
    get_floats(p, m->params, m->nparams);
    get_floats(p + 4 * m->nparams, velocity, m->nparams);
    *epoch = get32(buf + 12);
    *step = get64(buf + 16);
    return FM_OK;
}

/* ---- files ------------------------------------------------------------------------------- */

/* write_all: write(2) until done; returns 0 or -1 with errno set. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int ckpt_write_dir(const char *dir, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    char path[4096], tmp[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/" CKPT_FILE, dir) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/." CKPT_FILE ".tmp", dir) >= sizeof tmp) {
        fm_seterr(err, errlen, "checkpoint: directory path too long");
        return FM_EINVAL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fm_seterr(err, errlen, "checkpoint: open %s: %s", tmp, strerror(errno));
        return FM_EIO;
    }
    const char *what = NULL;
    if (write_all(fd, buf, len) != 0)
        what = "write";
    else if (fsync(fd) != 0)
        what = "fsync";
    int saved = errno;
    if (close(fd) != 0 && what == NULL) {
        what = "close";
        saved = errno;
    }
    if (what == NULL && rename(tmp, path) != 0) {
        what = "rename";
        saved = errno;
    }
    if (what != NULL) {
        fm_seterr(err, errlen, "checkpoint: %s %s: %s", what, tmp, strerror(saved));
        unlink(tmp);
        return FM_EIO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* best effort: persist the rename itself */
        (void)fsync(dfd);
        close(dfd);
    }
    return FM_OK;
}

int ckpt_read_dir(const char *dir, uint8_t **out, size_t *len, char *err, size_t errlen)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/" CKPT_FILE, dir) >= sizeof path) {
        fm_seterr(err, errlen, "checkpoint: directory path too long");
        return FM_EINVAL;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fm_seterr(err, errlen, "checkpoint: open %s: %s", path, strerror(errno));
        return FM_EIO;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fm_seterr(err, errlen, "checkpoint: stat %s: %s", path, strerror(errno));
        fclose(f);
        return FM_EIO;
    }
    if (st.st_size < 0 || (unsigned long long)st.st_size > CKPT_MAX_BYTES) {
        fm_seterr(err, errlen, "checkpoint: %s is implausibly large", path);
        fclose(f);
        return FM_EFORMAT;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL) {
        fclose(f);
        return FM_ENOMEM;
    }
    if (fread(buf, 1, n, f) != n || ferror(f)) {
        fm_seterr(err, errlen, "checkpoint: read %s: %s", path,
                  ferror(f) ? strerror(errno) : "short read");
        free(buf);
        fclose(f);
        return FM_EIO;
    }
    fclose(f);
    *out = buf;
    *len = n;
    return FM_OK;
}
