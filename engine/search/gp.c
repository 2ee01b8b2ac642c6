/* gp.c -- Gaussian-process regression for Bayesian search (see gp.h).
 *
 * Kernel matrices are column-major lower triangles, factored by LAPACK's
 * dpotrf; the marginal-likelihood gradient needs K^-1, taken from the factor
 * by dpotri. The hyperparameter search is a small projected L-BFGS (the
 * L-BFGS direction on the variables not held at a bound, a backtracking
 * Armijo search on the projected step) on -(lml + log prior) in log space.
 * A fitted GP keeps its factor with spare rows, so a belief (the kriging
 * believer of a batch) is a rank-one extension instead of a refactorisation.
 * This file does no acquisition search and knows nothing about spaces.
 */
/* See LICENSE */
#include "search/gp.h"
#include "search/gp_impl.h"

#include <cblas.h>
#include <f77blas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOG2PI 1.83787706640934548356
#define JITTER 1e-9             /* added to the diagonal, standardised units */
#define LBFGS_MEM 6
#define PREDICT_CHUNK 128

/* weak log-normal priors on l (feature units), sf2 and sn2 (standardised units) */
static const double PRIOR_L_MU = -0.69314718055994531, PRIOR_L_SD = 1.0;
static const double PRIOR_SF_MU = 0.0, PRIOR_SF_SD = 1.0;
static const double PRIOR_SN_MU = -6.90775527898213705, PRIOR_SN_SD = 3.0;

dl_gp_opts dl_gp_defaults(void) {
  dl_gp_opts o = {.theta = NULL, .fit = 1, .iters = 60, .starts = 0, .max_points = 800, .classify = 0,
                  .coarse_points = 128, .fine_iters = 30, .fit_points = 512};
  return o;
}

/* ------------------------------------------------------------------ kernel */

static void bounds(int dim, int classify, double *lo, double *hi) {
  for (int d = 0; d < dim; d++) {
    lo[d] = log(classify ? 0.3 : 0.02);
    hi[d] = log(20.0);
  }
  lo[dim] = log(classify ? 0.5 : 0.05);
  hi[dim] = log(classify ? 2.0 : 20.0);
  lo[dim + 1] = log(classify ? 1e-3 : 1e-6);
  hi[dim + 1] = log(classify ? 0.3 : 1.0);
}

static void default_theta(int dim, double *t) {
  for (int d = 0; d < dim; d++) t[d] = log(0.5);
  t[dim] = 0;
  t[dim + 1] = log(1e-3);
}


/* --------------------------------------------------------------- objective */

typedef struct {
  dl_ctx *ctx;
  const double *X, *y;
  int n, dim, classify;
  double *K, *W, *alpha, *inv_l2;   /* [n, n], [n, n], [n], [dim] workspace */
} fitdata;

static int fit_alloc(fitdata *f) {
  size_t nn = (size_t)f->n * (size_t)f->n;
  f->K = dl_alloc(f->ctx, (nn ? nn : 1) * sizeof(double));
  f->W = dl_alloc(f->ctx, (nn ? nn : 1) * sizeof(double));
  f->alpha = dl_alloc(f->ctx, (size_t)(f->n + 1) * sizeof(double));
  f->inv_l2 = dl_alloc(f->ctx, (size_t)f->dim * sizeof(double));
  return (f->K && f->W && f->alpha && f->inv_l2) ? 0 : -1;
}

static void fit_free(fitdata *f) {
  size_t nn = (size_t)f->n * (size_t)f->n;
  dl_free(f->ctx, f->K, (nn ? nn : 1) * sizeof(double));
  dl_free(f->ctx, f->W, (nn ? nn : 1) * sizeof(double));
  dl_free(f->ctx, f->alpha, (size_t)(f->n + 1) * sizeof(double));
  dl_free(f->ctx, f->inv_l2, (size_t)f->dim * sizeof(double));
}

static double log_prior(const double *t, int dim, double *grad) {
  double lp = 0;
  for (int d = 0; d < dim + 2; d++) {
    double mu = d < dim ? PRIOR_L_MU : (d == dim ? PRIOR_SF_MU : PRIOR_SN_MU);
    double sd = d < dim ? PRIOR_L_SD : (d == dim ? PRIOR_SF_SD : PRIOR_SN_SD);
    double z = (t[d] - mu) / sd;
    lp -= 0.5 * z * z;
    if (grad) grad[d] = -z / sd;
  }
  return lp;
}

