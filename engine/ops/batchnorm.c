/* batchnorm.c -- batch normalisation kernels: the stages of batchnorm.h and the
 * differentiable op dl_batch_norm built from them.
 *
 * The inner loops run along contiguous rows: one (example, channel) plane of
 * H * W values in [N, C, P] data, or one group of examples for a 2-D input,
 * which is transposed to [C, N] first so that its channels are contiguous
 * too. Sums of float32 rows use eight float lanes flushed into a double every
 * 512 values (packed adds, and accurate to far below float32 resolution);
 * float64 rows use double lanes. Work splits over the thread pool by blocks of
 * channels; within a block the stages run channel by channel, so a channel's
 * data is still in cache for the second and third pass. What this file does
 * not do: the moving-average bookkeeping across replicas and ranks (that is
 * lua/dlua/nn/batchnorm.lua), and it never allocates inside a stage.
 */
/* See LICENSE */
#include "ops/batchnorm.h"
#include "ops/kernels.h"

#include <math.h>
#include <string.h>

#define LANES 8
#define CHUNK 512

dl_bn_opts dl_bn_defaults(void) {
  dl_bn_opts o;
  memset(&o, 0, sizeof o);
  o.training = 1;
  o.momentum = 0.1;
  o.eps = 1e-5;
  o.replicas = 1;
  return o;
}

/* ------------------------------------------------------------ geometry */

int dl_bn_geom_init(dl_ctx *ctx, dl_bn_geom *g, int64_t N, int64_t C, int64_t P, int cn,
                    int64_t replicas, int64_t virtual_batch, int sync) {
  if (replicas < 1) {
    dl_fail(ctx, "batch_norm: replicas must be >= 1, got %lld", (long long)replicas);
    return -1;
  }
  if (virtual_batch < 0) {
    dl_fail(ctx, "batch_norm: virtual_batch must be >= 1 (or 0 for none), got %lld", (long long)virtual_batch);
    return -1;
  }
  if (N % replicas) {
    dl_fail(ctx, "batch_norm: a batch of %lld examples does not split into %lld equal replicas", (long long)N,
            (long long)replicas);
    return -1;
  }
  g->N = N; g->C = C; g->P = P; g->cn = cn;
  g->R = replicas;
  g->Nr = N / replicas;
  g->k = (virtual_batch == 0 || virtual_batch > g->Nr) ? g->Nr : virtual_batch;
  g->G = g->Nr ? g->Nr / g->k : 1;          /* the remainder joins the last group */
  g->sync = sync != 0;
  int64_t stats[3] = {g->R, g->G, C};           /* per replica, group and channel: bounds every product of them */
  if (dl_shape_check(ctx, "batch_norm", 3, stats, NULL) < 0) return -1;
  g->S = g->sync ? g->G : g->R * g->G;
  return 0;
}

void dl_bn_group(const dl_bn_geom *g, int64_t j, int64_t *start, int64_t *size) {
  int64_t r = j / g->G, q = j % g->G;
  *start = r * g->Nr + q * g->k;
  *size = q == g->G - 1 ? g->Nr - q * g->k : g->k;
}

int64_t dl_bn_group_set(const dl_bn_geom *g, int64_t j) { return g->sync ? j % g->G : j; }

double dl_bn_set_count(const dl_bn_geom *g, int64_t s) {
  int64_t start, size;
  dl_bn_group(g, s % g->G, &start, &size);  /* groups of a set all have the size of group s mod G */
  return (double)size * (double)g->P * (double)(g->sync ? g->R : 1);
}

/* group j, channel c as nrow rows of len contiguous values, rows rs apart */
typedef struct { int64_t off, nrow, len, rs; } block;

static block block_of(const dl_bn_geom *g, int64_t j, int64_t c) {
  int64_t start, size;
  dl_bn_group(g, j, &start, &size);
  block b;
  if (g->cn) {
    b.off = c * g->N + start; b.nrow = 1; b.len = size; b.rs = 0;
  } else {
    b.off = (start * g->C + c) * g->P; b.nrow = size; b.len = g->P; b.rs = g->C * g->P;
  }
  return b;
}

/* ------------------------------------------------------------ row kernels */

/* Float32 sums run on 2 x 4 float lanes, written with GCC's vector extension so
 * the compiler emits plain packed adds (its auto-vectoriser interleaves 8
 * scalar lanes with shuffles instead); the lanes are flushed into double every
 * CHUNK values. The row kernels below repeat that skeleton (centered_* and
 * bsums_* alike, each float32 kernel beside its float64 twin) on purpose: each
 * is the innermost loop of a pass, and sharing the skeleton would take a callback
 * or a code-generating macro inside it; change them together. */
typedef float v4f __attribute__((vector_size(16)));

static v4f load4(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}

static double hsum(v4f a, v4f b) {
  v4f s = a + b;
  return ((double)s[0] + (double)s[1]) + ((double)s[2] + (double)s[3]);
}

