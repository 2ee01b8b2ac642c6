/* test_optim.c -- the optimizer table (optim.c) walked row by row: names found
 * by name, hyperparameters alphabetical with "lr" among them and defaults in
 * their ranges, the range check refusing each bound and NaN, state slots within
 * DL_OPTIM_MAXS, the float32 rule agreeing with the float64 one, and
 * dl_optim_step giving the serial bits when chunked over threads. The rules'
 * values against their formulas are tests/lua/optim_spec.lua's; two are
 * checked here by hand. */
/* See LICENSE */
#include "ops/optim.h"
#include "dl_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_rows(void) {
  int n = dl_optim_count();
  DL_CHECK(n >= 6);
  DL_CHECK(dl_optim_get(-1) == NULL && dl_optim_get(n) == NULL);
  DL_CHECK(dl_optim_find("Nope") == NULL && dl_optim_find("sgd") == NULL);
  for (int i = 0; i < n; i++) {
    const dl_optim_def *d = dl_optim_get(i);
    DL_CHECK(d && d->name && dl_optim_find(d->name) == d);
    DL_CHECK(d->update_f32 && d->update_f64);
    int nh = dl_optim_nhparams(d), ns = dl_optim_nslots(d);
    DL_CHECK(nh >= 1 && nh <= DL_OPTIM_MAXH);
    DL_CHECK(ns >= 0 && ns <= DL_OPTIM_MAXS);
    DL_CHECK(dl_optim_hparam_index(d, "lr") >= 0);
    DL_CHECK(dl_optim_hparam_index(d, "no_such_key") == -1);
    for (int k = 1; k < nh; k++) {                 /* alphabetical: the messages list keys in this order */
      if (!(strcmp(d->hparams[k - 1].name, d->hparams[k].name) < 0))
        fprintf(stderr, "%s: '%s' before '%s'\n", d->name, d->hparams[k - 1].name, d->hparams[k].name);
      DL_CHECK(strcmp(d->hparams[k - 1].name, d->hparams[k].name) < 0);
    }
    for (int a = 0; a < ns; a++)
      for (int b = a + 1; b < ns; b++) DL_CHECK(strcmp(d->slots[a].name, d->slots[b].name) != 0);
    double h[DL_OPTIM_MAXH];
    dl_optim_defaults(d, h);
    DL_CHECK(dl_optim_check(d, h) == -1);
    for (int k = 0; k < nh; k++) {                 /* each bound refused at the right index, then restored */
      const dl_optim_hparam *hp = &d->hparams[k];
      double keep = h[k];
      if (hp->type == DL_OPTIM_BOOLEAN) {
        h[k] = 0.5;
        DL_CHECK(dl_optim_check(d, h) == k);
        h[k] = 1;
        DL_CHECK(dl_optim_check(d, h) == -1);
      } else {
        DL_CHECK(hp->lo <= hp->def && hp->def <= hp->hi);
        h[k] = nextafter(hp->lo, -HUGE_VAL);
        DL_CHECK(dl_optim_check(d, h) == k);
        h[k] = hp->lo;
        DL_CHECK(dl_optim_check(d, h) == -1);
        h[k] = hp->hi;
        DL_CHECK(dl_optim_check(d, h) == (hp->hi_open ? k : -1));
        h[k] = NAN;
        DL_CHECK(dl_optim_check(d, h) == k);
      }
      h[k] = keep;
    }
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) DL_CHECK(strcmp(dl_optim_get(i)->name, dl_optim_get(j)->name) != 0);
}

static void test_range_text(void) {
  char buf[64];
  dl_optim_hparam lr = {"lr", DL_OPTIM_NUMBER, 0.01, 0, HUGE_VAL, 0};
  dl_optim_hparam beta = {"beta1", DL_OPTIM_NUMBER, 0.9, 0, 1, 1};
  dl_optim_hparam rho = {"rho", DL_OPTIM_NUMBER, 0.9, 0, 1, 0};
  dl_optim_hparam flag = {"nesterov", DL_OPTIM_BOOLEAN, 0, 0, 1, 0};
  DL_CHECK(strcmp(dl_optim_range_text(&lr, buf, sizeof buf), "non-negative") == 0);
  DL_CHECK(strcmp(dl_optim_range_text(&beta, buf, sizeof buf), "in [0, 1)") == 0);
  DL_CHECK(strcmp(dl_optim_range_text(&rho, buf, sizeof buf), "in [0, 1]") == 0);
  DL_CHECK(strcmp(dl_optim_range_text(&flag, buf, sizeof buf), "true or false") == 0);
  DL_CHECK(strcmp(dl_optim_range_text(&beta, buf, 4), "in ") == 0);   /* truncated, terminated */
}