/* lml + log prior at t; grad (may be NULL) gets its gradient. -INFINITY when
 * K is not positive definite. */
static double objective(fitdata *f, const double *t, double *grad) {
  int n = f->n, dim = f->dim;
  blasint bn = n, info = 0, one = 1;
  for (int d = 0; d < dim; d++) f->inv_l2[d] = exp(-2 * t[d]);
  double sf2 = exp(t[dim]), sn2 = exp(t[dim + 1]);
  double *K = f->K;
  /* the lower triangles of K and W hold K and its inverse; their strict upper
   * triangles keep r^2 and exp(-sqrt5 r) of each pair for the gradient */
  double *W = f->W;
  for (int j = 0; j < n; j++) {
    const double *xj = f->X + (size_t)j * dim;
    K[j + (size_t)j * n] = matern(0, sf2);
    K[j + (size_t)j * n] += sn2 + JITTER;            /* as before: the same bits */
    for (int i = j + 1; i < n; i++) {
      double r2 = sq_dist(f->X + (size_t)i * dim, xj, f->inv_l2, dim), r = sqrt(r2), e = exp(-SQRT5 * r);
      K[i + (size_t)j * n] = sf2 * (1 + SQRT5 * r + (5.0 / 3.0) * r2) * e;
      K[j + (size_t)i * n] = r2;
      W[j + (size_t)i * n] = e;
    }
  }
  double lml = log_prior(t, dim, grad);
  if (n == 0) return lml;
  char lower = 'L';
  dpotrf_(&lower, &bn, K, &bn, &info);
  if (info != 0) return -INFINITY;
  memcpy(f->alpha, f->y, (size_t)n * sizeof(double));
  dpotrs_(&lower, &bn, &one, K, &bn, f->alpha, &bn, &info);
  for (int i = 0; i < n; i++) lml -= 0.5 * f->y[i] * f->alpha[i] + log(K[i + (size_t)i * n]);
  lml -= 0.5 * n * LOG2PI;
  if (!grad) return lml;
  /* dlml/dt = 1/2 sum_ij (alpha alpha^T - K^-1)_ij dK_ij/dt */
  for (int j = 0; j < n; j++) memcpy(W + j + (size_t)j * n, K + j + (size_t)j * n, (size_t)(n - j) * sizeof(double));
  dpotri_(&lower, &bn, W, &bn, &info);
  if (info != 0) return -INFINITY;
  double gf = 0, gn = 0;
  double *gl = grad;                                  /* accumulate the length-scale terms in place */
  for (int j = 0; j < n; j++) {
    const double *xj = f->X + (size_t)j * dim;
    double ajj = f->alpha[j];
    double wd = ajj * ajj - W[j + (size_t)j * n];
    gf += 0.5 * wd * sf2;
    gn += 0.5 * wd * sn2;
    for (int i = j + 1; i < n; i++) {
      const double *xi = f->X + (size_t)i * dim;
      double w = f->alpha[i] * ajj - W[i + (size_t)j * n];
      double r2 = K[j + (size_t)i * n], r = sqrt(r2), e = W[j + (size_t)i * n];
      gf += w * sf2 * (1 + SQRT5 * r + (5.0 / 3.0) * r2) * e;
      double c = w * sf2 * (5.0 / 3.0) * (1 + SQRT5 * r) * e;
      for (int d = 0; d < dim; d++) {
        double dx = xi[d] - xj[d];
        gl[d] += c * dx * dx * f->inv_l2[d];
      }
    }
  }
  grad[dim] += gf;
  grad[dim + 1] += gn;
  return lml;
}

double dl_gp_objective(dl_ctx *ctx, const double *X, const double *y, int n, int dim, const double *theta,
                       int classify, double *grad) {
  fitdata f = {.ctx = ctx, .X = X, .y = y, .n = n, .dim = dim, .classify = classify};
  if (fit_alloc(&f) != 0) {
    fit_free(&f);
    return NAN;
  }
  double v = objective(&f, theta, grad);
  fit_free(&f);
  return v;
}

/* ------------------------------------------------------------------ L-BFGS */

static void clamp(double *x, const double *lo, const double *hi, int m) {
  for (int j = 0; j < m; j++) x[j] = x[j] < lo[j] ? lo[j] : (x[j] > hi[j] ? hi[j] : x[j]);
}

static double dot(const double *a, const double *b, int m) {
  double s = 0;
  for (int j = 0; j < m; j++) s += a[j] * b[j];
  return s;
}

