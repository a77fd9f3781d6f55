/* fm_device.h on CUDA: cuBLAS for the matrix products, small kernels for the rest. Row-major
 * matrices are handed to column-major cuBLAS as their transposes (Y^T = W^T X^T), so no copy is
 * transposed. One stream; the host waits for it only where a number comes back (the loss and the
 * hits of a batch). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define restrict __restrict__ /* mlp.h is C */
#include "fm_device.h"

struct fm_dev {
    const mlp *net;
    size_t max_batch;
    cublasHandle_t blas;
    cudaStream_t stream;
    float *params, *velocity, *grad;
    float *act[MLP_MAX_LAYERS + 1]; /* act[0]: the batch's inputs */
    float *delta[2];
    uint8_t *y;
    double *loss; /* one double: the batch's summed loss */
    unsigned long long *hits;
};

#define THREADS 256
static unsigned blocks(size_t n)
{
    return (unsigned)((n + THREADS - 1) / THREADS);
}

/* out[i][j] += b[j] (then ReLU when relu) for an n x cols row-major matrix. */
__global__ void k_bias_act(float *out, const float *b, size_t n, int cols, int relu)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n * (size_t)cols)
        return;
    float v = out[i] + b[i % cols];
    out[i] = relu && !(v > 0.0f) ? 0.0f : v;
}

/* One thread a row: softmax cross-entropy of logits z (n x c), as mlp.c's softmax_xent_rows. */
__global__ void k_softmax_xent(float *z, const uint8_t *y, size_t n, int c, int to_grad,
                               double *loss, unsigned long long *hits)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float *r = z + i * (size_t)c;
    int arg = 0;
    for (int j = 1; j < c; j++)
        if (r[j] > r[arg])
            arg = j;
    float zmax = r[arg];
    double s = 0.0;
    for (int j = 0; j < c; j++)
        s += exp((double)(r[j] - zmax));
    double lse = (double)zmax + log(s);
    atomicAdd(loss, lse - (double)r[y[i]]);
    if (arg == y[i])
        atomicAdd(hits, 1ull);
    if (to_grad) {
        for (int j = 0; j < c; j++)
            r[j] = (float)exp((double)r[j] - lse);
        r[y[i]] -= 1.0f;
    }
}

/* gb[j] += sum over rows of delta[., j] (n x cols): one thread a column. */
__global__ void k_bias_grad(float *gb, const float *delta, size_t n, int cols)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    float s = 0.0f;
    for (size_t i = 0; i < n; i++)
        s += delta[i * (size_t)cols + j];
    gb[j] += s;
}

/* prev[i] = 0 where the ReLU output a[i] was not positive. */
__global__ void k_relu_back(float *prev, const float *a, size_t k)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < k && !(a[i] > 0.0f))
        prev[i] = 0.0f;
}

__global__ void k_sgd(float *p, float *v, const float *g, size_t n, float lr, float mu, float scale)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float x = mu * v[i] + g[i] * scale;
    v[i] = x;
    p[i] -= lr * x;
}

static int fail(char *err, size_t errlen, const char *what, const char *why)
{
    snprintf(err, errlen, "%s: %s", what, why);
    return -1;
}

