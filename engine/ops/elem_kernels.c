/* elem_kernels.c -- elementwise loops with NumPy broadcasting, and the views and copies
 * that broadcasting needs; nothing here records a tape node (kernels.h).
 *
 * One strided N-d loop serves every op: dims are coalesced, then the last
 * dim runs as a plain strided inner loop. float32 operands take a float
 * path; anything else goes through doubles (float64 gradchecks, integer
 * labels). Large float32 contiguous ops split into fixed chunks over the pool.
 * ops_elem.c picks dtypes, records nodes and differentiates on top of these; the
 * backward functions and the backward walk call them directly.
 */
/* See LICENSE */
#include "ops/kernels.h"

#include <math.h>
#include <string.h>

#define PAR_MIN 32768          /* elements below which an op stays on one thread */

/* the binary selectors' names, for messages, from the families' lists in ops.h */
#define NAME_(id, name, fw, bw, lua) name,
#define COMPARE_NAME_(id, name) name,
static const char *const binop_names[] = {
  DL_BINARY_OPS(NAME_, , ) DL_COMPARE_OPS(COMPARE_NAME_) "relu_backward"};
#undef NAME_
#undef COMPARE_NAME_
_Static_assert(sizeof binop_names / sizeof *binop_names == DL_B_MASK + 1, "a name for every binary selector");


/* the binary ops on one pair of values, in double; bin_f below is its float twin, two copies
 * on purpose: float's own operations (powf) round as the float32 kernels must, and each is
 * inlined into its dtype's loops */
static inline double bin_d(int op, double a, double b) {
  switch (op) {
    case DL_ADD: return a + b;
    case DL_SUB: return a - b;
    case DL_MUL: return a * b;
    case DL_DIV: return a / b;
    case DL_POW: return pow(a, b);
    case DL_MAXIMUM: return a > b || a != a ? a : b;
    case DL_MINIMUM: return a < b || a != a ? a : b;
    case DL_EQ: return a == b;
    case DL_NE: return a != b;
    case DL_LT: return a < b;
    case DL_LE: return a <= b;
    case DL_GT: return a > b;
    case DL_GE: return a >= b;
    case DL_B_MASK: return b > 0 ? a : 0;
    default: return 0;
  }
}

/* bin_d's float twin (two copies on purpose, see bin_d) */
static inline float bin_f(int op, float a, float b) {
  switch (op) {
    case DL_ADD: return a + b;
    case DL_SUB: return a - b;
    case DL_MUL: return a * b;
    case DL_DIV: return a / b;
    case DL_POW: return powf(a, b);
    case DL_MAXIMUM: return a > b || a != a ? a : b;
    case DL_MINIMUM: return a < b || a != a ? a : b;
    case DL_B_MASK: return b > 0 ? a : 0.0f;
    default: return (float)bin_d(op, a, b);
  }
}

/* Contiguous float32 loops with the op chosen once outside the loop (so each
 * loop vectorises); 0 when the op has no specialised loop. */
#define ELEM_LOOP(expr) do { for (int64_t i = 0; i < n; i++) o[i] = (expr); } while (0)

DL_SIMD_CLONES static int unary_fast_f(int op, float *o, const float *a, int64_t n) {
  switch (op) {
    case DL_NEG: ELEM_LOOP(-a[i]); return 1;
    case DL_RELU: ELEM_LOOP(a[i] > 0 ? a[i] : 0.0f); return 1;
    case DL_ABS: ELEM_LOOP(fabsf(a[i])); return 1;
    case DL_SQUARE: ELEM_LOOP(a[i] * a[i]); return 1;
    case DL_U_STEP: ELEM_LOOP(a[i] > 0 ? 1.0f : 0.0f); return 1;
    default: return 0;
  }
}

