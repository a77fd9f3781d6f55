/* MLP forward/backward and SGD with momentum. See mlp.h for the layout and conventions. */
#include "mlp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fm_error.h"
#include "rng.h"

/* ---- lifecycle ------------------------------------------------------------------------- */

int mlp_create(mlp *m, const int *dims, int ndims, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (ndims < 2 || ndims > MLP_MAX_LAYERS + 1) {
        fm_seterr(err, errlen, "mlp: need 2..%d layer sizes, got %d", MLP_MAX_LAYERS + 1, ndims);
        return FM_EINVAL;
    }
    size_t total = 0;
    for (int l = 0; l < ndims; l++) {
        if (dims[l] < 1 || dims[l] > (1 << 20)) {
            fm_seterr(err, errlen, "mlp: layer size %d out of range: %d", l, dims[l]);
            return FM_EINVAL;
        }
        m->dims[l] = dims[l];
    }
    m->nlayers = ndims - 1;
    for (int l = 0; l < m->nlayers; l++) {
        m->w_off[l] = total;
        total += (size_t)dims[l] * (size_t)dims[l + 1];
        m->b_off[l] = total;
        total += (size_t)dims[l + 1];
    }
    m->params = calloc(total, sizeof(float));
    if (m->params == NULL) {
        fm_seterr(err, errlen, "mlp: out of memory for %zu parameters", total);
        memset(m, 0, sizeof *m);
        return FM_ENOMEM;
    }
    m->nparams = total;
    return FM_OK;
}

void mlp_destroy(mlp *m)
{
    free(m->params);
    memset(m, 0, sizeof *m);
}

void mlp_init_he(mlp *m, uint64_t seed)
{
    for (int l = 0; l < m->nlayers; l++) {
        rng r;
        rng_seed(&r, seed, (uint64_t)l + 1);
        double std = sqrt(2.0 / m->dims[l]);
        size_t nw = (size_t)m->dims[l] * (size_t)m->dims[l + 1];
        float *w = m->params + m->w_off[l];
        for (size_t i = 0; i < nw; i++)
            w[i] = (float)(std * rng_normal(&r));
        memset(m->params + m->b_off[l], 0, (size_t)m->dims[l + 1] * sizeof(float));
    }
}

int mlp_work_create(mlp_work *w, const mlp *m, size_t max_batch)
{
    memset(w, 0, sizeof *w);
    w->max_batch = max_batch;
    size_t widest_hidden = 1;
    for (int l = 1; l <= m->nlayers; l++) {
        w->act[l] = malloc(max_batch * (size_t)m->dims[l] * sizeof(float));
        if (w->act[l] == NULL)
            goto oom;
        if (l < m->nlayers && (size_t)m->dims[l] > widest_hidden)
            widest_hidden = (size_t)m->dims[l];
    }
    for (int i = 0; i < 2; i++) {
        w->delta[i] = malloc(max_batch * widest_hidden * sizeof(float));
        if (w->delta[i] == NULL)
            goto oom;
    }
    return FM_OK;
oom:
    mlp_work_destroy(w);
    return FM_ENOMEM;
}

void mlp_work_destroy(mlp_work *w)
{
    for (int l = 0; l <= MLP_MAX_LAYERS; l++)
        free(w->act[l]);
    free(w->delta[0]);
    free(w->delta[1]);
    memset(w, 0, sizeof *w);
}

/* ---- forward --------------------------------------------------------------------------- */

void mlp_forward(const mlp *m, mlp_work *w, const float *x, size_t n)
{
    const float *in = x;
    for (int l = 0; l < m->nlayers; l++) {
        int din = m->dims[l], dout = m->dims[l + 1];
        float *out = w->act[l + 1];
        const float *b = m->params + m->b_off[l];
        for (size_t i = 0; i < n; i++)
            memcpy(out + i * (size_t)dout, b, (size_t)dout * sizeof(float));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, dout, din, 1.0f, in, din,
                    m->params + m->w_off[l], dout, 1.0f, out, dout);
        if (l + 1 < m->nlayers) {
            size_t k = n * (size_t)dout;
            for (size_t i = 0; i < k; i++)
                out[i] = out[i] > 0.0f ? out[i] : 0.0f;
        }
        in = out;
    }
}