/* -objective and its gradient (minimised); +INFINITY when not positive definite */
static double neg_objective(fitdata *f, const double *t, double *g) {
  double v = objective(f, t, g);
  for (int j = 0; j < f->dim + 2; j++) g[j] = -g[j];
  return -v;
}

/* Minimises -objective from x (in place) inside [lo, hi]; returns the value at x.
 * work holds (2 LBFGS_MEM + 5) m doubles. */
static double lbfgs(fitdata *f, double *x, const double *lo, const double *hi, int iters, double *work) {
  int m = f->dim + 2;
  double *g = work, *xn = g + m, *gn = xn + m, *d = gn + m, *q = d + m;
  double *S = q + m, *Y = S + LBFGS_MEM * m, rho[LBFGS_MEM], a[LBFGS_MEM];
  clamp(x, lo, hi, m);
  double fx = neg_objective(f, x, g);
  if (!isfinite(fx)) return fx;
  int k = 0, head = 0;                               /* stored pairs; next slot */
  for (int it = 0; it < iters; it++) {
    for (int j = 0; j < m; j++) {
      int held = (x[j] <= lo[j] && g[j] > 0) || (x[j] >= hi[j] && g[j] < 0);
      q[j] = held ? 0 : g[j];
    }
    for (int c = 0; c < k; c++) {                    /* newest to oldest */
      int s = (head - 1 - c + LBFGS_MEM) % LBFGS_MEM;
      a[s] = rho[s] * dot(S + s * m, q, m);
      for (int j = 0; j < m; j++) q[j] -= a[s] * Y[s * m + j];
    }
    if (k > 0) {
      int s = (head - 1 + LBFGS_MEM) % LBFGS_MEM;
      double gamma = dot(S + s * m, Y + s * m, m) / dot(Y + s * m, Y + s * m, m);
      for (int j = 0; j < m; j++) q[j] *= gamma;
    }
    for (int c = k - 1; c >= 0; c--) {               /* oldest to newest */
      int s = (head - 1 - c + LBFGS_MEM) % LBFGS_MEM;
      double b = rho[s] * dot(Y + s * m, q, m);
      for (int j = 0; j < m; j++) q[j] += S[s * m + j] * (a[s] - b);
    }
    double dmax = 0;
    for (int j = 0; j < m; j++) {
      int held = (x[j] <= lo[j] && g[j] > 0) || (x[j] >= hi[j] && g[j] < 0);
      d[j] = held ? 0 : -q[j];
    }
    double gd = dot(g, d, m);
    if (!(gd < 0)) {                                 /* not a descent direction: steepest descent */
      k = 0;
      for (int j = 0; j < m; j++) {
        int held = (x[j] <= lo[j] && g[j] > 0) || (x[j] >= hi[j] && g[j] < 0);
        d[j] = held ? 0 : -g[j];
      }
      gd = dot(g, d, m);
      if (!(gd < -1e-12)) break;                     /* projected gradient vanishes */
    }
    for (int j = 0; j < m; j++) dmax = fmax(dmax, fabs(d[j]));
    double step = k == 0 ? fmin(1.0, 0.5 / dmax) : fmin(1.0, 2.0 / dmax);
    double fn = INFINITY;
    int accepted = 0;
    for (int ls = 0; ls < 20 && !accepted; ls++) {
      for (int j = 0; j < m; j++) xn[j] = x[j] + step * d[j];
      clamp(xn, lo, hi, m);
      double dec = 0;
      for (int j = 0; j < m; j++) dec += g[j] * (xn[j] - x[j]);
      fn = neg_objective(f, xn, gn);
      if (isfinite(fn) && fn <= fx + 1e-4 * fmin(dec, 0.0) && fn <= fx) accepted = 1;
      else step *= 0.5;
    }
    if (!accepted) break;
    double *s = S + head * m, *yv = Y + head * m;
    for (int j = 0; j < m; j++) {
      s[j] = xn[j] - x[j];
      yv[j] = gn[j] - g[j];
    }
    double sy = dot(s, yv, m);
    if (sy > 1e-10) {
      rho[head] = 1 / sy;
      head = (head + 1) % LBFGS_MEM;
      if (k < LBFGS_MEM) k++;
    }
    double gain = fx - fn;
    memcpy(x, xn, (size_t)m * sizeof(double));
    memcpy(g, gn, (size_t)m * sizeof(double));
    fx = fn;
    if (gain < 1e-7 * (1 + fabs(fx))) break;
  }
  return fx;
}

