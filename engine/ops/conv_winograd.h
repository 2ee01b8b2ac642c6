/* conv_winograd.h -- stride-1 3x3 and 5x5 convolutions by Winograd's minimal filtering,
 * under conv.c: the forward and the exact adjoint of it, on AVX-512 machines. */
/* See LICENSE */
#ifndef DL_CONV_WINOGRAD_H
#define DL_CONV_WINOGRAD_H

#include "core/dl.h"

/* one convolution: x [N, C, H, W] with a square k x k kernel w [O, C, k, k] at stride 1,
 * dilation 1, one group, padding (ph, pw), giving [N, O, Ho, Wo] */
typedef struct {
  int64_t N, C, H, W, O, k, ph, pw, Ho, Wo;
} dl_wino_geom;

/* 1 when the kernels below take this convolution: AVX-512 (dl_conv_simd()), k 3 or 5,
 * C and O multiples of 16, and DLUA_CONV_WINOGRAD is not "0" (the test hook that keeps
 * im2col). Thread-safe. */
int dl_wino_fits(const dl_wino_geom *g);
/* 1 when Winograd may take layers at all: AVX-512 (dl_conv_simd()) and DLUA_CONV_WINOGRAD not "0" */
int dl_wino_enabled(void);

/* out = conv(x, w) + bias (bias [O] or NULL). Returns 0, or -1 with ctx's error set
 * when its buffers cannot be allocated. */
int dl_wino_forward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *bias,
                    float *out);

/* the gradients of dl_wino_forward's computation from gy [N, O, Ho, Wo]: gx [N, C, H, W],
 * gw [O, C, k, k] and gb [O], each written whole, or skipped when NULL. Returns 0 or -1 as
 * above. Results do not depend on the thread count. */
int dl_wino_backward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *gy, float *gx,
                     float *gw, float *gb);

#endif
