/* conv_f64.h -- float64 convolution and pooling kernels (conv_f64.c), for conv.c. */
/* See LICENSE */
#ifndef DL_CONV_F64_H
#define DL_CONV_F64_H

#include "ops/ops.h"

/* one layer's shapes and options, already checked by conv.c (Cg = C / groups,
 * Og = O / groups, K = Cg kh kw, P = Ho Wo; stride, padding and dilation as (h, w)) */
typedef struct {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, Cg, Og, K, P;
  int stride[2], pad[2], dil[2], groups;
} dl_conv64_geom;

/* x [N, C, H, W], w [O, Cg, kh, kw], b [O] or NULL -> out [N, O, Ho, Wo]; col is [K, P] of scratch */
void dl_conv64_forward(const dl_conv64_geom *g, const double *x, const double *w,
                       const double *b, double *out, double *col);

/* gy [N, O, Ho, Wo] -> gx [N, C, H, W], gw [O, Cg, kh, kw], gb [O] (each may be NULL; each is
 * overwritten); col is [K, P] of scratch */
void dl_conv64_backward(const dl_conv64_geom *g, const double *x, const double *w,
                        const double *gy, double *gx, double *gw, double *gb, double *col);

/* pooling over planes nc0..nc1 of [*, H, W] -> [*, Ho, Wo], window k, stride s, padding p;
 * max keeps the flat position of each window's max in arg (first wins ties, NaN wins) */
typedef struct {
  int max, k[2], s[2], p[2];
  int64_t H, W, Ho, Wo;
} dl_pool64_geom;

void dl_pool64_forward(const dl_pool64_geom *g, int64_t nc0, int64_t nc1, const double *x, double *out,
                       int64_t *arg);

/* gy [*, Ho, Wo] -> gx [*, H, W] (planes nc0..nc1, gx zeroed by the caller) */
void dl_pool64_backward(const dl_pool64_geom *g, int64_t nc0, int64_t nc1, const double *gy, const int64_t *arg,
                        double *gx);

#endif
