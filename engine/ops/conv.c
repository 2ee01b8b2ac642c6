/* conv.c -- 2-D convolution (im2col + sgemm) and max/average pooling, with backwards.
 *
 * Convolution runs per example and group: the input patch matrix
 * col [C/g * kh * kw, Ho * Wo] is built, then out = W_g col is one sgemm.
 * The backward rebuilds the same patches: dW += dY col^T, dcol = W^T dY, then
 * col2im adds dcol back into dX. Strides, padding, dilation and groups are
 * general. float64 tensors (for gradient checks) take the plain im2col + dgemm
 * path of conv_f64.c; everything below is float32. Pooling keeps the argmax of each window for its
 * backward. On AVX-512 and AVX2 machines (conv_simd.c) the padding, im2col and col2im
 * row copies are masked vector moves with the same bits, and layers with few
 * input channels at stride 1 (the first layer) skip the patches: a direct
 * kernel computes the forward and the weight gradient. Stride-1 3x3 and 5x5 layers with
 * channels in blocks of 16 go to Winograd's minimal filtering instead (conv_winograd.c).
 */
/* See LICENSE */
#include "ops/conv.h"
#include "ops/conv_f64.h"
#include "ops/conv_simd.h"
#include "ops/conv_winograd.h"
#include "ops/kernels.h"

#include <float.h>
#include <stdatomic.h>
#include <string.h>

typedef struct {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, Cg, Og, K, P;
  int64_t Hp, Wp;           /* padded input */
  int simd;                 /* dl_conv_simd() != DL_CONV_PORTABLE: the vector row copies and direct kernels */
} geom;

static int conv_geom(dl_ctx *ctx, const dl_tensor *x, const dl_tensor *w, const dl_tensor *b,
                     const dl_conv_opts *o, geom *g) {
  char a[128], c[128];
  dl_shape_str(x->shape, x->ndim, a, sizeof a);
  dl_shape_str(w->shape, w->ndim, c, sizeof c);
  if ((x->dtype != DL_F32 && x->dtype != DL_F64) || w->dtype != x->dtype || (b && b->dtype != x->dtype)) {
    dl_fail(ctx, "conv2d: expected input, weight and bias all float32 or all float64, got %s, %s and %s",
            dl_dtype_name(x->dtype), dl_dtype_name(w->dtype), b ? dl_dtype_name(b->dtype) : "no bias");
    return -1;
  }
  if (x->ndim != 4 || w->ndim != 4) {
    dl_fail(ctx, "conv2d: input %s must be [N, C, H, W] and weight %s [O, C/groups, kh, kw]", a, c);
    return -1;
  }
  for (int i = 0; i < 2; i++)
    if (o->stride[i] < 1 || o->dil[i] < 1 || o->pad[i] < 0) {
      dl_fail(ctx, "conv2d: stride and dilation must be >= 1 and padding >= 0");
      return -1;
    }
  g->N = x->shape[0]; g->C = x->shape[1]; g->H = x->shape[2]; g->W = x->shape[3];
  g->O = w->shape[0]; g->kh = w->shape[2]; g->kw = w->shape[3];
  int G = o->groups;
  if (G < 1 || g->C % G || g->O % G) {
    dl_fail(ctx, "conv2d: groups %d must divide input channels %lld and output channels %lld", G,
            (long long)g->C, (long long)g->O);
    return -1;
  }
  g->Cg = g->C / G;
  g->Og = g->O / G;
  if (w->shape[1] != g->Cg) {
    dl_fail(ctx, "conv2d: input %s has %lld channels but weight %s expects %lld x %d groups", a, (long long)g->C, c,
            (long long)w->shape[1], G);
    return -1;
  }
  if (b && (b->ndim != 1 || b->shape[0] != g->O)) {
    dl_fail(ctx, "conv2d: bias must be [%lld]", (long long)g->O);
    return -1;
  }
  /* the dilated kernel and the padded input, then every buffer shape, through the checked arithmetic */
  int64_t eh, ew;
  if (dl_shape_mul(ctx, "conv2d", "dilation x (kernel height - 1)", o->dil[0], g->kh - 1, &eh) < 0 ||
      dl_shape_mul(ctx, "conv2d", "dilation x (kernel width - 1)", o->dil[1], g->kw - 1, &ew) < 0)
    return -1;
  eh += 1;
  ew += 1;
  g->Hp = g->H + 2 * (int64_t)o->pad[0];
  g->Wp = g->W + 2 * (int64_t)o->pad[1];
  if (g->Hp < eh || g->Wp < ew) {
    dl_fail(ctx, "conv2d: input %s is smaller than the (dilated) kernel %lldx%lld after padding", a,
            (long long)eh, (long long)ew);
    return -1;
  }
  g->Ho = (g->Hp - eh) / o->stride[0] + 1;
  g->Wo = (g->Wp - ew) / o->stride[1] + 1;
  g->K = g->Cg * g->kh * g->kw;                  /* <= numel(w) */
  int64_t out_shape[4] = {g->N, g->O, g->Ho, g->Wo}, padded[3] = {g->Cg, g->Hp, g->Wp};
  if (dl_shape_check(ctx, "conv2d", 4, out_shape, NULL) < 0 || dl_shape_check(ctx, "conv2d", 3, padded, NULL) < 0)
    return -1;
  g->P = g->Ho * g->Wo;                          /* checked just above */
  g->simd = dl_conv_simd() != DL_CONV_PORTABLE;
  int64_t patches[2] = {g->K, g->P < 128 ? 256 : 2 * g->P};   /* the patch matrix of up to m examples */
  return dl_shape_check(ctx, "conv2d", 2, patches, NULL);
}