/* softmax_xent_rows: for each of n rows of `logits` (c columns), adds -log softmax(z)[y] to the
 * returned sum, counts argmax hits, and when `to_grad` overwrites the row with softmax(z) -
 * onehot(y), the gradient of that row's loss with respect to z. */
static double softmax_xent_rows(float *logits, const uint8_t *y, size_t n, int c, int to_grad,
                                size_t *correct)
{
    double loss = 0.0;
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        float *z = logits + i * (size_t)c;
        int arg = 0;
        for (int j = 1; j < c; j++)
            if (z[j] > z[arg])
                arg = j;
        float zmax = z[arg];
        double s = 0.0;
        for (int j = 0; j < c; j++)
            s += exp((double)(z[j] - zmax));
        double lse = (double)zmax + log(s);
        loss += lse - (double)z[y[i]];
        hits += (arg == y[i]);
        if (to_grad) {
            for (int j = 0; j < c; j++)
                z[j] = (float)exp((double)z[j] - lse);
            z[y[i]] -= 1.0f;
        }
    }
    if (correct != NULL)
        *correct += hits;
    return loss;
}

double mlp_evaluate(const mlp *m, mlp_work *w, const float *x, const uint8_t *y, size_t n,
                    size_t *correct)
{
    if (n == 0)
        return 0.0;
    mlp_forward(m, w, x, n);
    return softmax_xent_rows(w->act[m->nlayers], y, n, m->dims[m->nlayers], 0, correct);
}

/* ---- backward -------------------------------------------------------------------------- */

double mlp_loss_grad(const mlp *m, mlp_work *w, const float *x, const uint8_t *y, size_t n,
                     float *grad, size_t *correct)
{
    if (n == 0)
        return 0.0;
    int L = m->nlayers;
    mlp_forward(m, w, x, n);
    double loss = softmax_xent_rows(w->act[L], y, n, m->dims[L], 1, correct);

    /* delta: dLoss/d(pre-activation output of layer l), n x dims[l+1]. */
    float *delta = w->act[L];
    int spare = 0;
    for (int l = L - 1; l >= 0; l--) {
        int din = m->dims[l], dout = m->dims[l + 1];
        const float *in = l == 0 ? x : w->act[l];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, din, dout, (int)n, 1.0f, in, din,
                    delta, dout, 1.0f, grad + m->w_off[l], dout);
        float *gb = grad + m->b_off[l];
        for (size_t i = 0; i < n; i++) {
            const float *row = delta + i * (size_t)dout;
            for (int j = 0; j < dout; j++)
                gb[j] += row[j];
        }
        if (l == 0)
            break;
        float *prev = w->delta[spare];
        spare ^= 1;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, din, dout, 1.0f, delta, dout,
                    m->params + m->w_off[l], dout, 0.0f, prev, din);
        const float *a = w->act[l]; /* ReLU output: derivative is 1 where a > 0 */
        size_t k = n * (size_t)din;
        for (size_t i = 0; i < k; i++)
            if (!(a[i] > 0.0f))
                prev[i] = 0.0f;
        delta = prev;
    }
    return loss;
}

/* ---- optimizer ------------------------------------------------------------------------- */

void sgd_momentum_step(float *restrict params, float *restrict velocity, const float *restrict grad,
                       size_t n, float lr, float momentum, float grad_scale)
{
    for (size_t i = 0; i < n; i++) {
        float v = momentum * velocity[i] + grad[i] * grad_scale;
        velocity[i] = v;
        params[i] -= lr * v;
    }
}