/* b_step 0: b[i]; 1: b[0] for every i (a broadcast scalar) */
DL_SIMD_CLONES static int binary_fast_f(int op, float *o, const float *a, const float *b, int b_scalar, int64_t n) {
  if (b_scalar) {
    const float bv = b[0];
    switch (op) {
      case DL_ADD: ELEM_LOOP(a[i] + bv); return 1;
      case DL_SUB: ELEM_LOOP(a[i] - bv); return 1;
      case DL_MUL: ELEM_LOOP(a[i] * bv); return 1;
      case DL_DIV: ELEM_LOOP(a[i] / bv); return 1;
      default: return 0;
    }
  }
  switch (op) {
    case DL_ADD: ELEM_LOOP(a[i] + b[i]); return 1;
    case DL_SUB: ELEM_LOOP(a[i] - b[i]); return 1;
    case DL_MUL: ELEM_LOOP(a[i] * b[i]); return 1;
    case DL_DIV: ELEM_LOOP(a[i] / b[i]); return 1;
    case DL_B_MASK:            /* both loaded unconditionally, so the select vectorises without branches */
      for (int64_t i = 0; i < n; i++) {
        float av = a[i], bv = b[i];
        o[i] = bv > 0 ? av : 0.0f;
      }
      return 1;
    default: return 0;
  }
}
#undef ELEM_LOOP