/* Patches are cut from a zero-padded copy of one example's group channels,
 * xp [Cg, Hp, Wp] (x itself when there is no padding), so that every patch
 * row is a plain strided copy with no bounds to test. */
static int has_pad(const dl_conv_opts *o) { return o->pad[0] > 0 || o->pad[1] > 0; }

static const float *pad_input(const float *x, const geom *g, const dl_conv_opts *o, float *xp) {
  if (!has_pad(o)) return x;
  const int64_t H = g->H, W = g->W, Wp = g->Wp, p0 = o->pad[0], p1 = o->pad[1];
  if (g->simd) {
    memset(xp, 0, sizeof(float) * (size_t)(g->Cg * g->Hp * Wp));
    for (int64_t c = 0; c < g->Cg; c++) dl_conv_copy_rows(xp + (c * g->Hp + p0) * Wp + p1, Wp, x + c * H * W, W, H, W);
    return xp;
  }
  for (int64_t c = 0; c < g->Cg; c++) {
    float *d = xp + c * g->Hp * Wp;
    memset(d, 0, sizeof(float) * (size_t)(p0 * Wp));
    for (int64_t h = 0; h < H; h++) {          /* rows are short: plain loops, not memcpy calls */
      float *restrict r = d + (p0 + h) * Wp;
      const float *restrict xr = x + (c * H + h) * W;
      for (int64_t q = 0; q < p1; q++) r[q] = 0.0f;
      for (int64_t q = 0; q < W; q++) r[p1 + q] = xr[q];
      for (int64_t q = p1 + W; q < Wp; q++) r[q] = 0.0f;
    }
    memset(d + (p0 + H) * Wp, 0, sizeof(float) * (size_t)((g->Hp - p0 - H) * Wp));
  }
  return xp;
}

/* col [K, P] (rows ld apart) from the padded input */
static void im2col(const float *restrict xp, const geom *g, const dl_conv_opts *o, float *restrict col, int64_t ld) {
  const int64_t s0 = o->stride[0], s1 = o->stride[1], d0 = o->dil[0], d1 = o->dil[1];
  const int64_t Ho = g->Ho, Wo = g->Wo, Wp = g->Wp;
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        float *restrict row = col + ((c * g->kh + i) * g->kw + j) * ld;
        const float *restrict src = xp + (c * g->Hp + i * d0) * Wp + j * d1;
        if (s1 == 1 && g->simd) {
          dl_conv_copy_rows(row, Wo, src, s0 * Wp, Ho, Wo);
          continue;
        }
        for (int64_t oh = 0; oh < Ho; oh++) {
          const float *restrict sr = src + oh * s0 * Wp;
          float *restrict r = row + oh * Wo;
          if (s1 == 1) for (int64_t ow = 0; ow < Wo; ow++) r[ow] = sr[ow];
          else for (int64_t ow = 0; ow < Wo; ow++) r[ow] = sr[ow * s1];
        }
      }
}

/* dx (one example's group channels) = col2im(col): the patch gradients summed back
 * through a padded buffer dxp [Cg, Hp, Wp] (dx itself when there is no padding) */
static void col2im(const float *restrict col, int64_t ld, const geom *g, const dl_conv_opts *o, float *dx,
                   float *dxp) {
  const int64_t s0 = o->stride[0], s1 = o->stride[1], d0 = o->dil[0], d1 = o->dil[1];
  const int64_t Ho = g->Ho, Wo = g->Wo, Wp = g->Wp;
  float *acc = has_pad(o) ? dxp : dx;
  memset(acc, 0, sizeof(float) * (size_t)(g->Cg * g->Hp * Wp));
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        const float *restrict row = col + ((c * g->kh + i) * g->kw + j) * ld;
        float *dst = acc + (c * g->Hp + i * d0) * Wp + j * d1;
        if (s1 == 1 && g->simd) {
          dl_conv_add_rows(dst, s0 * Wp, row, Wo, Ho, Wo);
          continue;
        }
        for (int64_t oh = 0; oh < Ho; oh++) {
          float *restrict dr = dst + oh * s0 * Wp;
          const float *restrict r = row + oh * Wo;
          if (s1 == 1) for (int64_t ow = 0; ow < Wo; ow++) dr[ow] += r[ow];
          else for (int64_t ow = 0; ow < Wo; ow++) dr[ow * s1] += r[ow];
        }
      }
  if (!has_pad(o)) return;
  if (g->simd) {
    for (int64_t c = 0; c < g->Cg; c++)
      dl_conv_copy_rows(dx + c * g->H * g->W, g->W, dxp + (c * g->Hp + o->pad[0]) * Wp + o->pad[1], Wp, g->H, g->W);
    return;
  }
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t h = 0; h < g->H; h++) {
      float *restrict d = dx + (c * g->H + h) * g->W;
      const float *restrict sr = dxp + (c * g->Hp + o->pad[0] + h) * Wp + o->pad[1];
      for (int64_t q = 0; q < g->W; q++) d[q] = sr[q];
    }
}

/* Convolution runs per example, in chunks of examples spread over the pool.
 * Each pool task owns one patch-matrix buffer [Cg*kh*kw, Ho*Wo] the size of
 * one example (it stays in the core's cache between im2col, the sgemm and
 * col2im) and takes chunks from a shared counter. Products go straight into
 * the NCHW tensors: example n's output for group g is the [Og, Ho*Wo] block at
 * out[n, g*Og], so no layout copies are needed either way. Small outputs
 * (Ho*Wo below MIN_COLS, the late layers of a ResNet) take m examples per
 * product instead, so the weight is not streamed once per example for a thin
 * product; those go through a [Og, m*Ho*Wo] buffer. The weight and bias
 * gradients are summed per chunk and the chunk sums are added in chunk
 * order; the chunks depend on the batch size and the weight size, not on the
 * thread count, so results are bit-identical at any dl.threads. */
