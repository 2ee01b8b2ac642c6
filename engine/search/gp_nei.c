/* gp_nei.c -- noisy expected improvement under a fitted GP (see gp.h).
 *
 * With noisy observations the incumbent is not known: the best observed value is
 * biased low and the posterior means of the observed points are uncertain. Noisy
 * EI (Letham et al. 2019; BoTorch's qNEI with q = 1) integrates over it: draw S
 * joint posterior samples of the latent f at the baseline points B and at a
 * candidate x, and average max(min_j f_s(B_j) - f_s(x), 0). Here the samples of
 * f(B) come from fixed standard-normal base samples z_s (quasi-random, given by
 * the caller), f_s(B) = mu_B + L_B z_s with L_B the Cholesky factor of the
 * posterior covariance of f(B), and f(x) given f(B) = f_s(B) is Gaussian, so the
 * expectation over f(x) is the analytic EI below best_s = min_j f_s(B_j):
 *
 *   mean_s(x) = mu_x + w_x . z_s,  var(x | B) = sigma_x^2 - |w_x|^2,  w_x = L_B^-1 Sigma_Bx
 *   NEI(x)    = 1/S sum_s EI(mean_s(x), var(x | B); best_s)
 *
 * where Sigma_Bx = k(B, x) - V_B^T v_x, V_B = L^-1 k(X, B) and v_x = L^-1 k(X, x)
 * with L the factor of the GP's K + diag(noise). Preparing (the V_B, L_B and the
 * best_s) costs O(n^2 nb + nb^3 + S nb^2) once; each candidate O(n^2 + n nb + S nb).
 * Without noise sigma(B) is ~0, every best_s is the incumbent's mean, and NEI is
 * EI below it.
 */
/* See LICENSE */
#include "search/gp.h"
#include "search/gp_impl.h"

#include <cblas.h>
#include <f77blas.h>
#include <math.h>
#include <string.h>

#define NEI_CHUNK 128

struct dl_gp_nei {
  dl_ctx *ctx;
  const dl_gp *g;               /* borrowed: must outlive this object */
  int nb, S;
  double *Xb;                   /* [nb, dim] baseline points */
  double *V;                    /* [n, nb] column-major: L^-1 k(X, B) */
  double *LB;                   /* [nb, nb] column-major lower factor of Sigma_BB (standardised) */
  double *Z;                    /* [nb, S] column-major: base sample s is column s */
  double *best;                 /* [S] min_j f_s(B_j), standardised */
  size_t bytes;                 /* one block holding all of the above */
};

void dl_gp_nei_release(dl_gp_nei *e) {
  if (!e) return;
  dl_free(e->ctx, e->Xb, e->bytes);
  dl_free(e->ctx, e, sizeof *e);
}

/* k(X, P) for the GP's n points and m points P [m, dim] into K [n, m] column-major */
static void cross_kernel(const dl_gp *g, const double *P, int m, double *K) {
  for (int s = 0; s < m; s++)
    for (int i = 0; i < g->n; i++)
      K[i + (size_t)s * g->n] = matern(sq_dist(g->X + (size_t)i * g->dim, P + (size_t)s * g->dim, g->inv_l2, g->dim),
                                       g->sf2);
}

