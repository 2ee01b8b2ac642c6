/* batchnorm.h -- batch normalisation of [N, C] and [N, C, H, W]: standard, ghost
 * (virtual batch) and statistics shared across replicas, forward and backward.
 *
 * A worked example: 2 replicas of 200 examples each (N = 400), virtual_batch 64.
 * Each replica's 200 examples fall into groups of 64, 64 and 72 (the trailing
 * 200 mod 64 = 8 examples join the last full group; a shard smaller than k is
 * one group). With sync = 0 each of the 2 x 3 groups is a statistics set of
 * its own; with sync = 1 group g of replica 0 and group g of replica 1 form
 * one set (3 sets of 128, 128 and 144 examples). Every example is normalised
 * with the biased mean and variance of its set, over the set's examples and
 * all H x W positions:
 *
 *   dl_bn_opts o = dl_bn_defaults();
 *   o.replicas = 2; o.virtual_batch = 64; o.sync = 1;
 *   y = dl_batch_norm(ctx, x, gamma, beta, running_mean, running_var, &o);
 *
 * The kernel runs in stages so that a cross-rank sum (MPI allreduce) fits
 * between them (see dl_bn_reducer):
 *   forward   1. per group and channel: S1 = sum x            -> combine groups into sets [-> reduce]
 *             2. per group and channel: sum (x - m~), sum (x - m~)^2 around m~ = S1 / n
 *                                                              -> combine [-> reduce]
 *             3. mean, variance, running averages; y = (x - mean) * rstd * gamma + beta
 *   backward  1. per group and channel: sum dy, sum dy * (x - mean) -> combine [-> reduce]
 *             2. dx, and dgamma, dbeta from the local sums
 * Step 2 of the forward is the corrected two-pass algorithm: accurate when
 * |mean| >> std, and every quantity stays a plain sum, so it can be added
 * across groups, replicas and ranks. Without a reducer the stages run fused per
 * channel on the thread pool (one task per block of channels, so results do not
 * depend on the thread count); with one they run as three passes over all
 * channels around the two reductions.
 *
 * Moving averages (PyTorch's convention): once per training call, for each
 * replica r, running = (1 - momentum) * running + momentum * stat, where stat
 * is the unweighted mean over r's groups of the group means, and of the
 * groups' unbiased variances (n / (n - 1) times the biased one, n = values per
 * channel in the set). running_mean/var are float32 or float64 (one dtype) with R x C elements
 * (row r = replica r). Evaluation normalises with the mean over replicas of
 * the running averages, so it depends neither on the batch size nor on how the
 * batch splits into replicas.
 */
/* See LICENSE */
#ifndef DL_BATCHNORM_H
#define DL_BATCHNORM_H

#include "ops/ops.h"

/* A cross-rank sum: replaces buf[0..n) by its elementwise sum over all ranks
 * (every rank calls it with the same n, in the same order). Returns 0, or -1
 * with ctx->err set. The struct must outlive every graph that used it: the
 * backward calls it again. */
typedef struct dl_bn_reducer {
  int (*sum)(void *ud, dl_ctx *ctx, double *buf, int64_t n);
  void *ud;
} dl_bn_reducer;

typedef struct {
  int training;               /* 1: batch statistics, update running; 0: running statistics */
  double momentum;            /* in [0, 1]; running = (1 - momentum) running + momentum stat */
  double eps;                 /* > 0, added to the variance */
  int64_t replicas;           /* R >= 1: the batch is R equal consecutive shards */
  int64_t virtual_batch;      /* k >= 1 examples per statistics group; 0 = the whole shard */
  int sync;                   /* 1: group g of every replica shares statistics */
  const dl_bn_reducer *reducer; /* NULL, or a cross-rank sum for the shared sets (sync only) */
} dl_bn_opts;

/* training 1, momentum 0.1, eps 1e-5, replicas 1, virtual_batch 0, sync 0, no reducer */
dl_bn_opts dl_bn_defaults(void);

/* x is [N, C] or [N, C, H, W], float32 or float64; weight, bias are [C] of x's
 * dtype or NULL (scale 1, shift 0); running_mean, running_var are contiguous
 * float32 with replicas * C elements ([C] or [R, C]), or both NULL (training
 * only: then nothing is updated). Returns a new tensor shaped like x; in
 * training the running averages are updated in place. Records a node when x,
 * weight or bias requires grad (the backward of the batch statistics, or of
 * fixed statistics in evaluation).
 * Fails, naming both shapes, on: dtype, ndim, channel count, running shapes,
 * N not divisible by replicas (training), a statistics set with fewer than 2
 * values per channel (training), missing running averages (evaluation), bad
 * momentum/eps/virtual_batch, memory, reducer failure. On failure nothing is
 * modified: the running averages change last, after everything that can fail. */
