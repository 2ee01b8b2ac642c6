/* optim.c -- the optimizer table (optim.h) and the update rules of SGD,
 * momentum, Nesterov, Adam, NAdam, AdamW, Adagrad and RMSProp, as the tuning
 * playbook writes them (items 108-113; docs/optimizers.md).
 *
 * Each optimizer is an enum naming the indices of its hyperparameters, its
 * update function written as plain loops once per dtype (float32 for training,
 * float64 for checking the formulas to 1e-6 and beyond), and a row of `table`
 * below; nothing else in the engine, the binding or the Lua library names an
 * optimizer. The float32 and float64 loops of a rule are two copies on purpose:
 * they replaced a type-generic macro (DL_OPTIM_DEFINE, the TH pattern STYLE.md
 * warns against), each is a plain loop the compiler vectorises and a debugger
 * steps through, and each rounds in its own type; change both together.
 * The hyperparameters arrive as doubles and are rounded to the
 * buffers' type once per call; the caller (the Lua optimizer) owns the buffers
 * and calls dl_optim_step once per group inside one binding call per step.
 */
/* See LICENSE */
#include "ops/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ SGD */

/* plain: p -= lr g; momentum: v = mu v + g, p -= lr v; Nesterov: p -= lr (mu v + g);
 * g includes the coupled weight decay wd p. The slot (v) is unused when mu is 0. */
enum { SGD_LR, SGD_MOMENTUM, SGD_NESTEROV, SGD_WEIGHT_DECAY };

/* float32; sgd_f64 below is its twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void sgd_f32(const double *h, int64_t t, float *p, const float *g, float *const *s,
                                   int64_t n) {
  (void)t;
  const float lr = (float)h[SGD_LR], wd = (float)h[SGD_WEIGHT_DECAY], mu = (float)h[SGD_MOMENTUM];
  float *v = s[0];
  if (mu == 0) {
    for (int64_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);
  } else if (h[SGD_NESTEROV] != 0) {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * (mu * v[i] + gi);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      float gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * v[i];
    }
  }
}

/* sgd_f32's float64 twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void sgd_f64(const double *h, int64_t t, double *p, const double *g, double *const *s,
                                   int64_t n) {
  (void)t;
  const double lr = h[SGD_LR], wd = h[SGD_WEIGHT_DECAY], mu = h[SGD_MOMENTUM];
  double *v = s[0];
  if (mu == 0) {
    for (int64_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);
  } else if (h[SGD_NESTEROV] != 0) {
    for (int64_t i = 0; i < n; i++) {
      double gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * (mu * v[i] + gi);
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      double gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * v[i];
    }
  }
}

/* ------------------------------------------------------------ Adam, NAdam, AdamW */

/* m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr sqrt(1 - b2^t) / (1 - b1^t) num / (sqrt(v) + eps)
 * with num = m (Adam, AdamW) or b1 m + (1 - b1) g (NAdam); weight decay coupled (g += wd p)
 * except AdamW's, decoupled (p -= lr wd p before the step). The three rows share these. */
enum { ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_LR, ADAM_WEIGHT_DECAY };
enum { ADAM_PLAIN, ADAM_NESTEROV, ADAM_DECOUPLED };

/* bias correction folded into the step: lr sqrt(1 - b2^t) / (1 - b1^t) */
static double adam_step_size(const double *h, int64_t t) {
  return h[ADAM_LR] * sqrt(1 - pow(h[ADAM_BETA2], (double)t)) / (1 - pow(h[ADAM_BETA1], (double)t));
}

