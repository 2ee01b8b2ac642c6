/* test_gp.c -- the Gaussian-process surrogate (engine/search/gp.c) against independent math:
 * the posterior against a naive Gauss-Jordan solve of the same kernel system,
 * the marginal-likelihood gradient against central finite differences, the
 * rank-one belief against a refactorisation, the fitted noise against the
 * noise the data was drawn with, noisy EI against EI without noise, and the error
 * paths. */
/* See LICENSE */
#include "dl_test.h"
#include "search/gp.h"

#include <stdlib.h>
#include <string.h>

static double urand(uint64_t *s) {                  /* splitmix64 -> [0, 1) */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static double nrand(uint64_t *s) {
  double u1 = urand(s), u2 = urand(s);
  return sqrt(-2 * log(1 - u1)) * cos(6.283185307179586 * u2);
}

/* Matern 5/2 written out from its definition */
static double k52(const double *a, const double *b, const double *ls, double sf2, int dim) {
  double r2 = 0;
  for (int d = 0; d < dim; d++) r2 += (a[d] - b[d]) * (a[d] - b[d]) / (ls[d] * ls[d]);
  double r = sqrt(5 * r2);
  return sf2 * (1 + r + r * r / 3) * exp(-r);
}

/* solves A x = b (n x n, row-major, destroyed) by Gauss-Jordan with partial pivoting */
static void gauss_solve(double *A, double *b, int n) {
  for (int c = 0; c < n; c++) {
    int p = c;
    for (int r = c + 1; r < n; r++) if (fabs(A[r * n + c]) > fabs(A[p * n + c])) p = r;
    for (int k = 0; k < n; k++) { double t = A[c * n + k]; A[c * n + k] = A[p * n + k]; A[p * n + k] = t; }
    double t = b[c]; b[c] = b[p]; b[p] = t;
    for (int r = 0; r < n; r++) {
      if (r == c) continue;
      double f = A[r * n + c] / A[c * n + c];
      for (int k = c; k < n; k++) A[r * n + k] -= f * A[c * n + k];
      b[r] -= f * b[c];
    }
  }
  for (int c = 0; c < n; c++) b[c] /= A[c * n + c];
}

#define N 30
#define D 3

static void make_data(double *X, double *y, int n, double noise, uint64_t seed) {
  uint64_t s = seed;
  for (int i = 0; i < n; i++) {
    for (int d = 0; d < D; d++) X[i * D + d] = urand(&s);
    y[i] = sin(5 * X[i * D]) + X[i * D + 1] * X[i * D + 1] - 0.5 * X[i * D + 2] + noise * nrand(&s);
  }
}

static void test_posterior_matches_naive(dl_ctx *ctx) {
  double X[N * D], y[N];
  make_data(X, y, N, 0.05, 1);
  double theta[D + 2] = {log(0.3), log(0.6), log(1.5), log(1.3), log(0.02)};
  dl_gp_opts o = dl_gp_defaults();
  o.theta = theta;
  o.fit = 0;
  dl_gp *g = dl_gp_fit_new(ctx, X, y, N, D, &o);
  DL_CHECK(g != NULL);
  if (!g) return;
  /* standardise independently: population sd */
  double mu = 0, v = 0, ys[N];
  for (int i = 0; i < N; i++) mu += y[i] / N;
  for (int i = 0; i < N; i++) v += (y[i] - mu) * (y[i] - mu) / N;
  double sd = sqrt(v);
  for (int i = 0; i < N; i++) ys[i] = (y[i] - mu) / sd;
  double ls[D] = {0.3, 0.6, 1.5}, sf2 = 1.3, sn2 = 0.02 + 1e-9;
  double A[N * N], alpha[N];
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < N; j++) A[i * N + j] = k52(X + i * D, X + j * D, ls, sf2, D) + (i == j ? sn2 : 0);
    alpha[i] = ys[i];
  }
  gauss_solve(A, alpha, N);
  double Xs[3 * D] = {0.1, 0.2, 0.3, 0.5, 0.5, 0.5, 0.9, 0.7, 0.05}, mean[3], var[3];
  DL_CHECK(dl_gp_predict(ctx, g, Xs, 3, mean, var) == 0);
  for (int s = 0; s < 3; s++) {
    double m = 0, ks[N], w[N];
    for (int i = 0; i < N; i++) { ks[i] = k52(Xs + s * D, X + i * D, ls, sf2, D); m += ks[i] * alpha[i]; }
    for (int i = 0; i < N; i++) {                    /* var = k** - ks^T (K + N)^-1 ks */
      for (int j = 0; j < N; j++) A[i * N + j] = k52(X + i * D, X + j * D, ls, sf2, D) + (i == j ? sn2 : 0);
      w[i] = ks[i];
    }
    gauss_solve(A, w, N);
    double q = 0;
    for (int i = 0; i < N; i++) q += ks[i] * w[i];
    DL_CHECK_CLOSE(mean[s], mu + sd * m, 1e-9);
    DL_CHECK_CLOSE(var[s], sd * sd * (sf2 - q), 1e-9);
  }
  /* EI from its formula at the predicted mean and sd */
  double ei[3], best = mu - 0.5 * sd;
  DL_CHECK(dl_gp_ei(ctx, g, Xs, 3, best, 0, ei) == 0);
  for (int s = 0; s < 3; s++) {
    double sdv = sqrt(var[s]), z = (best - mean[s]) / sdv;
    double want = (best - mean[s]) * 0.5 * erfc(-z / sqrt(2.0)) + sdv * exp(-0.5 * z * z) / sqrt(2 * 3.141592653589793);
    DL_CHECK_CLOSE(ei[s], want, 1e-12);
  }
  /* augmented EI: the same times 1 - sqrt(noise / (var + noise)) */
  double aei[3];
  DL_CHECK(dl_gp_ei(ctx, g, Xs, 3, best, 0.04, aei) == 0);
  for (int s = 0; s < 3; s++) DL_CHECK_CLOSE(aei[s], ei[s] * (1 - sqrt(0.04 / (var[s] + 0.04))), 1e-12);
  /* the posterior mean at the training points, cheaply, equals predict there */
  double tm[N], pm[N];
  dl_gp_train_mean(g, tm);
  DL_CHECK(dl_gp_predict(ctx, g, X, N, pm, NULL) == 0);
  for (int i = 0; i < N; i++) DL_CHECK_CLOSE(tm[i], pm[i], 1e-9);
  dl_gp_release(g);
}

