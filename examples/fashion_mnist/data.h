/* Fashion-MNIST on disk and in memory: loading an images/labels pair and turning a list of
 * sample indices into a float batch.
 *
 * Images stay as bytes (47 MB for the training set rather than 188 MB as floats, which matters
 * when several workers share a machine); each batch is converted on the fly through a 256-entry
 * lookup table. */
#ifndef FM_DATA_H
#define FM_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "idx.h"

#define FM_PIXELS 784 /* 28 x 28 */
#define FM_CLASSES 10

/* Mean and standard deviation of the Fashion-MNIST training pixels scaled to [0, 1]. */
#define FM_PIXEL_MEAN 0.2860f
#define FM_PIXEL_STD 0.3530f

typedef struct fm_dataset {
    idx_array images; /* count x FM_PIXELS bytes */
    idx_array labels; /* count bytes, each < FM_CLASSES */
    size_t count;
} fm_dataset;

/* fm_dataset_load: loads `<dir>/<split>-images-idx3-ubyte.gz` and
 * `<dir>/<split>-labels-idx1-ubyte.gz` (split is "train" or "t10k"), keeping the first `limit`
 * samples (0 = all). Fails with FM_EIO (missing/unreadable file, message names it), FM_EFORMAT
 * (not 28x28 images, count mismatch, label >= 10), FM_ENOMEM. Free with fm_dataset_free. */
int fm_dataset_load(fm_dataset *d, const char *dir, const char *split, size_t limit, char *err,
                    size_t errlen);

void fm_dataset_free(fm_dataset *d);

/* fm_pixel_table: fills table[256] with the float each pixel value maps to: p / 255, then
 * (p / 255 - FM_PIXEL_MEAN) / FM_PIXEL_STD when `standardize`. */
void fm_pixel_table(float table[256], bool standardize);

/* fm_gather: copies samples order[first .. first+n) of d (or samples first .. first+n when
 * order is NULL) into x (n x FM_PIXELS floats, through `table`) and y (n labels). */
void fm_gather(const fm_dataset *d, const uint32_t *order, size_t first, size_t n,
               const float table[256], float *x, uint8_t *y);

#endif
