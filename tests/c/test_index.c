/* test_index.c -- gather, index_select, scatter_add, one_hot, cat and stack:
 * values, gradients (through dl_backward on a weighted sum), error messages,
 * cat of many inputs (the tree of cat nodes), and no leaked memory. */
/* See LICENSE */
#include "ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

#define DL_CHECK(cond)                                                        \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                             \
    }                                                                         \
  } while (0)

static dl_ctx *ctx;

static dl_tensor *mk(dl_dtype d, int ndim, const int64_t *shape, const double *v) {
  dl_tensor *t = dl_tensor_new_empty(ctx, d, ndim, shape);
  if (!t) {
    fprintf(stderr, "allocation failed: %s\n", ctx->err);
    return NULL;
  }
  int64_t n = dl_numel(t);
  for (int64_t i = 0; i < n; i++) dl_store(t->st->data, d, i, v[i]);
  return t;
}

static dl_tensor *mk2(dl_dtype d, int64_t r, int64_t c, const double *v) {
  int64_t sh[2] = {r, c};
  return mk(d, 2, sh, v);
}

static dl_tensor *mk1(dl_dtype d, int64_t n, const double *v) { return mk(d, 1, &n, v); }

/* shape equals the given one and values equal v (within 1e-6) */
static int same(const dl_tensor *t, int ndim, const int64_t *shape, const double *v) {
  if (!t) return 0;
  if (t->ndim != ndim) return 0;
  for (int d = 0; d < ndim; d++)
    if (t->shape[d] != shape[d]) return 0;
  int64_t n = dl_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (fabs(dl_get_flat(t, i) - v[i]) > 1e-6) {
      fprintf(stderr, "  element %lld: got %g, expected %g\n", (long long)i, dl_get_flat(t, i), v[i]);
      return 0;
    }
  return 1;
}

static int same2(const dl_tensor *t, int64_t r, int64_t c, const double *v) {
  int64_t sh[2] = {r, c};
  return same(t, 2, sh, v);
}

/* sum(out * w), then backward */
static int backward_weighted(dl_tensor *out, dl_tensor *w) {
  dl_tensor *p = w ? dl_binary(ctx, DL_MUL, out, w) : dl_tensor_retain(out);
  if (!p) return -1;
  dl_tensor *s = dl_reduce(ctx, DL_RSUM, p, 0, 0, 0, NULL);
  dl_tensor_release(p);
  if (!s) return -1;
  int rc = dl_backward(ctx, s, NULL, 0);
  if (rc < 0) fprintf(stderr, "backward failed: %s\n", ctx->err);
  dl_tensor_release(s);
  return rc;
}

static int err_has(const char *s) {
  if (strstr(ctx->err, s)) return 1;
  fprintf(stderr, "  error was: '%s'\n  expected to contain: '%s'\n", ctx->err, s);
  return 0;
}