static void test_gradient_matches_finite_differences(dl_ctx *ctx) {
  double X[N * D], y[N], g[D + 2], a[D + 2], b[D + 2];
  make_data(X, y, N, 0.1, 2);
  double theta[D + 2] = {log(0.3), log(0.8), log(0.5), log(1.5), log(0.02)};
  double f = dl_gp_objective(ctx, X, y, N, D, theta, 0, g);
  DL_CHECK(isfinite(f));
  for (int j = 0; j < D + 2; j++) {
    memcpy(a, theta, sizeof a);
    memcpy(b, theta, sizeof b);
    a[j] += 1e-5;
    b[j] -= 1e-5;
    double fd = (dl_gp_objective(ctx, X, y, N, D, a, 0, NULL) - dl_gp_objective(ctx, X, y, N, D, b, 0, NULL)) / 2e-5;
    DL_CHECK_CLOSE(g[j], fd, 1e-5 * fmax(1, fabs(fd)));
  }
  /* the objective itself: -1/2 y^T K^-1 y - 1/2 log|K| - n/2 log 2 pi + prior, by Gauss-Jordan */
  double ls[D], A[N * N], w[N];
  for (int d = 0; d < D; d++) ls[d] = exp(theta[d]);
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < N; j++)
      A[i * N + j] = k52(X + i * D, X + j * D, ls, exp(theta[D]), D) + (i == j ? exp(theta[D + 1]) + 1e-9 : 0);
    w[i] = y[i];
  }
  double logdet = 0, B[N * N];
  memcpy(B, A, sizeof B);
  for (int c = 0; c < N; c++) {                      /* log det by elimination (SPD: no pivoting) */
    logdet += log(B[c * N + c]);
    for (int r = c + 1; r < N; r++) {
      double fr = B[r * N + c] / B[c * N + c];
      for (int k = c; k < N; k++) B[r * N + k] -= fr * B[c * N + k];
    }
  }
  gauss_solve(A, w, N);
  double quad = 0;
  for (int i = 0; i < N; i++) quad += y[i] * w[i];
  double prior = 0;
  for (int d = 0; d < D; d++) prior -= 0.5 * (theta[d] - log(0.5)) * (theta[d] - log(0.5));
  prior -= 0.5 * theta[D] * theta[D];
  prior -= 0.5 * ((theta[D + 1] - log(1e-3)) / 3) * ((theta[D + 1] - log(1e-3)) / 3);
  DL_CHECK_CLOSE(f, -0.5 * quad - 0.5 * logdet - 0.5 * N * log(2 * 3.141592653589793) + prior, 1e-8);
}

