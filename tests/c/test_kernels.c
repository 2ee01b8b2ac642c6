/* test_kernels.c -- the non-recording kernels of ops/ (kernels.h), and the ops built on them.
 *
 * The kernels give the values of hand-worked examples and never record a node, even with
 * recording on and inputs that require grad; ops whose scratch copies go through them
 * (linear, conv2d, pooling, batch_norm) allocate for a non-contiguous input exactly one plain
 * copy more than for a contiguous one, so no clone node is made and dropped on the way; each
 * family's op records the op-table row of its own name.
 */
/* See LICENSE */
#include <string.h>

#include "dl_test.h"
#include "ops/batchnorm.h"
#include "ops/conv.h"
#include "ops/kernels.h"

static dl_tensor *from(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape, const double *v) {
  dl_tensor *t = dl_tensor_new_empty(ctx, d, ndim, shape);
  for (int64_t i = 0; t && i < dl_numel(t); i++) dl_set_flat(t, i, v[i]);
  return t;
}

/* t has n elements equal to want[] (row-major), no node and no grad flag */
static int plain_equal(const dl_tensor *t, int64_t n, const double *want) {
  if (!t || t->grad_fn || t->requires_grad || dl_numel(t) != n) return 0;
  for (int64_t i = 0; i < n; i++)
    if (dl_get_flat(t, i) != want[i]) return 0;
  return 1;
}