static void test_gather(void) {
  const double av[] = {1, 2, 3, 4, 5, 6};
  dl_tensor *a = mk2(DL_F32, 2, 3, av);
  const double iv[] = {0, 2, 1, 0};
  dl_tensor *idx = mk2(DL_I64, 2, 2, iv);
  dl_tensor *o = dl_gather(ctx, a, 1, idx);
  const double e1[] = {1, 3, 5, 4};
  DL_CHECK(same2(o, 2, 2, e1));
  dl_tensor_release(o);

  const double iv0[] = {1, 0, 1};
  dl_tensor *idx0 = mk2(DL_I32, 1, 3, iv0);
  o = dl_gather(ctx, a, 0, idx0);
  const double e0[] = {4, 2, 6};
  DL_CHECK(same2(o, 1, 3, e0));
  dl_tensor_release(o);

  /* non-contiguous input: gather from a transposed view */
  dl_tensor *at = dl_transpose(ctx, a, 0, 1);          /* [3, 2]: [[1,4],[2,5],[3,6]] */
  const double ivt[] = {1, 0, 0};
  dl_tensor *idxt = mk2(DL_I64, 3, 1, ivt);
  o = dl_gather(ctx, at, 1, idxt);
  const double et[] = {4, 2, 3};
  DL_CHECK(same2(o, 3, 1, et));
  dl_tensor_release(o);
  dl_tensor_release(idxt);
  dl_tensor_release(at);

  /* int64 data keeps full precision */
  const double bigv[] = {9007199254740993.0, 0};
  dl_tensor *big = mk2(DL_I64, 1, 2, bigv);
  ((int64_t *)big->st->data)[0] = INT64_C(9007199254740993);
  const double zi[] = {0};
  dl_tensor *i00 = mk2(DL_I64, 1, 1, zi);
  o = dl_gather(ctx, big, 1, i00);
  DL_CHECK(o && o->dtype == DL_I64 && ((int64_t *)o->st->data)[0] == INT64_C(9007199254740993));
  dl_tensor_release(o);
  dl_tensor_release(i00);
  dl_tensor_release(big);

  /* gradient: a.grad = zeros scatter-added with w at idx */
  a->requires_grad = 1;
  const double gi[] = {0, 0, 1, 2};
  dl_tensor *gidx = mk2(DL_I64, 2, 2, gi);
  o = dl_gather(ctx, a, 1, gidx);
  DL_CHECK(o && o->requires_grad);
  const double wv[] = {1, 2, 3, 4};
  dl_tensor *w = mk2(DL_F32, 2, 2, wv);
  DL_CHECK(backward_weighted(o, w) == 0);
  const double eg[] = {3, 0, 0, 0, 3, 4};
  DL_CHECK(a->grad && same2(a->grad, 2, 3, eg));
  dl_tensor_release(o);
  dl_tensor_release(w);
  dl_tensor_release(gidx);

  /* errors */
  const double bad[] = {0, 3, 1, 0};
  dl_tensor *bidx = mk2(DL_I64, 2, 2, bad);
  DL_CHECK(dl_gather(ctx, a, 1, bidx) == NULL);
  DL_CHECK(err_has("gather: index 4 out of range for dimension 2 of size 3"));
  const double neg[] = {0, -1, 1, 0};
  dl_tensor *nidx = mk2(DL_I64, 2, 2, neg);
  DL_CHECK(dl_gather(ctx, a, 1, nidx) == NULL);
  DL_CHECK(err_has("gather: index 0 out of range for dimension 2 of size 3"));
  const double z6[6] = {0};
  dl_tensor *tall = mk2(DL_I64, 3, 2, z6);
  DL_CHECK(dl_gather(ctx, a, 1, tall) == NULL);
  DL_CHECK(err_has("gather: index shape [3, 2] does not fit input [2, 3] at dimension 1"));
  const double z10[10] = {0};
  dl_tensor *wide = mk2(DL_I64, 2, 5, z10);
  o = dl_gather(ctx, a, 1, wide);                     /* wider along dim itself is fine */
  DL_CHECK(o && o->shape[1] == 5);
  dl_tensor_release(o);
  DL_CHECK(dl_gather(ctx, a, 0, wide) == NULL);
  DL_CHECK(err_has("gather: index shape [2, 5] does not fit input [2, 3] at dimension 2"));
  dl_tensor *fidx = mk2(DL_F32, 2, 2, iv);
  DL_CHECK(dl_gather(ctx, a, 1, fidx) == NULL);
  DL_CHECK(err_has("gather: index must be an int32 or int64 tensor, got float32"));
  dl_tensor *one = mk1(DL_I64, 2, iv);
  DL_CHECK(dl_gather(ctx, a, 1, one) == NULL);
  DL_CHECK(err_has("gather: index shape [2] must have as many dimensions as input [2, 3]"));
  DL_CHECK(dl_gather(ctx, a, 2, idx) == NULL);
  DL_CHECK(err_has("gather: dimension 3 out of range for a 2-d tensor"));

  dl_tensor_release(one);
  dl_tensor_release(fidx);
  dl_tensor_release(wide);
  dl_tensor_release(tall);
  dl_tensor_release(nidx);
  dl_tensor_release(bidx);
  dl_tensor_release(idx0);
  dl_tensor_release(idx);
  dl_tensor_release(a);
}