#define CONV_CHUNKS 16
#define PART_FLOATS ((int64_t)8 << 20)    /* bound on the chunk sums of the weight gradient */
#define MIN_COLS 128

static int64_t conv_chunks(const geom *g, int threads, int wgrad) {
  int64_t c = g->N < CONV_CHUNKS ? g->N : CONV_CHUNKS;
  int64_t wsize = g->O * g->K;
  if (wgrad && c * wsize > PART_FLOATS) {
    c = PART_FLOATS / wsize;
    if (c < threads) c = threads < g->N ? threads : g->N;
  }
  return c < 1 ? 1 : c;
}

/* examples per product */
static int64_t conv_m(const geom *g) { return g->P >= MIN_COLS ? 1 : (MIN_COLS + g->P - 1) / g->P; }

/* a 1x1 kernel at stride 1 without padding reads the input itself as its patch matrix */
static int conv_direct(const geom *g, const dl_conv_opts *o) {
  return conv_m(g) == 1 && g->kh == 1 && g->kw == 1 && o->stride[0] == 1 && o->stride[1] == 1 &&
         o->pad[0] == 0 && o->pad[1] == 0;
}

/* few input channels at stride 1 (the first layer): the direct kernels of conv_simd.c
 * instead of patches and a thin product, for the forward and the weight gradient */
static int conv_small(const geom *g, const dl_conv_opts *o) {
  return g->simd && !conv_direct(g, o) && conv_m(g) == 1 && o->stride[0] == 1 && o->stride[1] == 1 &&
         o->dil[0] == 1 && o->dil[1] == 1 && dl_conv_direct_fits(g->Cg, g->kh, g->kw, g->Wo);
}

/* stride-1 3x3 and 5x5 layers with channels in blocks of 16: Winograd's minimal filtering
 * (conv_winograd.c) on AVX-512 machines */
static int conv_winograd(const geom *g, const dl_conv_opts *o, dl_wino_geom *wg) {
  dl_wino_geom w = {g->N, g->C, g->H, g->W, g->O, g->kh, o->pad[0], o->pad[1], g->Ho, g->Wo};
  *wg = w;
  return o->groups == 1 && g->kh == g->kw && o->stride[0] == 1 && o->stride[1] == 1 && o->dil[0] == 1 &&
         o->dil[1] == 1 && dl_wino_fits(wg);
}

static dl_conv_direct_geom small_geom(const geom *g) {
  dl_conv_direct_geom d = {g->Cg, g->Hp, g->Wp, g->Og, g->kh, g->kw, g->Ho, g->Wo};
  return d;
}

typedef struct {
  const geom *g;
  const dl_conv_opts *o;
  int groups, direct, small;
  int64_t nchunks, m;
  atomic_int next;        /* next chunk */
  const float *x, *w, *bias, *gy;
  float *out, *gx;
  float *gw_part;         /* [nchunks, O*K], or NULL */
  double *gb_part;        /* [nchunks, O], or NULL */
  float *col;             /* [tasks, scratch_floats] */
} conv_job;

/* per task: the patch matrix [K, m*P], the padded planes [Cg, Hp, Wp], the product [Og, m*P] (m > 1) */
static int64_t scratch_floats(const geom *g, const dl_conv_opts *o, int direct) {
  int64_t m = conv_m(g);
  return direct ? 0 : g->K * m * g->P + (has_pad(o) ? g->Cg * g->Hp * g->Wp : 0) + (m > 1 ? g->Og * m * g->P : 0);
}

/* the patches of examples n..n+mm-1, group gi: [K, mm*P] */
static const float *patches(const conv_job *j, int64_t n, int64_t mm, int gi, float *col) {
  const geom *g = j->g;
  const float *xg = j->x + (n * g->C + gi * g->Cg) * g->H * g->W;
  if (j->direct) return xg;
  float *xp = col + g->K * j->m * g->P;
  for (int64_t s = 0; s < mm; s++)
    im2col(pad_input(xg + s * g->C * g->H * g->W, g, j->o, xp), g, j->o, col + s * g->P, mm * g->P);
  return col;
}

