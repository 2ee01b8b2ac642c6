/* optim.h -- the optimizer table: one row per optimizer with its name, its
 * hyperparameters (option key, default, valid range), its state slots (name,
 * initial value) and its update functions over flat float32 and float64
 * buffers. The C core, the binding (engine/lua/lua_optim.c, core.optim_table())
 * and the Lua optimizers (lua/dlua/optim/) all read this one table, so adding
 * an optimizer is a row and its update function in optim.c
 * (docs/architecture.md, "Adding an optimizer").
 *
 * A worked example, one Adam step over float32 buffers from C:
 *
 *   const dl_optim_def *adam = dl_optim_find("Adam");
 *   double h[DL_OPTIM_MAXH];
 *   dl_optim_defaults(adam, h);
 *   h[dl_optim_hparam_index(adam, "lr")] = 0.01;
 *   if (dl_optim_check(adam, h) >= 0) ...;            // a value out of its range
 *   dl_optim_buf b = {p, g, {m, v}, n, 0};             // m, v start at the slots' init (0)
 *   dl_optim_step(pool, adam, h, 1, &b, 1);            // step t = 1
 *
 * Deliberately no schedules or clipping here: those act on lr and g before the call.
 */
/* See LICENSE */
#ifndef DL_OPTIM_H
#define DL_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "core/dl.h"

#define DL_OPTIM_MAXH 8       /* hyperparameters of one optimizer, at most */
#define DL_OPTIM_MAXS 2       /* state slots per parameter, at most */

typedef enum { DL_OPTIM_NUMBER, DL_OPTIM_BOOLEAN } dl_optim_type;

/* One hyperparameter: an option key of the optimizer's constructor. */
typedef struct {
  const char *name;           /* option key, e.g. "weight_decay"; NULL ends a list */
  dl_optim_type type;         /* a boolean's value is 0 or 1 */
  double def;                 /* default */
  double lo, hi;              /* valid range of a number: lo <= v <= hi (hi may be HUGE_VAL) */
  int hi_open;                /* 1: v < hi (beta1 in [0, 1)) */
} dl_optim_hparam;

/* One state buffer the rule keeps per parameter, of the parameter's shape and dtype. */
typedef struct {
  const char *name;           /* its name in state_dict ("1.m") and checkpoints; NULL ends a list */
  double init;                /* every element's value when the state is created */
} dl_optim_slot;

/* An update rule over n elements: parameters p, gradients g, state slots
 * s[0..nslots) (n elements each, as the row lists them); h holds the
 * hyperparameters in the order of the row's hparams (lr already this step's),
 * t is the 1-based step number (Adam's bias correction). */
typedef void (*dl_optim_f32_fn)(const double *h, int64_t t, float *p, const float *g, float *const *s, int64_t n);
typedef void (*dl_optim_f64_fn)(const double *h, int64_t t, double *p, const double *g, double *const *s,
                                int64_t n);

/* A row of the table. */
typedef struct {
  const char *name;           /* the Lua constructor's name, "SGD" (dl.optim.SGD) */
  const dl_optim_hparam *hparams;   /* alphabetical by name, at most DL_OPTIM_MAXH, NULL-ended; "lr" among them */
  const dl_optim_slot *slots;       /* at most DL_OPTIM_MAXS, NULL-ended */
  dl_optim_f32_fn update_f32; /* training */
  dl_optim_f64_fn update_f64; /* the same rule in float64 (checking formulas) */
} dl_optim_def;

/* The number of rows, and row i (0 <= i < dl_optim_count(); borrowed, static). */
int dl_optim_count(void);
const dl_optim_def *dl_optim_get(int i);
/* The row named name ("Adam"), or NULL. */
const dl_optim_def *dl_optim_find(const char *name);
/* How many hyperparameters and state slots row d has. */
int dl_optim_nhparams(const dl_optim_def *d);
int dl_optim_nslots(const dl_optim_def *d);
/* The index of hyperparameter name in d's hparams (and in h), or -1. */
int dl_optim_hparam_index(const dl_optim_def *d, const char *name);
/* Fills h[0..nhparams) with d's defaults: the one set of defaults every binding,
 * C test and the Lua optimizers use. */
void dl_optim_defaults(const dl_optim_def *d, double *h);
/* The index of the first value of h outside its range (a boolean not 0 or 1,
 * NaN anywhere), or -1 when all are valid. */
int dl_optim_check(const dl_optim_def *d, const double *h);
/* The valid range of hp in words, for messages: "non-negative", "in [0, 1)",
 * "true or false". Writes at most size bytes to buf (NUL-terminated); returns buf. */
const char *dl_optim_range_text(const dl_optim_hparam *hp, char *buf, size_t size);

/* One parameter's buffers for dl_optim_step (s[i] NULL past the row's slots). */
typedef struct {
  void *p;
  const void *g;
  void *s[DL_OPTIM_MAXS];
  int64_t n;                  /* elements in each buffer */
  int f64;                    /* buffers are double, else float */
} dl_optim_buf;

/* Updates every buffer in bufs[0..nbuf) for step t with d's rule and the
 * hyperparameters h (checked by the caller with dl_optim_check), split into
 * chunks over the pool (elementwise rules: the split does not change any
 * value). Cannot fail. */
void dl_optim_step(dl_pool *pool, const dl_optim_def *d, const double *h, int64_t t, const dl_optim_buf *bufs,
                   int nbuf);

#endif