/* --------------------------------------------------------------- the model */

static size_t bytes_of(int cap, int dim) {         /* one block: X, y, noise, L, alpha */
  return ((size_t)cap * (size_t)dim + 3 * (size_t)cap + (size_t)cap * (size_t)cap) * sizeof(double);
}

/* (Re)allocates g's arrays for cap points, keeping the first g->n */
static int reserve(dl_gp *g, int cap) {
  double *blk = dl_alloc(g->ctx, bytes_of(cap, g->dim));
  if (!blk) return -1;
  double *X = blk, *y = X + (size_t)cap * g->dim, *noise = y + cap, *alpha = noise + cap, *L = alpha + cap;
  if (g->X) {
    memcpy(X, g->X, (size_t)g->n * g->dim * sizeof(double));
    memcpy(y, g->y, (size_t)g->n * sizeof(double));
    memcpy(noise, g->noise, (size_t)g->n * sizeof(double));
    memcpy(alpha, g->alpha, (size_t)g->n * sizeof(double));
    for (int j = 0; j < g->n; j++) memcpy(L + (size_t)j * cap, g->L + (size_t)j * g->cap, (size_t)g->n * sizeof(double));
    dl_free(g->ctx, g->X, bytes_of(g->cap, g->dim));
  }
  g->X = X, g->y = y, g->noise = noise, g->alpha = alpha, g->L = L, g->cap = cap;
  return 0;
}

static dl_gp *gp_new(dl_ctx *ctx, int dim, int cap) {
  dl_gp *g = dl_alloc(ctx, sizeof *g);
  if (!g) return NULL;
  memset(g, 0, sizeof *g);
  g->ctx = ctx;
  g->dim = dim;
  g->theta = dl_alloc(ctx, (size_t)(2 * dim + 2) * sizeof(double));
  if (!g->theta || reserve(g, cap > 0 ? cap : 1) != 0) {
    dl_gp_release(g);
    return NULL;
  }
  g->inv_l2 = g->theta + dim + 2;
  g->lml = -INFINITY;
  g->mean = 0, g->sd = 1;
  return g;
}

void dl_gp_release(dl_gp *g) {
  if (!g) return;
  dl_ctx *ctx = g->ctx;
  if (g->X) dl_free(ctx, g->X, bytes_of(g->cap, g->dim));
  if (g->theta) dl_free(ctx, g->theta, (size_t)(2 * g->dim + 2) * sizeof(double));
  dl_free(ctx, g, sizeof *g);
}

/* the kernel's parameters from g->theta */
static void apply_theta(dl_gp *g) {
  const double *t = g->theta;
  for (int d = 0; d < g->dim; d++) g->inv_l2[d] = exp(-2 * t[d]);
  g->sf2 = exp(t[g->dim]);
  g->sn2 = exp(t[g->dim + 1]);
}

/* Factors K + diag(noise) of g's n points into g->L and solves alpha; raises
 * the jitter until the factor exists. noise[] holds the base noise. */
static int factor(dl_gp *g, const double *base_noise) {
  int n = g->n, cap = g->cap, dim = g->dim;
  blasint bn = n, bcap = cap, info = 0, one = 1;
  char lower = 'L';
  if (n == 0) return 0;
  double jitter = JITTER;
  for (int attempt = 0; attempt < 10; attempt++, jitter *= 100) {
    for (int j = 0; j < n; j++) {
      const double *xj = g->X + (size_t)j * dim;
      for (int i = j; i < n; i++)
        g->L[i + (size_t)j * cap] = matern(sq_dist(g->X + (size_t)i * dim, xj, g->inv_l2, dim), g->sf2);
      g->noise[j] = base_noise[j] + jitter;
      g->L[j + (size_t)j * cap] += g->noise[j];
    }
    dpotrf_(&lower, &bn, g->L, &bcap, &info);
    if (info == 0) {
      g->jitter = jitter;
      memcpy(g->alpha, g->y, (size_t)n * sizeof(double));
      dpotrs_(&lower, &bn, &one, g->L, &bcap, g->alpha, &bn, &info);
      return 0;
    }
  }
  dl_fail(g->ctx, "dl_gp_fit: the kernel matrix is not positive definite even with jitter %g", jitter);
  return -1;
}