/* per chunk of examples: x [N, C, H, W], w [O, C/g, kh, kw], bias [O] -> out [N, O, Ho, Wo] */
static void conv_fwd_task(void *arg, int t) {
  conv_job *j = arg;
  const geom *g = j->g;
  const int64_t P = g->P, Og = g->Og;
  float *col = j->col + t * scratch_floats(g, j->o, j->direct);
  float *prod = col + g->K * j->m * P + (has_pad(j->o) ? g->Cg * g->Hp * g->Wp : 0);
  dl_conv_direct_geom dg = small_geom(g);
  for (int64_t c; (c = atomic_fetch_add(&j->next, 1)) < j->nchunks;) {
    int64_t n1 = g->N * (c + 1) / j->nchunks;
    if (j->small) {                              /* m = 1: one example at a time, bias included */
      for (int64_t n = g->N * c / j->nchunks; n < n1; n++)
        for (int gi = 0; gi < j->groups; gi++)
          dl_conv_direct_forward(&dg, pad_input(j->x + (n * g->C + gi * g->Cg) * g->H * g->W, g, j->o, col + g->K * P),
                                 j->w + gi * Og * g->K, j->bias ? j->bias + gi * Og : NULL,
                                 j->out + (n * g->O + gi * Og) * P);
      continue;
    }
    for (int64_t n = g->N * c / j->nchunks; n < n1; n += j->m) {
      int64_t mm = n1 - n < j->m ? n1 - n : j->m;
      for (int gi = 0; gi < j->groups; gi++) {
        const float *cp = patches(j, n, mm, gi, col);
        const float *wg = j->w + gi * Og * g->K;
        float *on = j->out + (n * g->O + gi * Og) * P;
        if (mm == 1) {                           /* into the output, onto the bias */
          if (j->bias)
            for (int64_t oc = 0; oc < Og; oc++)
              for (int64_t q = 0; q < P; q++) on[oc * P + q] = j->bias[gi * Og + oc];
          dl_sgemm_serial(0, 0, Og, P, g->K, 1.0f, wg, g->K, cp, P, j->bias ? 1.0f : 0.0f, on, P);
          continue;
        }
        dl_sgemm_serial(0, 0, Og, mm * P, g->K, 1.0f, wg, g->K, cp, mm * P, 0.0f, prod, mm * P);
        for (int64_t s = 0; s < mm; s++)
          for (int64_t oc = 0; oc < Og; oc++) {
            float bv = j->bias ? j->bias[gi * Og + oc] : 0.0f;
            float *restrict d = on + (s * g->O + oc) * P;
            const float *restrict r = prod + oc * mm * P + s * P;
            for (int64_t q = 0; q < P; q++) d[q] = r[q] + bv;
          }
      }
    }
  }
}

/* per chunk of examples: x, w, gy [N, O, Ho, Wo] -> gx [N, C, H, W], the chunk's gw [O, C/g, kh, kw]
 * and gb [O] partial sums */
static void conv_bw_task(void *arg, int t) {
  conv_job *j = arg;
  const geom *g = j->g;
  const int64_t P = g->P, Og = g->Og, K = g->K;
  float *col = j->col + t * scratch_floats(g, j->o, j->direct);
  float *prod = col + K * j->m * P + (has_pad(j->o) ? g->Cg * g->Hp * g->Wp : 0);
  float *xp = col + K * j->m * P;
  dl_conv_direct_geom dg = small_geom(g);
  for (int64_t c; (c = atomic_fetch_add(&j->next, 1)) < j->nchunks;) {
    int64_t n0 = g->N * c / j->nchunks, n1 = g->N * (c + 1) / j->nchunks;
    float *gw = j->gw_part ? j->gw_part + c * g->O * K : NULL;
    double *gb = j->gb_part ? j->gb_part + c * g->O : NULL;
    if (gb) memset(gb, 0, sizeof(double) * (size_t)g->O);
    for (int64_t n = n0; n < n1; n += j->m) {
      int64_t mm = n1 - n < j->m ? n1 - n : j->m, ld = mm * P;
      for (int gi = 0; gi < j->groups; gi++) {
        const float *gyn = j->gy + (n * g->O + gi * Og) * P;   /* [Og, P] when mm = 1 */
        const float *wg = j->w + gi * Og * K;
        if (mm > 1) {                            /* dY of the mm examples side by side: [Og, mm*P] */
          for (int64_t s = 0; s < mm; s++)
            for (int64_t oc = 0; oc < Og; oc++) {
              float *restrict d = prod + oc * ld + s * P;
              const float *restrict r = gyn + (s * g->O + oc) * P;
              for (int64_t q = 0; q < P; q++) d[q] = r[q];
            }
          gyn = prod;
        }
        if (gw && j->small) {                    /* m = 1: gW += dY correlated with the padded input */
          const float *xpn = pad_input(j->x + (n * g->C + gi * g->Cg) * g->H * g->W, g, j->o, xp);
          dl_conv_direct_wgrad(&dg, xpn, gyn, gw + gi * Og * K, n != n0);
        } else if (gw) {                         /* gW += dY col^T */
          const float *cp = patches(j, n, mm, gi, col);
          dl_sgemm_serial(0, 1, Og, K, ld, 1.0f, gyn, ld, cp, ld, n == n0 ? 0.0f : 1.0f, gw + gi * Og * K, K);
        }
        if (j->gx) {                             /* dcol = W^T dY, added back into dX */
          float *gxn = j->gx + (n * g->C + gi * g->Cg) * g->H * g->W;
          if (j->direct) {
            dl_sgemm_serial(1, 0, K, P, Og, 1.0f, wg, K, gyn, P, 0.0f, gxn, P);
          } else {
            dl_sgemm_serial(1, 0, K, ld, Og, 1.0f, wg, K, gyn, ld, 0.0f, col, ld);
            for (int64_t s = 0; s < mm; s++) col2im(col + s * P, ld, g, j->o, gxn + s * g->C * g->H * g->W, xp);
          }
        }
        if (gb)
          for (int64_t oc = 0; oc < Og; oc++) gb[gi * Og + oc] += dl_conv_row_sum(gyn + oc * ld, ld);
      }
    }
  }
}

/* gw = the chunk sums added in chunk order, split over the pool by element ranges */
typedef struct {
  const float *part;
  float *gw;
  int64_t len, nchunks;
  int ntask;
} sum_job;

static void sum_task(void *arg, int t) {
  const sum_job *j = arg;
  int64_t a = j->len * t / j->ntask, b = j->len * (t + 1) / j->ntask;
  memcpy(j->gw + a, j->part + a, sizeof(float) * (size_t)(b - a));
  for (int64_t c = 1; c < j->nchunks; c++) {
    const float *p = j->part + c * j->len;
    for (int64_t i = a; i < b; i++) j->gw[i] += p[i];
  }
}

static int conv_tasks(dl_ctx *ctx, int64_t nchunks) {
  int th = dl_pool_threads(ctx->pool);
  return (int)(nchunks < th ? nchunks : th);
}

