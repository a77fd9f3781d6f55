/* Unit tests for the Fashion-MNIST example's pure parts (examples/fashion_mnist/, library tymlp):
 * MLP gradients, SGD with momentum, data-parallel gradient sums, the IDX reader, the checkpoint
 * file, the config table, the shuffle and the pixel table. */
#include "ty_test.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint.h"
#include "config.h"
#include "data.h"
#include "fm_error.h"
#include "idx.h"
#include "mlp.h"
#include "rng.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* A tiny network with random weights and a batch of random inputs and labels. */
typedef struct tiny {
    mlp net;
    mlp_work work;
    float *x;
    uint8_t *y;
    size_t n;
} tiny;

static void tiny_make(tiny *t, const int *dims, int ndims, size_t n, uint64_t seed)
{
    assert_int_equal(mlp_create(&t->net, dims, ndims, NULL, 0), FM_OK);
    mlp_init_he(&t->net, seed);
    /* non-zero biases so that their gradients are exercised away from zero */
    rng r;
    rng_seed(&r, seed, 99);
    for (int l = 0; l < t->net.nlayers; l++)
        for (int j = 0; j < dims[l + 1]; j++)
            t->net.params[t->net.b_off[l] + (size_t)j] = (float)(0.1 * rng_normal(&r));
    assert_int_equal(mlp_work_create(&t->work, &t->net, n), FM_OK);
    t->n = n;
    t->x = malloc(n * (size_t)dims[0] * sizeof(float));
    t->y = malloc(n);
    assert_non_null(t->x);
    assert_non_null(t->y);
    for (size_t i = 0; i < n * (size_t)dims[0]; i++)
        t->x[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < n; i++)
        t->y[i] = (uint8_t)rng_below(&r, (uint64_t)dims[ndims - 1]);
}

static void tiny_free(tiny *t)
{
    mlp_work_destroy(&t->work);
    mlp_destroy(&t->net);
    free(t->x);
    free(t->y);
}

/* Writes `len` bytes to a fresh file in a fresh temp dir, gzip'd when gz; path to out[outlen]. */
static void write_file(char *out, size_t outlen, const uint8_t *buf, size_t len, int gz)
{
    char dir[] = "/tmp/test_mlp-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(out, outlen, "%s/data%s", dir, gz ? ".gz" : "");
    if (gz) {
        gzFile f = gzopen(out, "wb");
        assert_non_null(f);
        if (len > 0)
            assert_int_equal(gzwrite(f, buf, (unsigned)len), (int)len);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(out, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(buf, 1, len, f), len);
        assert_int_equal(fclose(f), 0);
    }
}

static void remove_file_and_dir(const char *path)
{
    assert_int_equal(unlink(path), 0);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(rmdir(dir), 0);
}