static void test_fit_learns_noise_and_improves(dl_ctx *ctx) {
  enum { M = 120 };
  double X[M * D], y[M];
  for (int rep = 0; rep < 2; rep++) {
    double noise = rep == 0 ? 0.3 : 0.0;
    make_data(X, y, M, noise, 3 + rep);
    dl_gp *g = dl_gp_fit_new(ctx, X, y, M, D, NULL);
    DL_CHECK(g != NULL);
    if (!g) continue;
    double theta[D + 2], def[D + 2] = {log(0.5), log(0.5), log(0.5), 0, log(1e-3)};
    dl_gp_theta(g, theta);
    /* the objective is in standardised units: recompute it there */
    double mu = dl_gp_mean(g), sd = dl_gp_sd(g), ys[M];
    for (int i = 0; i < M; i++) ys[i] = (y[i] - mu) / sd;
    DL_CHECK_CLOSE(dl_gp_lml(g), dl_gp_objective(ctx, X, ys, M, D, theta, 0, NULL), 1e-8);
    DL_CHECK(dl_gp_lml(g) > dl_gp_objective(ctx, X, ys, M, D, def, 0, NULL) + 1);
    if (rep == 0) {                                  /* noise variance 0.09 in y's units */
      DL_CHECK(dl_gp_noise(g) > 0.09 / 2 && dl_gp_noise(g) < 0.09 * 2);
    } else {
      DL_CHECK(dl_gp_noise(g) < 1e-3);
    }
    /* a warm start from the optimum stays there */
    dl_gp_opts o = dl_gp_defaults();
    o.theta = theta;
    dl_gp *w = dl_gp_fit_new(ctx, X, y, M, D, &o);
    DL_CHECK(w != NULL);
    if (w) DL_CHECK(dl_gp_lml(w) >= dl_gp_lml(g) - 1e-6);
    dl_gp_release(w);
    dl_gp_release(g);
  }
}

static void test_add_matches_refactorisation(dl_ctx *ctx) {
  double X[N * D], y[N];
  make_data(X, y, N, 0.05, 5);
  double theta[D + 2] = {log(0.4), log(0.4), log(0.9), 0.2, log(0.01)};
  dl_gp_opts o = dl_gp_defaults();
  o.theta = theta;
  o.fit = 0;
  dl_gp *g = dl_gp_fit_new(ctx, X, y, N - 4, D, &o);
  dl_gp *c = g ? dl_gp_clone_new(ctx, g) : NULL;
  DL_CHECK(g && c);
  if (!g || !c) return;
  double sd = dl_gp_sd(g), sn2 = exp(theta[D + 1]) * sd * sd;
  for (int i = N - 4; i < N; i++) DL_CHECK(dl_gp_add(ctx, g, X + i * D, y[i], sn2) == 0);
  DL_CHECK(dl_gp_points(g) == N && dl_gp_points(c) == N - 4);
  /* the reference: a factorisation of all N points with g's standardisation */
  double ls[D] = {0.4, 0.4, 0.9}, sf2 = exp(0.2), A[N * N], alpha[N];
  double mu = dl_gp_mean(g);
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < N; j++) A[i * N + j] = k52(X + i * D, X + j * D, ls, sf2, D) + (i == j ? 0.01 + 1e-9 : 0);
    alpha[i] = (y[i] - mu) / sd;
  }
  gauss_solve(A, alpha, N);
  double Xs[2 * D] = {0.3, 0.6, 0.2, 0.8, 0.1, 0.9}, mean[2], var[2];
  DL_CHECK(dl_gp_predict(ctx, g, Xs, 2, mean, var) == 0);
  for (int s = 0; s < 2; s++) {
    double m = 0;
    for (int i = 0; i < N; i++) m += k52(Xs + s * D, X + i * D, ls, sf2, D) * alpha[i];
    DL_CHECK_CLOSE(mean[s], mu + sd * m, 1e-9);
  }
  /* a belief with no noise pins the latent mean: variance ~0 there */
  double pm, pv;
  DL_CHECK(dl_gp_predict(ctx, c, Xs, 1, &pm, &pv) == 0);
  DL_CHECK(dl_gp_add(ctx, c, Xs, pm, 0) == 0);
  double m2, v2;
  DL_CHECK(dl_gp_predict(ctx, c, Xs, 1, &m2, &v2) == 0);
  DL_CHECK_CLOSE(m2, pm, 1e-9);
  DL_CHECK(v2 < 1e-6 * pv);
  /* growth past the reserved capacity keeps the factor */
  for (int k = 0; k < 40; k++) {
    double x[D] = {0.01 * k, 0.5, 0.02 * k};
    DL_CHECK(dl_gp_add(ctx, c, x, 0.1 * k, sn2) == 0);
  }
  DL_CHECK(dl_gp_points(c) == N - 4 + 41);
  double tm[N + 41];
  dl_gp_train_mean(c, tm);
  DL_CHECK(dl_gp_predict(ctx, c, Xs, 1, &m2, NULL) == 0);
  DL_CHECK(isfinite(m2) && isfinite(tm[N + 36]));
  dl_gp_release(g);
  dl_gp_release(c);
}