/* out's node on the tape, with the options for the backward */
static dl_tensor *record(dl_ctx *ctx, dl_tensor *out, dl_tensor *x, dl_tensor *w, dl_tensor *b, const dl_conv_opts *o) {
  dl_tensor *in[3] = {x, w, b};
  dl_node *nd = dl_tape_record(ctx, DL_OP_CONV2D, &out, b ? 3 : 2, in);
  _Static_assert(sizeof(dl_conv_opts) <= sizeof nd->iv, "conv options fit the node");
  if (nd) memcpy(&nd->iv[0], o, sizeof *o);
  return out;
}

static dl_conv64_geom geom64(const geom *g, const dl_conv_opts *o) {
  dl_conv64_geom d = {g->N, g->C, g->H, g->W, g->O, g->kh, g->kw, g->Ho, g->Wo, g->Cg, g->Og, g->K, g->P,
                      {o->stride[0], o->stride[1]}, {o->pad[0], o->pad[1]}, {o->dil[0], o->dil[1]}, o->groups};
  return d;
}

/* the float64 forward (conv_f64.c): one patch matrix [K, P] of scratch */
static dl_tensor *conv2d_f64(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b, const dl_conv_opts *o,
                             const geom *g, const int64_t osh[4]) {
  dl_conv64_geom d = geom64(g, o);
  int64_t ssh[1] = {g->K * g->P};
  dl_tensor *xc = dl_contiguous_raw(ctx, x);
  dl_tensor *wc = xc ? dl_contiguous_raw(ctx, w) : NULL;
  dl_tensor *bc = wc && b ? dl_contiguous_raw(ctx, b) : NULL;
  dl_tensor *col = wc && (bc || !b) ? dl_tensor_new_empty(ctx, DL_F64, 1, ssh) : NULL;
  dl_tensor *out = col ? dl_tensor_new_empty(ctx, DL_F64, 4, osh) : NULL;
  if (out) dl_conv64_forward(&d, dl_data(xc), dl_data(wc), bc ? dl_data(bc) : NULL, out->st->data, col->st->data);
  dl_tensor_release(col); dl_tensor_release(bc); dl_tensor_release(xc); dl_tensor_release(wc);
  return out ? record(ctx, out, x, w, b, o) : NULL;
}

/* the float64 backward */
static int bw_conv2d_f64(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b, const dl_conv_opts *o,
                         const geom *g, dl_tensor *gy, dl_tensor **gin) {
  dl_conv64_geom d = geom64(g, o);
  int64_t ssh[1] = {g->K * g->P};
  dl_tensor *gyc = dl_contiguous_raw(ctx, gy);
  dl_tensor *xc = gyc ? dl_contiguous_raw(ctx, x) : NULL;
  dl_tensor *wc = xc ? dl_contiguous_raw(ctx, w) : NULL;
  dl_tensor *col = wc ? dl_tensor_new_empty(ctx, DL_F64, 1, ssh) : NULL;
  dl_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  int rc = col ? 0 : -1;
  if (!rc && x->requires_grad && !(gx = dl_tensor_new_empty(ctx, DL_F64, 4, x->shape))) rc = -1;
  if (!rc && w->requires_grad && !(gw = dl_tensor_new_empty(ctx, DL_F64, 4, w->shape))) rc = -1;
  if (!rc && b && b->requires_grad && !(gb = dl_tensor_new_empty(ctx, DL_F64, 1, b->shape))) rc = -1;
  if (!rc)
    dl_conv64_backward(&d, dl_data(xc), dl_data(wc), dl_data(gyc), gx ? (double *)gx->st->data : NULL,
                       gw ? (double *)gw->st->data : NULL, gb ? (double *)gb->st->data : NULL, col->st->data);
  dl_tensor_release(col); dl_tensor_release(xc); dl_tensor_release(wc); dl_tensor_release(gyc);
  return dl_grads_out(rc, gin, 3, (dl_tensor *[]){gx, gw, gb});   /* gb is NULL without a bias */
}

/* x [N, C, H, W], w [O, C/groups, kh, kw], b [O] or NULL -> out [N, O, Ho, Wo] */
dl_tensor *dl_conv2d(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b, const dl_conv_opts *o) {
  geom g;
  if (conv_geom(ctx, x, w, b, o, &g) < 0) return NULL;
  int64_t osh[4] = {g.N, g.O, g.Ho, g.Wo};
  if (x->dtype == DL_F64) return conv2d_f64(ctx, x, w, b, o, &g, osh);
  dl_tensor *xc = dl_contiguous_raw(ctx, x);
  dl_tensor *wc = xc ? dl_contiguous_raw(ctx, w) : NULL;
  dl_tensor *bc = wc && b ? dl_tensor_new_contiguous(ctx, b, DL_F32) : NULL;
  dl_tensor *out = wc && (bc || !b) ? dl_tensor_new_empty(ctx, DL_F32, 4, osh) : NULL;
  dl_wino_geom wg;
  if (out && conv_winograd(&g, o, &wg)) {
    int rc = dl_wino_forward(ctx, &wg, dl_data(xc), dl_data(wc), bc ? dl_data(bc) : NULL, out->st->data);
    dl_tensor_release(bc); dl_tensor_release(xc); dl_tensor_release(wc);
    if (rc) { dl_tensor_release(out); return NULL; }
    return record(ctx, out, x, w, b, o);
  }
  conv_job j = {.g = &g, .o = o, .groups = o->groups, .direct = conv_direct(&g, o), .small = conv_small(&g, o),
                .nchunks = conv_chunks(&g, 1, 0), .m = conv_m(&g)};
  int tasks = conv_tasks(ctx, j.nchunks);
  int64_t ssh[1] = {g.N == 0 ? 0 : tasks * scratch_floats(&g, o, j.direct)};
  dl_tensor *col = out ? dl_tensor_new_empty(ctx, DL_F32, 1, ssh) : NULL;
  if (col && g.N > 0) {
    atomic_init(&j.next, 0);
    j.x = dl_data(xc); j.w = dl_data(wc); j.bias = bc ? dl_data(bc) : NULL;
    j.out = out->st->data; j.col = col->st->data;
    dl_pool_run(ctx->pool, tasks, conv_fwd_task, &j);
  }
  dl_tensor_release(col); dl_tensor_release(bc); dl_tensor_release(xc); dl_tensor_release(wc);
  if (!col) { dl_tensor_release(out); return NULL; }
  return record(ctx, out, x, w, b, o);
}