/* float32; adam_family_f64 below is its twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void adam_family_f32(const double *h, int64_t t, float *p, const float *g, float *const *s,
                                           int64_t n, int variant) {
  const float lr = (float)h[ADAM_LR], wd = (float)h[ADAM_WEIGHT_DECAY], eps = (float)h[ADAM_EPS];
  const float step = (float)adam_step_size(h, t);
  const float b1 = (float)h[ADAM_BETA1], b2 = (float)h[ADAM_BETA2];
  const float decay = variant == ADAM_DECOUPLED ? lr * wd : 0, l2 = variant == ADAM_DECOUPLED ? 0 : wd;
  /* NAdam's numerator b1 m + (1 - b1) g, Adam's m: one branch-free (vectorised) loop */
  const float c1 = variant == ADAM_NESTEROV ? b1 : 1, c2 = variant == ADAM_NESTEROV ? 1 - b1 : 0;
  float *ms = s[0], *vs = s[1];
  for (int64_t i = 0; i < n; i++) {
    float pi = p[i];
    float gi = g[i] + l2 * pi;
    pi -= decay * pi;
    float m = b1 * ms[i] + (1 - b1) * gi, v = b2 * vs[i] + (1 - b2) * gi * gi;
    ms[i] = m;
    vs[i] = v;
    p[i] = pi - step * (c1 * m + c2 * gi) / (sqrtf(v) + eps);
  }
}

/* adam_family_f32's float64 twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void adam_family_f64(const double *h, int64_t t, double *p, const double *g, double *const *s,
                                           int64_t n, int variant) {
  const double lr = h[ADAM_LR], wd = h[ADAM_WEIGHT_DECAY], eps = h[ADAM_EPS];
  const double step = adam_step_size(h, t);
  const double b1 = h[ADAM_BETA1], b2 = h[ADAM_BETA2];
  const double decay = variant == ADAM_DECOUPLED ? lr * wd : 0, l2 = variant == ADAM_DECOUPLED ? 0 : wd;
  const double c1 = variant == ADAM_NESTEROV ? b1 : 1, c2 = variant == ADAM_NESTEROV ? 1 - b1 : 0;
  double *ms = s[0], *vs = s[1];
  for (int64_t i = 0; i < n; i++) {
    double pi = p[i];
    double gi = g[i] + l2 * pi;
    pi -= decay * pi;
    double m = b1 * ms[i] + (1 - b1) * gi, v = b2 * vs[i] + (1 - b2) * gi * gi;
    ms[i] = m;
    vs[i] = v;
    p[i] = pi - step * (c1 * m + c2 * gi) / (sqrt(v) + eps);
  }
}

/* the three rows' entry points, per dtype: alike by design, since the table's update signature
 * carries no variant */
static void adam_f32(const double *h, int64_t t, float *p, const float *g, float *const *s, int64_t n) {
  adam_family_f32(h, t, p, g, s, n, ADAM_PLAIN);
}
static void adam_f64(const double *h, int64_t t, double *p, const double *g, double *const *s, int64_t n) {
  adam_family_f64(h, t, p, g, s, n, ADAM_PLAIN);
}
static void nadam_f32(const double *h, int64_t t, float *p, const float *g, float *const *s, int64_t n) {
  adam_family_f32(h, t, p, g, s, n, ADAM_NESTEROV);
}
static void nadam_f64(const double *h, int64_t t, double *p, const double *g, double *const *s, int64_t n) {
  adam_family_f64(h, t, p, g, s, n, ADAM_NESTEROV);
}
static void adamw_f32(const double *h, int64_t t, float *p, const float *g, float *const *s, int64_t n) {
  adam_family_f32(h, t, p, g, s, n, ADAM_DECOUPLED);
}
static void adamw_f64(const double *h, int64_t t, double *p, const double *g, double *const *s, int64_t n) {
  adam_family_f64(h, t, p, g, s, n, ADAM_DECOUPLED);
}

/* ------------------------------------------------------------ Adagrad */

/* s += g^2; p -= lr g / (sqrt(s) + eps), g with the coupled weight decay */
enum { ADAGRAD_EPS, ADAGRAD_LR, ADAGRAD_WEIGHT_DECAY };

