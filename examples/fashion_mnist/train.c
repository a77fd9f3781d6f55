/* fashion_mnist: data-parallel training of a 784-256-128-10 MLP on Fashion-MNIST with the
 * Trainyard C SDK.
 *
 * Every rank holds the whole dataset and an identical copy of the model. Each step, all ranks
 * walk the same shuffled order; rank r takes its contiguous share (ty_shard) of the global batch,
 * computes the gradient SUM over it, the ranks all-reduce the flat gradient buffer once, divide
 * by the global batch size and take the same SGD-momentum step. One, two or four workers at the
 * same batch_size therefore train the same model, up to float summation order.
 *
 * Each epoch ends with a sharded test evaluation and a ty_report() of the epoch's metrics, with
 * rank 0 writing model.bin (checkpoint.h) every checkpoint_every epochs. When the SDK names a
 * checkpoint to resume from, rank 0 reads it and broadcasts its bytes, and training continues
 * with the next epoch (shuffles and learning rate depend only on the epoch number, so a resumed
 * run follows the same path as an uninterrupted one).
 *
 * Built with FM_CUDA (examples/fashion_mnist_cuda), the same program trains on the GPU: the
 * model, its momentum and the gradient live in device memory (fm_device.h), the gradient is
 * all-reduced there (ty_allreduce on a device buffer: NCCL), and the host copy is refreshed only
 * for checkpoints, which stay the same model.bin, so a job resumes across the two builds.
 *
 * Exit status: 0 on success, 2 for a usage or configuration error, 3 when the final accuracy is
 * below the configured min_accuracy (a CI bar), 1 for anything else. */
#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <trainyard.h>

#include "checkpoint.h"
#include "config.h"
#include "data.h"
#include "fm_error.h"
#include "mlp.h"
#include "rng.h"
#ifdef FM_CUDA
#include "fm_device.h"
#endif

#define EVAL_CHUNK 1000
#define SHUFFLE_SALT 0x53485546464c45ull /* "SHUFFLE": shuffles never reuse init's stream */
#define EXIT_USAGE 2
#define EXIT_BELOW_BAR 3

static const int layer_dims[] = {FM_PIXELS, 256, 128, FM_CLASSES};

typedef struct trainer {
    ty_ctx *ctx;
    int rank, world;
    fm_config cfg;
    fm_dataset train, test;
    float table[256];
    mlp net;
    mlp_work work;
    float *velocity; /* momentum buffer, net.nparams */
    float *grad;     /* gradient sums, net.nparams; all-reduced in place */
    float *x;        /* batch inputs, max_batch x FM_PIXELS */
    uint8_t *y;      /* batch labels */
    uint32_t *order; /* this epoch's shuffle of the training set */
    uint32_t epoch;  /* epochs completed */
    uint64_t step;   /* optimizer steps taken */
    double final_accuracy;
#ifdef FM_CUDA
    fm_dev *dev; /* the model on the GPU */
#endif
    char prev_ckpt[4096]; /* standalone only: last checkpoint, removed once superseded */
} trainer;

