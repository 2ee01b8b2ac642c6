/* optim.c -- the update rules of SGD, momentum, Nesterov, Adam, NAdam, AdamW,
 * Adagrad and RMSProp, as the tuning playbook writes them (items 108-113).
 *
 * Plain loops over flat float32 buffers with the hyperparameters in doubles;
 * the caller (the Lua optimizer) owns the buffers and calls this once per
 * parameter tensor inside one binding call per step. Deliberately no
 * schedules or clipping here: those act on lr and g before the call.
 */
/* See LICENSE */
#include "ops/optim.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[DL_NOPTIM] = {"SGD", "Adam", "NAdam", "AdamW", "Adagrad", "RMSProp"};

const char *dl_optim_name(dl_optim_kind k) { return names[k]; }

int dl_optim_kind_from_name(const char *name) {
  for (int k = 0; k < DL_NOPTIM; k++)
    if (strcmp(name, names[k]) == 0) return k;
  return -1;
}

#define P_NUM(field) {#field, 0, offsetof(dl_optim_opts, field)}
#define P_END {NULL, 0, 0}
static const dl_optim_param sgd_params[] = {P_NUM(lr), P_NUM(momentum), {"nesterov", 1, offsetof(dl_optim_opts, nesterov)},
                                            P_NUM(weight_decay), P_END};
static const dl_optim_param adam_params[] = {P_NUM(beta1), P_NUM(beta2), P_NUM(eps), P_NUM(lr), P_NUM(weight_decay),
                                             P_END};
static const dl_optim_param adagrad_params[] = {P_NUM(eps), P_NUM(lr), P_NUM(weight_decay), P_END};
static const dl_optim_param rmsprop_params[] = {P_NUM(eps), P_NUM(lr), P_NUM(momentum), P_NUM(rho),
                                                P_NUM(weight_decay), P_END};
#undef P_NUM
#undef P_END

const dl_optim_param *dl_optim_params(dl_optim_kind k) {
  switch (k) {
    case DL_SGD: return sgd_params;
    case DL_ADAGRAD: return adagrad_params;
    case DL_RMSPROP: return rmsprop_params;
    default: return adam_params;
  }
}

dl_optim_opts dl_optim_defaults(dl_optim_kind k) {
  dl_optim_opts o = {0.01, 0, 0, 0.9, 0.999, 0.99, 1e-8, 0};
  if (k == DL_ADAM || k == DL_NADAM || k == DL_ADAMW) o.lr = 1e-3;
  if (k == DL_ADAMW) o.weight_decay = 0.01;
  if (k == DL_ADAGRAD) o.eps = 1e-10;
  return o;
}

int dl_optim_nstate(dl_optim_kind k, const dl_optim_opts *o) {
  switch (k) {
    case DL_SGD: return o->momentum != 0 ? 1 : 0;
    case DL_ADAGRAD: return 1;
    default: return 2;
  }
}

/* The rules are written once over an element type T and instantiated for
 * float32 (training) and float64 (checking the formulas to 1e-6 and beyond). */