int fm_dev_open(fm_dev **out, const mlp *net, size_t max_batch, char *err, size_t errlen)
{
    *out = NULL;
    fm_dev *d = (fm_dev *)calloc(1, sizeof(*d));
    if (!d)
        return fail(err, errlen, "fm_dev_open", "out of memory");
    d->net = net;
    d->max_batch = max_batch;
    cudaError_t e = cudaStreamCreate(&d->stream);
    if (e != cudaSuccess) {
        free(d);
        return fail(err, errlen, "cudaStreamCreate", cudaGetErrorString(e));
    }
    size_t widest = 0;
    for (int l = 0; l <= net->nlayers; l++)
        if ((size_t)net->dims[l] > widest)
            widest = (size_t)net->dims[l];
    bool ok = cublasCreate(&d->blas) == CUBLAS_STATUS_SUCCESS &&
              cublasSetStream(d->blas, d->stream) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cudaMalloc(&d->params, net->nparams * sizeof(float)) == cudaSuccess &&
         cudaMalloc(&d->velocity, net->nparams * sizeof(float)) == cudaSuccess &&
         cudaMalloc(&d->grad, net->nparams * sizeof(float)) == cudaSuccess &&
         cudaMalloc(&d->y, max_batch) == cudaSuccess &&
         cudaMalloc(&d->loss, sizeof(double)) == cudaSuccess &&
         cudaMalloc(&d->hits, sizeof(unsigned long long)) == cudaSuccess;
    for (int l = 0; ok && l <= net->nlayers; l++)
        ok =
            cudaMalloc(&d->act[l], max_batch * (size_t)net->dims[l] * sizeof(float)) == cudaSuccess;
    for (int k = 0; ok && k < 2; k++)
        ok = cudaMalloc(&d->delta[k], max_batch * widest * sizeof(float)) == cudaSuccess;
    if (!ok) {
        fm_dev_close(d);
        return fail(err, errlen, "fm_dev_open", "cannot set up cuBLAS or device memory");
    }
    *out = d;
    return 0;
}

void fm_dev_close(fm_dev *d)
{
    if (!d)
        return;
    cudaFree(d->params);
    cudaFree(d->velocity);
    cudaFree(d->grad);
    cudaFree(d->y);
    cudaFree(d->loss);
    cudaFree(d->hits);
    for (int l = 0; l <= MLP_MAX_LAYERS; l++)
        cudaFree(d->act[l]);
    cudaFree(d->delta[0]);
    cudaFree(d->delta[1]);
    if (d->blas)
        cublasDestroy(d->blas);
    if (d->stream)
        cudaStreamDestroy(d->stream);
    free(d);
}

