/* gp.h -- Gaussian-process regression, the surrogate of dl.search's bayes algorithm.
 *
 * A GP with an ARD Matern-5/2 kernel, a fitted amplitude and a fitted noise
 * variance, on targets standardised to mean 0 and variance 1 (classification
 * of +-1 feasibility labels: centred only). Hyperparameters maximise the log
 * marginal likelihood plus weak log-normal priors by a bound-constrained
 * L-BFGS on the analytic gradient, from a warm start and/or fixed defaults.
 * The factorisation is LAPACK's (OpenBLAS): dpotrf, dpotri, dtrsm.
 *
 *   dl_gp_opts o = dl_gp_defaults();
 *   o.theta = previous_theta;                      // warm start (dim + 2 values) or NULL
 *   dl_gp *g = dl_gp_fit_new(ctx, X, y, n, dim, &o);  // X is [n, dim] row-major, in [0, 1]
 *   dl_gp_predict(g, Xs, m, mean, var);            // latent f at m points, y's units
 *   dl_gp_theta(g, theta_out);                     // keep for the next fit
 *   dl_gp_release(g);
 *
 * theta = {log l_1 .. log l_dim, log sf2, log sn2}: length scales in feature
 * units, amplitude and noise variance in standardised units. Nothing here
 * knows about search spaces; features are numbers, nominally in [0, 1].
 * Above opts.max_points points the fit uses a subset (the best quarter by y
 * plus a greedy maximin space-filling choice of the rest); every point is
 * still predicted and reported on. The cost above a size: a cold fit on more
 * than opts.coarse_points points runs its starts on coarse_points of them
 * and then one start on all; a fit on more than
 * coarse_points runs at most opts.fine_iters L-BFGS iterations; above
 * opts.fit_points points the hyperparameters are those of fit_points evenly
 * spaced points (then the factor of all max_points). The coarse subset is
 * evenly spaced too. At 2,000 points in 20-D a cold fit drops from ~2.4 s to
 * ~0.3 s of CPU (docs/benchmarks.md).
 */
/* See LICENSE */
#ifndef DL_GP_H
#define DL_GP_H

#include "core/dl.h"

typedef struct dl_gp dl_gp;

typedef struct {
  const double *theta;  /* warm start (dim + 2 values) or NULL */
  int fit;              /* 1: optimise theta; 0: use theta (or the default) as is */
  int iters;            /* L-BFGS iterations per start */
  int starts;           /* starts optimised (best initial values first); 0 = 3 cold, or the warm one
                           and (up to coarse_points points) the noisy one */
  int max_points;       /* fit on a subset above this many points (0 = never) */
  int classify;         /* 1: +-1 labels: centred, not scaled; bounds for a smooth surface */
  int coarse_points;    /* above this many fitted points (0 = never): a cold fit runs its starts on
                           this many evenly spaced ones, then one start on all; every fit runs <= fine_iters */
  int fine_iters;       /* L-BFGS iterations of a fit above coarse_points points */
  int fit_points;       /* above this many points (0 = never) the hyperparameters are those of this many
                           evenly spaced points (point k n / fit_points for k = 0 .. fit_points - 1) */
} dl_gp_opts;

/* Defaults: fit = 1, iters = 60, starts = 0, max_points = 800, classify = 0,
 * coarse_points = 128, fine_iters = 30, fit_points = 512. */
dl_gp_opts dl_gp_defaults(void);

/* Fits a GP to n points X [n, dim] (row-major) with targets y [n]. n may be 0
 * (then the prior, with opts->theta or the default). Returns a new GP, or NULL
 * with ctx->err set. Fails on: dim < 1, n < 0, a non-finite X or y, a theta
 * with a non-finite value, out of memory. X and y are copied. */
dl_gp *dl_gp_fit_new(dl_ctx *ctx, const double *X, const double *y, int n, int dim, const dl_gp_opts *opts);

/* A copy of g (its own memory), or NULL with ctx->err set (out of memory). */
dl_gp *dl_gp_clone_new(dl_ctx *ctx, const dl_gp *g);

void dl_gp_release(dl_gp *g);   /* NULL is a no-op */

int dl_gp_dim(const dl_gp *g);
int dl_gp_points(const dl_gp *g);            /* training points, believed ones included */
void dl_gp_theta(const dl_gp *g, double *theta);   /* dim + 2 values */
double dl_gp_lml(const dl_gp *g);            /* objective at theta (lml + log prior) */
double dl_gp_noise(const dl_gp *g);          /* fitted noise variance in y's units squared */
double dl_gp_mean(const dl_gp *g);           /* the standardisation: y = mean + sd * z */
double dl_gp_sd(const dl_gp *g);

/* Posterior mean and variance of the latent function (noise excluded) at m
 * points Xs [m, dim], in y's units. var may be NULL. Fails only on out of
 * memory (returns -1, ctx->err set); otherwise 0. */
int dl_gp_predict(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double *mean, double *var);