/* gy [N, O, Ho, Wo] -> gx [N, C, H, W], gw [O, C/groups, kh, kw], gb [O] */
int dl_bw_conv2d(dl_ctx *ctx, dl_node *n, dl_tensor *gy, dl_tensor **gin) {
  dl_conv_opts o;
  memcpy(&o, &n->iv[0], sizeof o);
  dl_tensor *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
  geom g;
  if (conv_geom(ctx, x, w, b, &o, &g) < 0) return -1;
  if (x->dtype == DL_F64) return bw_conv2d_f64(ctx, x, w, b, &o, &g, gy, gin);
  int want_w = w->requires_grad, want_b = b && b->requires_grad;
  conv_job j = {.g = &g, .o = &o, .groups = o.groups, .direct = conv_direct(&g, &o), .small = conv_small(&g, &o),
                .nchunks = conv_chunks(&g, dl_pool_threads(ctx->pool), want_w), .m = conv_m(&g)};
  int tasks = conv_tasks(ctx, j.nchunks);
  dl_wino_geom wg;
  int wino = conv_winograd(&g, &o, &wg);
  int64_t N = g.N > 0 && !wino ? j.nchunks : 0;  /* the Winograd kernels bring their own buffers */
  int64_t ssh[1] = {N == 0 ? 0 : tasks * scratch_floats(&g, &o, j.direct)}, psh[1] = {want_w ? N * g.O * g.K : 0},
          bsh[1] = {want_b ? N * g.O : 0};
  dl_tensor *gyc = dl_contiguous_raw(ctx, gy);
  dl_tensor *xc = gyc ? dl_contiguous_raw(ctx, x) : NULL;
  dl_tensor *wc = xc ? dl_contiguous_raw(ctx, w) : NULL;
  dl_tensor *col = wc ? dl_tensor_new_empty(ctx, DL_F32, 1, ssh) : NULL;
  dl_tensor *part = col ? dl_tensor_new_empty(ctx, DL_F32, 1, psh) : NULL;
  dl_tensor *bpart = part ? dl_tensor_new_empty(ctx, DL_F64, 1, bsh) : NULL;
  dl_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  int rc = bpart ? 0 : -1;
  /* every example's input gradient is written by its chunk, so no zero fill (except N = 0) */
  if (!rc && x->requires_grad && !(gx = dl_tensor_new_empty(ctx, DL_F32, 4, x->shape))) rc = -1;
  if (!rc && want_w && !(gw = g.N > 0 ? dl_tensor_new_empty(ctx, DL_F32, 4, w->shape)
                                      : dl_tensor_new_zeros(ctx, DL_F32, 4, w->shape))) rc = -1;
  if (!rc && want_b && !(gb = dl_tensor_new_zeros(ctx, DL_F32, 1, b->shape))) rc = -1;
  if (!rc && wino) {
    rc = dl_wino_backward(ctx, &wg, dl_data(xc), dl_data(wc), dl_data(gyc), gx ? (float *)gx->st->data : NULL,
                          gw ? (float *)gw->st->data : NULL, gb ? (float *)gb->st->data : NULL);
  } else if (!rc && g.N > 0) {
    atomic_init(&j.next, 0);
    j.x = dl_data(xc); j.w = dl_data(wc); j.gy = dl_data(gyc);
    j.gx = gx ? (float *)gx->st->data : NULL;
    j.gw_part = gw ? (float *)part->st->data : NULL;
    j.gb_part = gb ? (double *)bpart->st->data : NULL;
    j.col = col->st->data;
    dl_pool_run(ctx->pool, tasks, conv_bw_task, &j);
    if (gw) {
      int64_t len = g.O * g.K;
      sum_job s = {j.gw_part, gw->st->data, len, j.nchunks, len < 65536 ? 1 : dl_pool_threads(ctx->pool)};
      dl_pool_run(ctx->pool, s.ntask, sum_task, &s);
    }
    if (gb) {
      float *bp = gb->st->data;
      for (int64_t c = 0; c < g.O; c++) {
        double acc = 0;
        for (int64_t k = 0; k < j.nchunks; k++) acc += j.gb_part[k * g.O + c];
        bp[c] = (float)acc;
      }
    }
  }
  dl_tensor_release(bpart); dl_tensor_release(part); dl_tensor_release(col);
  dl_tensor_release(xc); dl_tensor_release(wc); dl_tensor_release(gyc);
  return dl_grads_out(rc, gin, 3, (dl_tensor *[]){gx, gw, gb});   /* gb is NULL without a bias */
}

/* ------------------------------------------------------------ pooling */

/* pooling runs over planes (n, c) split into equal chunks on the pool; float64 planes
 * go to conv_f64.c's loops (x and out then point to doubles) */
