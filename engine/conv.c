/* conv.c -- 2-D convolution (im2col + sgemm) and max/average pooling, with backwards.
 *
 * Convolution runs per example and group: the input patch matrix
 * col [C/g * kh * kw, Ho * Wo] is built once, then out = W_g col is one sgemm.
 * The backward reuses the same layout: dW += dY col^T, dcol = W^T dY, then
 * col2im adds dcol back into dX. float32 only; strides, padding, dilation
 * and groups are general. Pooling keeps the argmax of each window for its
 * backward.
 */
/* See LICENSE */
#include "conv.h"

#include <float.h>
#include <string.h>

typedef struct {
  int64_t N, C, H, W, O, kh, kw, Ho, Wo, Cg, Og, K, P;
} geom;

static int conv_geom(dl_ctx *ctx, const dl_tensor *x, const dl_tensor *w, const dl_tensor *b,
                     const dl_conv_opts *o, geom *g) {
  char a[128], c[128];
  dl_shape_str(x->shape, x->ndim, a, sizeof a);
  dl_shape_str(w->shape, w->ndim, c, sizeof c);
  if (x->dtype != DL_F32 || w->dtype != DL_F32 || (b && b->dtype != DL_F32)) {
    dl_fail(ctx, "conv2d: expected float32 tensors, got %s and %s", dl_dtype_name(x->dtype), dl_dtype_name(w->dtype));
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
  int64_t eh = (int64_t)o->dil[0] * (g->kh - 1) + 1, ew = (int64_t)o->dil[1] * (g->kw - 1) + 1;
  g->Ho = (g->H + 2 * o->pad[0] - eh) / o->stride[0] + 1;
  g->Wo = (g->W + 2 * o->pad[1] - ew) / o->stride[1] + 1;
  if (g->H + 2 * o->pad[0] < eh || g->W + 2 * o->pad[1] < ew || g->Ho < 1 || g->Wo < 1) {
    dl_fail(ctx, "conv2d: input %s is smaller than the (dilated) kernel %lldx%lld after padding", a,
            (long long)eh, (long long)ew);
    return -1;
  }
  g->K = g->Cg * g->kh * g->kw;
  g->P = g->Ho * g->Wo;
  return 0;
}

/* the output columns ow whose input column ow*s - pad + j*d lies inside [0, W): [*lo, *hi) */
static void valid_cols(const geom *g, const dl_conv_opts *o, int64_t j, int64_t *lo, int64_t *hi) {
  int64_t s = o->stride[1], off = j * o->dil[1] - o->pad[1];
  int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;               /* first ow with w >= 0 */
  int64_t b = g->W - off <= 0 ? 0 : (g->W - off + s - 1) / s;  /* first ow with w >= W */
  if (a > g->Wo) a = g->Wo;
  if (b > g->Wo) b = g->Wo;
  if (b < a) b = a;
  *lo = a;
  *hi = b;
}

/* col[K, P] (rows ld apart) from x (one example, channels c0..c0+Cg) */
static void im2col(const float *x, const geom *g, const dl_conv_opts *o, int64_t c0, float *col, int64_t ld) {
  const int64_t s = o->stride[1];
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        float *row = col + ((c * g->kh + i) * g->kw + j) * ld;
        const float *xc = x + (c0 + c) * g->H * g->W;
        int64_t lo, hi, off = j * o->dil[1] - o->pad[1];
        valid_cols(g, o, j, &lo, &hi);
        for (int64_t oh = 0; oh < g->Ho; oh++) {
          int64_t h = oh * o->stride[0] - o->pad[0] + i * o->dil[0];
          float *r = row + oh * g->Wo;
          if (h < 0 || h >= g->H) { memset(r, 0, sizeof(float) * (size_t)g->Wo); continue; }
          const float *xr = xc + h * g->W + off;           /* xr[ow * s] for ow in [lo, hi) */
          for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0.0f;
          if (s == 1) memcpy(r + lo, xr + lo, sizeof(float) * (size_t)(hi - lo));
          else for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * s];
          for (int64_t ow = hi; ow < g->Wo; ow++) r[ow] = 0.0f;
        }
      }
}

