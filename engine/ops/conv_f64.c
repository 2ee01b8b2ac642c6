/* conv_f64.c -- float64 convolution and pooling: the plain im2col + dgemm path.
 *
 * float64 is what gradients are checked in (dl.autograd.gradcheck), so this path
 * is written for clarity, not speed: one example and group at a time on the
 * calling thread, patches cut with bounds tests instead of a padded copy, and the
 * products through dl_gemm_serial's cblas_dgemm. The float32 paths of conv.c
 * (AVX-512 rows, direct kernels, Winograd, chunks over the pool) are untouched.
 */
/* See LICENSE */
#include "ops/conv_f64.h"

#include <string.h>

/* col [K, P] from example n's group channels xg [Cg, H, W]; positions in the padding read 0 */
static void im2col64(const dl_conv64_geom *g, const double *xg, double *col) {
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        double *row = col + ((c * g->kh + i) * g->kw + j) * g->P;
        for (int64_t oh = 0; oh < g->Ho; oh++) {
          int64_t h = oh * g->stride[0] - g->pad[0] + i * g->dil[0];
          for (int64_t ow = 0; ow < g->Wo; ow++) {
            int64_t q = ow * g->stride[1] - g->pad[1] + j * g->dil[1];
            row[oh * g->Wo + ow] = h >= 0 && h < g->H && q >= 0 && q < g->W ? xg[(c * g->H + h) * g->W + q] : 0.0;
          }
        }
      }
}

/* gxg [Cg, H, W] += col2im(col): each patch gradient added back where im2col64 read it */
static void col2im64(const dl_conv64_geom *g, const double *col, double *gxg) {
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        const double *row = col + ((c * g->kh + i) * g->kw + j) * g->P;
        for (int64_t oh = 0; oh < g->Ho; oh++) {
          int64_t h = oh * g->stride[0] - g->pad[0] + i * g->dil[0];
          if (h < 0 || h >= g->H) continue;
          for (int64_t ow = 0; ow < g->Wo; ow++) {
            int64_t q = ow * g->stride[1] - g->pad[1] + j * g->dil[1];
            if (q >= 0 && q < g->W) gxg[(c * g->H + h) * g->W + q] += row[oh * g->Wo + ow];
          }
        }
      }
}

void dl_conv64_forward(const dl_conv64_geom *g, const double *x, const double *w,
                       const double *b, double *out, double *col) {
  const int64_t P = g->P, Og = g->Og, K = g->K;
  for (int64_t n = 0; n < g->N; n++)
    for (int gi = 0; gi < g->groups; gi++) {
      double *on = out + (n * g->O + gi * Og) * P;
      im2col64(g, x + (n * g->C + gi * g->Cg) * g->H * g->W, col);
      for (int64_t oc = 0; oc < Og; oc++)
        for (int64_t q = 0; q < P; q++) on[oc * P + q] = b ? b[gi * Og + oc] : 0.0;
      dl_gemm_serial(DL_F64, 0, 0, Og, P, K, 1.0, w + gi * Og * K, K, col, P, 1.0, on, P);
    }
}

void dl_conv64_backward(const dl_conv64_geom *g, const double *x, const double *w,
                        const double *gy, double *gx, double *gw, double *gb, double *col) {
  const int64_t P = g->P, Og = g->Og, K = g->K;
  if (gx) memset(gx, 0, sizeof(double) * (size_t)(g->N * g->C * g->H * g->W));
  if (gw) memset(gw, 0, sizeof(double) * (size_t)(g->O * K));
  if (gb) memset(gb, 0, sizeof(double) * (size_t)g->O);
  for (int64_t n = 0; n < g->N; n++)
    for (int gi = 0; gi < g->groups; gi++) {
      const double *gyn = gy + (n * g->O + gi * Og) * P, *wg = w + gi * Og * K;
      int64_t xoff = (n * g->C + gi * g->Cg) * g->H * g->W;
      if (gw) {                                  /* dW += dY col^T */
        im2col64(g, x + xoff, col);
        dl_gemm_serial(DL_F64, 0, 1, Og, K, P, 1.0, gyn, P, col, P, 1.0, gw + gi * Og * K, K);
      }
      if (gx) {                                  /* dcol = W^T dY, added back into dX */
        dl_gemm_serial(DL_F64, 1, 0, K, P, Og, 1.0, wg, K, gyn, P, 0.0, col, P);
        col2im64(g, col, gx + xoff);
      }
      if (gb)
        for (int64_t oc = 0; oc < Og; oc++)
          for (int64_t q = 0; q < P; q++) gb[gi * Og + oc] += gyn[oc * P + q];
    }
}

/* the float64 twin of conv.c's general pooling window (pool_fwd_task), two copies on purpose:
 * each a plain loop in its own type (change both together) */
void dl_pool64_forward(const dl_pool64_geom *g, int64_t nc0, int64_t nc1, const double *x, double *out,
                       int64_t *arg) {
  const int64_t H = g->H, W = g->W, Ho = g->Ho, Wo = g->Wo;
  for (int64_t nc = nc0; nc < nc1; nc++) {
    const double *xi = x + nc * H * W;
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++) {
        double best = 0, sum = 0;
        int64_t bi = -1;
        for (int i = 0; i < g->k[0]; i++) {
          int64_t h = oh * g->s[0] - g->p[0] + i;
          if (h < 0 || h >= H) continue;
          for (int q = 0; q < g->k[1]; q++) {
            int64_t w = ow * g->s[1] - g->p[1] + q;
            if (w < 0 || w >= W) continue;
            double v = xi[h * W + w];
            if (bi < 0 || v > best || v != v) { best = v; bi = h * W + w; }
            sum += v;
          }
        }
        int64_t o = (nc * Ho + oh) * Wo + ow;
        if (g->max) { out[o] = best; arg[o] = bi; }
        else out[o] = sum / (g->k[0] * g->k[1]);
      }
  }
}

void dl_pool64_backward(const dl_pool64_geom *g, int64_t nc0, int64_t nc1, const double *gy, const int64_t *arg,
                        double *gx) {
  const int64_t H = g->H, W = g->W, Ho = g->Ho, Wo = g->Wo;
  const double inv = 1.0 / (g->k[0] * g->k[1]);
  for (int64_t nc = nc0; nc < nc1; nc++) {
    double *xi = gx + nc * H * W;
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++) {
        int64_t o = (nc * Ho + oh) * Wo + ow;
        if (g->max) { xi[arg[o]] += gy[o]; continue; }
        for (int i = 0; i < g->k[0]; i++) {
          int64_t h = oh * g->s[0] - g->p[0] + i;
          if (h < 0 || h >= H) continue;
          for (int q = 0; q < g->k[1]; q++) {
            int64_t w = ow * g->s[1] - g->p[1] + q;
            if (w >= 0 && w < W) xi[h * W + w] += gy[o] * inv;
          }
        }
      }
  }
}
