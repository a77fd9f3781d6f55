/* Fashion-MNIST loading and batch assembly. See data.h. */
#include "data.h"

#include <stdio.h>
#include <string.h>

#include "fm_error.h"

int fm_dataset_load(fm_dataset *d, const char *dir, const char *split, size_t limit, char *err,
                    size_t errlen)
{
    memset(d, 0, sizeof *d);
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, split) >=
        sizeof path) {
        fm_seterr(err, errlen, "data_dir too long");
        return FM_EINVAL;
    }
    int rc = idx_load(path, limit, &d->images, err, errlen);
    if (rc != FM_OK)
        return rc;
    if (d->images.ndims != 3 || d->images.dims[1] != 28 || d->images.dims[2] != 28) {
        fm_seterr(err, errlen, "%s: expected N x 28 x 28 images", path);
        rc = FM_EFORMAT;
        goto fail;
    }
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    rc = idx_load(path, limit, &d->labels, err, errlen);
    if (rc != FM_OK)
        goto fail;
    if (d->labels.ndims != 1 || d->labels.count != d->images.count) {
        fm_seterr(err, errlen, "%s: %zu labels for %zu images", path, d->labels.count,
                  d->images.count);
        rc = FM_EFORMAT;
        goto fail;
    }
    for (size_t i = 0; i < d->labels.count; i++) {
        if (d->labels.data[i] >= FM_CLASSES) {
            fm_seterr(err, errlen, "%s: label %u at %zu out of range", path, d->labels.data[i], i);
            rc = FM_EFORMAT;
            goto fail;
        }
    }
    d->count = d->images.count;
    return FM_OK;
fail:
    fm_dataset_free(d);
    return rc;
}

void fm_dataset_free(fm_dataset *d)
{
    idx_free(&d->images);
    idx_free(&d->labels);
    d->count = 0;
}

void fm_pixel_table(float table[256], bool standardize)
{
    for (int p = 0; p < 256; p++) {
        float v = (float)p / 255.0f;
        table[p] = standardize ? (v - FM_PIXEL_MEAN) / FM_PIXEL_STD : v;
    }
}

void fm_gather(const fm_dataset *d, const uint32_t *order, size_t first, size_t n,
               const float table[256], float *x, uint8_t *y)
{
    for (size_t i = 0; i < n; i++) {
        size_t s = order ? order[first + i] : first + i;
        const uint8_t *img = d->images.data + s * FM_PIXELS;
        float *row = x + i * FM_PIXELS;
        for (size_t j = 0; j < FM_PIXELS; j++)
            row[j] = table[img[j]];
        y[i] = d->labels.data[s];
    }
}