static void col2im(const float *col, const geom *g, const dl_conv_opts *o, int64_t c0, float *dx, int64_t ld) {
  const int64_t s = o->stride[1];
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++) {
        const float *row = col + ((c * g->kh + i) * g->kw + j) * ld;
        float *xc = dx + (c0 + c) * g->H * g->W;
        int64_t lo, hi, off = j * o->dil[1] - o->pad[1];
        valid_cols(g, o, j, &lo, &hi);
        for (int64_t oh = 0; oh < g->Ho; oh++) {
          int64_t h = oh * o->stride[0] - o->pad[0] + i * o->dil[0];
          if (h < 0 || h >= g->H) continue;
          float *xr = xc + h * g->W + off;
          const float *r = row + oh * g->Wo;
          if (s == 1) for (int64_t ow = lo; ow < hi; ow++) xr[ow] += r[ow];
          else for (int64_t ow = lo; ow < hi; ow++) xr[ow * s] += r[ow];
        }
      }
}

/* Examples are taken in chunks of nb: col [K, nb*P] holds example n0+i in
 * columns i*P.., so each group of a chunk is one large sgemm, while the patch
 * matrix stays bounded (a 1000-example eval batch would otherwise build a
 * 600 MB matrix for a 5x5x32 conv). im2col/col2im run per example on the pool. */
#define COL_CHUNK_FLOATS ((int64_t)4 << 20)

static int64_t chunk_examples(const geom *g) {
  int64_t per = g->K * g->P;
  int64_t nb = per > 0 ? COL_CHUNK_FLOATS / per : g->N;
  if (nb < 1) nb = 1;
  return nb < g->N ? nb : g->N;
}

typedef struct {
  const geom *g;
  const dl_conv_opts *o;
  const float *x;     /* input, or NULL */
  float *dx;          /* input gradient, or NULL */
  float *col;
  int64_t c0;         /* first channel of the group */
  int64_t n0, ld;     /* first example of the chunk, row length of col (m * P) */
} col_job;

static void im2col_task(void *arg, int i) {
  const col_job *j = arg;
  const geom *g = j->g;
  im2col(j->x + (j->n0 + i) * g->C * g->H * g->W, g, j->o, j->c0, j->col + i * g->P, j->ld);
}

static void col2im_task(void *arg, int i) {
  const col_job *j = arg;
  const geom *g = j->g;
  col2im(j->col + i * g->P, g, j->o, j->c0, j->dx + (j->n0 + i) * g->C * g->H * g->W, j->ld);
}

/* moving a group's [Og, m*P] product to and from out[n, gi*Og + c, P], per example on the pool */
typedef struct {
  const geom *g;
  float *grp;           /* [Og, m*P] */
  float *nchw;          /* the [N, O, P] tensor */
  const float *bias;    /* per output channel, or NULL (forward only) */
  int64_t n0, NP, gi;
} move_job;

static void scatter_task(void *arg, int i) {      /* forward: out = product + bias */
  const move_job *j = arg;
  const geom *g = j->g;
  for (int64_t c = 0; c < g->Og; c++) {
    int64_t oc = j->gi * g->Og + c;
    float bv = j->bias ? j->bias[oc] : 0.0f;
    const float *src = j->grp + c * j->NP + i * g->P;
    float *dst = j->nchw + ((j->n0 + i) * g->O + oc) * g->P;
    for (int64_t q = 0; q < g->P; q++) dst[q] = src[q] + bv;
  }
}

static void gather_task(void *arg, int i) {       /* backward: dY into the group's layout */
  const move_job *j = arg;
  const geom *g = j->g;
  for (int64_t c = 0; c < g->Og; c++)
    memcpy(j->grp + c * j->NP + i * g->P, j->nchw + ((j->n0 + i) * g->O + j->gi * g->Og + c) * g->P,
           sizeof(float) * (size_t)g->P);
}

static int bw_conv(dl_ctx *ctx, dl_node *n, dl_tensor *gy, dl_tensor **gin);