/* A valid IDX image: 3 items of 2 x 2 bytes, values 0..11. Returns its length. */
static size_t make_idx3(uint8_t *buf)
{
    const uint8_t head[] = {0, 0, 0x08, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
    memcpy(buf, head, sizeof head);
    for (int i = 0; i < 12; i++)
        buf[sizeof head + (size_t)i] = (uint8_t)i;
    return sizeof head + 12;
}

/* ---- MLP --------------------------------------------------------------------------------- */

static void mlp_backward_matches_finite_differences(void **state)
{
    (void)state;
    const int dims[] = {5, 4, 3, 3};
    tiny t;
    tiny_make(&t, dims, 4, 6, 7);
    size_t np = t.net.nparams;
    float *grad = calloc(np, sizeof(float));
    assert_non_null(grad);
    mlp_loss_grad(&t.net, &t.work, t.x, t.y, t.n, grad, NULL);

    const float eps = 1e-3f;
    double worst = 0.0;
    for (size_t i = 0; i < np; i++) {
        float saved = t.net.params[i];
        t.net.params[i] = saved + eps;
        double up = mlp_evaluate(&t.net, &t.work, t.x, t.y, t.n, NULL);
        t.net.params[i] = saved - eps;
        double down = mlp_evaluate(&t.net, &t.work, t.x, t.y, t.n, NULL);
        t.net.params[i] = saved;
        double numeric = (up - down) / (2.0 * eps);
        double diff = fabs(numeric - grad[i]) / (1e-2 + fabs(numeric) + fabs(grad[i]));
        if (diff > worst)
            worst = diff;
    }
    assert_true(worst < 1e-2);
    free(grad);
    tiny_free(&t);
}

static void mlp_gradient_sums_of_two_halves_equal_full_batch(void **state)
{
    (void)state;
    const int dims[] = {6, 8, 5, 4};
    tiny t;
    tiny_make(&t, dims, 4, 10, 11);
    size_t np = t.net.nparams;
    float *full = calloc(np, sizeof(float)), *halves = calloc(np, sizeof(float));
    float *part = calloc(np, sizeof(float));
    assert_non_null(full);
    assert_non_null(halves);
    assert_non_null(part);

    double loss_full = mlp_loss_grad(&t.net, &t.work, t.x, t.y, 10, full, NULL);
    /* rank 0 takes rows 0..4, rank 1 rows 4..10 (uneven on purpose); each starts from zero
     * and the two buffers are summed, as the all-reduce does */
    double loss_a = mlp_loss_grad(&t.net, &t.work, t.x, t.y, 4, halves, NULL);
    double loss_b = mlp_loss_grad(&t.net, &t.work, t.x + 4 * 6, t.y + 4, 6, part, NULL);
    for (size_t i = 0; i < np; i++)
        halves[i] += part[i];

    assert_true(fabs(loss_full - (loss_a + loss_b)) < 1e-5 * fabs(loss_full));
    for (size_t i = 0; i < np; i++)
        assert_true(fabsf(full[i] - halves[i]) <= 1e-5f * (1.0f + fabsf(full[i])));
    free(full);
    free(halves);
    free(part);
    tiny_free(&t);
}

static void mlp_loss_grad_with_no_rows_adds_nothing(void **state)
{
    (void)state;
    const int dims[] = {3, 2};
    tiny t;
    tiny_make(&t, dims, 2, 1, 3);
    float grad[8] = {0};
    assert_true(mlp_loss_grad(&t.net, &t.work, t.x, t.y, 0, grad, NULL) == 0.0);
    for (size_t i = 0; i < t.net.nparams; i++)
        assert_true(grad[i] == 0.0f);
    tiny_free(&t);
}

static void mlp_create_rejects_bad_sizes(void **state)
{
    (void)state;
    mlp m;
    char err[128];
    const int one[] = {3};
    const int zero[] = {3, 0, 2};
    assert_int_equal(mlp_create(&m, one, 1, err, sizeof err), FM_EINVAL);
    assert_int_equal(mlp_create(&m, zero, 3, err, sizeof err), FM_EINVAL);
    assert_non_null(strstr(err, "layer size 1"));
}

static void mlp_he_init_is_deterministic_with_he_scale(void **state)
{
    (void)state;
    const int dims[] = {784, 256, 10};
    mlp a, b;
    assert_int_equal(mlp_create(&a, dims, 3, NULL, 0), FM_OK);
    assert_int_equal(mlp_create(&b, dims, 3, NULL, 0), FM_OK);
    mlp_init_he(&a, 5);
    mlp_init_he(&b, 5);
    assert_memory_equal(a.params, b.params, a.nparams * sizeof(float));
    size_t nw = 784 * 256;
    double sq = 0.0;
    for (size_t i = 0; i < nw; i++)
        sq += (double)a.params[a.w_off[0] + i] * a.params[a.w_off[0] + i];
    double std = sqrt(sq / (double)nw), want = sqrt(2.0 / 784.0);
    assert_true(fabs(std - want) < 0.02 * want);
    for (int j = 0; j < 256; j++)
        assert_true(a.params[a.b_off[0] + (size_t)j] == 0.0f);
    mlp_init_he(&b, 6);
    assert_memory_not_equal(a.params, b.params, a.nparams * sizeof(float));
    mlp_destroy(&a);
    mlp_destroy(&b);
}

/* ---- SGD --------------------------------------------------------------------------------- */

static void sgd_momentum_step_follows_the_formula(void **state)
{
    (void)state;
    float p[2] = {1.0f, -2.0f}, v[2] = {0.5f, 0.0f};
    const float g[2] = {4.0f, -8.0f};
    sgd_momentum_step(p, v, g, 2, 0.1f, 0.9f, 0.25f);
    /* v = 0.9 v + g / 4;  p -= 0.1 v */
    assert_float_equal(v[0], 0.45f + 1.0f, 1e-6);
    assert_float_equal(v[1], -2.0f, 1e-6);
    assert_float_equal(p[0], 1.0f - 0.145f, 1e-6);
    assert_float_equal(p[1], -2.0f + 0.2f, 1e-6);
}

static void sgd_steps_decrease_loss_on_separable_data(void **state)
{
    (void)state;
    /* three Gaussian blobs in 4-d, one per class */
    const int dims[] = {4, 16, 3};
    const size_t n = 60;
    mlp m;
    mlp_work w;
    assert_int_equal(mlp_create(&m, dims, 3, NULL, 0), FM_OK);
    mlp_init_he(&m, 1);
    assert_int_equal(mlp_work_create(&w, &m, n), FM_OK);
    float x[60 * 4];
    uint8_t y[60];
    rng r;
    rng_seed(&r, 2, 0);
    for (size_t i = 0; i < n; i++) {
        y[i] = (uint8_t)(i % 3);
        for (int j = 0; j < 4; j++)
            x[i * 4 + (size_t)j] = (float)((j == y[i] ? 2.0 : 0.0) + 0.3 * rng_normal(&r));
    }
    float *grad = calloc(m.nparams, sizeof(float)), *vel = calloc(m.nparams, sizeof(float));
    assert_non_null(grad);
    assert_non_null(vel);
    double first = mlp_evaluate(&m, &w, x, y, n, NULL) / (double)n, prev = first;
    int decreases = 0;
    for (int step = 0; step < 30; step++) {
        memset(grad, 0, m.nparams * sizeof(float));
        mlp_loss_grad(&m, &w, x, y, n, grad, NULL);
        sgd_momentum_step(m.params, vel, grad, m.nparams, 0.05f, 0.9f, 1.0f / (float)n);
        double loss = mlp_evaluate(&m, &w, x, y, n, NULL) / (double)n;
        decreases += loss < prev;
        prev = loss;
    }
    size_t hits = 0;
    mlp_evaluate(&m, &w, x, y, n, &hits);
    assert_true(prev < 0.25 * first);
    assert_true(decreases >= 20);
    assert_int_equal(hits, n);
    free(grad);
    free(vel);
    mlp_work_destroy(&w);
    mlp_destroy(&m);
}

/* ---- IDX --------------------------------------------------------------------------------- */

static void idx_parses_a_generated_buffer(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t len = make_idx3(buf);
    idx_array a;
    assert_int_equal(idx_parse(buf, len, 0, &a, NULL, 0), FM_OK);
    assert_int_equal(a.ndims, 3);
    assert_int_equal(a.count, 3);
    assert_int_equal(a.item_size, 4);
    assert_int_equal(a.dims[1], 2);
    assert_memory_equal(a.data, buf + 16, 12);
    idx_free(&a);
    assert_null(a.data);
    idx_free(&a); /* idempotent */
}

static void idx_loads_gzip_and_plain_files_and_limits_items(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t len = make_idx3(buf);
    for (int gz = 0; gz <= 1; gz++) {
        char path[256];
        write_file(path, sizeof path, buf, len, gz);
        idx_array a;
        assert_int_equal(idx_load(path, 0, &a, NULL, 0), FM_OK);
        assert_int_equal(a.count, 3);
        assert_memory_equal(a.data, buf + 16, 12);
        idx_free(&a);
        assert_int_equal(idx_load(path, 2, &a, NULL, 0), FM_OK);
        assert_int_equal(a.count, 2);
        assert_int_equal(a.dims[0], 3);
        assert_memory_equal(a.data, buf + 16, 8);
        idx_free(&a);
        remove_file_and_dir(path);
    }
}

static void idx_rejects_bad_magic(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t len = make_idx3(buf);
    char err[256];
    idx_array a;
    buf[0] = 0x1f; /* e.g. a gzip file handed to the memory parser */
    assert_int_equal(idx_parse(buf, len, 0, &a, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "magic"));
    assert_null(a.data);
    buf[0] = 0;
    buf[2] = 0x0D; /* float elements: unsupported */
    assert_int_equal(idx_parse(buf, len, 0, &a, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "type"));
    buf[2] = 0x08;
    buf[3] = 0; /* no dimensions */
    assert_int_equal(idx_parse(buf, len, 0, &a, err, sizeof err), FM_EFORMAT);
}

static void idx_rejects_truncated_header_and_data(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t len = make_idx3(buf);
    char err[256];
    idx_array a;
    assert_int_equal(idx_parse(buf, 3, 0, &a, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "truncated IDX header"));
    assert_int_equal(idx_parse(buf, 10, 0, &a, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "truncated IDX header"));
    assert_int_equal(idx_parse(buf, len - 1, 0, &a, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "truncated IDX data"));
    assert_null(a.data);
    /* the same through a gzip file */
    char path[256];
    write_file(path, sizeof path, buf, len - 5, 1);
    assert_int_equal(idx_load(path, 0, &a, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "truncated IDX data"));
    remove_file_and_dir(path);
}

static void idx_rejects_a_truncated_gzip_stream(void **state)
{
    (void)state;
    uint8_t buf[4096];
    size_t len = make_idx3(buf);
    /* a bigger, less compressible body so the cut lands inside the deflate stream */
    buf[7] = 200; /* 200 items of 2 x 2 */
    rng r;
    rng_seed(&r, 1, 1);
    for (size_t i = 16; i < 16 + 800; i++)
        buf[i] = (uint8_t)rng_next(&r);
    len = 16 + 800;
    char path[256];
    write_file(path, sizeof path, buf, len, 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t gzbytes[4096];
    size_t gzlen = fread(gzbytes, 1, sizeof gzbytes, f);
    fclose(f);
    assert_true(gzlen > 100);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(gzbytes, 1, gzlen / 2, f), gzlen / 2);
    assert_int_equal(fclose(f), 0);
    idx_array a;
    char err[256];
    int rc = idx_load(path, 0, &a, err, sizeof err);
    assert_true(rc == FM_EFORMAT);
    assert_null(a.data);
    remove_file_and_dir(path);
}

static void idx_rejects_trailing_bytes(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t len = make_idx3(buf);
    buf[len] = 42;
    char err[256];
    idx_array a;
    assert_int_equal(idx_parse(buf, len + 1, 0, &a, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "trailing"));
    /* but a limited read does not look past the items it keeps */
    assert_int_equal(idx_parse(buf, len + 1, 2, &a, err, sizeof err), FM_OK);
    idx_free(&a);
}

static void idx_load_of_a_missing_file_is_an_io_error_naming_it(void **state)
{
    (void)state;
    char err[256];
    idx_array a;
    assert_int_equal(idx_load("/nonexistent/train.gz", 0, &a, err, sizeof err), FM_EIO);
    assert_non_null(strstr(err, "/nonexistent/train.gz"));
}

static void dataset_load_of_a_missing_dir_fails_naming_the_file(void **state)
{
    (void)state;
    fm_dataset d;
    char err[512];
    assert_int_equal(fm_dataset_load(&d, "/nonexistent", "train", 0, err, sizeof err), FM_EIO);
    assert_non_null(strstr(err, "/nonexistent/train-images-idx3-ubyte.gz"));
    fm_dataset_free(&d);
}

/* ---- checkpoint -------------------------------------------------------------------------- */

static void checkpoint_round_trip_restores_params_momentum_and_counters(void **state)
{
    (void)state;
    const int dims[] = {7, 5, 3};
    mlp a, b;
    assert_int_equal(mlp_create(&a, dims, 3, NULL, 0), FM_OK);
    assert_int_equal(mlp_create(&b, dims, 3, NULL, 0), FM_OK);
    mlp_init_he(&a, 9);
    float *va = malloc(a.nparams * sizeof(float)), *vb = calloc(a.nparams, sizeof(float));
    assert_non_null(va);
    assert_non_null(vb);
    for (size_t i = 0; i < a.nparams; i++)
        va[i] = (float)i * -0.001f;

    uint8_t *buf = NULL, *back = NULL;
    size_t len = 0, backlen = 0;
    assert_int_equal(ckpt_encode(&a, va, 4, 1876, &buf, &len), FM_OK);
    char dir[] = "/tmp/test_mlp-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(ckpt_write_dir(dir, buf, len, NULL, 0), FM_OK);
    assert_int_equal(ckpt_read_dir(dir, &back, &backlen, NULL, 0), FM_OK);
    assert_int_equal(backlen, len);
    assert_memory_equal(back, buf, len);
    assert_memory_equal(back, CKPT_MAGIC, 8);

    uint32_t epoch = 0;
    uint64_t step = 0;
    assert_int_equal(ckpt_decode(back, backlen, &b, vb, &epoch, &step, NULL, 0), FM_OK);
    assert_int_equal(epoch, 4);
    assert_int_equal(step, 1876);
    assert_memory_equal(a.params, b.params, a.nparams * sizeof(float));
    assert_memory_equal(va, vb, a.nparams * sizeof(float));

    char path[128];
    snprintf(path, sizeof path, "%s/" CKPT_FILE, dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0); /* no temporary file left behind */
    free(buf);
    free(back);
    free(va);
    free(vb);
    mlp_destroy(&a);
    mlp_destroy(&b);
}

static void checkpoint_rejects_corruption_truncation_and_other_shapes(void **state)
{
    (void)state;
    const int dims[] = {4, 3, 2}, other[] = {4, 2, 3};
    mlp a, b;
    assert_int_equal(mlp_create(&a, dims, 3, NULL, 0), FM_OK);
    assert_int_equal(mlp_create(&b, other, 3, NULL, 0), FM_OK);
    mlp_init_he(&a, 1);
    float vel[64] = {0};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(ckpt_encode(&a, vel, 1, 2, &buf, &len), FM_OK);
    uint32_t epoch = 77;
    uint64_t step = 77;
    char err[256];

    assert_int_equal(ckpt_decode(buf, len, &b, vel, &epoch, &step, err, sizeof err), FM_EINVAL);
    assert_non_null(strstr(err, "4-3-2"));
    assert_int_equal(ckpt_decode(buf, len - 1, &a, vel, &epoch, &step, err, sizeof err),
                     FM_EFORMAT);
    assert_int_equal(ckpt_decode(buf, 20, &a, vel, &epoch, &step, err, sizeof err), FM_EFORMAT);
    buf[len / 2] ^= 0x40;
    assert_int_equal(ckpt_decode(buf, len, &a, vel, &epoch, &step, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "CRC"));
    buf[len / 2] ^= 0x40;
    buf[8] = 9; /* version */
    assert_int_equal(ckpt_decode(buf, len, &a, vel, &epoch, &step, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "version"));
    buf[0] = 'X';
    assert_int_equal(ckpt_decode(buf, len, &a, vel, &epoch, &step, err, sizeof err), FM_EFORMAT);
    assert_non_null(strstr(err, "magic"));
    assert_int_equal(epoch, 77); /* untouched on failure */
    assert_int_equal(step, 77);

    assert_int_equal(ckpt_read_dir("/nonexistent", &buf, &len, err, sizeof err), FM_EIO);
    assert_non_null(strstr(err, "/nonexistent/" CKPT_FILE));
    free(buf);
    mlp_destroy(&a);
    mlp_destroy(&b);
}

/* ---- config ------------------------------------------------------------------------------ */

static void config_defaults_apply_when_keys_are_absent(void **state)
{
    (void)state;
    fm_config c;
    fm_config_defaults(&c);
    json_t *empty = json_object();
    assert_int_equal(fm_config_from_json(&c, empty, NULL, 0), FM_OK);
    assert_int_equal(c.epochs, 10);
    assert_int_equal(c.batch_size, 128);
    assert_int_equal(c.checkpoint_every, 1);
    assert_int_equal(c.blas_threads, 1);
    assert_float_equal(c.momentum, 0.9, 1e-12);
    assert_string_equal(c.data_dir, "/usr/share/datasets/fashion-mnist");
    assert_true(c.standardize);
    json_decref(empty);
}

static void config_overrides_take_effect(void **state)
{
    (void)state;
    fm_config c;
    fm_config_defaults(&c);
    json_t *o = json_pack("{s:i, s:f, s:i, s:s, s:b}", "epochs", 3, "lr", 0.1, "limit_train", 1000,
                          "data_dir", "/data", "standardize", 0);
    assert_int_equal(fm_config_from_json(&c, o, NULL, 0), FM_OK);
    assert_int_equal(c.epochs, 3);
    assert_float_equal(c.lr, 0.1, 1e-12);
    assert_int_equal(c.limit_train, 1000);
    assert_string_equal(c.data_dir, "/data");
    assert_false(c.standardize);
    json_t *lr_int = json_pack("{s:i}", "lr", 1); /* integers are numbers too */
    assert_int_equal(fm_config_from_json(&c, lr_int, NULL, 0), FM_OK);
    assert_float_equal(c.lr, 1.0, 1e-12);
    json_t *eff = fm_config_to_json(&c);
    assert_non_null(eff);
    assert_int_equal(json_integer_value(json_object_get(eff, "epochs")), 3);
    json_decref(eff);
    json_decref(lr_int);
    json_decref(o);
}

static void config_errors_name_the_key(void **state)
{
    (void)state;
    static const char *bad[][2] = {
        {"{\"epoch\": 3}", "\"epoch\": unknown option"},
        {"{\"epochs\": 0}", "\"epochs\": 0 out of range"},
        {"{\"epochs\": 2.5}", "\"epochs\": expected an integer"},
        {"{\"batch_size\": \"big\"}", "\"batch_size\": expected an integer"},
        {"{\"lr\": -0.1}", "\"lr\""},
        {"{\"momentum\": 1.5}", "\"momentum\""},
        {"{\"data_dir\": 7}", "\"data_dir\": expected a non-empty string"},
        {"{\"standardize\": 1}", "\"standardize\": expected true or false"},
        {"[1]", "must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fm_config c;
        fm_config_defaults(&c);
        json_t *o = json_loads(bad[i][0], JSON_DECODE_ANY, NULL);
        assert_non_null(o);
        char err[256] = "";
        assert_int_equal(fm_config_from_json(&c, o, err, sizeof err), FM_EINVAL);
        if (strstr(err, bad[i][1]) == NULL)
            fail_msg("config %s: message \"%s\" lacks \"%s\"", bad[i][0], err, bad[i][1]);
        json_decref(o);
    }
}

/* ---- shuffles and pixels ----------------------------------------------------------------- */

static void permutation_is_deterministic_and_complete(void **state)
{
    (void)state;
    enum { N = 1000 };
    uint32_t a[N], b[N], seen[N] = {0};
    rng r;
    rng_seed(&r, 42, 3);
    rng_permutation(&r, a, N);
    rng_seed(&r, 42, 3);
    rng_permutation(&r, b, N);
    assert_memory_equal(a, b, sizeof a);
    size_t moved = 0;
    for (size_t i = 0; i < N; i++) {
        assert_true(a[i] < N);
        seen[a[i]]++;
        moved += a[i] != i;
    }
    for (size_t i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    assert_true(moved > N / 2);
    rng_seed(&r, 42, 4); /* the next epoch shuffles differently */
    rng_permutation(&r, b, N);
    assert_memory_not_equal(a, b, sizeof a);
}

static void gather_maps_pixels_through_the_table(void **state)
{
    (void)state;
    float table[256];
    fm_pixel_table(table, false);
    assert_float_equal(table[0], 0.0f, 0);
    assert_float_equal(table[255], 1.0f, 1e-7);
    fm_pixel_table(table, true);
    assert_float_equal(table[0], -FM_PIXEL_MEAN / FM_PIXEL_STD, 1e-6);

    fm_dataset d = {0};
    uint8_t pixels[2 * FM_PIXELS], labels[2] = {3, 7};
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (uint8_t)(i < FM_PIXELS ? 10 : 200);
    d.images.data = pixels;
    d.labels.data = labels;
    d.count = 2;
    const uint32_t order[2] = {1, 0};
    float x[2 * FM_PIXELS];
    uint8_t y[2];
    fm_gather(&d, order, 0, 2, table, x, y);
    assert_int_equal(y[0], 7);
    assert_int_equal(y[1], 3);
    assert_float_equal(x[0], table[200], 0);
    assert_float_equal(x[FM_PIXELS + 5], table[10], 0);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(mlp_backward_matches_finite_differences),
    cmocka_unit_test(mlp_gradient_sums_of_two_halves_equal_full_batch),
    cmocka_unit_test(mlp_loss_grad_with_no_rows_adds_nothing),
    cmocka_unit_test(mlp_create_rejects_bad_sizes),
    cmocka_unit_test(mlp_he_init_is_deterministic_with_he_scale),
    cmocka_unit_test(sgd_momentum_step_follows_the_formula),
    cmocka_unit_test(sgd_steps_decrease_loss_on_separable_data),
    cmocka_unit_test(idx_parses_a_generated_buffer),
    cmocka_unit_test(idx_loads_gzip_and_plain_files_and_limits_items),
    cmocka_unit_test(idx_rejects_bad_magic),
    cmocka_unit_test(idx_rejects_truncated_header_and_data),
    cmocka_unit_test(idx_rejects_a_truncated_gzip_stream),
    cmocka_unit_test(idx_rejects_trailing_bytes),
    cmocka_unit_test(idx_load_of_a_missing_file_is_an_io_error_naming_it),
    cmocka_unit_test(dataset_load_of_a_missing_dir_fails_naming_the_file),
    cmocka_unit_test(checkpoint_round_trip_restores_params_momentum_and_counters),
    cmocka_unit_test(checkpoint_rejects_corruption_truncation_and_other_shapes),
    cmocka_unit_test(config_defaults_apply_when_keys_are_absent),
    cmocka_unit_test(config_overrides_take_effect),
    cmocka_unit_test(config_errors_name_the_key),
    cmocka_unit_test(permutation_is_deterministic_and_complete),
    cmocka_unit_test(gather_maps_pixels_through_the_table),
};

TY_TEST_MAIN(tests)