/* softplus log(1 + e^x) without overflow or cancellation; sigmoid, its derivative */
static inline double softplus_d(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static inline double sigmoid_d(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }

#define TWO_OVER_SQRT_PI 1.12837916709551257390

/* the inverse of erf on [-1, 1] (+-inf at +-1, NaN outside): a single-precision
 * polynomial in w = -log(1 - y^2) as the start (Giles 2010), then two Newton steps on
 * erf (erfc near +-1, where 1 - |y| is exact and erf(x) is not) */
static double erfinv_d(double y) {
  if (!(y > -1 && y < 1)) return y == 1 ? (double)INFINITY : y == -1 ? -(double)INFINITY : (double)NAN;
  if (y == 0) return y;
  double w = -log((1 - y) * (1 + y)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w; p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w; p = 2.83297682 + p * w;
  }
  double x = p * y, ay = fabs(y), s = y < 0 ? -1 : 1;
  for (int k = 0; k < 2; k++) {
    double ax = fabs(x), r = ay > 0.5 ? (1 - ay) - erfc(ax) : erf(ax) - ay;
    x = s * (ax - r / (TWO_OVER_SQRT_PI * exp(-ax * ax)));
  }
  return x;
}

/* d op(x) / dx for the unary ops from DL_SIN on (their backward multiplies g by it) */
static double deriv_d(int op, double x) {
  switch (op) {
    case DL_SIN: return cos(x);
    case DL_COS: return -sin(x);
    case DL_TAN: { double c = cos(x); return 1 / (c * c); }
    case DL_ASIN: return 1 / sqrt(1 - x * x);
    case DL_ACOS: return -1 / sqrt(1 - x * x);
    case DL_ATAN: return 1 / (1 + x * x);
    case DL_SINH: return cosh(x);
    case DL_COSH: return sinh(x);
    case DL_ASINH: return 1 / sqrt(x * x + 1);
    case DL_ACOSH: return 1 / sqrt((x - 1) * (x + 1));
    case DL_ATANH: return 1 / (1 - x * x);
    case DL_EXPM1: return exp(x);
    case DL_LOG1P: return 1 / (1 + x);
    case DL_LOG2: return 1 / (x * 0.69314718055994530942);
    case DL_LOG10: return 1 / (x * 2.30258509299404568402);
    case DL_ERF: return TWO_OVER_SQRT_PI * exp(-x * x);
    case DL_ERFC: return -TWO_OVER_SQRT_PI * exp(-x * x);
    case DL_ERFINV: { double v = erfinv_d(x); return 1 / (TWO_OVER_SQRT_PI * exp(-v * v)); }
    case DL_SOFTPLUS: return sigmoid_d(x);
    case DL_SILU: { double s = sigmoid_d(x); return s * (1 + x * (1 - s)); }
    case DL_MISH: {           /* tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2) */
      double t = tanh(softplus_d(x));
      return t + x * sigmoid_d(x) * (1 - t * t);
    }
    case DL_LOG_SIGMOID: return sigmoid_d(-x);
    case DL_EXP2: return exp2(x) * 0.69314718055994530942;
    case DL_FLOOR: case DL_CEIL: case DL_ROUND: case DL_TRUNC: return 0;
    default: return 0;
  }
}

/* the unary ops on one value, in double; un_f below is its float twin, two copies on purpose
 * (as bin_d and bin_f: float's own functions round as the float32 kernels must) */
static inline double un_d(int op, double x) {
  switch (op) {
    case DL_NEG: return -x;
    case DL_EXP: return exp(x);
    case DL_LOG: return log(x);
    case DL_SQRT: return sqrt(x);
    case DL_ABS: return fabs(x);
    case DL_RELU: return x > 0 ? x : 0;
    case DL_SIGMOID: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    case DL_TANH: return tanh(x);
    case DL_GELU: return 0.5 * x * (1 + erf(x * 0.70710678118654752));
    case DL_SIGN: return (x > 0) - (x < 0);
    case DL_SQUARE: return x * x;
    case DL_RSQRT: return 1 / sqrt(x);
    case DL_SIN: return sin(x);
    case DL_COS: return cos(x);
    case DL_TAN: return tan(x);
    case DL_ASIN: return asin(x);
    case DL_ACOS: return acos(x);
    case DL_ATAN: return atan(x);
    case DL_SINH: return sinh(x);
    case DL_COSH: return cosh(x);
    case DL_ASINH: return asinh(x);
    case DL_ACOSH: return acosh(x);
    case DL_ATANH: return atanh(x);
    case DL_EXPM1: return expm1(x);
    case DL_LOG1P: return log1p(x);
    case DL_LOG2: return log2(x);
    case DL_LOG10: return log10(x);
    case DL_ERF: return erf(x);
    case DL_ERFC: return erfc(x);
    case DL_ERFINV: return erfinv_d(x);
    case DL_SOFTPLUS: return softplus_d(x);
    case DL_SILU: return x * sigmoid_d(x);
    case DL_MISH: return x * tanh(softplus_d(x));
    case DL_LOG_SIGMOID: return -softplus_d(-x);
    case DL_EXP2: return exp2(x);
    case DL_FLOOR: return floor(x);
    case DL_CEIL: return ceil(x);
    case DL_ROUND: return nearbyint(x);       /* halves to even, as torch.round */
    case DL_TRUNC: return trunc(x);
    case DL_U_STEP: return x > 0;
    case DL_U_GELU_GRAD:
      return 0.5 * (1 + erf(x * 0.70710678118654752)) + x * exp(-0.5 * x * x) * 0.39894228040143268;
    default: return op >= DL_U_DERIV ? deriv_d(op - DL_U_DERIV, x) : 0;
  }
}

/* un_d's float twin (two copies on purpose, see un_d) */
static inline float un_f(int op, float x) {
  switch (op) {
    case DL_NEG: return -x;
    case DL_EXP: return expf(x);
    case DL_LOG: return logf(x);
    case DL_SQRT: return sqrtf(x);
    case DL_ABS: return fabsf(x);
    case DL_RELU: return x > 0 ? x : 0;
    case DL_SIGMOID: return x >= 0 ? 1 / (1 + expf(-x)) : expf(x) / (1 + expf(x));
    case DL_TANH: return tanhf(x);
    case DL_GELU: return 0.5f * x * (1 + erff(x * 0.70710678f));
    case DL_SQUARE: return x * x;
    case DL_U_STEP: return x > 0 ? 1.0f : 0.0f;
    default: return (float)un_d(op, x);
  }
}

/* ------------------------------------------------------------ iteration */

typedef struct {
  int nd;
  int64_t shape[DL_MAXDIM];
  int64_t st[3][DL_MAXDIM];     /* strides of out, a, b (elements; 0 = broadcast) */
} loop3;

/* Merge adjacent dims whose strides are compatible for all operands. */
static void coalesce(loop3 *L, int nops) {
  int k = 0;
  for (int d = 0; d < L->nd; d++) {
    if (L->shape[d] == 1) continue;
    if (k > 0) {
      int ok = 1;
      for (int o = 0; o < nops; o++)
        if (L->st[o][k - 1] != L->st[o][d] * L->shape[d]) ok = 0;
      if (ok) {
        L->shape[k - 1] *= L->shape[d];
        for (int o = 0; o < nops; o++) L->st[o][k - 1] = L->st[o][d];
        continue;
      }
    }
    L->shape[k] = L->shape[d];
    for (int o = 0; o < nops; o++) L->st[o][k] = L->st[o][d];
    k++;
  }
  if (k == 0) {
    L->shape[0] = 1;
    for (int o = 0; o < nops; o++) L->st[o][0] = 0;
    k = 1;
  }
  L->nd = k;
}

/* strides of t broadcast to an nd-dim shape (right aligned) */
static void bstrides(const dl_tensor *t, int nd, const int64_t *shape, int64_t *st) {
  int off = nd - t->ndim;
  for (int d = 0; d < nd; d++) {
    int td = d - off;
    st[d] = (td < 0 || t->shape[td] == 1 || shape[d] == 1) ? 0 : t->stride[td];
  }
}

int dl_broadcast_shape(dl_ctx *ctx, const char *op, const dl_tensor *a, const dl_tensor *b,
                       int *ndim, int64_t *shape) {
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < nd; d++) {
    int ia = d - (nd - a->ndim), ib = d - (nd - b->ndim);
    int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char x[128], y[128];
      dl_shape_str(a->shape, a->ndim, x, sizeof x);
      dl_shape_str(b->shape, b->ndim, y, sizeof y);
      dl_fail(ctx, "%s: shapes %s and %s cannot be broadcast (dimension %d: %lld vs %lld)", op, x, y,
              d + 1, (long long)sa, (long long)sb);
      return -1;
    }
    shape[d] = sa == 1 ? sb : sa;
  }
  *ndim = nd;
  return 0;
}