static double sum_f32(const float *x, int64_t n) {
  double s = 0;
  for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
    int64_t e = n - i0 < CHUNK ? n : i0 + CHUNK, i = i0;
    v4f a = {0}, b = {0};
    for (; i + LANES <= e; i += LANES) {
      a += load4(x + i);
      b += load4(x + i + 4);
    }
    for (; i < e; i++) s += (double)x[i];
    s += hsum(a, b);
  }
  return s;
}

static double sum_f64(const double *x, int64_t n) {
  double a[LANES] = {0}, s = 0;
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) a[l] += x[i + l];
  for (; i < n; i++) a[0] += x[i];
  for (int l = 0; l < LANES; l++) s += a[l];
  return s;
}

/* *s1 += sum (x - m), *s2 += sum (x - m)^2; bsums_* share this skeleton, kept apart (see above) */
static void centered_f32(const float *x, int64_t n, float m, double *s1, double *s2) {
  double t1 = 0, t2 = 0;
  v4f mv = {m, m, m, m};
  for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
    int64_t e = n - i0 < CHUNK ? n : i0 + CHUNK, i = i0;
    v4f a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    for (; i + LANES <= e; i += LANES) {
      v4f d0 = load4(x + i) - mv, d1 = load4(x + i + 4) - mv;
      a0 += d0; a1 += d1;
      b0 += d0 * d0; b1 += d1 * d1;
    }
    for (; i < e; i++) {
      double d = (double)(x[i] - m);
      t1 += d;
      t2 += d * d;
    }
    t1 += hsum(a0, a1);
    t2 += hsum(b0, b1);
  }
  *s1 += t1;
  *s2 += t2;
}

static void centered_f64(const double *x, int64_t n, double m, double *s1, double *s2) {
  double a[LANES] = {0}, b[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) {
      double d = x[i + l] - m;
      a[l] += d;
      b[l] += d * d;
    }
  for (; i < n; i++) {
    double d = x[i] - m;
    a[0] += d;
    b[0] += d * d;
  }
  for (int l = 0; l < LANES; l++) { *s1 += a[l]; *s2 += b[l]; }
}

/* *sdy += sum dy, *sdyx += sum dy (x - m); centered_*'s skeleton, kept apart (see above) */
static void bsums_f32(const float *dy, const float *x, int64_t n, float m, double *sdy, double *sdyx) {
  double t1 = 0, t2 = 0;
  v4f mv = {m, m, m, m};
  for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
    int64_t e = n - i0 < CHUNK ? n : i0 + CHUNK, i = i0;
    v4f a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};
    for (; i + LANES <= e; i += LANES) {
      v4f g0 = load4(dy + i), g1 = load4(dy + i + 4);
      a0 += g0; a1 += g1;
      b0 += g0 * (load4(x + i) - mv);
      b1 += g1 * (load4(x + i + 4) - mv);
    }
    for (; i < e; i++) {
      t1 += (double)dy[i];
      t2 += (double)(dy[i] * (x[i] - m));
    }
    t1 += hsum(a0, a1);
    t2 += hsum(b0, b1);
  }
  *sdy += t1;
  *sdyx += t2;
}

static void bsums_f64(const double *dy, const double *x, int64_t n, double m, double *sdy, double *sdyx) {
  double a[LANES] = {0}, b[LANES] = {0};
  int64_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int l = 0; l < LANES; l++) {
      a[l] += dy[i + l];
      b[l] += dy[i + l] * (x[i + l] - m);
    }
  for (; i < n; i++) {
    a[0] += dy[i];
    b[0] += dy[i] * (x[i] - m);
  }
  for (int l = 0; l < LANES; l++) { *sdy += a[l]; *sdyx += b[l]; }
}

/* y = (x - m) a + b */
static void affine_f32(float *y, const float *x, int64_t n, float m, float a, float b) {
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * a + b;
}

static void affine_f64(double *y, const double *x, int64_t n, double m, double a, double b) {
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * a + b;
}

/* dx = a dy + b (x - m) + c */
static void dx_f32(float *dx, const float *dy, const float *x, int64_t n, float m, float a, float b, float c) {
  for (int64_t i = 0; i < n; i++) dx[i] = a * dy[i] + b * (x[i] - m) + c;
}

static void dx_f64(double *dx, const double *dy, const double *x, int64_t n, double m, double a, double b,
                   double c) {
  for (int64_t i = 0; i < n; i++) dx[i] = a * dy[i] + b * (x[i] - m) + c;
}

/* the centre a row kernel really subtracts: m rounded to the data's dtype */
static double as_dtype(dl_dtype d, double m) { return d == DL_F32 ? (double)(float)m : m; }

static double param(dl_dtype d, const void *p, int64_t c, double def) {
  if (!p) return def;
  return d == DL_F32 ? (double)((const float *)p)[c] : ((const double *)p)[c];
}

