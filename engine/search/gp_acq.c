/* gp_acq.c -- the GP posterior and log expected improvement with their
 * gradients in the input (see gp.h), for the acquisition's gradient search
 * (lua/dlua/search/acqopt.lua).
 *
 * With k_i = k(x, X_i) the Matern-5/2 kernel at scaled distance
 * r_i = sqrt(sum_d (x_d - X_id)^2 / l_d^2), dk_i/dx_d = c_i (x_d - X_id) / l_d^2
 * with c_i = -(5/3) sf2 (1 + sqrt5 r_i) exp(-sqrt5 r_i) (smooth at r = 0). The
 * mean is k' alpha, so dmean = sum_i alpha_i dk_i; the variance is
 * sf2 - k' (K + N)^-1 k, so dvar = -2 sum_i w_i dk_i with w = (K + N)^-1 k, taken
 * from the factor by two triangular solves. Log EI: EI = s h(z) with
 * z = (best - mean) / s and h(z) = z Phi(z) + phi(z); below z = -12, where
 * h(z) loses its digits to cancellation and then underflows, log h and
 * h'/h = Phi/h come from the asymptotic series of the Mills ratio.
 */
/* See LICENSE */
#include "search/gp.h"
#include "search/gp_impl.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define CHUNK 64
#define LOG_SQRT_2PI 0.91893853320467274178

/* log h(z) and Phi(z) / h(z), h(z) = z Phi(z) + phi(z) */
static void log_h(double z, double *logh, double *ratio) {
  if (z > -12) {
    double cdf = normal_cdf(z), pdf = normal_pdf(z);
    double h = z * cdf + pdf;
    *logh = log(h);
    *ratio = cdf / h;
    return;
  }
  double t = 1 / (z * z);
  double hs = 1 - 3 * t + 15 * t * t - 105 * t * t * t;        /* h = phi / z^2 * hs */
  double cs = 1 - t + 3 * t * t - 15 * t * t * t;              /* Phi = phi / |z| * cs */
  *logh = -0.5 * z * z - LOG_SQRT_2PI - 2 * log(-z) + log(hs);
  *ratio = -z * cs / hs;
}

int dl_gp_predict_grad(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double *mean, double *var,
                       double *dmean, double *dvar) {
  int n = g->n, dim = g->dim;
  if (n == 0) {
    for (int s = 0; s < m; s++) {
      mean[s] = g->mean, var[s] = g->sf2 * g->sd * g->sd;
      for (int d = 0; d < dim; d++) dmean[(size_t)s * dim + d] = dvar[(size_t)s * dim + d] = 0;
    }
    return 0;
  }
  size_t bytes = 2 * (size_t)n * CHUNK * sizeof(double);
  double *Ks = dl_alloc(ctx, bytes);
  if (!Ks) return -1;
  double *W = Ks + (size_t)n * CHUNK;
  for (int s0 = 0; s0 < m; s0 += CHUNK) {
    int b = m - s0 < CHUNK ? m - s0 : CHUNK;
    for (int s = 0; s < b; s++) {                    /* Ks, W are [n, b] column-major */
      const double *x = Xs + (size_t)(s0 + s) * dim;
      double *col = Ks + (size_t)s * n;
      for (int i = 0; i < n; i++) {
        const double *xi = g->X + (size_t)i * dim;
        col[i] = matern(sq_dist(x, xi, g->inv_l2, dim), g->sf2);
      }
    }
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, b, 1.0, g->L, g->cap, Ks, n);
    memcpy(W, Ks, (size_t)n * b * sizeof(double));  /* Ks now holds L^-1 k, W gets L^-T L^-1 k */
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, n, b, 1.0, g->L, g->cap, W, n);
    for (int s = 0; s < b; s++) {
      const double *x = Xs + (size_t)(s0 + s) * dim, *v = Ks + (size_t)s * n, *w = W + (size_t)s * n;
      double *gm = dmean + (size_t)(s0 + s) * dim, *gv = dvar + (size_t)(s0 + s) * dim;
      double mu = 0, vv = 0;
      for (int d = 0; d < dim; d++) gm[d] = gv[d] = 0;
      for (int i = 0; i < n; i++) {
        const double *xi = g->X + (size_t)i * dim;
        double r2 = sq_dist(x, xi, g->inv_l2, dim), r = sqrt(r2), e = exp(-SQRT5 * r);
        double k = g->sf2 * (1 + SQRT5 * r + (5.0 / 3.0) * r2) * e;
        double c = -(5.0 / 3.0) * g->sf2 * (1 + SQRT5 * r) * e;
        mu += k * g->alpha[i];
        vv += v[i] * v[i];
        double a = c * g->alpha[i], q = -2 * c * w[i];
        for (int d = 0; d < dim; d++) {
          double t = (x[d] - xi[d]) * g->inv_l2[d];
          gm[d] += a * t;
          gv[d] += q * t;
        }
      }
      double v0 = g->sf2 - vv;
      if (v0 < 1e-12 * g->sf2) {                     /* the clamp of dl_gp_predict: flat there */
        v0 = 1e-12 * g->sf2;
        for (int d = 0; d < dim; d++) gv[d] = 0;
      }
      mean[s0 + s] = g->mean + g->sd * mu;
      var[s0 + s] = v0 * g->sd * g->sd;
      for (int d = 0; d < dim; d++) gm[d] *= g->sd, gv[d] *= g->sd * g->sd;
    }
  }
  dl_free(ctx, Ks, bytes);
  return 0;
}