dl_tensor *dl_conv2d(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b, const dl_conv_opts *o) {
  geom g;
  if (conv_geom(ctx, x, w, b, o, &g) < 0) return NULL;
  dl_tensor *xc = dl_contiguous(ctx, x);
  dl_tensor *wc = xc ? dl_contiguous(ctx, w) : NULL;
  int64_t nb = chunk_examples(&g);
  int64_t csh[2] = {g.K, nb * g.P}, ysh[2] = {g.Og, nb * g.P}, osh[4] = {g.N, g.O, g.Ho, g.Wo};
  dl_tensor *col = wc ? dl_tensor_new_empty(ctx, DL_F32, 2, csh) : NULL;
  dl_tensor *yg = col ? dl_tensor_new_empty(ctx, DL_F32, 2, ysh) : NULL;
  dl_tensor *out = yg ? dl_tensor_new_empty(ctx, DL_F32, 4, osh) : NULL;
  if (!out) {
    dl_tensor_release(xc); dl_tensor_release(wc); dl_tensor_release(col); dl_tensor_release(yg);
    return NULL;
  }
  dl_tensor *bc = b ? dl_tensor_new_contiguous(ctx, b, DL_F32) : NULL;
  if (b && !bc) {
    dl_tensor_release(xc); dl_tensor_release(wc); dl_tensor_release(col); dl_tensor_release(yg);
    dl_tensor_release(out);
    return NULL;
  }
  const float *wp = dl_data(wc);
  float *cp = col->st->data, *yp = yg->st->data, *op = out->st->data;
  for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
    int64_t m = g.N - n0 < nb ? g.N - n0 : nb, NP = m * g.P;
    for (int gi = 0; gi < o->groups; gi++) {
      col_job j = {&g, o, dl_data(xc), NULL, cp, gi * g.Cg, n0, NP};
      dl_pool_run(ctx->pool, (int)m, im2col_task, &j);
      dl_gemm(ctx, DL_F32, 0, 0, g.Og, NP, g.K, 1.0, wp + gi * g.Og * g.K, g.K, cp, NP, 0.0, yp, NP);
      move_job mj = {&g, yp, op, bc ? (const float *)dl_data(bc) : NULL, n0, NP, gi};
      dl_pool_run(ctx->pool, (int)m, scatter_task, &mj);
    }
  }
  dl_tensor_release(bc);
  dl_tensor_release(yg);
  dl_tensor_release(col);
  dl_tensor_release(xc);
  dl_tensor_release(wc);
  dl_tensor *in[3] = {x, w, b};
  int nin = b ? 3 : 2;
  if (!dl_needs_grad(ctx, nin, in)) return out;
  dl_node *nd = dl_node_new(ctx, "conv2d", bw_conv, nin, in);
  if (!nd) { dl_tensor_release(out); return NULL; }
  _Static_assert(sizeof(dl_conv_opts) <= sizeof nd->iv, "conv options fit the node");
  memcpy(&nd->iv[0], o, sizeof *o);
  return dl_record(ctx, out, nd);
}