/* ------------------------------------------------------------ stages */

/* Each stage walks the same (group, channel, row) blocks and calls its row kernel directly
 * in that walk: alike by design, since a shared walk would put a callback between the walk
 * and the innermost loop. */

void dl_bn_sums(const dl_bn_geom *g, dl_dtype d, const void *x, double *sum, int64_t c0, int64_t c1) {
  int64_t J = g->R * g->G;
  for (int64_t j = 0; j < J; j++)
    for (int64_t c = c0; c < c1; c++) {
      block b = block_of(g, j, c);
      double s = 0;
      for (int64_t r = 0; r < b.nrow; r++) {
        int64_t o = b.off + r * b.rs;
        s += d == DL_F32 ? sum_f32((const float *)x + o, b.len) : sum_f64((const double *)x + o, b.len);
      }
      sum[j * g->C + c] = s;
    }
}

void dl_bn_centered_sums(const dl_bn_geom *g, dl_dtype d, const void *x, const double *centre,
                         double *d1, double *d2, int64_t c0, int64_t c1) {
  int64_t J = g->R * g->G;
  for (int64_t j = 0; j < J; j++) {
    int64_t s = dl_bn_group_set(g, j);
    for (int64_t c = c0; c < c1; c++) {
      block b = block_of(g, j, c);
      double m = centre[s * g->C + c], t1 = 0, t2 = 0;
      for (int64_t r = 0; r < b.nrow; r++) {
        int64_t o = b.off + r * b.rs;
        if (d == DL_F32) centered_f32((const float *)x + o, b.len, (float)m, &t1, &t2);
        else centered_f64((const double *)x + o, b.len, m, &t1, &t2);
      }
      if (d == DL_F32) {                       /* the rows were centred on (float)m */
        double dm = m - (double)(float)m, cnt = (double)(b.nrow * b.len);
        t2 += -2.0 * dm * t1 + dm * dm * cnt;
        t1 -= dm * cnt;
      }
      d1[j * g->C + c] = t1;
      d2[j * g->C + c] = t2;
    }
  }
}

void dl_bn_combine(const dl_bn_geom *g, const double *grp, double *set, int64_t c0, int64_t c1) {
  for (int64_t s = 0; s < g->S; s++)
    for (int64_t c = c0; c < c1; c++) set[s * g->C + c] = 0;
  for (int64_t j = 0; j < g->R * g->G; j++) {
    int64_t s = dl_bn_group_set(g, j);
    for (int64_t c = c0; c < c1; c++) set[s * g->C + c] += grp[j * g->C + c];
  }
}

void dl_bn_finish(const dl_bn_geom *g, const double *n, const double *centre, const double *d1,
                  const double *d2, double eps, double *mean, double *var, double *rstd,
                  int64_t c0, int64_t c1) {
  for (int64_t s = 0; s < g->S; s++)
    for (int64_t c = c0; c < c1; c++) {
      int64_t i = s * g->C + c;
      double v = (d2[i] - d1[i] * d1[i] / n[s]) / n[s];
      if (v < 0) v = 0;
      mean[i] = centre[i] + d1[i] / n[s];
      var[i] = v;
      rstd[i] = 1.0 / sqrt(v + eps);
    }
}

void dl_bn_update_running(const dl_bn_geom *g, void *rm, void *rv, int f64, const double *n, const double *mean,
                          const double *var, double momentum, int64_t c0, int64_t c1) {
  for (int64_t r = 0; r < g->R; r++)
    for (int64_t c = c0; c < c1; c++) {
      double bm = 0, bv = 0;
      for (int64_t q = 0; q < g->G; q++) {
        int64_t s = dl_bn_group_set(g, r * g->G + q);
        bm += mean[s * g->C + c];
        bv += var[s * g->C + c] * n[s] / (n[s] - 1);
      }
      bm /= (double)g->G;
      bv /= (double)g->G;
      int64_t i = r * g->C + c;
      if (f64) {
        double *m = rm, *v = rv;
        m[i] = (1 - momentum) * m[i] + momentum * bm;
        v[i] = (1 - momentum) * v[i] + momentum * bv;
      } else {
        float *m = rm, *v = rv;
        m[i] = (float)((1 - momentum) * (double)m[i] + momentum * bm);
        v[i] = (float)((1 - momentum) * (double)v[i] + momentum * bv);
      }
    }
}