/* Generic strided loop over up to 3 operands (out, a, b); kind 0 = binary, 1 = unary */
typedef struct {
  loop3 L;
  int op, unary;
  dl_dtype dt[3];
  char *p[3];
  int64_t n;
  int ntask;
} elem_job;

static void run_range(const elem_job *j, int64_t begin, int64_t end) {
  const loop3 *L = &j->L;
  int nd = L->nd;
  int64_t inner = L->shape[nd - 1];
  int64_t idx[DL_MAXDIM] = {0};
  int64_t off[3] = {0, 0, 0};
  /* position at begin (begin is a multiple of inner) */
  int64_t rem = begin / inner;
  for (int d = nd - 2; d >= 0; d--) {
    idx[d] = rem % L->shape[d];
    rem /= L->shape[d];
    for (int o = 0; o < 3; o++) off[o] += idx[d] * L->st[o][d];
  }
  int allf = j->dt[0] == DL_F32 && j->dt[1] == DL_F32 && (j->unary || j->dt[2] == DL_F32);
  int64_t s0 = L->st[0][nd - 1], s1 = L->st[1][nd - 1], s2 = L->st[2][nd - 1];
  for (int64_t row = begin; row < end; row += inner) {
    if (allf) {
      float *o = (float *)j->p[0] + off[0];
      const float *a = (const float *)j->p[1] + off[1];
      if (j->unary) {
        if (s0 == 1 && s1 == 1 && unary_fast_f(j->op, o, a, inner)) {
          /* done */
        } else if (s0 == 1 && s1 == 1)
          for (int64_t i = 0; i < inner; i++) o[i] = un_f(j->op, a[i]);
        else
          for (int64_t i = 0; i < inner; i++) o[i * s0] = un_f(j->op, a[i * s1]);
      } else {
        const float *b = (const float *)j->p[2] + off[2];
        if (s0 == 1 && s1 == 1 && (s2 == 1 || s2 == 0) && binary_fast_f(j->op, o, a, b, s2 == 0, inner)) {
          /* done */
        } else if (s0 == 1 && s1 == 1 && s2 == 1)
          for (int64_t i = 0; i < inner; i++) o[i] = bin_f(j->op, a[i], b[i]);
        else if (s0 == 1 && s1 == 1 && s2 == 0) {
          float bv = b[0];
          for (int64_t i = 0; i < inner; i++) o[i] = bin_f(j->op, a[i], bv);
        } else
          for (int64_t i = 0; i < inner; i++) o[i * s0] = bin_f(j->op, a[i * s1], b[i * s2]);
      }
    } else if (j->unary) {
      for (int64_t i = 0; i < inner; i++)
        dl_store(j->p[0], j->dt[0], off[0] + i * s0, un_d(j->op, dl_load(j->p[1], j->dt[1], off[1] + i * s1)));
    } else {
      for (int64_t i = 0; i < inner; i++)
        dl_store(j->p[0], j->dt[0], off[0] + i * s0,
                 bin_d(j->op, dl_load(j->p[1], j->dt[1], off[1] + i * s1),
                       dl_load(j->p[2], j->dt[2], off[2] + i * s2)));
    }
    for (int d = nd - 2; d >= 0; d--) {
      if (++idx[d] < L->shape[d]) {
        for (int o = 0; o < 3; o++) off[o] += L->st[o][d];
        break;
      }
      for (int o = 0; o < 3; o++) off[o] -= L->st[o][d] * (L->shape[d] - 1);
      idx[d] = 0;
    }
  }
}

