/* Checkpoint file `model.bin`: the model's parameters and the optimizer's momentum buffer.
 *
 * Layout (all integers and floats little-endian, whatever the host):
 *   offset  size          field
 *   0       8             magic "TYFMLP\r\n"
 *   8       4             version (CKPT_VERSION)
 *   12      4             epoch: epochs completed
 *   16      8             step: optimizer steps taken
 *   24      4             ndims: number of layer sizes (nlayers + 1)
 *   28      4 * ndims     layer sizes
 *   ..      8             nparams
 *   ..      4 * nparams   parameters (float32, mlp.h layout)
 *   ..      4 * nparams   momentum buffer (float32)
 *   ..      4             CRC-32 (zlib) of every preceding byte
 * Encoding and decoding work on memory buffers so that rank 0 can read the file once and
 * broadcast its bytes; ckpt_write_dir / ckpt_read_dir do the file I/O. */
#ifndef FM_CHECKPOINT_H
#define FM_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

#define CKPT_FILE "model.bin"
#define CKPT_VERSION 1u
#define CKPT_MAGIC "TYFMLP\r\n"

/* ckpt_encode: serialises m->params, velocity[0..m->nparams), epoch and step into a fresh
 * buffer (*out, *len; caller frees *out). Fails only with FM_ENOMEM. */
int ckpt_encode(const mlp *m, const float *velocity, uint32_t epoch, uint64_t step, uint8_t **out,
                size_t *len);

/* ckpt_decode: parses buf[0..len) into m->params and velocity (m->nparams floats), *epoch and
 * *step. m must already be created with the expected layer sizes; a checkpoint of another shape
 * fails with FM_EINVAL. Bad magic, unknown version, truncation, trailing bytes or a CRC mismatch
 * fail with FM_EFORMAT. Nothing is written to m, velocity, epoch or step on failure. */
int ckpt_decode(const uint8_t *buf, size_t len, mlp *m, float *velocity, uint32_t *epoch,
                uint64_t *step, char *err, size_t errlen);

/* ckpt_write_dir: writes buf[0..len) to dir/model.bin atomically (temporary file, fsync,
 * rename, fsync of the directory). Fails with FM_EIO naming the failing call. */
int ckpt_write_dir(const char *dir, const uint8_t *buf, size_t len, char *err, size_t errlen);

/* ckpt_read_dir: reads dir/model.bin into a fresh buffer (*out, *len; caller frees).
 * Fails with FM_EIO (missing or unreadable file), FM_EFORMAT (larger than 1 GiB), FM_ENOMEM. */
int ckpt_read_dir(const char *dir, uint8_t **out, size_t *len, char *err, size_t errlen);

#endif