void dl_bn_normalize(const dl_bn_geom *g, dl_dtype d, void *y, const void *x, const double *mean,
                     const double *rstd, const void *gamma, const void *beta, int64_t c0, int64_t c1) {
  int64_t J = g->R * g->G;
  for (int64_t j = 0; j < J; j++) {
    int64_t s = dl_bn_group_set(g, j);
    for (int64_t c = c0; c < c1; c++) {
      block b = block_of(g, j, c);
      double mu = mean[s * g->C + c], m = as_dtype(d, mu);
      double a = rstd[s * g->C + c] * param(d, gamma, c, 1);
      double sh = param(d, beta, c, 0) + (m - mu) * a;   /* (x - mu) a = (x - m) a + (m - mu) a */
      for (int64_t r = 0; r < b.nrow; r++) {
        int64_t o = b.off + r * b.rs;
        if (d == DL_F32) affine_f32((float *)y + o, (const float *)x + o, b.len, (float)m, (float)a, (float)sh);
        else affine_f64((double *)y + o, (const double *)x + o, b.len, m, a, sh);
      }
    }
  }
}

void dl_bn_backward_sums(const dl_bn_geom *g, dl_dtype d, const void *dy, const void *x, const double *mean,
                         double *sdy, double *sdyx, int64_t c0, int64_t c1) {
  int64_t J = g->R * g->G;
  for (int64_t j = 0; j < J; j++) {
    int64_t s = dl_bn_group_set(g, j);
    for (int64_t c = c0; c < c1; c++) {
      block b = block_of(g, j, c);
      double mu = mean[s * g->C + c], m = as_dtype(d, mu), t1 = 0, t2 = 0;
      for (int64_t r = 0; r < b.nrow; r++) {
        int64_t o = b.off + r * b.rs;
        if (d == DL_F32) bsums_f32((const float *)dy + o, (const float *)x + o, b.len, (float)m, &t1, &t2);
        else bsums_f64((const double *)dy + o, (const double *)x + o, b.len, m, &t1, &t2);
      }
      sdy[j * g->C + c] = t1;
      sdyx[j * g->C + c] = t2 - (mu - m) * t1;      /* sum dy (x - mu) */
    }
  }
}

void dl_bn_backward_dx(const dl_bn_geom *g, dl_dtype d, void *dx, const void *dy, const void *x,
                       const double *n, const double *mean, const double *rstd, const double *sdy,
                       const double *sdyx, const void *gamma, int frozen, int64_t c0, int64_t c1) {
  int64_t J = g->R * g->G;
  for (int64_t j = 0; j < J; j++) {
    int64_t s = dl_bn_group_set(g, j);
    for (int64_t c = c0; c < c1; c++) {
      block blk = block_of(g, j, c);
      int64_t i = s * g->C + c;
      double mu = mean[i], m = as_dtype(d, mu), rs = rstd[i];
      double a = param(d, gamma, c, 1) * rs, b = 0, cc = 0;
      if (!frozen) {                 /* dx = a (dy - sdy/n - (x - mu) rs^2 sdyx/n) */
        b = -a * rs * rs * sdyx[i] / n[s];
        cc = -a * sdy[i] / n[s] + b * (m - mu);
      }
      for (int64_t r = 0; r < blk.nrow; r++) {
        int64_t o = blk.off + r * blk.rs;
        if (d == DL_F32)
          dx_f32((float *)dx + o, (const float *)dy + o, (const float *)x + o, blk.len, (float)m, (float)a,
                 (float)b, (float)cc);
        else
          dx_f64((double *)dx + o, (const double *)dy + o, (const double *)x + o, blk.len, m, a, b, cc);
      }
    }
  }
}

/* ------------------------------------------------------------ the op */

/* channels [c0, c1) of block i out of n */
static void chunk(int64_t C, int n, int i, int64_t *c0, int64_t *c1) {
  *c0 = C * i / n;
  *c1 = C * (i + 1) / n;
}

static int ntasks(dl_ctx *ctx, const dl_bn_geom *g) {
  if (dl_pool_threads(ctx->pool) == 1 || g->N * g->C * g->P < 32768) return 1;
  return g->C < 64 ? (int)g->C : 64;
}

/* A pass computes one stage of the forward or the backward for channels [c0, c1) of its
 * job (an fw_job or a bw_job). run_passes spreads the channels over ntask pool tasks;
 * fused, each channel goes through all the passes in turn while its data is in cache,
 * else (one pass between two cross-rank reductions) a task's channels go through as one block. */
typedef void (*bn_pass)(const void *job, int64_t c0, int64_t c1);

typedef struct {
  const void *job;
  const bn_pass *pass;
  int npass, fused, ntask;
  int64_t C;
} pass_run;

static void pass_task(void *arg, int i) {
  const pass_run *r = arg;
  int64_t c0, c1;
  chunk(r->C, r->ntask, i, &c0, &c1);
  if (!r->fused) {
    for (int k = 0; k < r->npass; k++) r->pass[k](r->job, c0, c1);
    return;
  }
  for (int64_t c = c0; c < c1; c++)
    for (int k = 0; k < r->npass; k++) r->pass[k](r->job, c, c + 1);
}