int dl_gp_subset(dl_ctx *ctx, const double *X, const double *y, int n, int dim, int m, int *idx) {
  if (m >= n) {
    for (int i = 0; i < n; i++) idx[i] = i;
    return 0;
  }
  double *dmin = dl_alloc(ctx, (size_t)n * sizeof(double));
  char *taken = dl_alloc(ctx, (size_t)n);
  if (!dmin || !taken) {
    dl_free(ctx, dmin, (size_t)n * sizeof(double));
    dl_free(ctx, taken, (size_t)n);
    return -1;
  }
  memset(taken, 0, (size_t)n);
  int k = m / 4 > 0 ? m / 4 : 1, got = 0;
  for (; got < k; got++) {                           /* the k lowest y, by selection (k n, n <= a few 1e4) */
    int b = -1;
    for (int i = 0; i < n; i++)
      if (!taken[i] && (b < 0 || y[i] < y[b])) b = i;
    taken[b] = 1;
    idx[got] = b;
  }
  for (int i = 0; i < n; i++) {
    dmin[i] = INFINITY;
    for (int c = 0; c < got; c++) {
      double r2 = 0;
      for (int d = 0; d < dim; d++) r2 += (X[(size_t)i * dim + d] - X[(size_t)idx[c] * dim + d]) *
                                          (X[(size_t)i * dim + d] - X[(size_t)idx[c] * dim + d]);
      dmin[i] = fmin(dmin[i], r2);
    }
  }
  for (; got < m; got++) {                           /* greedy maximin */
    int b = -1;
    for (int i = 0; i < n; i++)
      if (!taken[i] && (b < 0 || dmin[i] > dmin[b])) b = i;
    taken[b] = 1;
    idx[got] = b;
    for (int i = 0; i < n; i++) {
      double r2 = 0;
      for (int d = 0; d < dim; d++) r2 += (X[(size_t)i * dim + d] - X[(size_t)b * dim + d]) *
                                          (X[(size_t)i * dim + d] - X[(size_t)b * dim + d]);
      dmin[i] = fmin(dmin[i], r2);
    }
  }
  dl_free(ctx, dmin, (size_t)n * sizeof(double));
  dl_free(ctx, taken, (size_t)n);
  return 0;
}

/* The hyperparameters of a fit with options o to m < n evenly spaced points
 * of (X, y), point floor(k n / m) for k = 0 .. m - 1: a sample of the history
 * as it came (the subset rule's best quarter and spread-out rest would bias
 * the noise low). theta gets them with the amplitude and noise moved into g's
 * standardisation, *lml the sub-fit's objective. */
static int subset_theta(dl_ctx *ctx, const double *X, const double *y, int n, int dim, dl_gp_opts o, int m,
                        const dl_gp *g, double *theta, double *lml) {
  size_t xbytes = (size_t)m * (size_t)dim * sizeof(double), ybytes = (size_t)(m + dim + 2) * sizeof(double);
  double *Xs = dl_alloc(ctx, xbytes), *ys = dl_alloc(ctx, ybytes);
  dl_gp *sg = NULL;
  if (Xs && ys) {
    double s = 0, v = 0;
    for (int k = 0; k < m; k++) {
      size_t i = (size_t)k * (size_t)n / (size_t)m;
      memcpy(Xs + (size_t)k * dim, X + i * dim, (size_t)dim * sizeof(double));
      ys[k] = y[i];
      s += ys[k];
    }
    for (int k = 0; k < m; k++) v += (ys[k] - s / m) * (ys[k] - s / m);
    if (o.theta) {                                   /* a warm start moves into the subset's standardisation */
      double sd = (o.classify || m < 2 || !(sqrt(v / m) > 1e-12)) ? 1.0 : sqrt(v / m), shift = 2 * log(sd / g->sd);
      double *t = ys + m;
      memcpy(t, o.theta, (size_t)(dim + 2) * sizeof(double));
      t[dim] -= shift;
      t[dim + 1] -= shift;
      o.theta = t;
    }
    o.max_points = 0;
    sg = dl_gp_fit_new(ctx, Xs, ys, m, dim, &o);
  }
  dl_free(ctx, Xs, xbytes);
  dl_free(ctx, ys, ybytes);
  if (!sg) return -1;
  dl_gp_theta(sg, theta);
  double shift = 2 * log(sg->sd / g->sd);
  theta[dim] += shift;
  theta[dim + 1] += shift;
  *lml = sg->lml;
  dl_gp_release(sg);
  return 0;
}

