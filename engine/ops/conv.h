/* conv.h -- 2-D convolution and pooling over NCHW tensors, differentiable, float32 or float64. */
/* See LICENSE */
#ifndef DL_CONV_H
#define DL_CONV_H

#include "ops/ops.h"

typedef struct {
  int stride[2], pad[2], dil[2];  /* (h, w) */
  int groups;
} dl_conv_opts;

/* x [N, C, H, W], w [O, C/groups, kh, kw], b [O] or NULL -> [N, O, Ho, Wo], all float32 or all float64.
 * Fails with a message naming both shapes when they do not fit. */
dl_tensor *dl_conv2d(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b, const dl_conv_opts *o);

/* max or average pooling, kernel k, stride s, padding p (h, w); avg counts padding as 0
 * and divides by the full window (count_include_pad, PyTorch's default) */
dl_tensor *dl_pool2d(dl_ctx *ctx, dl_tensor *x, const int k[2], const int s[2], const int p[2], int max);

#endif