dl_tensor *dl_batch_norm(dl_ctx *ctx, dl_tensor *x, dl_tensor *weight, dl_tensor *bias,
                         dl_tensor *running_mean, dl_tensor *running_var, const dl_bn_opts *o);

/* ------------------------------------------------------------ stages
 * The building blocks of dl_batch_norm, for C callers that need another
 * schedule. Data are viewed as [N, C, P] (P = H * W), or, when cn = 1, as
 * [C, N] (a 2-D input stored transposed, so each channel is one contiguous
 * row). Per-group arrays are [J, C] with J = R * G groups (group j = replica
 * j / G, group j % G within it); per-set arrays are [S, C]. Every stage
 * touches only channels [c0, c1) of its outputs, so blocks of channels can run
 * on different threads. All sums are double. */

typedef struct {
  int64_t N, C, P;            /* examples, channels, values per (example, channel) */
  int64_t R, Nr;              /* replicas, examples per replica */
  int64_t k, G;               /* examples per group (the last takes the remainder), groups per replica */
  int64_t S;                  /* statistics sets: G when sync, else R * G */
  int64_t sync, cn;           /* sets span replicas; data laid out [C, N] */
} dl_bn_geom;

/* Fills g for N examples (P values per channel); virtual_batch 0 = one group per
 * replica. Fails on replicas < 1, virtual_batch < 0, N not divisible by replicas. */
int dl_bn_geom_init(dl_ctx *ctx, dl_bn_geom *g, int64_t N, int64_t C, int64_t P, int cn,
                    int64_t replicas, int64_t virtual_batch, int sync);
/* Examples [*start, *start + *size) of group j in [0, R * G). */
void dl_bn_group(const dl_bn_geom *g, int64_t j, int64_t *start, int64_t *size);
/* The statistics set of group j. */
int64_t dl_bn_group_set(const dl_bn_geom *g, int64_t j);
/* Values per channel in set s on this process (examples of its groups x P). */
double dl_bn_set_count(const dl_bn_geom *g, int64_t s);

/* Forward 1: sum[j, c] = sum over group j, channel c of x. */
void dl_bn_sums(const dl_bn_geom *g, dl_dtype d, const void *x, double *sum, int64_t c0, int64_t c1);
/* Forward 2: with m = centre[set(j), c]: d1[j, c] = sum (x - m), d2[j, c] = sum (x - m)^2. */
void dl_bn_centered_sums(const dl_bn_geom *g, dl_dtype d, const void *x, const double *centre,
                         double *d1, double *d2, int64_t c0, int64_t c1);
/* Combine: set[s, c] = sum over the groups j of set s of grp[j, c]. */
void dl_bn_combine(const dl_bn_geom *g, const double *grp, double *set, int64_t c0, int64_t c1);
/* Statistics of set s from its count n[s], centre m~ and centred sums d1, d2 (all [S, C]
 * except n): mean = m~ + d1 / n, var = max(0, (d2 - d1^2 / n) / n) (biased),
 * rstd = 1 / sqrt(var + eps). */
void dl_bn_finish(const dl_bn_geom *g, const double *n, const double *centre, const double *d1,
                  const double *d2, double eps, double *mean, double *var, double *rstd,
                  int64_t c0, int64_t c1);
/* Moving averages rm, rv [R, C] (float32, or float64 when f64) from set statistics, as the
 * header comment says. */
void dl_bn_update_running(const dl_bn_geom *g, void *rm, void *rv, int f64, const double *n, const double *mean,
                          const double *var, double momentum, int64_t c0, int64_t c1);
/* Forward 3: y = (x - mean[set]) * rstd[set] * gamma + beta; gamma, beta of dtype d or NULL. */
void dl_bn_normalize(const dl_bn_geom *g, dl_dtype d, void *y, const void *x, const double *mean,
                     const double *rstd, const void *gamma, const void *beta, int64_t c0, int64_t c1);
/* Backward 1: sdy[j, c] = sum dy, sdyx[j, c] = sum dy * (x - mean[set(j), c]). */
void dl_bn_backward_sums(const dl_bn_geom *g, dl_dtype d, const void *dy, const void *x, const double *mean,
                         double *sdy, double *sdyx, int64_t c0, int64_t c1);
/* Backward 2: with set sums sdy, sdyx [S, C] and counts n [S]:
 *   dx = gamma rstd (dy - sdy / n - (x - mean) rstd^2 sdyx / n)
 * or, when frozen (fixed statistics), dx = gamma rstd dy (sdy, sdyx, n unused). */
void dl_bn_backward_dx(const dl_bn_geom *g, dl_dtype d, void *dx, const void *dy, const void *x,
                       const double *n, const double *mean, const double *rstd, const double *sdy,
                       const double *sdyx, const void *gamma, int frozen, int64_t c0, int64_t c1);

#endif