static void elem_task(void *arg, int i) {
  const elem_job *j = arg;
  int64_t inner = j->L.shape[j->L.nd - 1];
  int64_t rows = j->n / inner;
  int64_t r0 = rows * i / j->ntask, r1 = rows * (i + 1) / j->ntask;
  if (r1 > r0) run_range(j, r0 * inner, r1 * inner);
}

static void run_elem(dl_ctx *ctx, elem_job *j) {
  coalesce(&j->L, 3);
  if (j->n == 0) return;
  int64_t inner = j->L.shape[j->L.nd - 1];
  int64_t rows = j->n / inner;
  int th = dl_pool_threads(ctx->pool);
  if (j->n >= PAR_MIN && th > 1 && rows >= th) {
    j->ntask = th;
    dl_pool_run(ctx->pool, th, elem_task, j);
  } else if (j->n >= PAR_MIN && th > 1 && inner >= PAR_MIN && j->L.nd == 1) {
    /* one long contiguous row: split the row itself */
    loop3 L = j->L;
    elem_job parts = *j;
    parts.L.nd = 2;
    int64_t chunk = (inner + th - 1) / th;
    parts.L.shape[0] = th;
    parts.L.shape[1] = chunk;
    for (int o = 0; o < 3; o++) {
      parts.L.st[o][1] = L.st[o][0];
      parts.L.st[o][0] = L.st[o][0] * chunk;
    }
    if (chunk * th == inner) {
      parts.n = inner;
      parts.ntask = th;
      dl_pool_run(ctx->pool, th, elem_task, &parts);
    } else {
      run_range(j, 0, j->n);
    }
  } else {
    run_range(j, 0, j->n);
  }
}

dl_dtype dl_dtype_promote(dl_dtype a, dl_dtype b) {
  if (a == b) return a;
  if (a == DL_F64 || b == DL_F64) return DL_F64;
  if (a == DL_F32 || b == DL_F32) return DL_F32;
  if (a == DL_I64 || b == DL_I64) return DL_I64;
  if (a == DL_I32 || b == DL_I32) return DL_I32;
  return DL_U8;
}

dl_dtype dl_binary_dtype(int op, dl_dtype a, dl_dtype b) {
  dl_dtype outd = op >= DL_EQ ? DL_U8 : dl_dtype_promote(a, b);
  if (op == DL_DIV && !dl_dtype_is_float(outd)) outd = DL_F32;
  if (op == DL_POW && !dl_dtype_is_float(outd)) outd = DL_F32;
  return outd;
}

/* out [broadcast of a, b] = op(a [..], b [..]) */
dl_tensor *dl_binary_raw(dl_ctx *ctx, int op, dl_tensor *a, dl_tensor *b, dl_dtype outd) {
  int nd;
  int64_t shape[DL_MAXDIM];
  if (dl_broadcast_shape(ctx, binop_names[op], a, b, &nd, shape) < 0) return NULL;
  dl_tensor *out = dl_tensor_new_empty(ctx, outd, nd, shape);
  if (!out) return NULL;
  elem_job j;
  memset(&j, 0, sizeof j);
  j.L.nd = nd;
  memcpy(j.L.shape, shape, sizeof(int64_t) * (size_t)nd);
  bstrides(out, nd, shape, j.L.st[0]);
  bstrides(a, nd, shape, j.L.st[1]);
  bstrides(b, nd, shape, j.L.st[2]);
  j.op = op;
  j.dt[0] = outd; j.dt[1] = a->dtype; j.dt[2] = b->dtype;
  j.p[0] = dl_data(out); j.p[1] = dl_data(a); j.p[2] = dl_data(b);
  j.n = dl_numel(out);
  run_elem(ctx, &j);
  return out;
}