#define DL_OPTIM_DEFINE(NAME, T, SQRT) \
DL_SIMD_CLONES void NAME(dl_optim_kind k, const dl_optim_opts *o, int64_t t, T *p, const T *g, T *s1, T *s2, int64_t n) { \
  const T lr = (T)o->lr, wd = (T)o->weight_decay, eps = (T)o->eps; \
  switch (k) { \
    case DL_SGD: { \
      const T mu = (T)o->momentum; \
      if (mu == 0) { \
        for (int64_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]); \
      } else if (o->nesterov) { \
        for (int64_t i = 0; i < n; i++) {       /* v = mu v + g; p -= lr (mu v + g) */ \
          T gi = g[i] + wd * p[i]; \
          s1[i] = mu * s1[i] + gi; \
          p[i] -= lr * (mu * s1[i] + gi); \
        } \
      } else { \
        for (int64_t i = 0; i < n; i++) {       /* v = mu v + g; p -= lr v */ \
          T gi = g[i] + wd * p[i]; \
          s1[i] = mu * s1[i] + gi; \
          p[i] -= lr * s1[i]; \
        } \
      } \
      break; \
    } \
    case DL_ADAM: case DL_NADAM: case DL_ADAMW: { \
      const double b1 = o->beta1, b2 = o->beta2; \
      /* bias correction folded into the step: b = sqrt(1 - b2^t) / (1 - b1^t) */ \
      const T step = (T)(o->lr * sqrt(1 - pow(b2, (double)t)) / (1 - pow(b1, (double)t))); \
      const T fb1 = (T)b1, fb2 = (T)b2, decay = k == DL_ADAMW ? lr * wd : 0; \
      const T l2 = k == DL_ADAMW ? 0 : wd; \
      /* NAdam's numerator b1 m + (1 - b1) g, Adam's m: one branch-free (vectorised) loop */ \
      const T c1 = k == DL_NADAM ? fb1 : 1, c2 = k == DL_NADAM ? 1 - fb1 : 0; \
      for (int64_t i = 0; i < n; i++) { \
        T pi = p[i]; \
        T gi = g[i] + l2 * pi; \
        pi -= decay * pi; \
        T m = fb1 * s1[i] + (1 - fb1) * gi, v = fb2 * s2[i] + (1 - fb2) * gi * gi; \
        s1[i] = m; \
        s2[i] = v; \
        p[i] = pi - step * (c1 * m + c2 * gi) / (SQRT(v) + eps); \
      } \
      break; \
    } \
    case DL_ADAGRAD: \
      for (int64_t i = 0; i < n; i++) { \
        T gi = g[i] + wd * p[i]; \
        s1[i] += gi * gi; \
        p[i] -= lr * gi / (SQRT(s1[i]) + eps); \
      } \
      break; \
    case DL_RMSPROP: { \
      /* v (s1) starts at 1; m (s2) = gamma m + lr / sqrt(v + eps) g; p -= m */ \
      const T rho = (T)o->rho, mu = (T)o->momentum; \
      for (int64_t i = 0; i < n; i++) { \
        T gi = g[i] + wd * p[i]; \
        s1[i] = rho * s1[i] + (1 - rho) * gi * gi; \
        s2[i] = mu * s2[i] + lr / SQRT(s1[i] + eps) * gi; \
        p[i] -= s2[i]; \
      } \
      break; \
    } \
    default: break; \
  } \
}

DL_OPTIM_DEFINE(dl_optim_update, float, sqrtf)
DL_OPTIM_DEFINE(dl_optim_update_f64, double, sqrt)

typedef struct {
  dl_optim_kind k;
  const dl_optim_opts *o;
  int64_t t;
  const dl_optim_buf *bufs;
  int nbuf;
  int64_t chunk;        /* elements per task */
  int64_t *first;       /* first[b] = index of buffer b's first task; first[nbuf] = tasks */
} step_job;

static void step_task(void *arg, int i) {
  const step_job *j = arg;
  int b = 0;
  while (j->first[b + 1] <= i) b++;              /* few buffers: a linear scan is enough */
  const dl_optim_buf *u = &j->bufs[b];
  int64_t s = (i - j->first[b]) * j->chunk, n = u->n - s < j->chunk ? u->n - s : j->chunk;
  size_t es = u->f64 ? sizeof(double) : sizeof(float);
#define AT(ptr) ((ptr) ? (char *)(ptr) + (size_t)s * es : NULL)
  if (u->f64)
    dl_optim_update_f64(j->k, j->o, j->t, (double *)AT(u->p), (const double *)AT(u->g), (double *)AT(u->s1),
                        (double *)AT(u->s2), n);
  else
    dl_optim_update(j->k, j->o, j->t, (float *)AT(u->p), (const float *)AT(u->g), (float *)AT(u->s1),
                    (float *)AT(u->s2), n);
#undef AT
}

/* chunks of 64K elements: large enough that waking a thread pays off */
#define STEP_CHUNK ((int64_t)1 << 16)

void dl_optim_step(dl_pool *pool, dl_optim_kind k, const dl_optim_opts *o, int64_t t, const dl_optim_buf *bufs,
                   int nbuf) {
  int64_t small_first[17], *first = nbuf < 16 ? small_first : malloc(sizeof(int64_t) * (size_t)(nbuf + 1));
  int64_t total = 0;
  if (first) {
    for (int b = 0; b < nbuf; b++) {
      first[b] = total;
      total += (bufs[b].n + STEP_CHUNK - 1) / STEP_CHUNK;
    }
    first[nbuf] = total;
  }
  if (!first || dl_pool_threads(pool) <= 1 || total < 2 || total > INT32_MAX) {
    for (int b = 0; b < nbuf; b++) {            /* serially, whole buffers */
      const dl_optim_buf *u = &bufs[b];
      if (u->f64) dl_optim_update_f64(k, o, t, u->p, u->g, u->s1, u->s2, u->n);
      else dl_optim_update(k, o, t, u->p, u->g, u->s1, u->s2, u->n);
    }
  } else {
    step_job j = {k, o, t, bufs, nbuf, STEP_CHUNK, first};
    dl_pool_run(pool, (int)total, step_task, &j);
  }
  if (first != small_first) free(first);
}
