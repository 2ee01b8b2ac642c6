/* ops_elem.c -- elementwise ops with NumPy broadcasting, and their backwards.
 *
 * One strided N-d loop serves every op: dims are coalesced, then the last
 * dim runs as a plain strided inner loop. float32 operands take a float
 * path; anything else goes through doubles (float64 gradchecks, integer
 * labels). Large float32 contiguous ops split into fixed chunks over the pool.
 */
/* See LICENSE */
#include "ops/ops.h"

#include <math.h>
#include <string.h>

#define PAR_MIN 32768          /* elements below which an op stays on one thread */

static const char *const binop_names[DL_NBINARY + 1] = {
  "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
  "relu_backward"};

/* internal unary ops used by backwards */
enum { U_STEP = DL_NUNARY, U_GELU_GRAD };
enum { B_MASK = DL_NBINARY };   /* a where b > 0, else 0: ReLU's backward in one pass */

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
    case B_MASK: return b > 0 ? a : 0;
    default: return 0;
  }
}

static inline float bin_f(int op, float a, float b) {
  switch (op) {
    case DL_ADD: return a + b;
    case DL_SUB: return a - b;
    case DL_MUL: return a * b;
    case DL_DIV: return a / b;
    case DL_POW: return powf(a, b);
    case DL_MAXIMUM: return a > b || a != a ? a : b;
    case DL_MINIMUM: return a < b || a != a ? a : b;
    case B_MASK: return b > 0 ? a : 0.0f;
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
    case U_STEP: ELEM_LOOP(a[i] > 0 ? 1.0f : 0.0f); return 1;
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
    case B_MASK:            /* both loaded unconditionally, so the select vectorises without branches */
      for (int64_t i = 0; i < n; i++) {
        float av = a[i], bv = b[i];
        o[i] = bv > 0 ? av : 0.0f;
      }
      return 1;
    default: return 0;
  }
}
#undef ELEM_LOOP

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
    case U_STEP: return x > 0;
    case U_GELU_GRAD:
      return 0.5 * (1 + erf(x * 0.70710678118654752)) + x * exp(-0.5 * x * x) * 0.39894228040143268;
    default: return 0;
  }
}

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
    case U_STEP: return x > 0 ? 1.0f : 0.0f;
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

static dl_dtype promote(dl_dtype a, dl_dtype b) {
  if (a == b) return a;
  if (a == DL_F64 || b == DL_F64) return DL_F64;
  if (a == DL_F32 || b == DL_F32) return DL_F32;
  if (a == DL_I64 || b == DL_I64) return DL_I64;
  if (a == DL_I32 || b == DL_I32) return DL_I32;
  return DL_U8;
}