dl_gp_nei *dl_gp_nei_new(dl_ctx *ctx, const dl_gp *g, const double *Xb, int nb, const double *z, int S) {
  if (nb < 1) return dl_fail(ctx, "dl_gp_nei: the baseline needs at least 1 point, got %d", nb);
  if (S < 1) return dl_fail(ctx, "dl_gp_nei: S must be >= 1, got %d", S);
  int n = g->n, dim = g->dim;
  for (size_t i = 0; i < (size_t)nb * dim; i++)
    if (!isfinite(Xb[i])) return dl_fail(ctx, "dl_gp_nei: baseline[%zu][%zu] is not finite", i / dim + 1, i % dim + 1);
  for (size_t i = 0; i < (size_t)nb * S; i++)
    if (!isfinite(z[i])) return dl_fail(ctx, "dl_gp_nei: base sample value %zu is not finite", i + 1);
  dl_gp_nei *e = dl_alloc(ctx, sizeof *e);
  if (!e) return NULL;
  memset(e, 0, sizeof *e);
  e->ctx = ctx, e->g = g, e->nb = nb, e->S = S;
  size_t nn = n > 0 ? (size_t)n : 1, bb = (size_t)nb * nb, bs = (size_t)nb * S;
  /* Xb, V, LB, Z, best, then scratch: mu [nb], F [nb, S] */
  e->bytes = ((size_t)nb * dim + nn * nb + bb + bs + (size_t)S + (size_t)nb + bs) * sizeof(double);
  e->Xb = dl_alloc(ctx, e->bytes);
  if (!e->Xb) {
    dl_free(ctx, e, sizeof *e);
    return NULL;
  }
  e->V = e->Xb + (size_t)nb * dim;
  e->LB = e->V + nn * nb;
  e->Z = e->LB + bb;
  e->best = e->Z + bs;
  double *mu = e->best + S, *F = mu + nb;
  memcpy(e->Xb, Xb, (size_t)nb * dim * sizeof(double));
  for (int s = 0; s < S; s++)
    for (int j = 0; j < nb; j++) e->Z[j + (size_t)s * nb] = z[(size_t)s * nb + j];
  /* posterior means mu_B and V = L^-1 k(X, B) (standardised units) */
  if (n > 0) {
    cross_kernel(g, Xb, nb, e->V);
    for (int j = 0; j < nb; j++) mu[j] = cblas_ddot(n, e->V + (size_t)j * n, 1, g->alpha, 1);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, nb, 1.0, g->L, g->cap, e->V, n);
  } else {
    for (int j = 0; j < nb; j++) mu[j] = 0;
  }
  /* L_B: the factor of Sigma_BB = k(B, B) - V^T V, with jitter until it exists
   * (a repeated baseline point makes Sigma_BB singular) */
  blasint bnb = nb, info = 1;
  char lower = 'L';
  double jitter = 1e-10 * g->sf2;
  for (int attempt = 0; attempt < 12 && info != 0; attempt++, jitter *= 10) {
    for (int j = 0; j < nb; j++)
      for (int i = 0; i < nb; i++)
        e->LB[i + (size_t)j * nb] = i < j ? 0 :
          matern(sq_dist(Xb + (size_t)i * dim, Xb + (size_t)j * dim, g->inv_l2, dim), g->sf2);
    if (n > 0) cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, nb, n, -1.0, e->V, n, 1.0, e->LB, nb);
    for (int j = 0; j < nb; j++) e->LB[j + (size_t)j * nb] += jitter;
    dpotrf_(&lower, &bnb, e->LB, &bnb, &info);
  }
  if (info != 0) {
    dl_gp_nei_release(e);
    return dl_fail(ctx, "dl_gp_nei: the baseline's posterior covariance is not positive definite");
  }
  /* the samples F = mu_B + L_B Z, best_s = min_j F[j, s] */
  memcpy(F, e->Z, bs * sizeof(double));
  cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, nb, S, 1.0, e->LB, nb, F, nb);
  for (int s = 0; s < S; s++) {
    double b = INFINITY;
    for (int j = 0; j < nb; j++) b = fmin(b, mu[j] + F[j + (size_t)s * nb]);
    e->best[s] = b;
  }
  return e;
}

int dl_gp_nei_eval(dl_ctx *ctx, const dl_gp_nei *e, const double *Xs, int m, double *nei) {
  const dl_gp *g = e->g;
  int n = g->n, nb = e->nb, S = e->S, dim = g->dim;
  size_t nn = n > 0 ? (size_t)n : 1;
  size_t bytes = (nn * NEI_CHUNK + (size_t)nb * NEI_CHUNK + (size_t)NEI_CHUNK * S + 2 * NEI_CHUNK) * sizeof(double);
  double *Ks = dl_alloc(ctx, bytes);
  if (!Ks) return -1;
  double *C = Ks + nn * NEI_CHUNK, *M = C + (size_t)nb * NEI_CHUNK, *mx = M + (size_t)NEI_CHUNK * S, *vx = mx + NEI_CHUNK;
  for (int s0 = 0; s0 < m; s0 += NEI_CHUNK) {
    int b = m - s0 < NEI_CHUNK ? m - s0 : NEI_CHUNK;
    const double *P = Xs + (size_t)s0 * dim;
    /* mean and variance of f at the chunk, v_x = L^-1 k(X, x) in Ks [n, b] */
    for (int s = 0; s < b; s++) {
      mx[s] = 0;
      vx[s] = g->sf2;
    }
    if (n > 0) {
      cross_kernel(g, P, b, Ks);
      for (int s = 0; s < b; s++) mx[s] = cblas_ddot(n, Ks + (size_t)s * n, 1, g->alpha, 1);
      cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, b, 1.0, g->L, g->cap, Ks, n);
      for (int s = 0; s < b; s++) vx[s] -= cblas_ddot(n, Ks + (size_t)s * n, 1, Ks + (size_t)s * n, 1);
    }
    /* C = Sigma_Bx = k(B, x) - V^T v_x [nb, b], then W = L_B^-1 C in place */
    for (int s = 0; s < b; s++)
      for (int j = 0; j < nb; j++)
        C[j + (size_t)s * nb] = matern(sq_dist(e->Xb + (size_t)j * dim, P + (size_t)s * dim, g->inv_l2, dim), g->sf2);
    if (n > 0) cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, nb, b, n, -1.0, e->V, n, Ks, n, 1.0, C, nb);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, nb, b, 1.0, e->LB, nb, C, nb);
    /* M[s, t] = w_s . z_t [b, S] */
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, b, S, nb, 1.0, C, nb, e->Z, nb, 0.0, M, b);
    for (int s = 0; s < b; s++) {
      double v = vx[s] - cblas_ddot(nb, C + (size_t)s * nb, 1, C + (size_t)s * nb, 1);
      double sd = sqrt(v > 1e-12 * g->sf2 ? v : 1e-12 * g->sf2), acc = 0;
      for (int t = 0; t < S; t++) {
        double imp = e->best[t] - (mx[s] + M[s + (size_t)t * b]), u = imp / sd;
        acc += imp * normal_cdf(u) + sd * normal_pdf(u);
      }
      nei[s0 + s] = g->sd * acc / S;                  /* in y's units */
    }
  }
  dl_free(ctx, Ks, bytes);
  return 0;
}