static void test_index_select(void) {
  const double av[] = {1, 2, 3, 4, 5, 6};
  dl_tensor *a = mk2(DL_F32, 3, 2, av);
  const double iv[] = {2, 0, 2};
  dl_tensor *idx = mk1(DL_I64, 3, iv);
  dl_tensor *o = dl_index_select(ctx, a, 0, idx);
  const double e0[] = {5, 6, 1, 2, 5, 6};
  DL_CHECK(same2(o, 3, 2, e0));
  dl_tensor_release(o);

  const double i1[] = {1};
  dl_tensor *idx1 = mk1(DL_I32, 1, i1);
  o = dl_index_select(ctx, a, 1, idx1);
  const double e1[] = {2, 4, 6};
  DL_CHECK(same2(o, 3, 1, e1));
  dl_tensor_release(o);

  /* non-contiguous input */
  dl_tensor *at = dl_transpose(ctx, a, 0, 1);          /* [2, 3]: [[1,3,5],[2,4,6]] */
  o = dl_index_select(ctx, at, 1, idx);
  const double et[] = {5, 1, 5, 6, 2, 6};
  DL_CHECK(same2(o, 2, 3, et));
  dl_tensor_release(o);
  dl_tensor_release(at);

  /* gradient: index_add of w into zeros */
  a->requires_grad = 1;
  o = dl_index_select(ctx, a, 0, idx);
  const double wv[] = {1, 2, 3, 4, 5, 6};
  dl_tensor *w = mk2(DL_F32, 3, 2, wv);
  DL_CHECK(backward_weighted(o, w) == 0);
  const double eg[] = {3, 4, 0, 0, 6, 8};
  DL_CHECK(a->grad && same2(a->grad, 3, 2, eg));
  dl_tensor_release(o);
  dl_tensor_release(w);
  dl_tensor_release(a->grad);
  a->grad = NULL;

  /* gradient along dim 2 with a repeated index */
  const double i2[] = {1, 1, 0};
  dl_tensor *idx2 = mk1(DL_I64, 3, i2);
  o = dl_index_select(ctx, a, 1, idx2);               /* [3, 3] */
  const double w2v[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  dl_tensor *w2 = mk2(DL_F32, 3, 3, w2v);
  DL_CHECK(backward_weighted(o, w2) == 0);
  const double eg2[] = {3, 3, 6, 9, 9, 15};
  DL_CHECK(a->grad && same2(a->grad, 3, 2, eg2));
  dl_tensor_release(o);
  dl_tensor_release(w2);
  dl_tensor_release(idx2);

  /* errors */
  const double bad[] = {0, 6};
  dl_tensor *bidx = mk1(DL_I64, 2, bad);
  DL_CHECK(dl_index_select(ctx, a, 0, bidx) == NULL);
  DL_CHECK(err_has("index_select: index 7 out of range for dimension 1 of size 3"));
  const double z4[4] = {0};
  dl_tensor *i2d = mk2(DL_I64, 2, 2, z4);
  DL_CHECK(dl_index_select(ctx, a, 0, i2d) == NULL);
  DL_CHECK(err_has("index_select: index must be 1-dimensional, got shape [2, 2]"));
  DL_CHECK(dl_index_select(ctx, a, 5, idx) == NULL);
  DL_CHECK(err_has("index_select: dimension 6 out of range"));

  dl_tensor_release(i2d);
  dl_tensor_release(bidx);
  dl_tensor_release(idx1);
  dl_tensor_release(idx);
  dl_tensor_release(a);
}

static void test_scatter_add(void) {
  const double av[] = {1, 1, 1, 1, 1, 1};
  dl_tensor *a = mk2(DL_F32, 2, 3, av);
  const double iv[] = {0, 1, 0};
  dl_tensor *idx = mk2(DL_I64, 1, 3, iv);
  const double sv[] = {10, 20, 30};
  dl_tensor *src = mk2(DL_F32, 1, 3, sv);
  dl_tensor *o = dl_scatter_add(ctx, a, 0, idx, src);
  const double e[] = {11, 1, 31, 1, 21, 1};
  DL_CHECK(same2(o, 2, 3, e));
  DL_CHECK(same2(a, 2, 3, av));                       /* not in place */
  dl_tensor_release(o);

  /* along dim 2 with repeated positions: they accumulate */
  const double iv1[] = {2, 2, 0, 1, 1, 1};
  dl_tensor *idx1 = mk2(DL_I64, 2, 3, iv1);
  const double sv1[] = {1, 2, 3, 4, 5, 6};
  dl_tensor *src1 = mk2(DL_F32, 2, 3, sv1);
  o = dl_scatter_add(ctx, a, 1, idx1, src1);
  const double e1[] = {4, 1, 4, 1, 16, 1};
  DL_CHECK(same2(o, 2, 3, e1));
  dl_tensor_release(o);

  /* gradients: a gets w, src gets gather(w, dim, index) */
  a->requires_grad = 1;
  src->requires_grad = 1;
  o = dl_scatter_add(ctx, a, 0, idx, src);
  const double wv[] = {1, 2, 3, 4, 5, 6};
  dl_tensor *w = mk2(DL_F32, 2, 3, wv);
  DL_CHECK(backward_weighted(o, w) == 0);
  DL_CHECK(a->grad && same2(a->grad, 2, 3, wv));
  const double esg[] = {1, 5, 3};
  DL_CHECK(src->grad && same2(src->grad, 1, 3, esg));
  dl_tensor_release(o);

  /* src larger than index: the rest of src gets zero gradient */
  const double sbv[] = {10, 20, 30, 40, 50, 60};
  dl_tensor *sbig = mk2(DL_F32, 2, 3, sbv);
  sbig->requires_grad = 1;
  o = dl_scatter_add(ctx, a, 0, idx, sbig);
  const double eb[] = {11, 1, 31, 1, 21, 1};
  DL_CHECK(same2(o, 2, 3, eb));
  DL_CHECK(backward_weighted(o, w) == 0);
  const double ebg[] = {1, 5, 3, 0, 0, 0};
  DL_CHECK(sbig->grad && same2(sbig->grad, 2, 3, ebg));
  dl_tensor_release(o);
  dl_tensor_release(w);

  /* errors */
  const double bad[] = {0, 2, 0};
  dl_tensor *bidx = mk2(DL_I64, 1, 3, bad);
  DL_CHECK(dl_scatter_add(ctx, a, 0, bidx, src) == NULL);
  DL_CHECK(err_has("scatter_add: index 3 out of range for dimension 1 of size 2"));
  const double z4[4] = {0};
  dl_tensor *idx4 = mk2(DL_I64, 1, 4, z4);
  DL_CHECK(dl_scatter_add(ctx, a, 0, idx4, src) == NULL);
  DL_CHECK(err_has("scatter_add: index shape [1, 4] does not fit input [2, 3] at dimension 2"));
  dl_tensor *idx21 = mk2(DL_I64, 2, 1, z4);
  DL_CHECK(dl_scatter_add(ctx, a, 1, idx21, src) == NULL);
  DL_CHECK(err_has("scatter_add: index shape [2, 1] does not fit src [1, 3] at dimension 1"));
  dl_tensor *sd = mk2(DL_F64, 1, 3, sv);
  DL_CHECK(dl_scatter_add(ctx, a, 0, idx, sd) == NULL);
  DL_CHECK(err_has("scatter_add: src has dtype float64, expected float32"));

  dl_tensor_release(sd);
  dl_tensor_release(idx21);
  dl_tensor_release(idx4);
  dl_tensor_release(bidx);
  dl_tensor_release(sbig);
  dl_tensor_release(src1);
  dl_tensor_release(idx1);
  dl_tensor_release(src);
  dl_tensor_release(idx);
  dl_tensor_release(a);
}

static void test_one_hot(void) {
  const double lv[] = {2, 0, 1};
  dl_tensor *lab = mk1(DL_I64, 3, lv);
  dl_tensor *o = dl_one_hot(ctx, lab, 3);
  const double e[] = {0, 0, 1, 1, 0, 0, 0, 1, 0};
  DL_CHECK(same2(o, 3, 3, e));
  DL_CHECK(o && o->dtype == DL_F32);
  dl_tensor_release(o);

  const double l2[] = {3, 0, 1, 1};
  dl_tensor *lab2 = mk2(DL_I32, 2, 2, l2);
  o = dl_one_hot(ctx, lab2, 4);
  const int64_t sh[3] = {2, 2, 4};
  const double e2[] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0};
  DL_CHECK(same(o, 3, sh, e2));
  dl_tensor_release(o);

  DL_CHECK(dl_one_hot(ctx, lab2, 3) == NULL);
  DL_CHECK(err_has("one_hot: label 4 out of range for 3 classes"));
  DL_CHECK(dl_one_hot(ctx, lab2, 0) == NULL);
  DL_CHECK(err_has("one_hot: classes must be positive"));
  dl_tensor *fl = mk1(DL_F32, 3, lv);
  DL_CHECK(dl_one_hot(ctx, fl, 3) == NULL);
  DL_CHECK(err_has("one_hot: labels must be an integer tensor, got float32"));
  dl_tensor_release(fl);
  dl_tensor_release(lab2);
  dl_tensor_release(lab);
}