/* above fit_points the hyperparameters are exactly those of a fit to the
 * evenly spaced fit_points points (k M / F), moved into the full standardisation */
static void test_fit_points_is_the_subsets_fit(dl_ctx *ctx) {
  enum { M = 150, F = 60 };
  double X[M * D], y[M], Xs[F * D], ys[F];
  make_data(X, y, M, 0.1, 8);
  for (int k = 0; k < F; k++) {
    int i = k * M / F;                               /* 0, 2, 5, 7, 10, ... */
    memcpy(Xs + k * D, X + i * D, D * sizeof(double));
    ys[k] = y[i];
  }
  dl_gp_opts o = dl_gp_defaults();
  o.fit_points = F;
  dl_gp *g = dl_gp_fit_new(ctx, X, y, M, D, &o);
  o.fit_points = 0;
  dl_gp *s = dl_gp_fit_new(ctx, Xs, ys, F, D, &o);
  DL_CHECK(g && s && dl_gp_points(g) == M && dl_gp_points(s) == F);
  if (g && s) {
    double tg[D + 2], ts[D + 2], shift = 2 * log(dl_gp_sd(s) / dl_gp_sd(g));
    dl_gp_theta(g, tg);
    dl_gp_theta(s, ts);
    for (int d = 0; d < D; d++) DL_CHECK_CLOSE(tg[d], ts[d], 1e-12);
    DL_CHECK_CLOSE(tg[D], ts[D] + shift, 1e-12);
    DL_CHECK_CLOSE(tg[D + 1], ts[D + 1] + shift, 1e-12);
    DL_CHECK_CLOSE(dl_gp_noise(g), dl_gp_noise(s), 1e-12);
    /* a warm start reaches the subset in its standardisation: with no
     * iterations the fit gives back the theta it was given */
    o.fit_points = F;
    o.theta = tg;
    o.iters = 0;
    dl_gp *w = dl_gp_fit_new(ctx, X, y, M, D, &o);
    DL_CHECK(w != NULL);
    if (w) {
      double tw[D + 2];
      dl_gp_theta(w, tw);
      for (int d = 0; d < D + 2; d++) DL_CHECK_CLOSE(tw[d], tg[d], 1e-12);
    }
    dl_gp_release(w);
  }
  dl_gp_release(g);
  dl_gp_release(s);
}