typedef struct {
  int max, k[2], s[2], p[2];
  int64_t H, W, Ho, Wo, planes;
  int ntask;
  const float *x;       /* forward input, or backward gradient of the output */
  float *out;           /* forward output, or backward input gradient */
  int64_t *arg;         /* argmax (max pooling) */
  int f64;
} pool_job;

static dl_pool64_geom pool64(const pool_job *j) {
  dl_pool64_geom d = {j->max, {j->k[0], j->k[1]}, {j->s[0], j->s[1]}, {j->p[0], j->p[1]}, j->H, j->W, j->Ho, j->Wo};
  return d;
}

/* max pooling over the common 2x2 window at stride 2 without padding: the windows do not overlap */
static int pool_2x2(const pool_job *j) {
  return j->max && j->k[0] == 2 && j->k[1] == 2 && j->s[0] == 2 && j->s[1] == 2 && j->p[0] == 0 && j->p[1] == 0;
}

/* per block of planes: x [N*C, H, W] -> out [N*C, Ho, Wo] (and arg [N*C, Ho, Wo], the flat
 * position in the plane of each window's max) */
static void pool_fwd_task(void *arg_, int t) {
  const pool_job *j = arg_;
  int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo;
  int64_t nc0 = j->planes * t / j->ntask, nc1 = j->planes * (t + 1) / j->ntask;
  if (j->f64) {
    dl_pool64_geom d = pool64(j);
    dl_pool64_forward(&d, nc0, nc1, (const double *)(const void *)j->x, (double *)(void *)j->out, j->arg);
    return;
  }
  if (pool_2x2(j)) {
    int simd = dl_conv_simd() != DL_CONV_PORTABLE && W < INT32_MAX / 2;     /* window offsets in int32 lanes */
    for (int64_t nc = nc0; nc < nc1; nc++) {     /* the common 2x2/2 window: no bounds to test */
      const float *xi = j->x + nc * H * W;
      for (int64_t oh = 0; oh < Ho; oh++) {
        const float *r0 = xi + 2 * oh * W, *r1 = r0 + W;
        float *o = j->out + (nc * Ho + oh) * Wo;
        int64_t *ai = j->arg + (nc * Ho + oh) * Wo;
        if (simd) {
          dl_conv_maxpool2x2_row(r0, W, 2 * oh * W, Wo, o, ai);
          continue;
        }
        for (int64_t ow = 0; ow < Wo; ow++) {
          int64_t w = 2 * ow, bi = 2 * oh * W + w;
          float best = r0[w];
          /* the same order and NaN rule as the general loop: first of the window wins ties */
          if (r0[w + 1] > best || r0[w + 1] != r0[w + 1]) { best = r0[w + 1]; bi = 2 * oh * W + w + 1; }
          if (r1[w] > best || r1[w] != r1[w]) { best = r1[w]; bi = (2 * oh + 1) * W + w; }
          if (r1[w + 1] > best || r1[w + 1] != r1[w + 1]) { best = r1[w + 1]; bi = (2 * oh + 1) * W + w + 1; }
          o[ow] = best;
          ai[ow] = bi;
        }
      }
    }
    return;
  }
  /* the general window; dl_pool64_forward (conv_f64.c) is its float64 twin, two copies on
   * purpose: each a plain loop in its own type, float32 the hot one (change both together) */
  for (int64_t nc = nc0; nc < nc1; nc++) {
    const float *xi = j->x + nc * H * W;
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++) {
        float best = -FLT_MAX;
        int64_t bi = -1;
        double sum = 0;
        for (int i = 0; i < j->k[0]; i++) {
          int64_t h = oh * j->s[0] - j->p[0] + i;
          if (h < 0 || h >= H) continue;
          for (int q = 0; q < j->k[1]; q++) {
            int64_t w = ow * j->s[1] - j->p[1] + q;
            if (w < 0 || w >= W) continue;
            float v = xi[h * W + w];
            if (bi < 0 || v > best || v != v) { best = v; bi = h * W + w; }
            sum += (double)v;
          }
        }
        int64_t o = (nc * Ho + oh) * Wo + ow;
        if (j->max) { j->out[o] = best; j->arg[o] = bi; }
        else j->out[o] = (float)(sum / (j->k[0] * j->k[1]));
      }
  }
}

/* per block of planes: gy [N*C, Ho, Wo] (j->x), arg -> gx [N*C, H, W] (j->out) */
static void pool_bw_task(void *arg_, int t) {
  const pool_job *j = arg_;
  int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo;
  int64_t nc0 = j->planes * t / j->ntask, nc1 = j->planes * (t + 1) / j->ntask;
  float inv = 1.0f / (float)(j->k[0] * j->k[1]);
  if (j->f64) {                                  /* the caller zeroed gx */
    dl_pool64_geom d = pool64(j);
    dl_pool64_backward(&d, nc0, nc1, (const double *)(const void *)j->x, j->arg, (double *)(void *)j->out);
    return;
  }
  if (pool_2x2(j)) {                             /* every input element written once: no zero fill */
    for (int64_t nc = nc0; nc < nc1; nc++) {
      float *xi = j->out + nc * H * W;
      for (int64_t oh = 0; oh < Ho; oh++) {
        float *r0 = xi + 2 * oh * W, *r1 = r0 + W;
        const float *g = j->x + (nc * Ho + oh) * Wo;
        const int64_t *a = j->arg + (nc * Ho + oh) * Wo;
        for (int64_t ow = 0; ow < 2 * Wo; ow++) r0[ow] = r1[ow] = 0.0f;
        for (int64_t ow = 0; ow < Wo; ow++) xi[a[ow]] = g[ow];   /* no branch on where the max was */
        for (int64_t w = 2 * Wo; w < W; w++) r0[w] = r1[w] = 0.0f;   /* odd width: the last column */
      }
      for (int64_t w = 2 * Ho * W; w < H * W; w++) xi[w] = 0.0f;   /* odd height: the last row */
    }
    return;
  }
  for (int64_t nc = nc0; nc < nc1; nc++) {
    float *xi = j->out + nc * H * W;
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++) {
        int64_t o = (nc * Ho + oh) * Wo + ow;
        float g = j->x[o];
        if (j->max) { xi[j->arg[o]] += g; continue; }
        for (int i = 0; i < j->k[0]; i++) {
          int64_t h = oh * j->s[0] - j->p[0] + i;
          if (h < 0 || h >= H) continue;
          for (int q = 0; q < j->k[1]; q++) {
            int64_t w = ow * j->s[1] - j->p[1] + q;
            if (w >= 0 && w < W) xi[h * W + w] += g * inv;
          }
        }
      }
  }
}