/* every row: 5 steps in float32 and float64 from the same start agree to float32 rounding */
static void test_dtypes_agree(void) {
  enum { N = 37 };
  for (int i = 0; i < dl_optim_count(); i++) {
    const dl_optim_def *d = dl_optim_get(i);
    double h[DL_OPTIM_MAXH];
    dl_optim_defaults(d, h);
    int mom = dl_optim_hparam_index(d, "momentum");
    if (mom >= 0) h[mom] = 0.5;                    /* the slot in use */
    float p32[N], g32[N], s32[DL_OPTIM_MAXS][N];
    double p64[N], g64[N], s64[DL_OPTIM_MAXS][N];
    for (int k = 0; k < N; k++) {
      p32[k] = (float)(0.25 * (k % 7) - 0.7);
      p64[k] = (double)p32[k];
      for (int s = 0; s < dl_optim_nslots(d); s++) s32[s][k] = (float)(s64[s][k] = d->slots[s].init);
    }
    float *sp32[DL_OPTIM_MAXS];
    double *sp64[DL_OPTIM_MAXS];
    for (int s = 0; s < DL_OPTIM_MAXS; s++) sp32[s] = s32[s], sp64[s] = s64[s];
    for (int t = 1; t <= 5; t++) {
      for (int k = 0; k < N; k++) {
        g32[k] = (float)(0.5 * sin(k + t) + 0.1);
        g64[k] = (double)g32[k];
      }
      d->update_f32(h, t, p32, g32, sp32, N);
      d->update_f64(h, t, p64, g64, sp64, N);
    }
    double worst = 0;
    for (int k = 0; k < N; k++) worst = fmax(worst, fabs((double)p32[k] - p64[k]) / (1e-3 + fabs(p64[k])));
    if (!(worst < 1e-5)) fprintf(stderr, "%s: float32 and float64 differ by %g (relative)\n", d->name, worst);
    DL_CHECK(worst < 1e-5);
  }
}

/* SGD with Nesterov momentum and RMSProp, one step each, against the formulas by hand */
static void test_by_hand(void) {
  const dl_optim_def *sgd = dl_optim_find("SGD");
  double h[DL_OPTIM_MAXH];
  dl_optim_defaults(sgd, h);
  h[dl_optim_hparam_index(sgd, "lr")] = 0.1;
  h[dl_optim_hparam_index(sgd, "momentum")] = 0.9;
  h[dl_optim_hparam_index(sgd, "nesterov")] = 1;
  h[dl_optim_hparam_index(sgd, "weight_decay")] = 0.5;
  double p = 2, g = 1, v = 1, *s[DL_OPTIM_MAXS] = {&v, NULL};
  sgd->update_f64(h, 1, &p, &g, s, 1);
  /* g' = 1 + 0.5 * 2 = 2; v = 0.9 * 1 + 2 = 2.9; p = 2 - 0.1 * (0.9 * 2.9 + 2) */
  DL_CHECK_CLOSE(v, 2.9, 1e-15);
  DL_CHECK_CLOSE(p, 2 - 0.1 * (0.9 * 2.9 + 2), 1e-15);

  const dl_optim_def *rms = dl_optim_find("RMSProp");
  dl_optim_defaults(rms, h);
  DL_CHECK(rms->slots[0].init == 1 && strcmp(rms->slots[0].name, "v") == 0);
  double q = 1, gq = 2, vq = 1, mq = 0, *sq[DL_OPTIM_MAXS] = {&vq, &mq};
  rms->update_f64(h, 1, &q, &gq, sq, 1);
  /* v = 0.99 + 0.01 * 4 = 1.03; m = 0.01 / sqrt(1.03 + 1e-8) * 2; q = 1 - m */
  DL_CHECK_CLOSE(vq, 1.03, 1e-15);
  DL_CHECK_CLOSE(mq, 0.01 / sqrt(1.03 + 1e-8) * 2, 1e-15);
  DL_CHECK_CLOSE(q, 1 - mq, 1e-15);
}

/* dl_optim_step over a pool of 3 threads: the same bits as the serial loop, for every row */
static void test_step_chunks(void) {
  dl_pool *pool = dl_pool_new(3);
  DL_CHECK(pool != NULL);
  const int64_t n = 200003;                        /* four 64K chunks, the last partial */
  for (int i = 0; i < dl_optim_count(); i++) {
    const dl_optim_def *d = dl_optim_get(i);
    double h[DL_OPTIM_MAXH];
    dl_optim_defaults(d, h);
    int mom = dl_optim_hparam_index(d, "momentum");
    if (mom >= 0) h[mom] = 0.9;
    float *buf[2][2 + DL_OPTIM_MAXS];
    for (int c = 0; c < 2; c++)
      for (int b = 0; b < 2 + DL_OPTIM_MAXS; b++) buf[c][b] = malloc(sizeof(float) * (size_t)n);
    for (int64_t k = 0; k < n; k++)
      for (int c = 0; c < 2; c++) {
        buf[c][0][k] = (float)sin((double)k);
        buf[c][1][k] = (float)cos(0.5 * (double)k);
        for (int s = 0; s < DL_OPTIM_MAXS; s++)
          buf[c][2 + s][k] = s < dl_optim_nslots(d) ? (float)d->slots[s].init : 0;
      }
    for (int c = 0; c < 2; c++) {
      dl_optim_buf b = {buf[c][0], buf[c][1], {NULL}, n, 0};
      for (int s = 0; s < DL_OPTIM_MAXS; s++) b.s[s] = buf[c][2 + s];
      for (int t = 1; t <= 3; t++) dl_optim_step(c ? pool : NULL, d, h, t, &b, 1);
    }
    for (int b = 0; b < 2 + DL_OPTIM_MAXS; b++) {
      DL_CHECK(memcmp(buf[0][b], buf[1][b], sizeof(float) * (size_t)n) == 0);
      free(buf[0][b]);
      free(buf[1][b]);
    }
  }
  dl_pool_free(pool);
}

int main(void) {
  test_rows();
  test_range_text();
  test_dtypes_agree();
  test_by_hand();
  test_step_chunks();
  DL_TEST_END();
}