static void run_passes(dl_ctx *ctx, const void *job, int64_t C, int ntask, int fused, int npass,
                       const bn_pass *pass) {
  pass_run r = {job, pass, npass, fused, ntask, C};
  dl_pool_run(ctx->pool, ntask, pass_task, &r);
}

typedef struct {
  const dl_bn_geom *g;
  dl_dtype d;
  const void *x, *gamma, *beta;
  void *y;
  double eps;
  int frozen;                 /* fixed statistics: only the normalisation runs */
  int ntask;
  double *ssum, *n;           /* [S, C] sums, then the [S] counts right after (one reduction) */
  double *sd;                 /* [2, S, C] centred sums d1, d2 */
  double *centre, *var;       /* [S, C] */
  double *gs, *g1, *g2;       /* [J, C] per-group sums */
  double *mean, *rstd;        /* [S, C], saved for the backward */
} fw_job;

/* channels [c0, c1): x [N, C, P] -> group sums gs [J, C] -> set sums ssum [S, C] */
static void fw_pass1(const void *job, int64_t c0, int64_t c1) {
  const fw_job *j = job;
  dl_bn_sums(j->g, j->d, j->x, j->gs, c0, c1);
  dl_bn_combine(j->g, j->gs, j->ssum, c0, c1);
}

/* channels [c0, c1): centre [S, C] = ssum / n; x -> centred sums g1, g2 [J, C] -> sd [2, S, C] */
static void fw_pass2(const void *job, int64_t c0, int64_t c1) {
  const fw_job *j = job;
  const dl_bn_geom *g = j->g;
  for (int64_t s = 0; s < g->S; s++)
    for (int64_t c = c0; c < c1; c++)
      j->centre[s * g->C + c] = as_dtype(j->d, j->ssum[s * g->C + c] / j->n[s]);
  dl_bn_centered_sums(g, j->d, j->x, j->centre, j->g1, j->g2, c0, c1);
  dl_bn_combine(g, j->g1, j->sd, c0, c1);
  dl_bn_combine(g, j->g2, j->sd + g->S * g->C, c0, c1);
}

/* channels [c0, c1): sd -> mean, var, rstd [S, C] (unless frozen); x -> y [N, C, P] */
static void fw_pass3(const void *job, int64_t c0, int64_t c1) {
  const fw_job *j = job;
  const dl_bn_geom *g = j->g;
  if (!j->frozen)
    dl_bn_finish(g, j->n, j->centre, j->sd, j->sd + g->S * g->C, j->eps, j->mean, j->var, j->rstd, c0, c1);
  dl_bn_normalize(g, j->d, j->y, j->x, j->mean, j->rstd, j->gamma, j->beta, c0, c1);
}

/* [N, C] <-> [C, N] as a new contiguous tensor of dtype d */
static dl_tensor *transposed(dl_ctx *ctx, dl_tensor *t, dl_dtype d) {
  int64_t sh[2] = {t->shape[1], t->shape[0]}, st[2] = {t->stride[1], t->stride[0]};
  dl_tensor *v = dl_view_new(ctx, t, 2, sh, st, t->offset);
  dl_tensor *c = v ? dl_tensor_new_contiguous(ctx, v, d) : NULL;
  dl_tensor_release(v);
  return c;
}

static int check_param(dl_ctx *ctx, const char *what, const dl_tensor *p, const dl_tensor *x) {
  char a[128], b[128];
  if (!p) return 0;
  dl_shape_str(x->shape, x->ndim, a, sizeof a);
  dl_shape_str(p->shape, p->ndim, b, sizeof b);
  if (p->dtype != x->dtype) {
    dl_fail(ctx, "batch_norm: %s is %s but input %s is %s", what, dl_dtype_name(p->dtype), a,
            dl_dtype_name(x->dtype));
    return -1;
  }
  if (p->ndim != 1 || p->shape[0] != x->shape[1]) {
    dl_fail(ctx, "batch_norm: input %s has %lld channels but %s is %s", a, (long long)x->shape[1], what, b);
    return -1;
  }
  return 0;
}

static int check_running(dl_ctx *ctx, const char *what, const dl_tensor *t, const dl_tensor *x, int64_t R) {
  char a[128], b[128];
  dl_shape_str(x->shape, x->ndim, a, sizeof a);
  dl_shape_str(t->shape, t->ndim, b, sizeof b);
  if ((t->dtype != DL_F32 && t->dtype != DL_F64) || !dl_is_contiguous(t)) {
    dl_fail(ctx, "batch_norm: %s must be a contiguous float32 or float64 tensor", what);
    return -1;
  }
  int64_t want;
  if (dl_shape_mul(ctx, "batch_norm", "replicas x channels", R, x->shape[1], &want) < 0) return -1;
  if (dl_numel(t) != want || t->ndim < 1 || t->shape[t->ndim - 1] != x->shape[1]) {
    dl_fail(ctx, "batch_norm: %s %s does not hold %lld replicas x %lld channels of input %s", what, b,
            (long long)R, (long long)x->shape[1], a);
    return -1;
  }
  return 0;
}