/* the hyperparameter search on the (already standardised) points of g */
static int optimise(dl_gp *g, const dl_gp_opts *o) {
  int dim = g->dim, m = dim + 2;
  fitdata f = {.ctx = g->ctx, .X = g->X, .y = g->y, .n = g->n, .dim = dim, .classify = o->classify};
  size_t tbytes = (size_t)m * (6 + 2 * 4 + 2 * LBFGS_MEM + 5) * sizeof(double);
  double *tw = dl_alloc(g->ctx, tbytes);
  if (fit_alloc(&f) != 0 || !tw) {
    fit_free(&f);
    dl_free(g->ctx, tw, tbytes);
    return -1;
  }
  double *lo = tw, *hi = lo + m, *starts = hi + m, *val = starts + 4 * m, *best = val + 4, *work = best + m;
  bounds(dim, o->classify, lo, hi);
  int ns = 0;
  if (o->theta) memcpy(starts + (ns++) * m, o->theta, (size_t)m * sizeof(double));
  default_theta(dim, starts + (ns++) * m);
  double *s = starts + (ns++) * m;                   /* smooth, a little noise */
  for (int d = 0; d < dim; d++) s[d] = log(2.0);
  s[dim] = 0, s[dim + 1] = log(0.05);
  s = starts + (ns++) * m;                           /* noisy: half the variance is noise */
  for (int d = 0; d < dim; d++) s[d] = log(0.5);
  s[dim] = log(0.5), s[dim + 1] = log(0.5);
  int runs = o->starts > 0 ? o->starts : (o->theta ? 1 : 3);
  if (runs > ns) runs = ns;
  int scored = (o->theta && runs == 1) ? 1 : ns;    /* a lone warm start needs no ranking */
  int order[4];
  for (int i = 0; i < ns; i++) {
    clamp(starts + i * m, lo, hi, m);
    val[i] = i < scored ? objective(&f, starts + i * m, NULL) : -(double)INFINITY;
    order[i] = i;
  }
  /* the warm start always runs; then the best initial values */
  int first = o->theta ? 1 : 0;
  for (int i = first; i < ns; i++)
    for (int j = i + 1; j < ns; j++)
      if (val[order[j]] > val[order[i]]) {
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  int large = o->coarse_points > 0 && g->n > o->coarse_points;   /* then at most fine_iters */
  int iters = (large && o->fine_iters < o->iters) ? o->fine_iters : o->iters;
  double bestf = INFINITY;
  default_theta(dim, best);
  clamp(best, lo, hi, m);
  for (int r = 0; r < runs; r++) {
    double *x = starts + order[r] * m;
    double fx = lbfgs(&f, x, lo, hi, iters, work);
    if (fx < bestf) {
      bestf = fx;
      memcpy(best, x, (size_t)m * sizeof(double));
    }
  }
  memcpy(g->theta, best, (size_t)m * sizeof(double));
  apply_theta(g);
  g->lml = -bestf;
  fit_free(&f);
  dl_free(g->ctx, tw, tbytes);
  return 0;
}

dl_gp *dl_gp_fit_new(dl_ctx *ctx, const double *X, const double *y, int n, int dim, const dl_gp_opts *opts) {
  dl_gp_opts o = opts ? *opts : dl_gp_defaults();
  if (dim < 1) return dl_fail(ctx, "dl_gp_fit: dim must be >= 1, got %d", dim);
  if (n < 0) return dl_fail(ctx, "dl_gp_fit: n must be >= 0, got %d", n);
  for (size_t i = 0; i < (size_t)n * dim; i++)
    if (!isfinite(X[i])) return dl_fail(ctx, "dl_gp_fit: X[%zu][%zu] is not finite", i / dim + 1, i % dim + 1);
  for (int i = 0; i < n; i++)
    if (!isfinite(y[i])) return dl_fail(ctx, "dl_gp_fit: y[%d] is not finite", i + 1);
  if (o.theta)
    for (int d = 0; d < dim + 2; d++)
      if (!isfinite(o.theta[d])) return dl_fail(ctx, "dl_gp_fit: theta[%d] is not finite", d + 1);
  int use = (o.max_points > 0 && n > o.max_points) ? o.max_points : n;
  dl_gp *g = gp_new(ctx, dim, use + 16);
  if (!g) return NULL;
  g->classify = o.classify;
  int *idx = NULL;
  if (use < n) {
    idx = dl_alloc(ctx, (size_t)n * sizeof(int));
    if (!idx || dl_gp_subset(ctx, X, y, n, dim, use, idx) != 0) goto fail;
  }
  for (int k = 0; k < use; k++) {
    int i = idx ? idx[k] : k;
    memcpy(g->X + (size_t)k * dim, X + (size_t)i * dim, (size_t)dim * sizeof(double));
    g->y[k] = y[i];
  }
  g->n = use;
  if (use > 0) {                                     /* standardise (labels: centre only) */
    double s = 0, v = 0;
    for (int k = 0; k < use; k++) s += g->y[k];
    g->mean = s / use;
    for (int k = 0; k < use; k++) v += (g->y[k] - g->mean) * (g->y[k] - g->mean);
    g->sd = (o.classify || use < 2 || !(sqrt(v / use) > 1e-12)) ? 1.0 : sqrt(v / use);
    for (int k = 0; k < use; k++) g->y[k] = (g->y[k] - g->mean) / g->sd;
  }
  double sub_lml = 0;
  if (use > 0 && o.fit && o.fit_points > 0 && use > o.fit_points) {
    dl_gp_opts s = o;                                /* the hyperparameters of a subset, as they are here */
    s.fit_points = 0;
    if (subset_theta(ctx, X, y, n, dim, s, o.fit_points, g, g->theta, &sub_lml) != 0) goto fail;
    apply_theta(g);
    g->lml = sub_lml;
  } else if (use > 0 && o.fit) {
    if (!o.theta && o.coarse_points > 0 && use > o.coarse_points) {
      dl_gp_opts c = o;                              /* cold: the starts on a coarse subset, then one here */
      c.coarse_points = 0;
      if (subset_theta(ctx, X, y, n, dim, c, o.coarse_points, g, g->theta, &sub_lml) != 0) goto fail;
      o.theta = g->theta;                            /* optimise copies it before writing g->theta */
      o.starts = 1;
    }
    if (optimise(g, &o) != 0) goto fail;
  } else {
    if (o.theta) memcpy(g->theta, o.theta, (size_t)(dim + 2) * sizeof(double));
    else default_theta(dim, g->theta);
    apply_theta(g);
  }
  double *base = dl_alloc(ctx, (size_t)(use + 1) * sizeof(double));
  if (!base) goto fail;
  for (int k = 0; k < use; k++) base[k] = g->sn2;
  int rc = factor(g, base);
  dl_free(ctx, base, (size_t)(use + 1) * sizeof(double));
  if (rc != 0) goto fail;
  if (idx) dl_free(ctx, idx, (size_t)n * sizeof(int));
  return g;
fail:
  if (idx) dl_free(ctx, idx, (size_t)n * sizeof(int));
  dl_gp_release(g);
  return NULL;
}

dl_gp *dl_gp_clone_new(dl_ctx *ctx, const dl_gp *g) {
  dl_gp *c = gp_new(ctx, g->dim, g->cap);
  if (!c) return NULL;
  double *X = c->X, *theta = c->theta;
  memcpy(X, g->X, bytes_of(g->cap, g->dim));
  memcpy(theta, g->theta, (size_t)(2 * g->dim + 2) * sizeof(double));
  size_t off_y = (size_t)(g->y - g->X), off_noise = (size_t)(g->noise - g->X);
  size_t off_alpha = (size_t)(g->alpha - g->X), off_L = (size_t)(g->L - g->X);
  *c = *g;
  c->ctx = ctx;
  c->X = X, c->y = X + off_y, c->noise = X + off_noise, c->alpha = X + off_alpha, c->L = X + off_L;
  c->theta = theta, c->inv_l2 = theta + g->dim + 2;
  return c;
}

/* ---------------------------------------------------------------- queries */

int dl_gp_dim(const dl_gp *g) { return g->dim; }
int dl_gp_points(const dl_gp *g) { return g->n; }
double dl_gp_lml(const dl_gp *g) { return g->lml; }
double dl_gp_noise(const dl_gp *g) { return g->sn2 * g->sd * g->sd; }
double dl_gp_mean(const dl_gp *g) { return g->mean; }
double dl_gp_sd(const dl_gp *g) { return g->sd; }

void dl_gp_theta(const dl_gp *g, double *theta) {
  memcpy(theta, g->theta, (size_t)(g->dim + 2) * sizeof(double));
}

int dl_gp_predict(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double *mean, double *var) {
  int n = g->n, dim = g->dim;
  if (n == 0) {
    for (int s = 0; s < m; s++) {
      mean[s] = g->mean;
      if (var) var[s] = g->sf2 * g->sd * g->sd;
    }
    return 0;
  }
  size_t kbytes = (size_t)n * PREDICT_CHUNK * sizeof(double);
  double *Ks = dl_alloc(ctx, kbytes);
  if (!Ks) return -1;
  for (int s0 = 0; s0 < m; s0 += PREDICT_CHUNK) {
    int b = m - s0 < PREDICT_CHUNK ? m - s0 : PREDICT_CHUNK;
    for (int s = 0; s < b; s++) {                    /* Ks is [n, b] column-major */
      const double *x = Xs + (size_t)(s0 + s) * dim;
      double *col = Ks + (size_t)s * n, mu = 0;
      for (int i = 0; i < n; i++) {
        col[i] = matern(sq_dist(g->X + (size_t)i * dim, x, g->inv_l2, dim), g->sf2);
        mu += col[i] * g->alpha[i];
      }
      mean[s0 + s] = g->mean + g->sd * mu;
    }
    if (!var) continue;
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, b, 1.0, g->L, g->cap, Ks, n);
    for (int s = 0; s < b; s++) {
      const double *col = Ks + (size_t)s * n;
      double v = g->sf2 - dot(col, col, n);
      if (v < 1e-12 * g->sf2) v = 1e-12 * g->sf2;
      var[s0 + s] = v * g->sd * g->sd;
    }
  }
  dl_free(ctx, Ks, kbytes);
  return 0;
}