/* ---- messages ---------------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static void errorf(const trainer *t, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (t->world > 1)
        fprintf(stderr, "fashion_mnist: rank %d: %s\n", t->rank, msg);
    else
        fprintf(stderr, "fashion_mnist: %s\n", msg);
}

/* Rank 0's progress lines on stdout (the other ranks would print the same numbers). */
#define LOG0(t, ...)                                                                               \
    do {                                                                                           \
        if ((t)->rank == 0) {                                                                      \
            printf(__VA_ARGS__);                                                                   \
            fflush(stdout);                                                                        \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- collective helpers ------------------------------------------------------------------ */

/* agree: all-reduces "this rank is fine" so that a failure on one rank (a missing file, an
 * allocation) stops every rank at the same point instead of leaving the others blocked in the
 * next collective. Returns 1 when every rank passed ok = 1, else 0. */
static int agree(trainer *t, int ok)
{
    int32_t v = ok ? 1 : 0;
    int rc = ty_allreduce(t->ctx, &v, 1, TY_INT32, TY_MIN);
    if (rc != 0) {
        errorf(t, "allreduce: %s", ty_strerror(rc));
        return 0;
    }
    if (v == 0 && ok)
        errorf(t, "stopping: another rank failed (see its message)");
    return v == 1;
}

/* ---- setup ------------------------------------------------------------------------------- */

/* setup_local: everything a rank does on its own: data, model, buffers. Returns 0 or an exit
 * status, having printed why. */
static int setup_local(trainer *t)
{
    char err[512] = "";
    size_t ntrain = (size_t)t->cfg.limit_train, ntest = (size_t)t->cfg.limit_test;
    if (fm_dataset_load(&t->train, t->cfg.data_dir, "train", ntrain, err, sizeof err) != 0 ||
        fm_dataset_load(&t->test, t->cfg.data_dir, "t10k", ntest, err, sizeof err) != 0) {
        errorf(t, "cannot load the dataset: %s (set train_loop_config.data_dir)", err);
        return 1;
    }
    if (mlp_create(&t->net, layer_dims, 4, err, sizeof err) != 0) {
        errorf(t, "%s", err);
        return 1;
    }
    size_t max_batch =
        (size_t)t->cfg.batch_size > EVAL_CHUNK ? (size_t)t->cfg.batch_size : EVAL_CHUNK;
    size_t np = t->net.nparams;
    t->velocity = calloc(np, sizeof(float));
    t->grad = calloc(np, sizeof(float));
    t->x = malloc(max_batch * FM_PIXELS * sizeof(float));
    t->y = malloc(max_batch);
    t->order = malloc(t->train.count * sizeof(uint32_t));
    if (t->velocity == NULL || t->grad == NULL || t->x == NULL || t->y == NULL ||
        t->order == NULL || mlp_work_create(&t->work, &t->net, max_batch) != 0) {
        errorf(t, "out of memory");
        return 1;
    }
    fm_pixel_table(t->table, t->cfg.standardize);
    mlp_init_he(&t->net, (uint64_t)t->cfg.seed);
#ifdef FM_CUDA
    if (fm_dev_open(&t->dev, &t->net, max_batch, err, sizeof err) != 0 ||
        fm_dev_upload(t->dev, &t->net, t->velocity) != 0) {
        errorf(t, "GPU: %s", err[0] ? err : "cannot copy the model to the device");
        return 1;
    }
#endif
    return 0;
}

/* resume: when rank 0's SDK context names a checkpoint directory (a restarted or resumed job)
 * or, failing that, the config's resume_from does, rank 0 reads model.bin and broadcasts it;
 * every rank decodes the same bytes into the model and optimizer. Rank 0 decides for all (a
 * length of 0 means "fresh start", UINT64_MAX "rank 0 failed"). Returns 0 or 1. */
static int resume(trainer *t)
{
    uint64_t len = 0;
    uint8_t *buf = NULL;
    char err[512] = "";
    const char *dir = NULL;
    if (t->rank == 0) {
        dir = ty_checkpoint_dir(t->ctx);
        if (dir == NULL && t->cfg.resume_from[0] != '\0')
            dir = t->cfg.resume_from;
    }
    if (dir != NULL) {
        size_t n = 0;
        if (ckpt_read_dir(dir, &buf, &n, err, sizeof err) != 0) {
            errorf(t, "cannot resume: %s", err);
            len = UINT64_MAX;
        } else {
            len = n;
        }
    }
    int rc = ty_broadcast(t->ctx, &len, sizeof len, 0);
    if (rc == 0 && len != 0 && len != UINT64_MAX) {
        if (t->rank != 0 && (buf = malloc((size_t)len)) == NULL)
            errorf(t, "out of memory for a %" PRIu64 "-byte checkpoint", len);
        if (!agree(t, buf != NULL)) {
            free(buf);
            return 1;
        }
        rc = ty_broadcast(t->ctx, buf, (size_t)len, 0);
    }
    if (rc != 0) {
        errorf(t, "broadcast: %s", ty_strerror(rc));
        free(buf);
        return 1;
    }
    if (len == UINT64_MAX) {
        if (t->rank != 0)
            errorf(t, "rank 0 could not read the checkpoint to resume from");
        return 1;
    }
    if (len == 0)
        return 0;
    rc = ckpt_decode(buf, (size_t)len, &t->net, t->velocity, &t->epoch, &t->step, err, sizeof err);
    free(buf);
    if (rc != 0) {
        errorf(t, "cannot resume from %s: %s", dir ? dir : "rank 0's checkpoint", err);
        return 1;
    }
    LOG0(t, "resumed from %s after epoch %" PRIu32 " (step %" PRIu64 ")\n", dir, t->epoch, t->step);
#ifdef FM_CUDA
    if (fm_dev_upload(t->dev, &t->net, t->velocity) != 0) {
        errorf(t, "GPU: cannot copy the resumed model to the device");
        return 1;
    }
#endif
    return 0;
}

/* ---- one epoch --------------------------------------------------------------------------- */

/* train_epoch: one pass over the training set; adds this rank's summed loss and hit count to
 * sums[0] and sums[1]. Returns 0 or 1 (a failed collective, reported). */
static int train_epoch(trainer *t, double sums[2])
{
    size_t n = t->train.count, gb = (size_t)t->cfg.batch_size, np = t->net.nparams;
    rng r;
    rng_seed(&r, (uint64_t)t->cfg.seed ^ SHUFFLE_SALT, t->epoch);
    rng_permutation(&r, t->order, n);
    float lr = (float)(t->cfg.lr * pow(t->cfg.lr_decay, (double)t->epoch));
    float mu = (float)t->cfg.momentum;
    size_t hits = 0;
    for (size_t first = 0; first < n; first += gb) {
        size_t bsz = n - first < gb ? n - first : gb, lo, hi;
        ty_shard(t->ctx, bsz, &lo, &hi);
        fm_gather(&t->train, t->order, first + lo, hi - lo, t->table, t->x, t->y);
#ifdef FM_CUDA
        sums[0] += fm_dev_loss_grad(t->dev, t->x, t->y, hi - lo, &hits);
        float *grad = fm_dev_grad(t->dev);
#else
        memset(t->grad, 0, np * sizeof(float));
        sums[0] += mlp_loss_grad(&t->net, &t->work, t->x, t->y, hi - lo, t->grad, &hits);
        float *grad = t->grad;
#endif
        int rc = ty_allreduce(t->ctx, grad, np, TY_FLOAT32, TY_SUM);
        if (rc != 0) {
            errorf(t, "gradient allreduce at step %" PRIu64 ": %s", t->step, ty_strerror(rc));
            return 1;
        }
#ifdef FM_CUDA
        fm_dev_sgd(t->dev, lr, mu, 1.0f / (float)bsz);
#else
        sgd_momentum_step(t->net.params, t->velocity, t->grad, np, lr, mu, 1.0f / (float)bsz);
#endif
        t->step++;
    }
    sums[1] += (double)hits;
    return 0;
}

/* evaluate: this rank's share of the test set; adds its summed loss and hits to sums[0..1]. */
static void evaluate(trainer *t, double sums[2])
{
    size_t lo, hi, hits = 0;
    ty_shard(t->ctx, t->test.count, &lo, &hi);
    for (size_t i = lo; i < hi; i += EVAL_CHUNK) {
        size_t k = hi - i < EVAL_CHUNK ? hi - i : EVAL_CHUNK;
        fm_gather(&t->test, NULL, i, k, t->table, t->x, t->y);
#ifdef FM_CUDA
        sums[0] += fm_dev_evaluate(t->dev, t->x, t->y, k, &hits);
#else
        sums[0] += mlp_evaluate(&t->net, &t->work, t->x, t->y, k, &hits);
#endif
    }
    sums[1] += (double)hits;
}

/* ---- checkpoints and reports ------------------------------------------------------------- */

/* remove_checkpoint_dir: deletes a directory this program created (model.bin, then the dir). */
static void remove_checkpoint_dir(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" CKPT_FILE, dir);
    (void)unlink(path);
    (void)rmdir(dir);
}

/* write_checkpoint: rank 0 only. Creates a fresh directory under checkpoint_root (or $TMPDIR,
 * or /tmp) holding model.bin; its path goes to dir[dirlen]. Returns 0 or 1 (reported). */
static int write_checkpoint(trainer *t, char *dir, size_t dirlen)
{
    const char *root = t->cfg.checkpoint_root[0] ? t->cfg.checkpoint_root : getenv("TMPDIR");
    if (root == NULL || root[0] == '\0')
        root = "/tmp";
    if ((size_t)snprintf(dir, dirlen, "%s/fashion_mnist-e%03" PRIu32 "-XXXXXX", root, t->epoch) >=
        dirlen) {
        errorf(t, "checkpoint_root too long");
        return 1;
    }
    if (mkdtemp(dir) == NULL) {
        errorf(t, "cannot create a checkpoint directory in %s: %s", root, strerror(errno));
        return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[512] = "";
#ifdef FM_CUDA
    if (fm_dev_download(t->dev, &t->net, t->velocity) != 0) {
        errorf(t, "GPU: cannot copy the model back for a checkpoint");
        remove_checkpoint_dir(dir);
        return 1;
    }
#endif
    int rc = ckpt_encode(&t->net, t->velocity, t->epoch, t->step, &buf, &len);
    if (rc == 0)
        rc = ckpt_write_dir(dir, buf, len, err, sizeof err);
    free(buf);
    if (rc != 0) {
        errorf(t, "cannot write checkpoint: %s", rc == FM_ENOMEM ? "out of memory" : err);
        remove_checkpoint_dir(dir);
        return 1;
    }
    return 0;
}

/* report_epoch: builds the epoch's metrics, has rank 0 write a checkpoint when one is due, and
 * calls ty_report on every rank (the SDK requires the same number of calls everywhere). */
static int report_epoch(trainer *t, const double all[4], double lr, double seconds)
{
    double ntrain = (double)t->train.count, ntest = (double)t->test.count;
    json_t *metrics = json_pack(
        "{s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "epoch", (json_int_t)t->epoch, "step",
        (json_int_t)t->step, "loss", all[0] / ntrain, "train_accuracy", all[1] / ntrain,
        "test_loss", all[2] / ntest, "accuracy", all[3] / ntest, "lr", lr, "epoch_time_s", seconds);
    if (metrics == NULL) {
        errorf(t, "out of memory");
        return 1;
    }
    int every = (int)t->cfg.checkpoint_every;
    int due = every > 0 && (t->epoch % (uint32_t)every == 0 || t->epoch == t->cfg.epochs);
    char dir[4096] = "";
    int failed = 0;
    if (due && t->rank == 0)
        failed = write_checkpoint(t, dir, sizeof dir);
    int rc = failed ? 0 : ty_report(t->ctx, metrics, dir[0] ? dir : NULL);
    json_decref(metrics);
    if (failed)
        return 1;
    if (rc != 0) {
        errorf(t, "report for epoch %" PRIu32 ": %s", t->epoch, ty_strerror(rc));
        return 1;
    }
    if (dir[0] != '\0' && ty_is_standalone(t->ctx)) {
        /* Nobody else owns these directories: keep only the newest. */
        if (t->prev_ckpt[0] != '\0')
            remove_checkpoint_dir(t->prev_ckpt);
        snprintf(t->prev_ckpt, sizeof t->prev_ckpt, "%s", dir);
    }
    LOG0(t,
         "epoch %" PRIu32 "/%" PRId64 ": loss %.4f train_acc %.4f test_loss %.4f "
         "test_acc %.4f lr %.4g %.2f s%s%s\n",
         t->epoch, t->cfg.epochs, all[0] / ntrain, all[1] / ntrain, all[2] / ntest, all[3] / ntest,
         lr, seconds, dir[0] ? " checkpoint " : "", dir);
    return 0;
}

/* ---- main -------------------------------------------------------------------------------- */

/* run: the whole training; returns the process exit status. */
static int run(trainer *t)
{
    char err[512] = "";
    fm_config_defaults(&t->cfg);
    if (fm_config_from_json(&t->cfg, ty_config(t->ctx), err, sizeof err) != 0) {
        errorf(t, "%s", err); /* every rank sees the same config and stops here */
        return EXIT_USAGE;
    }
    if (t->cfg.blas_threads > 0)
        openblas_set_num_threads((int)t->cfg.blas_threads);
    if (t->rank == 0) {
        json_t *eff = fm_config_to_json(&t->cfg);
        char *s = eff ? json_dumps(eff, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        LOG0(t, "fashion_mnist: %d worker(s), config %s\n", t->world, s ? s : "?");
        free(s);
        json_decref(eff);
    }
    if (!agree(t, setup_local(t) == 0))
        return 1;
    /* Same seed everywhere already gives identical weights; broadcasting rank 0's makes it
     * independent of libm differences between nodes. */
    int rc = ty_broadcast(t->ctx, t->net.params, t->net.nparams * sizeof(float), 0);
    if (rc != 0) {
        errorf(t, "broadcast: %s", ty_strerror(rc));
        return 1;
    }
    if (resume(t) != 0)
        return 1;
    LOG0(t, "train %zu, test %zu images, %zu parameters, global batch %" PRId64 "\n",
         t->train.count, t->test.count, t->net.nparams, t->cfg.batch_size);

    double all[4] = {0};
    int evaluated = 0;
    while (t->epoch < (uint64_t)t->cfg.epochs) {
        double t0 = now_s(), lr = t->cfg.lr * pow(t->cfg.lr_decay, (double)t->epoch);
        memset(all, 0, sizeof all);
        if (train_epoch(t, all) != 0)
            return 1;
        t->epoch++;
        evaluate(t, all + 2);
        rc = ty_allreduce(t->ctx, all, 4, TY_FLOAT64, TY_SUM);
        if (rc != 0) {
            errorf(t, "metrics allreduce: %s", ty_strerror(rc));
            return 1;
        }
        evaluated = 1;
        if (report_epoch(t, all, lr, now_s() - t0) != 0)
            return 1;
    }
    if (!evaluated) { /* resumed from a finished run: evaluate what was loaded */
        evaluate(t, all + 2);
        rc = ty_allreduce(t->ctx, all, 4, TY_FLOAT64, TY_SUM);
        if (rc != 0) {
            errorf(t, "metrics allreduce: %s", ty_strerror(rc));
            return 1;
        }
    }
    t->final_accuracy = all[3] / (double)t->test.count;
    LOG0(t, "final test accuracy: %.4f\n", t->final_accuracy);
    if (t->final_accuracy < t->cfg.min_accuracy) {
        errorf(t, "final test accuracy %.4f is below min_accuracy %.4f", t->final_accuracy,
               t->cfg.min_accuracy);
        return EXIT_BELOW_BAR;
    }
    return 0;
}

static void trainer_free(trainer *t)
{
#ifdef FM_CUDA
    fm_dev_close(t->dev);
#endif
    fm_dataset_free(&t->train);
    fm_dataset_free(&t->test);
    mlp_work_destroy(&t->work);
    mlp_destroy(&t->net);
    free(t->velocity);
    free(t->grad);
    free(t->x);
    free(t->y);
    free(t->order);
}

int main(int argc, char **argv)
{
    trainer t = {0};
    int rc = ty_init(&t.ctx, &argc, &argv);
    if (rc != 0) {
        fprintf(stderr, "fashion_mnist: cannot start: %s\n", ty_strerror(rc));
        return rc == TY_ECONFIG ? EXIT_USAGE : 1;
    }
    t.rank = ty_world_rank(t.ctx);
    t.world = ty_world_size(t.ctx);
    int status;
    if (argc > 1) {
        int help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
        FILE *f = help ? stdout : stderr;
        fprintf(f,
                "usage: %s [--config FILE]\n"
                "Trains a 784-256-128-10 MLP on Fashion-MNIST, alone or as a Trainyard job.\n"
                "FILE holds the train_loop_config, a JSON object with these optional keys:\n",
                argv[0]);
        fm_config_print_help(f);
        status = help ? 0 : EXIT_USAGE;
    } else {
        status = run(&t);
    }
    trainer_free(&t);
    ty_finish(&t.ctx);
    return status;
}