static void pool_run(dl_ctx *ctx, pool_job *j, void (*fn)(void *, int)) {
  int th = dl_pool_threads(ctx->pool);
  int64_t work = j->planes * j->H * j->W;
  j->ntask = work < 32768 || th <= 1 ? 1 : (int)(j->planes < 4 * th ? j->planes : 4 * th);
  dl_pool_run(ctx->pool, j->ntask, fn, j);
}

/* x [N, C, H, W] -> out [N, C, Ho, Wo], Ho = (H + 2 p0 - k0) / s0 + 1 (Wo likewise) */
dl_tensor *dl_pool2d(dl_ctx *ctx, dl_tensor *x, const int k[2], const int s[2], const int p[2], int max) {
  const char *name = max ? "max_pool2d" : "avg_pool2d";
  char a[128];
  dl_shape_str(x->shape, x->ndim, a, sizeof a);
  if (x->ndim != 4 || (x->dtype != DL_F32 && x->dtype != DL_F64))
    return dl_fail(ctx, "%s: input %s must be a float32 or float64 [N, C, H, W]", name, a);
  for (int i = 0; i < 2; i++) {
    if (k[i] < 1 || s[i] < 1 || p[i] < 0) return dl_fail(ctx, "%s: kernel and stride must be >= 1, padding >= 0", name);
    if (2 * (int64_t)p[i] > k[i]) return dl_fail(ctx, "%s: padding %d must be at most half the kernel %d", name, p[i], k[i]);
  }
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t Hp = H + 2 * (int64_t)p[0], Wp = W + 2 * (int64_t)p[1];
  int64_t Ho = (Hp - k[0]) / s[0] + 1, Wo = (Wp - k[1]) / s[1] + 1;
  if (Hp < k[0] || Wp < k[1])
    return dl_fail(ctx, "%s: input %s is smaller than the kernel %dx%d", name, a, k[0], k[1]);
  int64_t osh[4] = {N, C, Ho, Wo};
  dl_tensor *xc = dl_contiguous_raw(ctx, x);
  dl_tensor *out = xc ? dl_tensor_new_empty(ctx, x->dtype, 4, osh) : NULL;
  dl_tensor *arg = (out && max) ? dl_tensor_new_empty(ctx, DL_I64, 4, osh) : NULL;
  if (!out || (max && !arg)) { dl_tensor_release(xc); dl_tensor_release(out); return NULL; }
  pool_job j = {max, {k[0], k[1]}, {s[0], s[1]}, {p[0], p[1]}, H, W, Ho, Wo, N * C, 1, dl_data(xc),
                out->st->data, arg ? (int64_t *)arg->st->data : NULL, x->dtype == DL_F64};
  pool_run(ctx, &j, pool_fwd_task);
  dl_tensor_release(xc);
  dl_node *nd = dl_tape_record(ctx, max ? DL_OP_MAX_POOL2D : DL_OP_AVG_POOL2D, &out, 1, &x);
  if (!nd) { dl_tensor_release(arg); return out; }
  nd->saved[0] = arg;
  nd->iv[0] = max; nd->iv[1] = k[0]; nd->iv[2] = k[1]; nd->iv[3] = s[0]; nd->iv[4] = s[1];
  nd->iv[5] = p[0]; nd->iv[6] = p[1];
  return out;
}

/* gy [N, C, Ho, Wo] -> gx [N, C, H, W] */
int dl_bw_pool2d(dl_ctx *ctx, dl_node *n, dl_tensor *gy, dl_tensor **gin) {
  dl_tensor *x = n->in[0];
  int max = (int)n->iv[0], k0 = (int)n->iv[1], k1 = (int)n->iv[2], s0 = (int)n->iv[3], s1 = (int)n->iv[4];
  int p0 = (int)n->iv[5], p1 = (int)n->iv[6];
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t Ho = gy->shape[2], Wo = gy->shape[3];
  pool_job j = {max, {k0, k1}, {s0, s1}, {p0, p1}, H, W, Ho, Wo, N * C, 1, NULL, NULL,
                max ? (int64_t *)n->saved[0]->st->data : NULL, x->dtype == DL_F64};
  dl_tensor *gyc = dl_contiguous_raw(ctx, gy);
  dl_tensor *gx = !gyc ? NULL : pool_2x2(&j) && !j.f64 ? dl_tensor_new_empty(ctx, DL_F32, 4, x->shape)
                                                       : dl_tensor_new_zeros(ctx, x->dtype, 4, x->shape);
  if (!gx) { dl_tensor_release(gyc); return -1; }
  j.x = dl_data(gyc);
  j.out = gx->st->data;
  pool_run(ctx, &j, pool_bw_task);
  dl_tensor_release(gyc);
  gin[0] = gx;
  return 0;
}