/* out [a's shape] = op(a) */
dl_tensor *dl_unary_raw(dl_ctx *ctx, int op, dl_tensor *a) {
  dl_dtype outd = a->dtype;
  if (!dl_dtype_is_float(outd) && op != DL_NEG && op != DL_ABS && op != DL_RELU && op != DL_SIGN &&
      op != DL_SQUARE && op != DL_FLOOR && op != DL_CEIL && op != DL_ROUND && op != DL_TRUNC)
    outd = DL_F32;
  dl_tensor *out = dl_tensor_new_empty(ctx, outd, a->ndim, a->shape);
  if (!out) return NULL;
  elem_job j;
  memset(&j, 0, sizeof j);
  j.L.nd = a->ndim;
  memcpy(j.L.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
  bstrides(out, a->ndim, a->shape, j.L.st[0]);
  bstrides(a, a->ndim, a->shape, j.L.st[1]);
  j.op = op;
  j.unary = 1;
  j.dt[0] = outd; j.dt[1] = a->dtype; j.dt[2] = a->dtype;
  j.p[0] = dl_data(out); j.p[1] = dl_data(a); j.p[2] = dl_data(a);
  j.n = dl_numel(out);
  run_elem(ctx, &j);
  return out;
}

/* ------------------------------------------------------ scale/shift, where */

/* out [a's shape] = a * scale + shift */
dl_tensor *dl_scale_shift_raw(dl_ctx *ctx, dl_tensor *a, double scale, double shift) {
  dl_dtype d = a->dtype;
  if (!dl_dtype_is_float(d) && (scale != floor(scale) || shift != floor(shift))) d = DL_F32;
  dl_tensor *out = dl_tensor_new_empty(ctx, d, a->ndim, a->shape);
  if (!out) return NULL;
  int64_t n = dl_numel(a);
  if (a->dtype == DL_F32 && d == DL_F32 && dl_is_contiguous(a)) {
    const float *s = dl_data(a);
    float *o = out->st->data, sc = (float)scale, sh = (float)shift;
    for (int64_t i = 0; i < n; i++) o[i] = s[i] * sc + sh;
  } else {
    for (int64_t i = 0; i < n; i++) dl_store(out->st->data, d, i, dl_get_flat(a, i) * scale + shift);
  }
  return out;
}

/* out [broadcast of c, a, b] = c != 0 ? a : b, of dtype d */
dl_tensor *dl_where_raw(dl_ctx *ctx, dl_tensor *c, dl_tensor *a, dl_tensor *b, dl_dtype d) {
  int nd1, nd;
  int64_t s1[DL_MAXDIM], shape[DL_MAXDIM];
  if (dl_broadcast_shape(ctx, "where", c, a, &nd1, s1) < 0) return NULL;
  dl_tensor tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.ndim = nd1;
  memcpy(tmp.shape, s1, sizeof s1);
  if (dl_broadcast_shape(ctx, "where", &tmp, b, &nd, shape) < 0) return NULL;
  dl_tensor *out = dl_tensor_new_empty(ctx, d, nd, shape);
  if (!out) return NULL;
  int64_t sc[DL_MAXDIM], sa[DL_MAXDIM], sb[DL_MAXDIM], idx[DL_MAXDIM] = {0};
  bstrides(c, nd, shape, sc);
  bstrides(a, nd, shape, sa);
  bstrides(b, nd, shape, sb);
  const char *pc = dl_data(c), *pa = dl_data(a), *pb = dl_data(b);
  int64_t n = dl_numel(out);
  for (int64_t i = 0; i < n; i++) {
    int64_t oc = 0, oa = 0, ob = 0;
    for (int k = 0; k < nd; k++) {
      oc += idx[k] * sc[k];
      oa += idx[k] * sa[k];
      ob += idx[k] * sb[k];
    }
    double v = dl_load(pc, c->dtype, oc) != 0 ? dl_load(pa, a->dtype, oa) : dl_load(pb, b->dtype, ob);
    dl_store(out->st->data, d, i, v);
    for (int k = nd - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

/* ------------------------------------------------------------ views and copies */

/* out [shape] = a [.., right-aligned] broadcast, a view (stride 0 on broadcast dims) */
dl_tensor *dl_expand_raw(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape) {
  if (ndim < a->ndim || ndim > DL_MAXDIM) {
    char x[128], y[128];
    dl_shape_str(a->shape, a->ndim, x, sizeof x);
    dl_shape_str(shape, ndim, y, sizeof y);
    return dl_fail(ctx, "expand: cannot expand shape %s to %s", x, y);
  }
  int64_t sh[DL_MAXDIM], st[DL_MAXDIM];
  int off = ndim - a->ndim;
  for (int d = 0; d < ndim; d++) {
    int ad = d - off;
    int64_t as = ad >= 0 ? a->shape[ad] : 1;
    int64_t want = shape[d] == -1 ? as : shape[d];
    if (want < 0 || (as != 1 && as != want)) {
      char x[128], y[128];
      dl_shape_str(a->shape, a->ndim, x, sizeof x);
      dl_shape_str(shape, ndim, y, sizeof y);
      return dl_fail(ctx, "expand: cannot expand shape %s to %s (dimension %d: %lld vs %lld)", x, y,
                     d + 1, (long long)as, (long long)want);
    }
    sh[d] = want;
    st[d] = (ad < 0 || as == 1) ? 0 : a->stride[ad];
    if (ad >= 0 && as == 1 && want == 1) st[d] = a->stride[ad];
  }
  if (dl_shape_check(ctx, "expand", ndim, sh, NULL) < 0) return NULL;
  return dl_view_new(ctx, a, ndim, sh, st, a->offset);
}

dl_tensor *dl_contiguous_raw(dl_ctx *ctx, dl_tensor *a) {
  if (dl_is_contiguous(a)) return dl_tensor_retain(a);
  return dl_tensor_new_contiguous(ctx, a, a->dtype);
}

/* ------------------------------------------------------------ in place */

/* dst [..] += alpha * src [broadcast to dst] */
int dl_axpy_inplace(dl_ctx *ctx, dl_tensor *dst, double alpha, dl_tensor *src) {
  int nd;
  int64_t shape[DL_MAXDIM];
  if (dl_broadcast_shape(ctx, "add_", dst, src, &nd, shape) < 0) return -1;
  int same = nd == dst->ndim;
  for (int d = 0; same && d < nd; d++) same = shape[d] == dst->shape[d];
  if (!same) {
    char x[128], y[128];
    dl_shape_str(dst->shape, dst->ndim, x, sizeof x);
    dl_shape_str(src->shape, src->ndim, y, sizeof y);
    dl_fail(ctx, "add_: shape %s cannot be broadcast into %s", y, x);
    return -1;
  }
  int64_t n = dl_numel(dst);
  if (dst->dtype == DL_F32 && src->dtype == DL_F32 && dl_is_contiguous(dst) &&
      dl_is_contiguous(src) && dl_numel(src) == n) {
    float *d = dl_data(dst);
    const float *s = dl_data(src);
    float al = (float)alpha;
    if (alpha == 1) for (int64_t i = 0; i < n; i++) d[i] += s[i];
    else for (int64_t i = 0; i < n; i++) d[i] += al * s[i];
    return 0;
  }
  dl_tensor *tmp = dl_tensor_new_empty(ctx, dst->dtype, nd, shape);
  if (!tmp) return -1;
  dl_tensor *e = dl_expand_raw(ctx, src, nd, shape);
  if (!e) { dl_tensor_release(tmp); return -1; }
  dl_copy_into(ctx, tmp, e);
  dl_tensor_release(e);
  for (int64_t i = 0; i < n; i++) dl_set_flat(dst, i, dl_get_flat(dst, i) + alpha * dl_load(tmp->st->data, tmp->dtype, i));
  dl_tensor_release(tmp);
  return 0;
}

int dl_fill_inplace(dl_ctx *ctx, dl_tensor *t, double v) {
  (void)ctx;
  int64_t n = dl_numel(t);
  if (t->dtype == DL_F32 && dl_is_contiguous(t)) {
    float *p = dl_data(t), f = (float)v;
    for (int64_t i = 0; i < n; i++) p[i] = f;
  } else {
    for (int64_t i = 0; i < n; i++) dl_set_flat(t, i, v);
  }
  return 0;
}