/* Posterior mean of the latent function at each training point [points]. */
void dl_gp_train_mean(const dl_gp *g, double *mean);

/* Expected improvement below `best` (minimisation), in y's units, of the
 * latent function at m points Xs [m, dim]. With noise > 0 (a noise variance in
 * y's units squared) it is the augmented EI of Huang et al. (2006): EI times
 * 1 - sqrt(noise / (var + noise)), which discounts points whose posterior
 * variance is already below the noise (another sample there teaches little).
 * -1 on out of memory. */
int dl_gp_ei(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double best, double noise, double *ei);

/* The posterior of dl_gp_predict at m points Xs [m, dim] and its gradients in
 * the input: dmean and dvar [m, dim] (row s: d mean(x_s) / d x_s). The
 * gradient of a variance at its floor (1e-12 sf2) is 0. -1 on out of memory.
 * (engine/search/gp_acq.c) */
int dl_gp_predict_grad(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double *mean, double *var,
                       double *dmean, double *dvar);

/* log of dl_gp_ei's expected improvement (noise 0) at m points Xs [m, dim],
 * accurate where EI underflows (z = (best - mean) / sd far below 0), and its
 * gradient in the input into grad [m, dim] (may be NULL). Where the posterior
 * variance is at its floor: log(best - mean), -INFINITY when that is <= 0.
 * -1 on out of memory. (engine/search/gp_acq.c) */
int dl_gp_log_ei(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, double best, double *logei, double *grad);

/* The joint posterior of the latent function at m points Xs [m, dim] and q
 * points Zs [q, dim]: the means and variances at Xs (as dl_gp_predict) and the
 * covariances cov [m, q] (row s: cov(f(x_s), f(z_j)), y's units squared), for
 * a batch's joint acquisition (lua/dlua/search/batch.lua). -1 on out of memory.
 * (engine/search/gp_acq.c) */
int dl_gp_cross_cov(dl_ctx *ctx, const dl_gp *g, const double *Xs, int m, const double *Zs, int q, double *mean,
                    double *var, double *cov);

/* Adds the observation (x [dim], y) with noise variance `noise` (y's units
 * squared; the fitted noise for a real observation, 0 for a belief) at the
 * same hyperparameters: a rank-one extension of the factor, O(points^2).
 * Fails on a non-finite x or y or a negative noise, out of memory (-1). */
int dl_gp_add(dl_ctx *ctx, dl_gp *g, const double *x, double y, double noise);

/* The objective the fit maximises, log marginal likelihood + log prior, of
 * (X [n, dim], y [n]) taken as they are (no standardisation) at theta, and its
 * gradient in theta [dim + 2] (grad may be NULL). -INFINITY when the kernel
 * matrix is not positive definite; NAN with ctx->err set on out of memory. */
double dl_gp_objective(dl_ctx *ctx, const double *X, const double *y, int n, int dim, const double *theta,
                       int classify, double *grad);

/* The subset rule used above max_points: writes m indices of X [n, dim] into
 * idx: the m / 4 lowest y, then greedily the point farthest from the chosen
 * ones. -1 on out of memory. */
int dl_gp_subset(dl_ctx *ctx, const double *X, const double *y, int n, int dim, int m, int *idx);

/* Noisy expected improvement (gp_nei.c): the EI of the latent f below the best of
 * f at nb baseline points, averaged over S joint posterior samples of f at the
 * baseline and the candidate (Letham et al. 2019, BoTorch's qNEI with q = 1).
 *
 *   dl_gp_nei *e = dl_gp_nei_new(ctx, g, Xb, nb, z, S);   // z [S, nb]: fixed N(0, 1) base samples
 *   dl_gp_nei_eval(ctx, e, Xs, m, nei);                   // nei [m], y's units
 *   dl_gp_nei_release(e);
 *
 * The object borrows g, which must outlive it (and not change: no dl_gp_add).
 * The same z gives the same values. Without noise the samples of f at the
 * baseline collapse to their means and NEI is EI below the lowest of them. */
typedef struct dl_gp_nei dl_gp_nei;

/* Prepares NEI over the baseline Xb [nb, dim] with base samples z [S, nb]
 * (row s is sample s): O(n^2 nb + nb^3 + S nb^2). Returns NULL with ctx->err set
 * on nb < 1, S < 1, a non-finite Xb or z, a baseline covariance that no jitter
 * makes positive definite, out of memory. */
dl_gp_nei *dl_gp_nei_new(dl_ctx *ctx, const dl_gp *g, const double *Xb, int nb, const double *z, int S);

/* NEI at m points Xs [m, dim] into nei [m] (minimisation, y's units, >= 0):
 * O(n^2 + n nb + S nb) each. -1 on out of memory (ctx->err set), else 0. */
int dl_gp_nei_eval(dl_ctx *ctx, const dl_gp_nei *e, const double *Xs, int m, double *nei);

void dl_gp_nei_release(dl_gp_nei *e);   /* NULL is a no-op */

#endif