/* float32; adagrad_f64 below is its twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void adagrad_f32(const double *h, int64_t t, float *p, const float *g, float *const *s,
                                       int64_t n) {
  (void)t;
  const float lr = (float)h[ADAGRAD_LR], wd = (float)h[ADAGRAD_WEIGHT_DECAY], eps = (float)h[ADAGRAD_EPS];
  float *sum = s[0];
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] + wd * p[i];
    sum[i] += gi * gi;
    p[i] -= lr * gi / (sqrtf(sum[i]) + eps);
  }
}

/* adagrad_f32's float64 twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void adagrad_f64(const double *h, int64_t t, double *p, const double *g, double *const *s,
                                       int64_t n) {
  (void)t;
  const double lr = h[ADAGRAD_LR], wd = h[ADAGRAD_WEIGHT_DECAY], eps = h[ADAGRAD_EPS];
  double *sum = s[0];
  for (int64_t i = 0; i < n; i++) {
    double gi = g[i] + wd * p[i];
    sum[i] += gi * gi;
    p[i] -= lr * gi / (sqrt(sum[i]) + eps);
  }
}

/* ------------------------------------------------------------ RMSProp */

/* v (starts at 1) = rho v + (1 - rho) g^2; m = mu m + lr / sqrt(v + eps) g; p -= m */
enum { RMSPROP_EPS, RMSPROP_LR, RMSPROP_MOMENTUM, RMSPROP_RHO, RMSPROP_WEIGHT_DECAY };

/* float32; rmsprop_f64 below is its twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void rmsprop_f32(const double *h, int64_t t, float *p, const float *g, float *const *s,
                                       int64_t n) {
  (void)t;
  const float lr = (float)h[RMSPROP_LR], wd = (float)h[RMSPROP_WEIGHT_DECAY], eps = (float)h[RMSPROP_EPS];
  const float rho = (float)h[RMSPROP_RHO], mu = (float)h[RMSPROP_MOMENTUM];
  float *v = s[0], *m = s[1];
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] + wd * p[i];
    v[i] = rho * v[i] + (1 - rho) * gi * gi;
    m[i] = mu * m[i] + lr / sqrtf(v[i] + eps) * gi;
    p[i] -= m[i];
  }
}

/* rmsprop_f32's float64 twin (two copies on purpose: see the top of the file) */
DL_SIMD_CLONES static void rmsprop_f64(const double *h, int64_t t, double *p, const double *g, double *const *s,
                                       int64_t n) {
  (void)t;
  const double lr = h[RMSPROP_LR], wd = h[RMSPROP_WEIGHT_DECAY], eps = h[RMSPROP_EPS];
  const double rho = h[RMSPROP_RHO], mu = h[RMSPROP_MOMENTUM];
  double *v = s[0], *m = s[1];
  for (int64_t i = 0; i < n; i++) {
    double gi = g[i] + wd * p[i];
    v[i] = rho * v[i] + (1 - rho) * gi * gi;
    m[i] = mu * m[i] + lr / sqrt(v[i] + eps) * gi;
    p[i] -= m[i];
  }
}

/* ------------------------------------------------------------ the table */

/* The optimizers, in the order core.optim_table() lists them. A row: the name,
 * the hyperparameters {option key, type, default, lo, hi, hi_open}, indexed by
 * the optimizer's enum above (alphabetical, as the messages list keys), the state
 * slots {name, initial value}, and the update functions. Slot names are the keys
 * of state_dict and of checkpoints ("3.m"): renaming one makes old checkpoints
 * unreadable. */
