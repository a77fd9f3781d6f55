/* A multi-layer perceptron (dense + ReLU, softmax cross-entropy) and SGD with momentum, in
 * float32 on top of CBLAS.
 *
 * All parameters live in one contiguous buffer, layer by layer: W0, b0, W1, b1, ... where W_l is
 * dims[l] x dims[l+1], row-major (input-major), so a batch X (n x dims[l], row-major) maps to
 * X W_l + b_l. Gradients use the same layout, which lets a data-parallel trainer all-reduce one
 * flat buffer per step. Gradients are SUMS over the samples given, never means: the caller
 * divides once by the global batch size, so shards of a batch add up to the full batch exactly
 * (up to float summation order). */
#ifndef FM_MLP_H
#define FM_MLP_H

#include <stddef.h>
#include <stdint.h>

#define MLP_MAX_LAYERS 8 /* weight layers */

typedef struct mlp {
    int nlayers;                  /* weight layers, 1..MLP_MAX_LAYERS */
    int dims[MLP_MAX_LAYERS + 1]; /* dims[0] inputs, dims[nlayers] classes */
    size_t nparams;
    size_t w_off[MLP_MAX_LAYERS]; /* offsets of W_l and b_l in params */
    size_t b_off[MLP_MAX_LAYERS];
    float *params; /* owned, nparams floats */
} mlp;

/* Per-batch scratch space for one network, for batches of up to max_batch rows. */
typedef struct mlp_work {
    size_t max_batch;
    float *act[MLP_MAX_LAYERS + 1]; /* act[l], l >= 1: layer outputs (act[nlayers]: logits) */
    float *delta[2];                /* ping-pong back-propagated gradients */
} mlp_work;

/* mlp_create: sets up *m for layer sizes dims[0..ndims) (ndims >= 2, every size >= 1) with all
 * parameters zero. Fails with FM_EINVAL on bad sizes, FM_ENOMEM. Free with mlp_destroy. */
int mlp_create(mlp *m, const int *dims, int ndims, char *err, size_t errlen);

/* mlp_destroy: frees m->params; safe on a zeroed or destroyed mlp. */
void mlp_destroy(mlp *m);

/* mlp_init_he: He-normal weights (std sqrt(2 / fan_in)) drawn from `seed`, zero biases.
 * Deterministic: the same seed gives bit-identical parameters. */
void mlp_init_he(mlp *m, uint64_t seed);

/* mlp_work_create: allocates scratch for batches of up to max_batch (>= 1) rows.
 * Fails with FM_ENOMEM. Free with mlp_work_destroy. */
int mlp_work_create(mlp_work *w, const mlp *m, size_t max_batch);
void mlp_work_destroy(mlp_work *w);

/* mlp_forward: computes logits for x (n x dims[0], n <= w->max_batch) into w->act[nlayers]. */
void mlp_forward(const mlp *m, mlp_work *w, const float *x, size_t n);

/* mlp_loss_grad: forward, softmax cross-entropy against labels y[0..n) (each < classes), and
 * backward. ADDS the gradient of the summed loss to grad (nparams floats, params' layout);
 * returns the summed loss; adds the number of argmax hits to *correct when non-NULL.
 * n == 0 is a no-op returning 0. */
double mlp_loss_grad(const mlp *m, mlp_work *w, const float *x, const uint8_t *y, size_t n,
                     float *grad, size_t *correct);

/* mlp_evaluate: forward and summed cross-entropy loss without gradients; adds argmax hits to
 * *correct when non-NULL. */
double mlp_evaluate(const mlp *m, mlp_work *w, const float *x, const uint8_t *y, size_t n,
                    size_t *correct);

/* sgd_momentum_step: for each i, g = grad[i] * grad_scale; velocity[i] = momentum *
 * velocity[i] + g; params[i] -= lr * velocity[i] (PyTorch's SGD formulation). The three
 * arrays must not overlap. */
void sgd_momentum_step(float *restrict params, float *restrict velocity, const float *restrict grad,
                       size_t n, float lr, float momentum, float grad_scale);

#endif