#define IV_GEOM 10               /* node->iv: the 10 geometry fields, then frozen */

/* x [N, C] or [N, C, H, W], weight/bias [C] or NULL, running_mean/var [R, C] -> y [x's shape] */
dl_tensor *dl_batch_norm(dl_ctx *ctx, dl_tensor *x, dl_tensor *weight, dl_tensor *bias,
                         dl_tensor *running_mean, dl_tensor *running_var, const dl_bn_opts *o) {
  char a[128];
  dl_shape_str(x->shape, x->ndim, a, sizeof a);
  if (x->dtype != DL_F32 && x->dtype != DL_F64)
    return dl_fail(ctx, "batch_norm: input %s must be float32 or float64, got %s", a, dl_dtype_name(x->dtype));
  if (x->ndim != 2 && x->ndim != 4) return dl_fail(ctx, "batch_norm: input %s must be [N, C] or [N, C, H, W]", a);
  if (check_param(ctx, "weight", weight, x) < 0 || check_param(ctx, "bias", bias, x) < 0) return NULL;
  if (!(o->momentum >= 0 && o->momentum <= 1))
    return dl_fail(ctx, "batch_norm: momentum must be in [0, 1], got %g", o->momentum);
  if (!(o->eps > 0)) return dl_fail(ctx, "batch_norm: eps must be > 0, got %g", o->eps);
  if (o->replicas < 1) return dl_fail(ctx, "batch_norm: replicas must be >= 1, got %lld", (long long)o->replicas);
  if (!running_mean != !running_var)
    return dl_fail(ctx, "batch_norm: give both running_mean and running_var, or neither");
  if (!running_mean && !o->training)
    return dl_fail(ctx, "batch_norm: evaluation needs running_mean and running_var");
  if (running_mean && (check_running(ctx, "running_mean", running_mean, x, o->replicas) < 0 ||
                       check_running(ctx, "running_var", running_var, x, o->replicas) < 0))
    return NULL;
  if (running_mean && running_mean->dtype != running_var->dtype)
    return dl_fail(ctx, "batch_norm: running_mean is %s but running_var is %s", dl_dtype_name(running_mean->dtype),
                   dl_dtype_name(running_var->dtype));
  if (running_mean && running_mean->st == running_var->st)
    return dl_fail(ctx, "batch_norm: running_mean and running_var share storage");
  int64_t N = x->shape[0], C = x->shape[1], P = dl_shape_numel(x->ndim - 2, x->shape + 2);
  int cn = x->ndim == 2, frozen = !o->training;
  dl_bn_geom g;
  if (dl_bn_geom_init(ctx, &g, N, C, P, cn, frozen ? 1 : o->replicas, frozen ? 0 : o->virtual_batch,
                      frozen ? 0 : o->sync) < 0)
    return NULL;
  if (!frozen)
    for (int64_t s = 0; s < g.S; s++)
      if (dl_bn_set_count(&g, s) < 2)
        return dl_fail(ctx, "batch_norm: input %s gives a statistics group only %.0f value(s) per channel "
                            "(replicas %lld, virtual_batch %lld); training needs at least 2",
                       a, dl_bn_set_count(&g, s), (long long)o->replicas, (long long)o->virtual_batch);
  int staged = !frozen && g.sync && o->reducer;
  int64_t S = g.S, J = g.R * g.G, SC = S * C;

  dl_tensor *xc = cn ? transposed(ctx, x, x->dtype) : dl_contiguous_raw(ctx, x);
  dl_tensor *yc = xc ? dl_tensor_new_empty(ctx, x->dtype, xc->ndim, xc->shape) : NULL;
  int64_t nst = 2 * SC + S;
  dl_tensor *stats = yc ? dl_tensor_new_empty(ctx, DL_F64, 1, &nst) : NULL;   /* mean, rstd [S, C]; n [S] */
  size_t wbytes = sizeof(double) * (size_t)(frozen ? 1 : 5 * SC + S + 3 * J * C);
  double *w = stats ? dl_alloc(ctx, wbytes) : NULL;
  if (!w) {
    dl_tensor_release(xc); dl_tensor_release(yc); dl_tensor_release(stats);
    return NULL;
  }
  double *st = stats->st->data;
  fw_job j;
  memset(&j, 0, sizeof j);
  j.g = &g; j.d = x->dtype; j.x = dl_data(xc); j.y = yc->st->data;
  j.gamma = weight ? dl_data(weight) : NULL;
  j.beta = bias ? dl_data(bias) : NULL;
  j.eps = o->eps; j.frozen = frozen;
  j.mean = st; j.rstd = st + SC;
  j.ntask = ntasks(ctx, &g);
  if (frozen) {                   /* one set: the mean over replicas of the running averages */
    int f64 = running_mean->dtype == DL_F64;
    const float *rm = dl_data(running_mean), *rv = dl_data(running_var);
    const double *rmd = dl_data(running_mean), *rvd = dl_data(running_var);
    for (int64_t c = 0; c < C; c++) {
      double m = 0, v = 0;
      for (int64_t r = 0; r < o->replicas; r++) {
        int64_t i = r * C + c;
        m += f64 ? rmd[i] : (double)rm[i];
        v += f64 ? rvd[i] : (double)rv[i];
      }
      j.mean[c] = m / (double)o->replicas;
      j.rstd[c] = 1.0 / sqrt(v / (double)o->replicas + o->eps);
    }
    st[2 * SC] = dl_bn_set_count(&g, 0);
    run_passes(ctx, &j, C, j.ntask, 1, 1, (const bn_pass[]){fw_pass3});
  } else {
    j.ssum = w; j.n = w + SC; j.sd = w + SC + S; j.centre = j.sd + 2 * SC; j.var = j.centre + SC;
    j.gs = j.var + SC; j.g1 = j.gs + J * C; j.g2 = j.g1 + J * C;
    for (int64_t s = 0; s < S; s++) j.n[s] = dl_bn_set_count(&g, s);
    int rc = 0;
    if (!staged) {
      run_passes(ctx, &j, C, j.ntask, 1, 3, (const bn_pass[]){fw_pass1, fw_pass2, fw_pass3});
    } else {
      /* the shared sets' sums are added across ranks before the centre and the statistics are taken */
      run_passes(ctx, &j, C, j.ntask, 0, 1, (const bn_pass[]){fw_pass1});
      rc = o->reducer->sum(o->reducer->ud, ctx, j.ssum, SC + S);
      if (!rc) run_passes(ctx, &j, C, j.ntask, 0, 1, (const bn_pass[]){fw_pass2});
      if (!rc) rc = o->reducer->sum(o->reducer->ud, ctx, j.sd, 2 * SC);
      if (!rc) run_passes(ctx, &j, C, j.ntask, 0, 1, (const bn_pass[]){fw_pass3});
    }
    if (rc) {
      dl_free(ctx, w, wbytes);
      dl_tensor_release(xc); dl_tensor_release(yc); dl_tensor_release(stats);
      return NULL;
    }
    memcpy(st + 2 * SC, j.n, sizeof(double) * (size_t)S);
  }
  /* everything that can fail comes before the running averages change */
  dl_tensor *out = cn ? transposed(ctx, yc, yc->dtype) : dl_tensor_retain(yc);
  dl_tensor_release(yc);
  dl_tensor *in[3] = {x, weight, bias};
  dl_node *nd = dl_tape_record(ctx, DL_OP_BATCH_NORM, &out, 3, in);   /* out is NULL if that failed */
  if (!out) {
    dl_free(ctx, w, wbytes);
    dl_tensor_release(xc); dl_tensor_release(stats);
    return NULL;
  }
  if (!frozen && running_mean)
    dl_bn_update_running(&g, dl_data(running_mean), dl_data(running_var), running_mean->dtype == DL_F64, j.n, j.mean, j.var, o->momentum, 0, C);
  dl_free(ctx, w, wbytes);
  if (!nd) {
    dl_tensor_release(xc); dl_tensor_release(stats);
    return out;
  }
  _Static_assert(sizeof g == IV_GEOM * sizeof(int64_t) && IV_GEOM < 2 * DL_MAXDIM, "geometry fits the node");
  memcpy(nd->iv, &g, sizeof g);
  nd->iv[IV_GEOM] = frozen;
  nd->niv = IV_GEOM + 1;
  nd->saved[0] = stats;
  nd->saved[1] = xc;
  nd->user = staged ? (void *)o->reducer : NULL;    /* borrowed: outlives the graph (see dl_bn_reducer) */
  return out;
}