static void test_subset_and_errors(dl_ctx *ctx) {
  enum { M = 200 };
  double X[M * D], y[M];
  make_data(X, y, M, 0.0, 6);
  int idx[40];
  DL_CHECK(dl_gp_subset(ctx, X, y, M, D, 40, idx) == 0);
  double ymax = -INFINITY;
  for (int k = 0; k < 10; k++) ymax = fmax(ymax, y[idx[k]]);
  int below = 0, seen[M] = {0};
  for (int i = 0; i < M; i++) below += y[i] < ymax;
  DL_CHECK(below == 9);                              /* the first 10 are the 10 lowest */
  for (int k = 0; k < 40; k++) DL_CHECK(!seen[idx[k]]++);
  dl_gp_opts o = dl_gp_defaults();
  o.max_points = 40;
  dl_gp *g = dl_gp_fit_new(ctx, X, y, M, D, &o);
  DL_CHECK(g && dl_gp_points(g) == 40);
  dl_gp_release(g);
  DL_CHECK(dl_gp_fit_new(ctx, X, y, 5, 0, NULL) == NULL);
  DL_CHECK(strcmp(ctx->err, "dl_gp_fit: dim must be >= 1, got 0") == 0);
  y[3] = NAN;
  DL_CHECK(dl_gp_fit_new(ctx, X, y, 5, D, NULL) == NULL);
  DL_CHECK(strcmp(ctx->err, "dl_gp_fit: y[4] is not finite") == 0);
  y[3] = 0;
  g = dl_gp_fit_new(ctx, X, y, 0, D, NULL);         /* no data: the prior */
  DL_CHECK(g != NULL);
  if (g) {
    double m, v;
    DL_CHECK(dl_gp_predict(ctx, g, X, 1, &m, &v) == 0);
    DL_CHECK(m == 0 && v == 1);
    DL_CHECK(dl_gp_add(ctx, g, X, 1.0, -1) == -1);
    DL_CHECK(strcmp(ctx->err, "dl_gp_add: noise must be a finite number >= 0, got -1") == 0);
  }
  dl_gp_release(g);
}

/* noisy EI (gp_nei.c) without noise is EI below the lowest posterior mean at
 * the baseline (to Monte-Carlo error), and its argument errors */
static void test_nei_noiseless_is_ei(dl_ctx *ctx) {
  enum { M = 40, S = 256, Q = 6 };
  double X[M * D], y[M], mean[M + 16];
  make_data(X, y, M, 0.0, 9);
  dl_gp *g = dl_gp_fit_new(ctx, X, y, M, D, NULL);
  DL_CHECK(g != NULL);
  if (!g) return;
  dl_gp_train_mean(g, mean);
  double best = INFINITY;
  for (int i = 0; i < M; i++) best = fmin(best, mean[i]);
  static double z[S * M];
  uint64_t seed = 11;
  for (int i = 0; i < S * M; i++) z[i] = nrand(&seed);
  dl_gp_nei *e = dl_gp_nei_new(ctx, g, X, M, z, S);
  DL_CHECK(e != NULL);
  double Xs[Q * D], a[Q], b[Q];
  for (int i = 0; i < Q * D; i++) Xs[i] = urand(&seed);
  if (e) {
    DL_CHECK(dl_gp_nei_eval(ctx, e, Xs, Q, a) == 0);
    DL_CHECK(dl_gp_ei(ctx, g, Xs, Q, best, 0, b) == 0);
    for (int q = 0; q < Q; q++) DL_CHECK(fabs(a[q] - b[q]) <= 0.02 * b[q] + 1e-6 * dl_gp_sd(g));
  }
  dl_gp_nei_release(e);
  DL_CHECK(dl_gp_nei_new(ctx, g, X, 0, z, S) == NULL);
  DL_CHECK(strcmp(ctx->err, "dl_gp_nei: the baseline needs at least 1 point, got 0") == 0);
  z[0] = NAN;
  DL_CHECK(dl_gp_nei_new(ctx, g, X, M, z, S) == NULL);
  DL_CHECK(strcmp(ctx->err, "dl_gp_nei: base sample value 1 is not finite") == 0);
  dl_gp_release(g);
}

int main(void) {
  dl_ctx *ctx = dl_ctx_new();
  test_posterior_matches_naive(ctx);
  test_gradient_matches_finite_differences(ctx);
  test_fit_learns_noise_and_improves(ctx);
  test_add_matches_refactorisation(ctx);
  test_fit_points_is_the_subsets_fit(ctx);
  test_subset_and_errors(ctx);
  test_nei_noiseless_is_ei(ctx);
  dl_ctx_free(ctx);
  DL_TEST_END();
}