static int bw_conv(dl_ctx *ctx, dl_node *n, dl_tensor *gy, dl_tensor **gin) {
  dl_conv_opts o;
  memcpy(&o, &n->iv[0], sizeof o);
  dl_tensor *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
  geom g;
  if (conv_geom(ctx, x, w, b, &o, &g) < 0) return -1;
  dl_tensor *gyc = dl_contiguous(ctx, gy);
  dl_tensor *xc = gyc ? dl_contiguous(ctx, x) : NULL;
  dl_tensor *wc = xc ? dl_contiguous(ctx, w) : NULL;
  int64_t nb = chunk_examples(&g);
  int64_t csh[2] = {g.K, nb * g.P}, ysh[2] = {g.Og, nb * g.P};
  dl_tensor *col = wc ? dl_tensor_new_empty(ctx, DL_F32, 2, csh) : NULL;
  dl_tensor *dyg = col ? dl_tensor_new_empty(ctx, DL_F32, 2, ysh) : NULL;
  dl_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  int rc = dyg ? 0 : -1;
  if (!rc && x->requires_grad && !(gx = dl_tensor_new_zeros(ctx, DL_F32, 4, x->shape))) rc = -1;
  /* gw needs no zero fill: the first chunk writes it with beta = 0 */
  if (!rc && w->requires_grad && !(gw = g.N > 0 ? dl_tensor_new_empty(ctx, DL_F32, 4, w->shape)
                                                : dl_tensor_new_zeros(ctx, DL_F32, 4, w->shape))) rc = -1;
  if (!rc && b && b->requires_grad && !(gb = dl_tensor_new_zeros(ctx, DL_F32, 1, b->shape))) rc = -1;
  if (!rc) {
    const float *wp = dl_data(wc), *gp = dl_data(gyc);
    float *cp = col->st->data, *dp = dyg->st->data;
    for (int64_t n0 = 0; n0 < g.N; n0 += nb) {
      int64_t m = g.N - n0 < nb ? g.N - n0 : nb, NP = m * g.P;
      for (int gi = 0; gi < o.groups; gi++) {
        move_job mj = {&g, dp, (float *)gp, NULL, n0, NP, gi};   /* dY[n0 + s, gi*Og + c, P] -> [Og, m*P] */
        dl_pool_run(ctx->pool, (int)m, gather_task, &mj);
        col_job j = {&g, &o, dl_data(xc), gx ? (float *)gx->st->data : NULL, cp, gi * g.Cg, n0, NP};
        if (gw) {                                 /* gW += dY col^T, summed over the chunks */
          dl_pool_run(ctx->pool, (int)m, im2col_task, &j);
          dl_gemm(ctx, DL_F32, 0, 1, g.Og, g.K, NP, 1.0, dp, NP, cp, NP, n0 == 0 ? 0.0 : 1.0,
                  (float *)gw->st->data + gi * g.Og * g.K, g.K);
        }
        if (gx) {
          dl_gemm(ctx, DL_F32, 1, 0, g.K, NP, g.Og, 1.0, wp + gi * g.Og * g.K, g.K, dp, NP, 0.0, cp, NP);
          dl_pool_run(ctx->pool, (int)m, col2im_task, &j);
        }
      }
    }
    if (gb) {
      float *bp = gb->st->data;
      for (int64_t c = 0; c < g.O; c++) {
        double acc = 0;
        for (int64_t s = 0; s < g.N; s++) {
          const float *dy = gp + (s * g.O + c) * g.P;
          for (int64_t q = 0; q < g.P; q++) acc += (double)dy[q];
        }
        bp[c] = (float)acc;
      }
    }
  }
  dl_tensor_release(dyg);
  dl_tensor_release(col); dl_tensor_release(xc); dl_tensor_release(wc); dl_tensor_release(gyc);
  if (rc) {
    dl_tensor_release(gx); dl_tensor_release(gw); dl_tensor_release(gb);
    return -1;
  }
  gin[0] = gx;
  gin[1] = gw;
  if (b) gin[2] = gb;
  return 0;
}

/* ------------------------------------------------------------ pooling */

static int bw_pool(dl_ctx *ctx, dl_node *n, dl_tensor *gy, dl_tensor **gin);

/* pooling runs over planes (n, c) split into equal chunks on the pool */
typedef struct {
  int max, k[2], s[2], p[2];
  int64_t H, W, Ho, Wo, planes;
  int ntask;
  const float *x;       /* forward input, or backward gradient of the output */
  float *out;           /* forward output, or backward input gradient */
  int64_t *arg;         /* argmax (max pooling) */
} pool_job;