static void test_elementwise(void) {
  dl_ctx *ctx = dl_ctx_new();
  int64_t s23[2] = {2, 3}, s3[1] = {3};
  dl_tensor *a = from(ctx, DL_F32, 2, s23, (const double[]){1, 2, 3, 4, 5, 6});
  dl_tensor *b = from(ctx, DL_F32, 1, s3, (const double[]){10, -1, 0.5});
  a->requires_grad = b->requires_grad = 1;       /* recording is on: nothing below may record */
  DL_CHECK(ctx->grad_enabled);

  dl_tensor *t = dl_binary_raw(ctx, DL_ADD, a, b, DL_F32);
  DL_CHECK(plain_equal(t, 6, (const double[]){11, 1, 3.5, 14, 4, 6.5}));
  DL_CHECK(t && t->dtype == DL_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
  dl_tensor_release(t);
  t = dl_binary_raw(ctx, DL_B_MASK, a, b, DL_F64);              /* a where b > 0 */
  DL_CHECK(plain_equal(t, 6, (const double[]){1, 0, 3, 4, 0, 6}) && t->dtype == DL_F64);
  dl_tensor_release(t);
  t = dl_binary_raw(ctx, DL_GT, a, b, DL_U8);
  DL_CHECK(plain_equal(t, 6, (const double[]){0, 1, 1, 0, 1, 1}));
  dl_tensor_release(t);
  int64_t s4[1] = {4};
  dl_tensor *d = from(ctx, DL_F32, 1, s4, (const double[]){1, 2, 3, 4});
  DL_CHECK(dl_binary_raw(ctx, DL_MUL, a, d, DL_F32) == NULL);
  DL_CHECK(strcmp(ctx->err, "mul: shapes [2, 3] and [4] cannot be broadcast (dimension 2: 3 vs 4)") == 0);
  dl_tensor_release(d);

  t = dl_unary_raw(ctx, DL_U_STEP, b);
  DL_CHECK(plain_equal(t, 3, (const double[]){1, 0, 1}));
  dl_tensor_release(t);
  t = dl_unary_raw(ctx, DL_SQUARE, b);
  DL_CHECK(plain_equal(t, 3, (const double[]){100, 1, 0.25}));
  dl_tensor_release(t);
  t = dl_scale_shift_raw(ctx, a, 2, -1);
  DL_CHECK(plain_equal(t, 6, (const double[]){1, 3, 5, 7, 9, 11}));
  dl_tensor_release(t);
  dl_tensor *c = from(ctx, DL_U8, 1, s3, (const double[]){1, 0, 1});
  t = dl_where_raw(ctx, c, a, b, DL_F32);
  DL_CHECK(plain_equal(t, 6, (const double[]){1, -1, 3, 4, -1, 6}));
  dl_tensor_release(t);
  dl_tensor_release(c);

  /* expand: a view of b's storage with a stride-0 leading dim */
  t = dl_expand_raw(ctx, b, 2, s23);
  DL_CHECK(plain_equal(t, 6, (const double[]){10, -1, 0.5, 10, -1, 0.5}));
  DL_CHECK(t && t->st == b->st && t->stride[0] == 0 && t->stride[1] == 1);
  dl_tensor_release(t);
  int64_t s24[2] = {2, 4};
  DL_CHECK(dl_expand_raw(ctx, b, 2, s24) == NULL);
  DL_CHECK(strcmp(ctx->err, "expand: cannot expand shape [3] to [2, 4] (dimension 2: 3 vs 4)") == 0);

  /* contiguous: a itself when it already is, else a plain copy */
  t = dl_contiguous_raw(ctx, a);
  DL_CHECK(t == a && atomic_load(&a->refs) == 2);
  dl_tensor_release(t);
  int64_t s32[2] = {3, 2}, st[2] = {1, 3};
  dl_tensor *at = dl_view_new(ctx, a, 2, s32, st, 0);          /* a transposed */
  t = dl_contiguous_raw(ctx, at);
  DL_CHECK(plain_equal(t, 6, (const double[]){1, 4, 2, 5, 3, 6}) && t != at && dl_is_contiguous(t));
  dl_tensor_release(t);
  dl_tensor_release(at);

  DL_CHECK(dl_binary_dtype(DL_DIV, DL_I32, DL_I32) == DL_F32);
  DL_CHECK(dl_binary_dtype(DL_ADD, DL_I32, DL_I64) == DL_I64);
  DL_CHECK(dl_binary_dtype(DL_MUL, DL_F32, DL_F64) == DL_F64);
  DL_CHECK(dl_binary_dtype(DL_EQ, DL_F64, DL_F64) == DL_U8);
  dl_tensor_release(a);
  dl_tensor_release(b);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

static void test_reductions(void) {
  dl_ctx *ctx = dl_ctx_new();
  int64_t s23[2] = {2, 3};
  dl_tensor *a = from(ctx, DL_F32, 2, s23, (const double[]){1, 5, 3, 4, 2, 6});
  a->requires_grad = 1;
  dl_tensor *t = dl_reduce_raw(ctx, DL_RSUM, a, 1u << 0, 0, 0, NULL);   /* column sums */
  DL_CHECK(plain_equal(t, 3, (const double[]){5, 7, 9}) && t->ndim == 1);
  dl_tensor_release(t);
  dl_tensor *idx = NULL;
  t = dl_reduce_raw(ctx, DL_RMAX, a, 1u << 1, 1, 0, &idx);              /* row maxima, kept dim */
  DL_CHECK(plain_equal(t, 2, (const double[]){5, 6}) && t->ndim == 2 && t->shape[1] == 1);
  DL_CHECK(plain_equal(idx, 2, (const double[]){1, 2}) && idx->dtype == DL_I64);
  dl_tensor_release(t);
  dl_tensor_release(idx);
  t = dl_reduce_raw(ctx, DL_RVAR, a, 1u << 1, 0, 1, NULL);              /* unbiased row variances */
  DL_CHECK(plain_equal(t, 2, (const double[]){4, 4}));
  dl_tensor_release(t);

  int64_t s13[2] = {1, 3}, s1[1] = {1};
  t = dl_sum_to(ctx, a, 2, s13);
  DL_CHECK(plain_equal(t, 3, (const double[]){5, 7, 9}) && t->ndim == 2 && t->shape[0] == 1);
  dl_tensor_release(t);
  t = dl_sum_to(ctx, a, 1, s1);
  DL_CHECK(plain_equal(t, 1, (const double[]){21}));
  dl_tensor_release(t);
  t = dl_sum_to(ctx, a, 2, s23);                                        /* already that shape */
  DL_CHECK(t == a);
  dl_tensor_release(t);

  int64_t rows = 0, R = 0;
  t = dl_rows_of(ctx, a, 1u << 0, &rows, &R);                           /* dim 0 moved last */
  DL_CHECK(rows == 3 && R == 2);
  DL_CHECK(plain_equal(t, 6, (const double[]){1, 4, 5, 2, 3, 6}) && dl_is_contiguous(t));
  dl_tensor_release(t);
  dl_tensor_release(a);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

/* allocations made by fn(ctx, x) with its result released */
typedef dl_tensor *(*fwd_fn)(dl_ctx *ctx, dl_tensor *x, dl_tensor **p);
static uint64_t allocs_of(dl_ctx *ctx, fwd_fn fn, dl_tensor *x, dl_tensor **p, const char *name) {
  uint64_t n0 = ctx->mem.allocs;
  dl_tensor *y = fn(ctx, x, p);
  uint64_t n = ctx->mem.allocs - n0;
  DL_CHECK(y && y->grad_fn && strcmp(y->grad_fn->name, name) == 0 && y->grad_fn->in[0] == x);
  dl_tensor_release(y);
  return n;
}

static dl_tensor *fw_linear(dl_ctx *ctx, dl_tensor *x, dl_tensor **p) { return dl_linear(ctx, x, p[0], p[1]); }
static dl_tensor *fw_conv(dl_ctx *ctx, dl_tensor *x, dl_tensor **p) {
  dl_conv_opts o = {{1, 1}, {1, 1}, {1, 1}, 1};
  return dl_conv2d(ctx, x, p[0], p[1], &o);
}
static dl_tensor *fw_pool(dl_ctx *ctx, dl_tensor *x, dl_tensor **p) {
  (void)p;
  const int k[2] = {2, 2}, s[2] = {2, 2}, pad[2] = {0, 0};
  return dl_pool2d(ctx, x, k, s, pad, 1);
}
static dl_tensor *fw_bn(dl_ctx *ctx, dl_tensor *x, dl_tensor **p) {
  dl_bn_opts o = dl_bn_defaults();
  return dl_batch_norm(ctx, x, p[0], p[1], NULL, NULL, &o);
}

/* y = fn(x) for x [n0, n1, ...] contiguous and for the same shape as a transposed view
 * (last two dims swapped): the second costs the copy and nothing else */
static void check_scratch(dl_ctx *ctx, fwd_fn fn, int ndim, const int64_t *shape, dl_tensor **p, const char *name) {
  int64_t sw[DL_MAXDIM];
  memcpy(sw, shape, sizeof(int64_t) * (size_t)ndim);
  sw[ndim - 1] = shape[ndim - 2];
  sw[ndim - 2] = shape[ndim - 1];
  dl_tensor *xc = dl_tensor_new_rand(ctx, DL_F32, ndim, shape, 1);
  dl_tensor *base = dl_tensor_new_rand(ctx, DL_F32, ndim, sw, 1);
  int64_t st[DL_MAXDIM];
  memcpy(st, base->stride, sizeof st);
  st[ndim - 1] = base->stride[ndim - 2];
  st[ndim - 2] = base->stride[ndim - 1];
  dl_tensor *xt = dl_view_new(ctx, base, ndim, shape, st, 0);
  xc->requires_grad = xt->requires_grad = 1;
  DL_CHECK(!dl_is_contiguous(xt));
  uint64_t n0 = ctx->mem.allocs;
  dl_tensor_release(dl_tensor_new_contiguous(ctx, xt, DL_F32));
  uint64_t copy = ctx->mem.allocs - n0;
  uint64_t plain = allocs_of(ctx, fn, xc, p, name), strided = allocs_of(ctx, fn, xt, p, name);
  if (strided != plain + copy)
    fprintf(stderr, "%s: %llu allocations for a strided input, %llu for a contiguous one, a copy is %llu\n", name,
            (unsigned long long)strided, (unsigned long long)plain, (unsigned long long)copy);
  DL_CHECK(strided == plain + copy);
  dl_tensor_release(xt);
  dl_tensor_release(base);
  dl_tensor_release(xc);
}

static void test_scratch_copies(void) {
  dl_ctx *ctx = dl_ctx_new();
  int64_t sx[2] = {4, 5}, sw[2] = {3, 5}, sb[1] = {3};
  dl_tensor *p[2] = {dl_tensor_new_rand(ctx, DL_F32, 2, sw, 1), dl_tensor_new_rand(ctx, DL_F32, 1, sb, 1)};
  check_scratch(ctx, fw_linear, 2, sx, p, "linear");
  dl_tensor_release(p[0]);
  int64_t sx4[4] = {2, 3, 6, 5}, sw4[4] = {4, 3, 3, 3}, sb4[1] = {4};
  dl_tensor_release(p[1]);
  p[0] = dl_tensor_new_rand(ctx, DL_F32, 4, sw4, 1);
  p[1] = dl_tensor_new_rand(ctx, DL_F32, 1, sb4, 1);
  check_scratch(ctx, fw_conv, 4, sx4, p, "conv2d");
  check_scratch(ctx, fw_pool, 4, sx4, p, "max_pool2d");
  dl_tensor_release(p[0]);
  dl_tensor_release(p[1]);
  int64_t sc[1] = {3};
  p[0] = dl_tensor_new_full(ctx, DL_F32, 1, sc, 1);
  p[1] = dl_tensor_new_zeros(ctx, DL_F32, 1, sc);
  check_scratch(ctx, fw_bn, 4, sx4, p, "batch_norm");
  dl_tensor_release(p[0]);
  dl_tensor_release(p[1]);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

/* each family op records the op-table row of its own name, and the row names its family */
static void test_family_rows(void) {
  static const char *const binary[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                       "eq", "ne", "lt", "le", "gt", "ge"};
  static const char *const unary[] = {"neg", "exp", "log", "sqrt", "abs", "relu", "sigmoid", "tanh",
                                      "gelu", "sign", "square", "rsqrt", "sin", "cos", "tan", "asin",
                                      "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1",
                                      "log1p", "log2", "log10", "erf", "erfc", "erfinv", "softplus", "silu", "mish",
                                      "log_sigmoid", "exp2", "floor", "ceil", "round", "trunc"};
  static const char *const reduce[] = {"sum", "mean", "max", "min", "var", "logsumexp"};
  DL_CHECK(DL_NBINARY == 13 && DL_EQ == 7 && DL_NUNARY == 39 && DL_NREDUCE == 6);
  dl_ctx *ctx = dl_ctx_new();
  int64_t s2[1] = {2};
  dl_tensor *a = from(ctx, DL_F64, 1, s2, (const double[]){0.5, 2});
  dl_tensor *b = from(ctx, DL_F64, 1, s2, (const double[]){1.5, 0.25});
  a->requires_grad = 1;
  for (int op = 0; op < DL_NBINARY; op++) {
    dl_tensor *y = dl_binary(ctx, (dl_binop)op, a, b);
    if (op < DL_EQ) {
      DL_CHECK(y && y->grad_fn && strcmp(y->grad_fn->name, binary[op]) == 0);
      const dl_op_info *o = y && y->grad_fn ? dl_op_get(y->grad_fn->op) : NULL;
      DL_CHECK(o && strcmp(o->name, binary[op]) == 0 && strcmp(o->forward, "dl_binary") == 0 &&
               strcmp(o->backward, "dl_bw_binary") == 0 && o->fn == dl_bw_binary);
    } else {
      DL_CHECK(y && !y->grad_fn && y->dtype == DL_U8);
    }
    dl_tensor_release(y);
  }
  for (int op = 0; op < DL_NUNARY; op++) {
    dl_tensor *y = dl_unary(ctx, (dl_unop)op, a);
    DL_CHECK(y && y->grad_fn && strcmp(y->grad_fn->name, unary[op]) == 0 &&
             dl_op_get(y->grad_fn->op)->fn == dl_bw_unary);
    dl_tensor_release(y);
  }
  for (int op = 0; op < DL_NREDUCE; op++) {
    dl_tensor *y = dl_reduce(ctx, (dl_redop)op, a, 0, 0, 0, NULL);
    DL_CHECK(y && y->grad_fn && strcmp(y->grad_fn->name, reduce[op]) == 0 &&
             dl_op_get(y->grad_fn->op)->fn == dl_bw_reduce);
    dl_tensor_release(y);
  }
  dl_tensor_release(a);
  dl_tensor_release(b);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

int main(void) {
  test_elementwise();
  test_reductions();
  test_scratch_copies();
  test_family_rows();
  DL_TEST_END();
}
