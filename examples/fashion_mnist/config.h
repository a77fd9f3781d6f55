/* The trainer's options, read from the job's train_loop_config (a JSON object).
 *
 * Every option is optional; fm_config.c holds the one table of names, types, defaults and
 * bounds. Unknown keys are rejected so that a typo ("epoch") does not silently train with the
 * default. */
#ifndef FM_CONFIG_H
#define FM_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct fm_config {
    int64_t epochs;             /* passes over the training set */
    int64_t batch_size;         /* GLOBAL batch, split across workers */
    double lr;                  /* peak learning rate */
    double momentum;            /* SGD momentum */
    double lr_decay;            /* learning rate is multiplied by this after every epoch */
    int64_t seed;               /* initial weights and shuffles */
    char data_dir[1024];        /* holds the four *-ubyte.gz files */
    int64_t limit_train;        /* use the first N training images (0 = all) */
    int64_t limit_test;         /* evaluate on the first N test images (0 = all) */
    int64_t checkpoint_every;   /* epochs between checkpoints, and after the last (0 = none) */
    char checkpoint_root[1024]; /* where checkpoint directories are created ("" = $TMPDIR) */
    char resume_from[1024];     /* checkpoint dir to start from when the SDK names none ("") */
    int64_t blas_threads;       /* OpenBLAS threads per worker (0 = leave OpenBLAS's default) */
    double min_accuracy;        /* exit 3 when the final test accuracy is below (0 = off) */
    bool standardize;           /* subtract the pixel mean, divide by the std after /255 */
} fm_config;

/* fm_config_defaults: fills *c with every option's default. */
void fm_config_defaults(fm_config *c);

/* fm_config_from_json: applies the keys of `obj` (a JSON object, or NULL for none) on top of
 * *c. Fails with FM_EINVAL and a message naming the key when obj is not an object, a key is
 * unknown, a value has the wrong type or is out of bounds; *c may then be partly updated. */
int fm_config_from_json(fm_config *c, const json_t *obj, char *err, size_t errlen);

/* fm_config_print_help: one line per option (name, type, default, meaning) to f. */
void fm_config_print_help(FILE *f);

/* fm_config_to_json: the effective configuration, for logging (new reference). */
json_t *fm_config_to_json(const fm_config *c);

#endif