void dl_gp_train_mean(const dl_gp *g, double *mean) {
  /* (K + N) alpha = y, so the latent posterior mean K alpha is y - N alpha */
  for (int i = 0; i < g->n; i++) mean[i] = g->mean + g->sd * (g->y[i] - g->noise[i] * g->alpha[i]);
}

int dl_gp_ei(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double best, double noise, double *ei) {
  double *var = dl_alloc(ctx, (size_t)(m > 0 ? m : 1) * sizeof(double));
  if (!var) return -1;
  if (dl_gp_predict(ctx, g, Xs, m, ei, var) != 0) {
    dl_free(ctx, var, (size_t)(m > 0 ? m : 1) * sizeof(double));
    return -1;
  }
  for (int s = 0; s < m; s++) {
    double imp = best - ei[s], sd = sqrt(var[s]);
    if (sd < 1e-12 * g->sd) {
      ei[s] = imp > 0 ? imp : 0;
      continue;
    }
    double z = imp / sd;
    ei[s] = imp * normal_cdf(z) + sd * normal_pdf(z);
    if (noise > 0) ei[s] *= 1 - sqrt(noise / (var[s] + noise));
  }
  dl_free(ctx, var, (size_t)(m > 0 ? m : 1) * sizeof(double));
  return 0;
}