int dl_gp_log_ei(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double best, double *logei, double *grad) {
  int dim = g->dim;
  size_t bytes = ((size_t)m + 2 * (size_t)m * dim + 1) * sizeof(double);
  double *buf = dl_alloc(ctx, bytes);
  if (!buf) return -1;
  double *var = buf, *dmean = var + m, *dvar = dmean + (size_t)m * dim;
  if (dl_gp_predict_grad(ctx, g, Xs, m, logei, var, dmean, dvar) != 0) {
    dl_free(ctx, buf, bytes);
    return -1;
  }
  for (int s = 0; s < m; s++) {
    double imp = best - logei[s], sd = sqrt(var[s]);
    double *gr = grad ? grad + (size_t)s * dim : NULL;
    const double *gm = dmean + (size_t)s * dim, *gv = dvar + (size_t)s * dim;
    if (sd < 1e-12 * g->sd) {                        /* no uncertainty left: log of the plain improvement */
      logei[s] = imp > 0 ? log(imp) : -(double)INFINITY;
      for (int d = 0; gr && d < dim; d++) gr[d] = imp > 0 ? -gm[d] / imp : 0;
      continue;
    }
    double z = imp / sd, lh, ratio;
    log_h(z, &lh, &ratio);
    logei[s] = log(sd) + lh;
    for (int d = 0; gr && d < dim; d++) {
      double dsd = gv[d] / (2 * sd);
      gr[d] = dsd / sd + ratio * (-gm[d] - z * dsd) / sd;
    }
  }
  dl_free(ctx, buf, bytes);
  return 0;
}

/* the kernel block K(A, B) [na, nb] column-major into out (leading dimension na) */
static void kernel_block(const dl_gp *g, const double *A, int na, const double *B, int nb, double *out) {
  int dim = g->dim;
  for (int j = 0; j < nb; j++)
    for (int i = 0; i < na; i++) {
      out[i + (size_t)j * na] = matern(sq_dist(A + (size_t)i * dim, B + (size_t)j * dim, g->inv_l2, dim), g->sf2);
    }
}

int dl_gp_cross_cov(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, const double *Zs, int q, double *mean,
                    double *var, double *cov) {
  int n = g->n;
  if (dl_gp_predict(ctx, g, Xs, m, mean, var) != 0) return -1;
  if (q == 0) return 0;
  int b0 = m < CHUNK ? m : CHUNK;
  size_t bytes = ((size_t)n * q + (size_t)n * (b0 > 0 ? b0 : 1) + (size_t)(b0 > 0 ? b0 : 1) * q) * sizeof(double);
  double *Vz = dl_alloc(ctx, bytes);
  if (!Vz) return -1;
  double *Vx = Vz + (size_t)n * q, *Kxz = Vx + (size_t)n * (b0 > 0 ? b0 : 1);
  double s2 = g->sd * g->sd;
  if (n > 0) {
    kernel_block(g, g->X, n, Zs, q, Vz);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, q, 1.0, g->L, g->cap, Vz, n);
  }
  for (int s0 = 0; s0 < m; s0 += CHUNK) {
    int b = m - s0 < CHUNK ? m - s0 : CHUNK;
    kernel_block(g, Xs + (size_t)s0 * g->dim, b, Zs, q, Kxz);     /* [b, q] */
    if (n > 0) {
      kernel_block(g, g->X, n, Xs + (size_t)s0 * g->dim, b, Vx);
      cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, b, 1.0, g->L, g->cap, Vx, n);
      cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, b, q, n, -1.0, Vx, n, Vz, n, 1.0, Kxz, b);
    }
    for (int s = 0; s < b; s++)
      for (int j = 0; j < q; j++) cov[(size_t)(s0 + s) * q + j] = Kxz[s + (size_t)j * b] * s2;
  }
  dl_free(ctx, Vz, bytes);
  return 0;
}
