/* Reader for IDX files (the MNIST / Fashion-MNIST container), plain or gzip-compressed.
 *
 * Format (big-endian): two zero bytes, a type byte (only 0x08 = unsigned byte is supported), a
 * dimension count, one u32 per dimension, then the items, row-major. */
#ifndef FM_IDX_H
#define FM_IDX_H

#include <stddef.h>
#include <stdint.h>

#define IDX_MAX_DIMS 4

typedef struct idx_array {
    uint8_t *data;               /* count * item_size bytes, owned; NULL when empty */
    uint32_t ndims;              /* as in the file, 1..IDX_MAX_DIMS */
    uint32_t dims[IDX_MAX_DIMS]; /* dims[0] is the item count in the file */
    size_t count;                /* items actually held: min(dims[0], max_items) */
    size_t item_size;            /* product of dims[1..ndims) (1 for a 1-d file) */
} idx_array;

/* idx_parse: parses an IDX image held in memory (buf[0..len)), keeping at most max_items items
 * (0 = all). Fails with FM_EFORMAT on bad magic, unsupported type, zero or too many dimensions,
 * size overflow, truncated data, or (when all items are kept) trailing bytes; FM_ENOMEM when the
 * copy cannot be allocated. On success *out owns a fresh copy (free with idx_free); on failure
 * *out is left empty. */
int idx_parse(const uint8_t *buf, size_t len, size_t max_items, idx_array *out, char *err,
              size_t errlen);

/* idx_load: reads the IDX file at `path` (gzip or plain; zlib decides) the same way as
 * idx_parse, but streaming: only the first max_items items (0 = all) are read and decompressed.
 * Fails with FM_EIO when the file cannot be opened or read, else as idx_parse. */
int idx_load(const char *path, size_t max_items, idx_array *out, char *err, size_t errlen);

/* idx_free: releases a->data and empties *a; safe on an empty or already-freed array. */
void idx_free(idx_array *a);

#endif