int fm_dev_upload(fm_dev *d, const mlp *net, const float *velocity)
{
    size_t bytes = net->nparams * sizeof(float);
    return cudaMemcpy(d->params, net->params, bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
                   cudaMemcpy(d->velocity, velocity, bytes, cudaMemcpyHostToDevice) == cudaSuccess
               ? 0
               : -1;
}

int fm_dev_download(fm_dev *d, mlp *net, float *velocity)
{
    size_t bytes = net->nparams * sizeof(float);
    cudaStreamSynchronize(d->stream);
    return cudaMemcpy(net->params, d->params, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
                   cudaMemcpy(velocity, d->velocity, bytes, cudaMemcpyDeviceToHost) == cudaSuccess
               ? 0
               : -1;
}

float *fm_dev_grad(fm_dev *d)
{
    return d->grad;
}

/* Copies the batch in and runs the forward pass into act[nlayers]. */
static void forward(fm_dev *d, const float *x, const uint8_t *y, size_t n)
{
    const mlp *m = d->net;
    cudaMemcpyAsync(d->act[0], x, n * (size_t)m->dims[0] * sizeof(float), cudaMemcpyHostToDevice,
                    d->stream);
    cudaMemcpyAsync(d->y, y, n, cudaMemcpyHostToDevice, d->stream);
    const float one = 1.0f, zero = 0.0f;
    for (int l = 0; l < m->nlayers; l++) {
        int din = m->dims[l], dout = m->dims[l + 1];
        cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, dout, (int)n, din, &one,
                    d->params + m->w_off[l], dout, d->act[l], din, &zero, d->act[l + 1], dout);
        k_bias_act<<<blocks(n * (size_t)dout), THREADS, 0, d->stream>>>(
            d->act[l + 1], d->params + m->b_off[l], n, dout, l + 1 < m->nlayers);
    }
}

/* Softmax cross-entropy of the logits; waits for the stream to return the loss and hits. */
static double xent(fm_dev *d, size_t n, int to_grad, size_t *hits)
{
    const mlp *m = d->net;
    cudaMemsetAsync(d->loss, 0, sizeof(double), d->stream);
    cudaMemsetAsync(d->hits, 0, sizeof(unsigned long long), d->stream);
    k_softmax_xent<<<blocks(n), THREADS, 0, d->stream>>>(
        d->act[m->nlayers], d->y, n, m->dims[m->nlayers], to_grad, d->loss, d->hits);
    double loss = 0.0;
    unsigned long long h = 0;
    cudaMemcpyAsync(&loss, d->loss, sizeof(loss), cudaMemcpyDeviceToHost, d->stream);
    cudaMemcpyAsync(&h, d->hits, sizeof(h), cudaMemcpyDeviceToHost, d->stream);
    cudaStreamSynchronize(d->stream);
    if (hits)
        *hits += (size_t)h;
    return loss;
}

double fm_dev_loss_grad(fm_dev *d, const float *x, const uint8_t *y, size_t n, size_t *hits)
{
    const mlp *m = d->net;
    cudaMemsetAsync(d->grad, 0, m->nparams * sizeof(float), d->stream);
    if (n == 0)
        return 0.0;
    forward(d, x, y, n);
    int L = m->nlayers;
    const float one = 1.0f, zero = 0.0f;
    cudaMemsetAsync(d->loss, 0, sizeof(double), d->stream);
    cudaMemsetAsync(d->hits, 0, sizeof(unsigned long long), d->stream);
    k_softmax_xent<<<blocks(n), THREADS, 0, d->stream>>>(d->act[L], d->y, n, m->dims[L], 1, d->loss,
                                                         d->hits);
    float *delta = d->act[L];
    int spare = 0;
    for (int l = L - 1; l >= 0; l--) {
        int din = m->dims[l], dout = m->dims[l + 1];
        /* dW (din x dout, row-major) += in^T delta: column-major dW^T = delta^T in */
        cublasSgemm(d->blas, CUBLAS_OP_N, CUBLAS_OP_T, dout, din, (int)n, &one, delta, dout,
                    d->act[l], din, &one, d->grad + m->w_off[l], dout);
        k_bias_grad<<<blocks((size_t)dout), THREADS, 0, d->stream>>>(d->grad + m->b_off[l], delta,
                                                                     n, dout);
        if (l == 0)
            break;
        float *prev = d->delta[spare];
        spare ^= 1;
        /* prev (n x din) = delta W^T: column-major prev^T = W delta^T */
        cublasSgemm(d->blas, CUBLAS_OP_T, CUBLAS_OP_N, din, (int)n, dout, &one,
                    d->params + m->w_off[l], dout, delta, dout, &zero, prev, din);
        k_relu_back<<<blocks(n * (size_t)din), THREADS, 0, d->stream>>>(prev, d->act[l],
                                                                        n * (size_t)din);
        delta = prev;
    }
    double loss = 0.0;
    unsigned long long h = 0;
    cudaMemcpyAsync(&loss, d->loss, sizeof(loss), cudaMemcpyDeviceToHost, d->stream);
    cudaMemcpyAsync(&h, d->hits, sizeof(h), cudaMemcpyDeviceToHost, d->stream);
    cudaStreamSynchronize(d->stream);
    if (hits)
        *hits += (size_t)h;
    return loss;
}

void fm_dev_sgd(fm_dev *d, float lr, float momentum, float grad_scale)
{
    size_t n = d->net->nparams;
    k_sgd<<<blocks(n), THREADS, 0, d->stream>>>(d->params, d->velocity, d->grad, n, lr, momentum,
                                                grad_scale);
}

double fm_dev_evaluate(fm_dev *d, const float *x, const uint8_t *y, size_t n, size_t *hits)
{
    if (n == 0)
        return 0.0;
    forward(d, x, y, n);
    return xent(d, n, 0, hits);
}
