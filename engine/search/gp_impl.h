/* gp_impl.h -- the layout of a fitted GP, private to engine/search (gp.c, which
 * fits and updates it, and gp_acq.c, which differentiates its acquisition).
 * Nothing outside engine/search includes it; the interface is gp.h.
 */
/* See LICENSE */
#ifndef DL_GP_IMPL_H
#define DL_GP_IMPL_H

#include "core/dl.h"

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

#endif