static void pool_fwd_task(void *arg_, int t) {
  const pool_job *j = arg_;
  int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo;
  int64_t nc0 = j->planes * t / j->ntask, nc1 = j->planes * (t + 1) / j->ntask;
  if (j->max && j->k[0] == 2 && j->k[1] == 2 && j->s[0] == 2 && j->s[1] == 2 && j->p[0] == 0 && j->p[1] == 0) {
    for (int64_t nc = nc0; nc < nc1; nc++) {     /* the common 2x2/2 window: no bounds to test */
      const float *xi = j->x + nc * H * W;
      for (int64_t oh = 0; oh < Ho; oh++) {
        const float *r0 = xi + 2 * oh * W, *r1 = r0 + W;
        float *o = j->out + (nc * Ho + oh) * Wo;
        int64_t *ai = j->arg + (nc * Ho + oh) * Wo;
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

static void pool_bw_task(void *arg_, int t) {
  const pool_job *j = arg_;
  int64_t H = j->H, W = j->W, Ho = j->Ho, Wo = j->Wo;
  int64_t nc0 = j->planes * t / j->ntask, nc1 = j->planes * (t + 1) / j->ntask;
  float inv = 1.0f / (float)(j->k[0] * j->k[1]);
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

dl_tensor *dl_pool2d(dl_ctx *ctx, dl_tensor *x, const int k[2], const int s[2], const int p[2], int max) {
  const char *name = max ? "max_pool2d" : "avg_pool2d";
  char a[128];
  dl_shape_str(x->shape, x->ndim, a, sizeof a);
  if (x->ndim != 4 || x->dtype != DL_F32) return dl_fail(ctx, "%s: input %s must be a float32 [N, C, H, W]", name, a);
  for (int i = 0; i < 2; i++) {
    if (k[i] < 1 || s[i] < 1 || p[i] < 0) return dl_fail(ctx, "%s: kernel and stride must be >= 1, padding >= 0", name);
    if (2 * p[i] > k[i]) return dl_fail(ctx, "%s: padding %d must be at most half the kernel %d", name, p[i], k[i]);
  }
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t Ho = (H + 2 * p[0] - k[0]) / s[0] + 1, Wo = (W + 2 * p[1] - k[1]) / s[1] + 1;
  if (H + 2 * p[0] < k[0] || W + 2 * p[1] < k[1])
    return dl_fail(ctx, "%s: input %s is smaller than the kernel %dx%d", name, a, k[0], k[1]);
  int64_t osh[4] = {N, C, Ho, Wo};
  dl_tensor *xc = dl_contiguous(ctx, x);
  dl_tensor *out = xc ? dl_tensor_new_empty(ctx, DL_F32, 4, osh) : NULL;
  dl_tensor *arg = (out && max) ? dl_tensor_new_empty(ctx, DL_I64, 4, osh) : NULL;
  if (!out || (max && !arg)) { dl_tensor_release(xc); dl_tensor_release(out); return NULL; }
  pool_job j = {max, {k[0], k[1]}, {s[0], s[1]}, {p[0], p[1]}, H, W, Ho, Wo, N * C, 1, dl_data(xc),
                out->st->data, arg ? (int64_t *)arg->st->data : NULL};
  pool_run(ctx, &j, pool_fwd_task);
  dl_tensor_release(xc);
  if (!dl_needs_grad(ctx, 1, &x)) { dl_tensor_release(arg); return out; }
  dl_node *nd = dl_node_new(ctx, name, bw_pool, 1, &x);
  if (!nd) { dl_tensor_release(arg); dl_tensor_release(out); return NULL; }
  nd->saved[0] = arg;
  nd->iv[0] = max; nd->iv[1] = k[0]; nd->iv[2] = k[1]; nd->iv[3] = s[0]; nd->iv[4] = s[1];
  nd->iv[5] = p[0]; nd->iv[6] = p[1];
  return dl_record(ctx, out, nd);
}

static int bw_pool(dl_ctx *ctx, dl_node *n, dl_tensor *gy, dl_tensor **gin) {
  dl_tensor *x = n->in[0];
  int max = (int)n->iv[0], k0 = (int)n->iv[1], k1 = (int)n->iv[2], s0 = (int)n->iv[3], s1 = (int)n->iv[4];
  int p0 = (int)n->iv[5], p1 = (int)n->iv[6];
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t Ho = gy->shape[2], Wo = gy->shape[3];
  dl_tensor *gyc = dl_contiguous(ctx, gy);
  dl_tensor *gx = gyc ? dl_tensor_new_zeros(ctx, DL_F32, 4, x->shape) : NULL;
  if (!gx) { dl_tensor_release(gyc); return -1; }
  pool_job j = {max, {k0, k1}, {s0, s1}, {p0, p1}, H, W, Ho, Wo, N * C, 1, dl_data(gyc), gx->st->data,
                max ? (int64_t *)n->saved[0]->st->data : NULL};
  pool_run(ctx, &j, pool_bw_task);
  dl_tensor_release(gyc);
  gin[0] = gx;
  return 0;
}
