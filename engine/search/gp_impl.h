/* gp_impl.h -- the fields of a fitted GP and its kernel, for the files of
 * engine/search/ that compute with them (gp.c: the fit and the posterior;
 * gp_acq.c: gradients of the acquisition; gp_nei.c: noisy expected improvement). Not part
 * of the API: callers use gp.h.
 */
/* See LICENSE */
#ifndef DL_GP_IMPL_H
#define DL_GP_IMPL_H

#include "core/dl.h"

#include <math.h>

#define SQRT5 2.23606797749978969641

struct dl_gp {
  dl_ctx *ctx;
  int dim, n, cap;
  double *X;                    /* [cap, dim] row-major */
  double *y;                    /* [cap] standardised targets */
  double *noise;                /* [cap] diagonal added to K, standardised units */
  double *L;                    /* [cap, cap] column-major lower factor of K + diag(noise) */
  double *alpha;                /* [cap] (K + diag(noise))^-1 y */
  double *theta;                /* [dim + 2] */
  double *inv_l2;               /* [dim] 1 / l_d^2 */
  double sf2, sn2, jitter;      /* amplitude, fitted noise, extra jitter (standardised) */
  double mean, sd;              /* y = mean + sd * standardised */
  double lml;                   /* objective at theta (-INFINITY before any data) */
  int classify;
};

/* squared distance of a and b [dim] scaled by the inverse squared length scales */
static inline double sq_dist(const double *a, const double *b, const double *inv_l2, int dim) {
  double r2 = 0;
  for (int d = 0; d < dim; d++) {
    double t = a[d] - b[d];
    r2 += t * t * inv_l2[d];
  }
  return r2;
}

/* the Matern-5/2 kernel at scaled squared distance r2, amplitude sf2 */
static inline double matern(double r2, double sf2) {
  double r = sqrt(r2);
  return sf2 * (1 + SQRT5 * r + (5.0 / 3.0) * r2) * exp(-SQRT5 * r);
}

static inline double normal_cdf(double z) { return 0.5 * erfc(-z / sqrt(2.0)); }
static inline double normal_pdf(double z) { return exp(-0.5 * z * z) * 0.39894228040143267794; }   /* 1/sqrt(2pi) */

#endif