static void test_cat_small(void) {
  const double av[] = {1, 2, 3, 4};
  const double bv[] = {5, 6, 7, 8, 9, 10};
  dl_tensor *a = mk2(DL_F32, 2, 2, av);
  dl_tensor *b = mk2(DL_F32, 2, 3, bv);
  dl_tensor *ts[3] = {a, b, a};
  dl_tensor *o = dl_cat(ctx, 3, ts, 1);
  const double e[] = {1, 2, 5, 6, 7, 1, 2, 3, 4, 8, 9, 10, 3, 4};
  DL_CHECK(same2(o, 2, 7, e));
  dl_tensor_release(o);

  /* along dim 1 (0-based 0), with a transposed (non-contiguous) input */
  dl_tensor *bt = dl_transpose(ctx, b, 0, 1);         /* [3, 2]: [[5,8],[6,9],[7,10]] */
  dl_tensor *t2[2] = {a, bt};
  o = dl_cat(ctx, 2, t2, 0);
  const double e0[] = {1, 2, 3, 4, 5, 8, 6, 9, 7, 10};
  DL_CHECK(same2(o, 5, 2, e0));
  dl_tensor_release(o);

  /* gradient: a appears twice, so its gradient is the sum of two slices */
  a->requires_grad = 1;
  b->requires_grad = 1;
  o = dl_cat(ctx, 3, ts, 1);
  DL_CHECK(o && o->requires_grad && o->grad_fn && strcmp(o->grad_fn->name, "cat") == 0);
  const double wv[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  dl_tensor *w = mk2(DL_F32, 2, 7, wv);
  DL_CHECK(backward_weighted(o, w) == 0);
  const double ea[] = {1 + 6, 2 + 7, 8 + 13, 9 + 14};
  const double eb[] = {3, 4, 5, 10, 11, 12};
  DL_CHECK(a->grad && same2(a->grad, 2, 2, ea));
  DL_CHECK(b->grad && same2(b->grad, 2, 3, eb));
  dl_tensor_release(o);
  dl_tensor_release(w);

  /* no grad recorded when grad is disabled */
  ctx->grad_enabled = 0;
  o = dl_cat(ctx, 3, ts, 1);
  DL_CHECK(o && !o->requires_grad && !o->grad_fn);
  dl_tensor_release(o);
  ctx->grad_enabled = 1;

  /* errors */
  const double cv[12] = {0};
  dl_tensor *c = mk2(DL_F32, 3, 4, cv);
  dl_tensor *tc[2] = {a, c};
  DL_CHECK(dl_cat(ctx, 2, tc, 1) == NULL);
  DL_CHECK(err_has("cat: tensor 2 has shape [3, 4], expected [2, *]"));
  DL_CHECK(dl_cat(ctx, 2, tc, 0) == NULL);
  DL_CHECK(err_has("cat: tensor 2 has shape [3, 4], expected [*, 2]"));
  dl_tensor *c1 = mk1(DL_F32, 2, av);
  dl_tensor *tc1[2] = {a, c1};
  DL_CHECK(dl_cat(ctx, 2, tc1, 0) == NULL);
  DL_CHECK(err_has("cat: tensor 2 has shape [2], expected [*, 2]"));
  dl_tensor *ci = mk2(DL_I64, 2, 2, av);
  dl_tensor *tci[2] = {a, ci};
  DL_CHECK(dl_cat(ctx, 2, tci, 0) == NULL);
  DL_CHECK(err_has("cat: tensor 2 has dtype int64, expected float32"));
  DL_CHECK(dl_cat(ctx, 2, ts, 2) == NULL);
  DL_CHECK(err_has("cat: dimension 3 out of range for a 2-d tensor"));
  DL_CHECK(dl_cat(ctx, 0, ts, 0) == NULL);
  DL_CHECK(err_has("cat: expected a non-empty list"));

  dl_tensor_release(ci);
  dl_tensor_release(c1);
  dl_tensor_release(c);
  dl_tensor_release(bt);
  dl_tensor_release(a);
  dl_tensor_release(b);
}

/* 10 inputs of shape [2, i+1] along dim 2; inputs 1, 4, 7 do not require grad */
static void test_cat_many(void) {
  enum { N = 10 };
  dl_tensor *ts[N];
  int64_t total = 0;
  for (int i = 0; i < N; i++) {
    double v[2 * N];
    for (int r = 0; r < 2; r++)
      for (int c = 0; c <= i; c++) v[r * (i + 1) + c] = 100 * i + 10 * r + c;
    ts[i] = mk2(DL_F32, 2, i + 1, v);
    ts[i]->requires_grad = i % 3 != 1;
    total += i + 1;
  }
  dl_tensor *o = dl_cat(ctx, N, ts, 1);
  DL_CHECK(o && o->ndim == 2 && o->shape[0] == 2 && o->shape[1] == total);
  if (o) {
    int ok = 1;
    int64_t start = 0;
    for (int i = 0; i < N; i++) {
      for (int r = 0; r < 2; r++)
        for (int c = 0; c <= i; c++)
          ok &= dl_get_flat(o, r * total + start + c) == 100 * i + 10 * r + c;
      start += i + 1;
    }
    DL_CHECK(ok);
  }
  double wv[2 * 55];
  for (int r = 0; r < 2; r++)
    for (int j = 0; j < total; j++) wv[r * total + j] = 1000 * r + j;
  dl_tensor *w = mk2(DL_F32, 2, total, wv);
  DL_CHECK(backward_weighted(o, w) == 0);
  int64_t start = 0;
  for (int i = 0; i < N; i++) {
    if (i % 3 == 1) {
      DL_CHECK(ts[i]->grad == NULL);
    } else {
      double e[2 * N];
      for (int r = 0; r < 2; r++)
        for (int c = 0; c <= i; c++) e[r * (i + 1) + c] = 1000 * r + start + c;
      DL_CHECK(ts[i]->grad && same2(ts[i]->grad, 2, i + 1, e));
    }
    start += i + 1;
  }
  dl_tensor_release(w);
  dl_tensor_release(o);

  /* the same tensor 7 times (a tree of nodes with a repeated leaf) along dim 1 */
  dl_tensor *x = ts[2];                                 /* [2, 3], requires grad */
  dl_tensor_release(x->grad);
  x->grad = NULL;
  dl_tensor *rep[7] = {x, x, x, x, x, x, x};
  o = dl_cat(ctx, 7, rep, 0);                         /* [14, 3] */
  double w7[42];
  for (int k = 0; k < 42; k++) w7[k] = k;
  w = mk2(DL_F32, 14, 3, w7);
  DL_CHECK(o && o->shape[0] == 14 && o->shape[1] == 3);
  DL_CHECK(backward_weighted(o, w) == 0);
  double e7[6] = {0};
  for (int k = 0; k < 7; k++)
    for (int j = 0; j < 6; j++) e7[j] += w7[k * 6 + j];
  DL_CHECK(x->grad && same2(x->grad, 2, 3, e7));
  dl_tensor_release(w);
  dl_tensor_release(o);
  for (int i = 0; i < N; i++) dl_tensor_release(ts[i]);

  /* 1000 one-element inputs, every third one requiring grad, then keep_graph and a second backward */
  enum { M = 1000 };
  static dl_tensor *many[M];
  for (int i = 0; i < M; i++) {
    double v = i;
    many[i] = mk1(DL_F32, 1, &v);
    many[i]->requires_grad = i % 3 == 0;
  }
  o = dl_cat(ctx, M, many, 0);
  DL_CHECK(o && o->shape[0] == M);
  int ok = o != NULL;
  for (int i = 0; ok && i < M; i++) ok &= dl_get_flat(o, i) == i;
  DL_CHECK(ok);
  static double wm[M];
  for (int i = 0; i < M; i++) wm[i] = 3 * i + 1;
  w = mk1(DL_F32, M, wm);
  dl_tensor *p = dl_binary(ctx, DL_MUL, o, w);
  dl_tensor *s = p ? dl_reduce(ctx, DL_RSUM, p, 0, 0, 0, NULL) : NULL;
  DL_CHECK(s && dl_backward(ctx, s, NULL, 1) == 0);
  DL_CHECK(s && dl_backward(ctx, s, NULL, 0) == 0);
  ok = 1;
  for (int i = 0; i < M; i++) {
    if (i % 3 == 0) ok &= many[i]->grad && dl_get_flat(many[i]->grad, 0) == 2 * wm[i];
    else ok &= many[i]->grad == NULL;
  }
  DL_CHECK(ok);
  dl_tensor_release(s);
  dl_tensor_release(p);
  dl_tensor_release(w);
  dl_tensor_release(o);
  for (int i = 0; i < M; i++) dl_tensor_release(many[i]);
}

static void test_stack(void) {
  const double av[] = {1, 2, 3, 4, 5, 6};
  const double bv[] = {7, 8, 9, 10, 11, 12};
  dl_tensor *a = mk2(DL_F32, 2, 3, av);
  dl_tensor *b = mk2(DL_F32, 2, 3, bv);
  dl_tensor *ts[2] = {a, b};
  dl_tensor *o = dl_stack(ctx, 2, ts, 0);
  const int64_t s0[3] = {2, 2, 3};
  const double e0[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  DL_CHECK(same(o, 3, s0, e0));
  dl_tensor_release(o);
  o = dl_stack(ctx, 2, ts, 1);
  const int64_t s1[3] = {2, 2, 3};
  const double e1[] = {1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12};
  DL_CHECK(same(o, 3, s1, e1));
  dl_tensor_release(o);
  o = dl_stack(ctx, 2, ts, 2);                        /* dim == ndim */
  const int64_t s2[3] = {2, 3, 2};
  const double e2[] = {1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12};
  DL_CHECK(same(o, 3, s2, e2));
  dl_tensor_release(o);

  /* gradient through stack of 6 (a tree: a, b, a, b, a, b) along the last dim */
  a->requires_grad = 1;
  b->requires_grad = 1;
  dl_tensor *t6[6] = {a, b, a, b, a, b};
  o = dl_stack(ctx, 6, t6, 2);                        /* [2, 3, 6] */
  const int64_t s6[3] = {2, 3, 6};
  DL_CHECK(o && o->ndim == 3 && o->shape[0] == 2 && o->shape[1] == 3 && o->shape[2] == 6);
  double wv[36];
  for (int k = 0; k < 36; k++) wv[k] = k;
  dl_tensor *w = mk(DL_F32, 3, s6, wv);
  DL_CHECK(backward_weighted(o, w) == 0);
  double ea[6], eb[6];
  for (int j = 0; j < 6; j++) {
    ea[j] = wv[j * 6 + 0] + wv[j * 6 + 2] + wv[j * 6 + 4];
    eb[j] = wv[j * 6 + 1] + wv[j * 6 + 3] + wv[j * 6 + 5];
  }
  DL_CHECK(a->grad && same2(a->grad, 2, 3, ea));
  DL_CHECK(b->grad && same2(b->grad, 2, 3, eb));
  dl_tensor_release(w);
  dl_tensor_release(o);

  /* 0-d tensors stack into a vector */
  dl_tensor *x = dl_tensor_new_scalar(ctx, DL_F32, 4);
  dl_tensor *y = dl_tensor_new_scalar(ctx, DL_F32, 5);
  dl_tensor *xy[2] = {x, y};
  o = dl_stack(ctx, 2, xy, 0);
  const double exy[] = {4, 5};
  const int64_t sxy[1] = {2};
  DL_CHECK(same(o, 1, sxy, exy));
  dl_tensor_release(o);
  dl_tensor_release(x);
  dl_tensor_release(y);

  /* errors */
  const double cv[4] = {0};
  dl_tensor *c = mk2(DL_F32, 2, 2, cv);
  dl_tensor *tc[3] = {a, b, c};
  DL_CHECK(dl_stack(ctx, 3, tc, 0) == NULL);
  DL_CHECK(err_has("stack: tensor 3 has shape [2, 2], expected [2, 3]"));
  DL_CHECK(dl_stack(ctx, 2, ts, 3) == NULL);
  DL_CHECK(err_has("stack: dimension 4 out of range"));
  dl_tensor_release(c);
  dl_tensor_release(a);
  dl_tensor_release(b);
}

int main(void) {
  ctx = dl_ctx_new();
  if (!ctx) return 1;
  test_gather();
  test_index_select();
  test_scatter_add();
  test_one_hot();
  test_cat_small();
  test_cat_many();
  test_stack();
  if (ctx->mem.in_use != 0) {
    fprintf(stderr, "leak: %zu bytes still in use\n", ctx->mem.in_use);
    failures++;
  }
  dl_ctx_free(ctx);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("test_index: all checks passed\n");
  return 0;
}