#define INF HUGE_VAL
/* the Adam family's hyperparameters: Adam, NAdam and AdamW differ only in weight decay's default */
#define ADAM_HPARAMS(wd_default)                                                  \
  (const dl_optim_hparam[]){                                                      \
    [ADAM_BETA1] = {"beta1", DL_OPTIM_NUMBER, 0.9, 0, 1, 1},                      \
    [ADAM_BETA2] = {"beta2", DL_OPTIM_NUMBER, 0.999, 0, 1, 1},                    \
    [ADAM_EPS] = {"eps", DL_OPTIM_NUMBER, 1e-8, 0, INF, 0},                       \
    [ADAM_LR] = {"lr", DL_OPTIM_NUMBER, 1e-3, 0, INF, 0},                         \
    [ADAM_WEIGHT_DECAY] = {"weight_decay", DL_OPTIM_NUMBER, wd_default, 0, INF, 0}, \
    {0}}
static const dl_optim_def table[] = {
  {"SGD",
   (const dl_optim_hparam[]){
     [SGD_LR] = {"lr", DL_OPTIM_NUMBER, 0.01, 0, INF, 0},
     [SGD_MOMENTUM] = {"momentum", DL_OPTIM_NUMBER, 0, 0, 1, 0},
     [SGD_NESTEROV] = {"nesterov", DL_OPTIM_BOOLEAN, 0, 0, 1, 0},
     [SGD_WEIGHT_DECAY] = {"weight_decay", DL_OPTIM_NUMBER, 0, 0, INF, 0},
     {0}},
   (const dl_optim_slot[]){{"momentum", 0}, {0}},
   sgd_f32, sgd_f64},
  {"Adam", ADAM_HPARAMS(0), (const dl_optim_slot[]){{"m", 0}, {"v", 0}, {0}}, adam_f32, adam_f64},
  {"NAdam", ADAM_HPARAMS(0), (const dl_optim_slot[]){{"m", 0}, {"v", 0}, {0}}, nadam_f32, nadam_f64},
  {"AdamW", ADAM_HPARAMS(0.01), (const dl_optim_slot[]){{"m", 0}, {"v", 0}, {0}}, adamw_f32, adamw_f64},
  {"Adagrad",
   (const dl_optim_hparam[]){
     [ADAGRAD_EPS] = {"eps", DL_OPTIM_NUMBER, 1e-10, 0, INF, 0},
     [ADAGRAD_LR] = {"lr", DL_OPTIM_NUMBER, 0.01, 0, INF, 0},
     [ADAGRAD_WEIGHT_DECAY] = {"weight_decay", DL_OPTIM_NUMBER, 0, 0, INF, 0},
     {0}},
   (const dl_optim_slot[]){{"sum_sq", 0}, {0}},
   adagrad_f32, adagrad_f64},
  {"RMSProp",
   (const dl_optim_hparam[]){
     [RMSPROP_EPS] = {"eps", DL_OPTIM_NUMBER, 1e-8, 0, INF, 0},
     [RMSPROP_LR] = {"lr", DL_OPTIM_NUMBER, 0.01, 0, INF, 0},
     [RMSPROP_MOMENTUM] = {"momentum", DL_OPTIM_NUMBER, 0, 0, 1, 0},
     [RMSPROP_RHO] = {"rho", DL_OPTIM_NUMBER, 0.99, 0, 1, 0},
     [RMSPROP_WEIGHT_DECAY] = {"weight_decay", DL_OPTIM_NUMBER, 0, 0, INF, 0},
     {0}},
   (const dl_optim_slot[]){{"v", 1}, {"m", 0}, {0}},   /* v starts at 1 (playbook 111) */
   rmsprop_f32, rmsprop_f64},
};
#undef INF

int dl_optim_count(void) { return (int)(sizeof table / sizeof table[0]); }

const dl_optim_def *dl_optim_get(int i) { return i >= 0 && i < dl_optim_count() ? &table[i] : NULL; }

const dl_optim_def *dl_optim_find(const char *name) {
  for (int i = 0; i < dl_optim_count(); i++)
    if (strcmp(name, table[i].name) == 0) return &table[i];
  return NULL;
}

int dl_optim_nhparams(const dl_optim_def *d) {
  int n = 0;
  while (d->hparams[n].name) n++;
  return n;
}