int dl_gp_add(dl_ctx *ctx, dl_gp *g, const double *x, double y, double noise) {
  int dim = g->dim;
  for (int d = 0; d < dim; d++)
    if (!isfinite(x[d])) {
      dl_fail(ctx, "dl_gp_add: x[%d] is not finite", d + 1);
      return -1;
    }
  if (!isfinite(y)) {
    dl_fail(ctx, "dl_gp_add: y is not finite");
    return -1;
  }
  if (!(noise >= 0) || !isfinite(noise)) {
    dl_fail(ctx, "dl_gp_add: noise must be a finite number >= 0, got %g", noise);
    return -1;
  }
  if (g->n == g->cap && reserve(g, 2 * g->cap) != 0) return -1;
  int n = g->n, cap = g->cap;
  memcpy(g->X + (size_t)n * dim, x, (size_t)dim * sizeof(double));
  g->y[n] = (y - g->mean) / g->sd;
  g->noise[n] = noise / (g->sd * g->sd) + g->jitter;
  double *row = g->L + n;                            /* row n of L, stride cap */
  for (int i = 0; i < n; i++) row[(size_t)i * cap] = matern(sq_dist(g->X + (size_t)i * dim, x, g->inv_l2, dim), g->sf2);
  if (n > 0) cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, n, g->L, cap, row, cap);
  double ll = 0;
  for (int i = 0; i < n; i++) ll += row[(size_t)i * cap] * row[(size_t)i * cap];
  double dd = g->sf2 + g->noise[n] - ll;
  if (dd < 1e-10 * g->sf2) dd = 1e-10 * g->sf2;
  g->L[n + (size_t)n * cap] = sqrt(dd);
  g->n = n + 1;
  memcpy(g->alpha, g->y, (size_t)g->n * sizeof(double));
  cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, g->n, g->L, cap, g->alpha, 1);
  cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, g->n, g->L, cap, g->alpha, 1);
  return 0;
}
