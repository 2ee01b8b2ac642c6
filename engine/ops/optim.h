/* optim.h -- optimizer update rules over flat float32 (or float64) buffers. */
/* See LICENSE */
#ifndef DL_OPTIM_H
#define DL_OPTIM_H

#include <stdint.h>

#include "core/dl.h"

typedef enum { DL_SGD = 0, DL_ADAM, DL_NADAM, DL_ADAMW, DL_ADAGRAD, DL_RMSPROP, DL_NOPTIM } dl_optim_kind;

typedef struct {
  double lr;            /* eta / alpha, this step's value (schedules applied by the caller) */
  double momentum;      /* gamma: SGD momentum, RMSProp momentum */
  int nesterov;         /* SGD only */
  double beta1, beta2;  /* Adam family */
  double rho;           /* RMSProp decay */
  double eps;
  double weight_decay;  /* coupled L2 (g += wd * p) except AdamW: decoupled (p -= lr * wd * p) */
} dl_optim_opts;

/* The one set of defaults: every binding, C test and the Lua optimizers use it
 * (SGD and Adagrad lr 0.01, Adam family 1e-3; AdamW weight_decay 0.01;
 * Adagrad eps 1e-10, else 1e-8; betas 0.9, 0.999; RMSProp rho 0.99). */
dl_optim_opts dl_optim_defaults(dl_optim_kind k);
/* "SGD", "Adam", "NAdam", "AdamW", "Adagrad", "RMSProp" (the Lua constructors' names). */
const char *dl_optim_name(dl_optim_kind k);
/* The kind with that name, or -1. */
int dl_optim_kind_from_name(const char *name);

/* One hyperparameter a rule reads: its option name and its field in dl_optim_opts. */
typedef struct {
  const char *name;     /* option key, e.g. "weight_decay" */
  int boolean;          /* 1: an int flag (nesterov), else a double */
  size_t offset;        /* offsetof(dl_optim_opts, field) */
} dl_optim_param;
/* The hyperparameters kind k reads, in alphabetical order, ending with {NULL}:
 * the valid option keys of its constructor. */
const dl_optim_param *dl_optim_params(dl_optim_kind k);
/* number of state buffers the rule keeps per parameter (0, 1 or 2) */
int dl_optim_nstate(dl_optim_kind k, const dl_optim_opts *o);

/* One update of n parameters p with gradient g and state s1, s2 (each n floats,
 * or NULL when the rule keeps fewer). t is the 1-based step number (Adam's
 * bias correction). The formulas are in docs/optimizers.md. */
void dl_optim_update(dl_optim_kind k, const dl_optim_opts *o, int64_t t, float *p, const float *g, float *s1,
                     float *s2, int64_t n);
/* The same rules over float64 buffers. */
void dl_optim_update_f64(dl_optim_kind k, const dl_optim_opts *o, int64_t t, double *p, const double *g,
                         double *s1, double *s2, int64_t n);

/* One parameter's buffers for dl_optim_step (s1/s2 NULL when the rule keeps fewer). */
typedef struct {
  void *p;
  const void *g;
  void *s1, *s2;
  int64_t n;
  int f64;              /* buffers are double, else float */
} dl_optim_buf;

/* Updates every buffer in bufs[0..nbuf) for step t, split into chunks over
 * the pool (elementwise rules: the split does not change any value). */
void dl_optim_step(dl_pool *pool, dl_optim_kind k, const dl_optim_opts *o, int64_t t, const dl_optim_buf *bufs,
                   int nbuf);

#endif