int dl_optim_nslots(const dl_optim_def *d) {
  int n = 0;
  while (d->slots[n].name) n++;
  return n;
}

int dl_optim_hparam_index(const dl_optim_def *d, const char *name) {
  for (int i = 0; d->hparams[i].name; i++)
    if (strcmp(name, d->hparams[i].name) == 0) return i;
  return -1;
}

void dl_optim_defaults(const dl_optim_def *d, double *h) {
  for (int i = 0; d->hparams[i].name; i++) h[i] = d->hparams[i].def;
}

int dl_optim_check(const dl_optim_def *d, const double *h) {
  for (int i = 0; d->hparams[i].name; i++) {
    const dl_optim_hparam *hp = &d->hparams[i];
    double v = h[i];
    int ok = hp->type == DL_OPTIM_BOOLEAN ? (v == 0 || v == 1)
                                          : (v >= hp->lo && (hp->hi_open ? v < hp->hi : v <= hp->hi));
    if (!ok) return i;
  }
  return -1;
}

const char *dl_optim_range_text(const dl_optim_hparam *hp, char *buf, size_t size) {
  if (hp->type == DL_OPTIM_BOOLEAN) snprintf(buf, size, "true or false");
  else if (hp->lo == 0 && isinf(hp->hi)) snprintf(buf, size, "non-negative");
  else if (isinf(hp->hi)) snprintf(buf, size, ">= %.17g", hp->lo);
  else snprintf(buf, size, "in [%.17g, %.17g%c", hp->lo, hp->hi, hp->hi_open ? ')' : ']');
  return buf;
}

/* ------------------------------------------------------------ one step over the pool */

typedef struct {
  const dl_optim_def *d;
  const double *h;
  int64_t t;
  const dl_optim_buf *bufs;
  int nbuf;
  int64_t chunk;        /* elements per task */
  int64_t *first;       /* first[b] = index of buffer b's first task; first[nbuf] = tasks */
} step_job;

/* elements [s, s + n) of buffer u */
static void update_range(const dl_optim_def *d, const double *h, int64_t t, const dl_optim_buf *u, int64_t s,
                         int64_t n) {
  if (u->f64) {
    double *st[DL_OPTIM_MAXS];
    for (int k = 0; k < DL_OPTIM_MAXS; k++) st[k] = u->s[k] ? (double *)u->s[k] + s : NULL;
    d->update_f64(h, t, (double *)u->p + s, (const double *)u->g + s, st, n);
  } else {
    float *st[DL_OPTIM_MAXS];
    for (int k = 0; k < DL_OPTIM_MAXS; k++) st[k] = u->s[k] ? (float *)u->s[k] + s : NULL;
    d->update_f32(h, t, (float *)u->p + s, (const float *)u->g + s, st, n);
  }
}

static void step_task(void *arg, int i) {
  const step_job *j = arg;
  int b = 0;
  while (j->first[b + 1] <= i) b++;              /* few buffers: a linear scan is enough */
  const dl_optim_buf *u = &j->bufs[b];
  int64_t s = (i - j->first[b]) * j->chunk, n = u->n - s < j->chunk ? u->n - s : j->chunk;
  update_range(j->d, j->h, j->t, u, s, n);
}

/* chunks of 64K elements: large enough that waking a thread pays off */
#define STEP_CHUNK ((int64_t)1 << 16)

void dl_optim_step(dl_pool *pool, const dl_optim_def *d, const double *h, int64_t t, const dl_optim_buf *bufs,
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
    for (int b = 0; b < nbuf; b++) update_range(d, h, t, &bufs[b], 0, bufs[b].n);   /* serially, whole buffers */
  } else {
    step_job j = {d, h, t, bufs, nbuf, STEP_CHUNK, first};
    dl_pool_run(pool, (int)total, step_task, &j);
  }
  if (first != small_first) free(first);
}
