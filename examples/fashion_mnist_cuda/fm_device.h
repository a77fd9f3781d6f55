/* The Fashion-MNIST MLP of examples/fashion_mnist on a CUDA GPU (fm_device.cu): parameters,
 * momentum and gradient sums live in device memory in mlp.h's flat layout, the products run on
 * cuBLAS, the rest (bias, ReLU, softmax cross-entropy, SGD) in small kernels. The host mlp is the
 * model's copy for checkpoints (fm_dev_download before writing one, fm_dev_upload after reading
 * one), so a checkpoint is the same model.bin the CPU example writes and reads. */
#ifndef FM_DEVICE_H
#define FM_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fm_dev fm_dev;

/* Opens the current CUDA device for `net`'s shape and batches of up to max_batch rows. 0, or -1
 * with the reason in err. Free with fm_dev_close. */
int fm_dev_open(fm_dev **out, const mlp *net, size_t max_batch, char *err, size_t errlen);
void fm_dev_close(fm_dev *d);
/* Copies the host model (net->params, velocity) to the device, or back. 0 or -1. */
int fm_dev_upload(fm_dev *d, const mlp *net, const float *velocity);
int fm_dev_download(fm_dev *d, mlp *net, float *velocity);
/* mlp_loss_grad on the device: zeroes the device gradient, then adds the gradient SUM of the
 * summed cross-entropy over x (n x dims[0]), y; returns the summed loss, adds argmax hits to
 * *hits. */
double fm_dev_loss_grad(fm_dev *d, const float *x, const uint8_t *y, size_t n, size_t *hits);
/* The device gradient (nparams floats), to all-reduce in place (ty_allreduce: NCCL). */
float *fm_dev_grad(fm_dev *d);
/* sgd_momentum_step on the device. */
void fm_dev_sgd(fm_dev *d, float lr, float momentum, float grad_scale);
/* mlp_evaluate on the device. */
double fm_dev_evaluate(fm_dev *d, const float *x, const uint8_t *y, size_t n, size_t *hits);

#ifdef __cplusplus
}
#endif

#endif