/* ------------------------------------------------------------ backward */

typedef struct {
  const dl_bn_geom *g;
  dl_dtype d;
  const void *dy, *x, *gamma;
  void *dx;                   /* NULL: x needs no gradient */
  const double *n, *mean, *rstd;
  double *gdy, *gdyx;         /* [J, C] */
  double *sums;               /* [2, S, C]: sdy, sdyx over each set */
  double *dgamma, *dbeta;     /* [C], local sums */
  int frozen, ntask;
} bw_job;

/* channels [c0, c1): dy, x [N, C, P] -> gdy, gdyx [J, C] -> dgamma, dbeta [C] and set sums [2, S, C] */
static void bw_pass1(const void *job, int64_t c0, int64_t c1) {
  const bw_job *j = job;
  const dl_bn_geom *g = j->g;
  dl_bn_backward_sums(g, j->d, j->dy, j->x, j->mean, j->gdy, j->gdyx, c0, c1);
  for (int64_t c = c0; c < c1; c++) {
    double sg = 0, sb = 0;
    for (int64_t q = 0; q < g->R * g->G; q++) {
      sg += j->rstd[dl_bn_group_set(g, q) * g->C + c] * j->gdyx[q * g->C + c];
      sb += j->gdy[q * g->C + c];
    }
    j->dgamma[c] = sg;
    j->dbeta[c] = sb;
  }
  if (!j->frozen && j->dx) {
    dl_bn_combine(g, j->gdy, j->sums, c0, c1);
    dl_bn_combine(g, j->gdyx, j->sums + g->S * g->C, c0, c1);
  }
}