/* out = op(a, b) with no autograd */
static dl_tensor *binary_raw(dl_ctx *ctx, int op, dl_tensor *a, dl_tensor *b, dl_dtype outd) {
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

static dl_tensor *unary_raw(dl_ctx *ctx, int op, dl_tensor *a) {
  dl_dtype outd = a->dtype;
  if (!dl_dtype_is_float(outd) && op != DL_NEG && op != DL_ABS && op != DL_RELU && op != DL_SIGN &&
      op != DL_SQUARE)
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

/* --------------------------------------------------------- backwards */

static int grad_reduce(dl_ctx *ctx, dl_tensor *g, dl_tensor *like, dl_tensor **out) {
  if (!g) return -1;
  *out = dl_sum_to(ctx, g, like->ndim, like->shape);
  dl_tensor_release(g);
  return *out ? 0 : -1;
}

int dl_bw_binary(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *b = n->in[1];
  int op = (int)n->iv[0];
  int need_a = a->requires_grad, need_b = b->requires_grad;
  dl_tensor *t = NULL, *u = NULL;
  switch (op) {
    case DL_ADD:
      if (need_a && grad_reduce(ctx, dl_tensor_retain(g), a, &gin[0]) < 0) return -1;
      if (need_b && grad_reduce(ctx, dl_tensor_retain(g), b, &gin[1]) < 0) return -1;
      return 0;
    case DL_SUB:
      if (need_a && grad_reduce(ctx, dl_tensor_retain(g), a, &gin[0]) < 0) return -1;
      if (need_b && grad_reduce(ctx, unary_raw(ctx, DL_NEG, g), b, &gin[1]) < 0) return -1;
      return 0;
    case DL_MUL:
      if (need_a && grad_reduce(ctx, binary_raw(ctx, DL_MUL, g, b, g->dtype), a, &gin[0]) < 0) return -1;
      if (need_b && grad_reduce(ctx, binary_raw(ctx, DL_MUL, g, a, g->dtype), b, &gin[1]) < 0) return -1;
      return 0;
    case DL_DIV:
      if (need_a && grad_reduce(ctx, binary_raw(ctx, DL_DIV, g, b, g->dtype), a, &gin[0]) < 0) return -1;
      if (need_b) {
        /* -g * a / b^2 = -(g * out) / b */
        t = binary_raw(ctx, DL_MUL, g, n->saved[0], g->dtype);
        if (!t) return -1;
        u = binary_raw(ctx, DL_DIV, t, b, g->dtype);
        dl_tensor_release(t);
        if (!u) return -1;
        t = unary_raw(ctx, DL_NEG, u);
        dl_tensor_release(u);
        if (grad_reduce(ctx, t, b, &gin[1]) < 0) return -1;
      }
      return 0;
    case DL_POW:
      if (need_a) {
        /* g * b * a^(b-1) = g * b * out / a, computed without dividing by a */
        dl_tensor *one = dl_tensor_new_scalar(ctx, b->dtype, 1);
        if (!one) return -1;
        dl_tensor *bm1 = binary_raw(ctx, DL_SUB, b, one, g->dtype);
        dl_tensor_release(one);
        if (!bm1) return -1;
        t = binary_raw(ctx, DL_POW, a, bm1, g->dtype);
        dl_tensor_release(bm1);
        if (!t) return -1;
        u = binary_raw(ctx, DL_MUL, t, b, g->dtype);
        dl_tensor_release(t);
        if (!u) return -1;
        t = binary_raw(ctx, DL_MUL, u, g, g->dtype);
        dl_tensor_release(u);
        if (grad_reduce(ctx, t, a, &gin[0]) < 0) return -1;
      }
      if (need_b) {
        dl_tensor *la = unary_raw(ctx, DL_LOG, a);
        if (!la) return -1;
        t = binary_raw(ctx, DL_MUL, la, n->saved[0], g->dtype);
        dl_tensor_release(la);
        if (!t) return -1;
        u = binary_raw(ctx, DL_MUL, t, g, g->dtype);
        dl_tensor_release(t);
        if (grad_reduce(ctx, u, b, &gin[1]) < 0) return -1;
      }
      return 0;
    case DL_MAXIMUM:
    case DL_MINIMUM: {
      /* the gradient goes to the selected operand (a on ties) */
      dl_tensor *m = binary_raw(ctx, op == DL_MAXIMUM ? DL_GE : DL_LE, a, b, g->dtype);
      if (!m) return -1;
      if (need_a && grad_reduce(ctx, binary_raw(ctx, DL_MUL, g, m, g->dtype), a, &gin[0]) < 0) {
        dl_tensor_release(m);
        return -1;
      }
      if (need_b) {
        dl_tensor *gm = binary_raw(ctx, DL_MUL, g, m, g->dtype);
        dl_tensor *r = gm ? binary_raw(ctx, DL_SUB, g, gm, g->dtype) : NULL;
        dl_tensor_release(gm);
        if (grad_reduce(ctx, r, b, &gin[1]) < 0) {
          dl_tensor_release(m);
          return -1;
        }
      }
      dl_tensor_release(m);
      return 0;
    }
    default:
      return 0;
  }
}

dl_tensor *dl_binary(dl_ctx *ctx, dl_binop op, dl_tensor *a, dl_tensor *b) {
  dl_dtype outd = op >= DL_EQ ? DL_U8 : promote(a->dtype, b->dtype);
  if (op == DL_DIV && !dl_dtype_is_float(outd)) outd = DL_F32;
  if (op == DL_POW && !dl_dtype_is_float(outd)) outd = DL_F32;
  dl_tensor *out = binary_raw(ctx, op, a, b, outd);
  if (!out || op >= DL_EQ) return out;
  static const dl_op ops[DL_EQ] = {DL_OP_ADD, DL_OP_SUB, DL_OP_MUL, DL_OP_DIV, DL_OP_POW, DL_OP_MAXIMUM, DL_OP_MINIMUM};
  dl_tensor *in[2] = {a, b};
  dl_node *n = dl_tape_record(ctx, ops[op], &out, 2, in);
  if (!n) return out;
  n->iv[0] = op;
  if ((op == DL_DIV || op == DL_POW) && !(n->saved[0] = dl_detach(ctx, out))) {
    dl_tensor_release(out);
    return NULL;
  }
  return out;
}

int dl_bw_unary(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *out = n->saved[0];
  int op = (int)n->iv[0];
  dl_tensor *t = NULL, *r = NULL;
  switch (op) {
    case DL_NEG: r = unary_raw(ctx, DL_NEG, g); break;
    case DL_EXP: r = binary_raw(ctx, DL_MUL, g, out, g->dtype); break;
    case DL_LOG: r = binary_raw(ctx, DL_DIV, g, a, g->dtype); break;
    case DL_SQRT:
      t = binary_raw(ctx, DL_DIV, g, out, g->dtype);
      r = t ? dl_scale_shift(ctx, t, 0.5, 0) : NULL;
      break;
    case DL_ABS:
      t = unary_raw(ctx, DL_SIGN, a);
      r = t ? binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      break;
    case DL_RELU:               /* g where a > 0 */
      r = binary_raw(ctx, B_MASK, g, a, g->dtype);
      break;
    case DL_SIGMOID:            /* g * s * (1 - s) */
      t = dl_scale_shift(ctx, out, -1, 1);
      if (t) {
        dl_tensor *u = binary_raw(ctx, DL_MUL, t, out, g->dtype);
        dl_tensor_release(t);
        t = u;
        r = t ? binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      }
      break;
    case DL_TANH:               /* g * (1 - y^2) */
      t = unary_raw(ctx, DL_SQUARE, out);
      if (t) {
        dl_tensor *u = dl_scale_shift(ctx, t, -1, 1);
        dl_tensor_release(t);
        t = u;
        r = t ? binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      }
      break;
    case DL_GELU:
      t = unary_raw(ctx, U_GELU_GRAD, a);
      r = t ? binary_raw(ctx, DL_MUL, g, t, g->dtype) : NULL;
      break;
    case DL_SIGN:
      r = dl_tensor_new_zeros(ctx, g->dtype, a->ndim, a->shape);
      break;
    case DL_SQUARE:
      t = binary_raw(ctx, DL_MUL, g, a, g->dtype);
      r = t ? dl_scale_shift(ctx, t, 2, 0) : NULL;
      break;
    case DL_RSQRT:              /* -0.5 * g * y^3 */
      t = unary_raw(ctx, DL_SQUARE, out);
      if (t) {
        dl_tensor *u = binary_raw(ctx, DL_MUL, t, out, g->dtype);
        dl_tensor_release(t);
        t = u ? binary_raw(ctx, DL_MUL, u, g, g->dtype) : NULL;
        dl_tensor_release(u);
        r = t ? dl_scale_shift(ctx, t, -0.5, 0) : NULL;
      }
      break;
    default: break;
  }
  dl_tensor_release(t);
  if (!r) return -1;
  gin[0] = r;
  return 0;
}

dl_tensor *dl_unary(dl_ctx *ctx, dl_unop op, dl_tensor *a) {
  dl_tensor *out = unary_raw(ctx, op, a);
  if (!out) return NULL;
  static const dl_op ops[DL_NUNARY] = {DL_OP_NEG, DL_OP_EXP, DL_OP_LOG, DL_OP_SQRT, DL_OP_ABS, DL_OP_RELU,
                                       DL_OP_SIGMOID, DL_OP_TANH, DL_OP_GELU, DL_OP_SIGN, DL_OP_SQUARE, DL_OP_RSQRT};
  if (!dl_dtype_is_float(a->dtype)) return out;
  dl_node *n = dl_tape_record(ctx, ops[op], &out, 1, &a);
  if (!n) return out;
  n->iv[0] = op;
  if ((op == DL_EXP || op == DL_SQRT || op == DL_SIGMOID || op == DL_TANH || op == DL_RSQRT) &&
      !(n->saved[0] = dl_detach(ctx, out))) {
    dl_tensor_release(out);
    return NULL;
  }
  return out;
}

/* ------------------------------------------------- scale/shift and clamp */

int dl_bw_scale(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  gin[0] = dl_scale_shift(ctx, g, n->sc[0], 0);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_scale_shift(dl_ctx *ctx, dl_tensor *a, double scale, double shift) {
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
  dl_node *nd = dl_tape_record(ctx, DL_OP_SCALE, &out, 1, &a);
  if (nd) nd->sc[0] = scale;
  return out;
}

int dl_bw_clamp(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0];
  dl_tensor *m = dl_tensor_new_empty(ctx, g->dtype, a->ndim, a->shape);
  if (!m) return -1;
  int64_t k = dl_numel(a);
  for (int64_t i = 0; i < k; i++) {
    double v = dl_get_flat(a, i);
    dl_store(m->st->data, m->dtype, i, v >= n->sc[0] && v <= n->sc[1]);
  }
  gin[0] = binary_raw(ctx, DL_MUL, g, m, g->dtype);
  dl_tensor_release(m);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_clamp(dl_ctx *ctx, dl_tensor *a, double lo, double hi) {
  if (lo > hi) return dl_fail(ctx, "clamp: min %g is greater than max %g", lo, hi);
  dl_tensor *out = dl_tensor_new_empty(ctx, a->dtype, a->ndim, a->shape);
  if (!out) return NULL;
  int64_t k = dl_numel(a);
  for (int64_t i = 0; i < k; i++) {
    double v = dl_get_flat(a, i);
    dl_store(out->st->data, out->dtype, i, v < lo ? lo : v > hi ? hi : v);
  }
  dl_node *n = dl_tape_record(ctx, DL_OP_CLAMP, &out, 1, &a);
  if (n) {
    n->sc[0] = lo;
    n->sc[1] = hi;
  }
  return out;
}

/* ------------------------------------------------------------- where */

static dl_tensor *where_raw(dl_ctx *ctx, dl_tensor *c, dl_tensor *a, dl_tensor *b, dl_dtype d) {
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

int dl_bw_where(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *c = n->saved[0];
  dl_tensor *z = dl_tensor_new_scalar(ctx, g->dtype, 0);
  if (!z) return -1;
  int rc = 0;
  if (n->in[0]->requires_grad)
    rc |= grad_reduce(ctx, where_raw(ctx, c, g, z, g->dtype), n->in[0], &gin[0]);
  if (!rc && n->in[1]->requires_grad)
    rc |= grad_reduce(ctx, where_raw(ctx, c, z, g, g->dtype), n->in[1], &gin[1]);
  dl_tensor_release(z);
  return rc;
}

dl_tensor *dl_where(dl_ctx *ctx, dl_tensor *cond, dl_tensor *a, dl_tensor *b) {
  dl_tensor *out = where_raw(ctx, cond, a, b, promote(a->dtype, b->dtype));
  if (!out) return NULL;
  dl_tensor *in[2] = {a, b};
  dl_node *n = dl_tape_record(ctx, DL_OP_WHERE, &out, 2, in);
  if (n) n->saved[0] = dl_tensor_retain(cond);
  return out;
}

/* -------------------------------------------------------------- cast */

int dl_bw_cast(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  gin[0] = dl_tensor_new_contiguous(ctx, g, n->in[0]->dtype);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_cast(dl_ctx *ctx, dl_tensor *a, dl_dtype d) {
  dl_tensor *out = dl_tensor_new_contiguous(ctx, a, d);
  if (!out) return NULL;
  if (dl_dtype_is_float(d) && dl_dtype_is_float(a->dtype)) dl_tape_record(ctx, DL_OP_CAST, &out, 1, &a);
  return out;
}

/* ------------------------------------------------------------ in place */

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
  dl_tensor *e = dl_expand(ctx, src, nd, shape);
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