/* channels [c0, c1): dy, x [N, C, P], set sums -> dx [N, C, P] */
static void bw_pass2(const void *job, int64_t c0, int64_t c1) {
  const bw_job *j = job;
  if (!j->dx) return;
  const dl_bn_geom *g = j->g;
  dl_bn_backward_dx(g, j->d, j->dx, j->dy, j->x, j->n, j->mean, j->rstd, j->sums, j->sums + g->S * g->C,
                    j->gamma, j->frozen, c0, c1);
}

/* a [C] tensor of dtype d from double values */
static dl_tensor *param_grad(dl_ctx *ctx, dl_dtype d, const double *v, int64_t C) {
  dl_tensor *t = dl_tensor_new_empty(ctx, d, 1, &C);
  if (!t) return NULL;
  for (int64_t c = 0; c < C; c++) dl_store(t->st->data, d, c, v[c]);
  return t;
}

/* gy [x's shape] -> gx [x's shape], gweight, gbias [C] */
int dl_bw_batch_norm(dl_ctx *ctx, dl_node *n, dl_tensor *gy, dl_tensor **gin) {
  dl_bn_geom g;
  memcpy(&g, n->iv, sizeof g);
  int frozen = (int)n->iv[IV_GEOM];
  dl_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *stats = n->saved[0], *xc = n->saved[1];
  const dl_bn_reducer *red = n->user;
  int64_t C = g.C, S = g.S, J = g.R * g.G, SC = S * C;
  int need_dx = x->requires_grad;
  dl_tensor *dyc = g.cn ? transposed(ctx, gy, x->dtype)                 /* in x's layout and dtype */
                 : (gy->dtype == x->dtype && dl_is_contiguous(gy)) ? dl_tensor_retain(gy)
                 : dl_tensor_new_contiguous(ctx, gy, x->dtype);
  dl_tensor *dxc = (dyc && need_dx) ? dl_tensor_new_empty(ctx, x->dtype, xc->ndim, xc->shape) : NULL;
  size_t wbytes = sizeof(double) * (size_t)(2 * J * C + 2 * SC + 2 * C);
  double *wk = (dyc && (dxc || !need_dx)) ? dl_alloc(ctx, wbytes) : NULL;
  if (!wk) {
    dl_tensor_release(dyc); dl_tensor_release(dxc);
    return -1;
  }
  const double *st = stats->st->data;
  bw_job j;
  memset(&j, 0, sizeof j);
  j.g = &g; j.d = x->dtype; j.dy = dl_data(dyc); j.x = dl_data(xc);
  j.gamma = w ? dl_data(w) : NULL;
  j.dx = dxc ? dxc->st->data : NULL;
  j.mean = st; j.rstd = st + SC; j.n = st + 2 * SC;
  j.gdy = wk; j.gdyx = wk + J * C; j.sums = wk + 2 * J * C; j.dgamma = j.sums + 2 * SC; j.dbeta = j.dgamma + C;
  j.frozen = frozen;
  j.ntask = ntasks(ctx, &g);
  int rc = 0;
  if (!red || frozen || !need_dx) {
    run_passes(ctx, &j, C, j.ntask, 1, 2, (const bn_pass[]){bw_pass1, bw_pass2});
  } else {
    run_passes(ctx, &j, C, j.ntask, 0, 1, (const bn_pass[]){bw_pass1});
    rc = red->sum(red->ud, ctx, j.sums, 2 * SC);
    if (!rc) run_passes(ctx, &j, C, j.ntask, 0, 1, (const bn_pass[]){bw_pass2});
  }
  dl_tensor *gx = NULL, *gw = NULL, *gb = NULL;
  if (!rc && dxc) {
    gx = g.cn ? transposed(ctx, dxc, dxc->dtype) : dl_tensor_retain(dxc);
    if (!gx) rc = -1;
  }
  if (!rc && w && w->requires_grad && !(gw = param_grad(ctx, w->dtype, j.dgamma, C))) rc = -1;
  if (!rc && b && b->requires_grad && !(gb = param_grad(ctx, b->dtype, j.dbeta, C))) rc = -1;
  dl_free(ctx, wk, wbytes);
  dl_tensor_release(dyc);
  dl_tensor_release(dxc);
  return dl_grads_out(rc, gin, 3, (dl_tensor *[]){gx, gw, gb});
}
