/* lua_ops.c -- Lua bindings of the tensor ops: arithmetic, reductions, views, indexing.
 *
 * Each function checks its arguments (1-based dims, shapes, dtypes; no
 * extra arguments, no unknown option keys) and calls one core op; index
 * tensors cross the boundary 1-based and are shifted here, once. Results
 * are boxed before the op runs so no C memory is stranded if Lua raises.
 * Convolution and pooling are in lua_conv.c.
 */
/* See LICENSE */
#include "lua/lua_aux.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ elementwise */

/* the dtype numbers take when combined with the other operand */
static dl_dtype other_dtype(lua_State *L, int i) {
  dl_tensor *t = lt_test(L, i);
  return t ? t->dtype : DL_F32;
}

/* dtype for a number at i combined with a tensor of dtype d: fractional numbers
 * next to integer tensors become float32, so i * 2.5 and i:lt(1.5) are exact */
static dl_dtype number_dtype(lua_State *L, int i, dl_dtype d) {
  if (!dl_dtype_is_float(d) && lua_type(L, i) == LUA_TNUMBER && !lua_isinteger(L, i)) {
    lua_Number v = lua_tonumber(L, i);
    if (v != floor(v)) return DL_F32;
  }
  return d;
}

static int binary(lua_State *L, dl_binop op) {
  lt_checkargs(L, 2);
  dl_tensor *a = lt_test(L, 1), *b = lt_test(L, 2);
  if (!a) a = lt_coerce(L, 1, number_dtype(L, 1, other_dtype(L, 2)));
  if (!b) b = lt_coerce(L, 2, number_dtype(L, 2, a->dtype));
  lt_newbox(L);
  return lt_finish(L, dl_binary(lt_ctx(L), op, a, b));
}

static int l_add(lua_State *L) { return binary(L, DL_ADD); }
static int l_sub(lua_State *L) { return binary(L, DL_SUB); }
static int l_mul(lua_State *L) { return binary(L, DL_MUL); }
static int l_div(lua_State *L) { return binary(L, DL_DIV); }
static int l_pow(lua_State *L) { return binary(L, DL_POW); }
static int l_maximum(lua_State *L) { return binary(L, DL_MAXIMUM); }
static int l_minimum(lua_State *L) { return binary(L, DL_MINIMUM); }
static int l_eq(lua_State *L) { return binary(L, DL_EQ); }
static int l_ne(lua_State *L) { return binary(L, DL_NE); }
static int l_lt(lua_State *L) { return binary(L, DL_LT); }
static int l_le(lua_State *L) { return binary(L, DL_LE); }
static int l_gt(lua_State *L) { return binary(L, DL_GT); }
static int l_ge(lua_State *L) { return binary(L, DL_GE); }

static int unary(lua_State *L, dl_unop op) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_unary(lt_ctx(L), op, a));
}

static int l_neg(lua_State *L) { return unary(L, DL_NEG); }
static int l_exp(lua_State *L) { return unary(L, DL_EXP); }
static int l_log(lua_State *L) { return unary(L, DL_LOG); }
static int l_sqrt(lua_State *L) { return unary(L, DL_SQRT); }
static int l_abs(lua_State *L) { return unary(L, DL_ABS); }
static int l_relu(lua_State *L) { return unary(L, DL_RELU); }
static int l_sigmoid(lua_State *L) { return unary(L, DL_SIGMOID); }
static int l_tanh(lua_State *L) { return unary(L, DL_TANH); }
static int l_gelu(lua_State *L) { return unary(L, DL_GELU); }
static int l_sign(lua_State *L) { return unary(L, DL_SIGN); }
static int l_square(lua_State *L) { return unary(L, DL_SQUARE); }
static int l_rsqrt(lua_State *L) { return unary(L, DL_RSQRT); }
static int l_sin(lua_State *L) { return unary(L, DL_SIN); }
static int l_cos(lua_State *L) { return unary(L, DL_COS); }
static int l_tan(lua_State *L) { return unary(L, DL_TAN); }
static int l_asin(lua_State *L) { return unary(L, DL_ASIN); }
static int l_acos(lua_State *L) { return unary(L, DL_ACOS); }
static int l_atan(lua_State *L) { return unary(L, DL_ATAN); }
static int l_sinh(lua_State *L) { return unary(L, DL_SINH); }
static int l_cosh(lua_State *L) { return unary(L, DL_COSH); }
static int l_asinh(lua_State *L) { return unary(L, DL_ASINH); }
static int l_acosh(lua_State *L) { return unary(L, DL_ACOSH); }
static int l_atanh(lua_State *L) { return unary(L, DL_ATANH); }
static int l_expm1(lua_State *L) { return unary(L, DL_EXPM1); }
static int l_log1p(lua_State *L) { return unary(L, DL_LOG1P); }
static int l_log2(lua_State *L) { return unary(L, DL_LOG2); }
static int l_log10(lua_State *L) { return unary(L, DL_LOG10); }
static int l_erf(lua_State *L) { return unary(L, DL_ERF); }
static int l_erfc(lua_State *L) { return unary(L, DL_ERFC); }
static int l_erfinv(lua_State *L) { return unary(L, DL_ERFINV); }
static int l_softplus(lua_State *L) { return unary(L, DL_SOFTPLUS); }
static int l_silu(lua_State *L) { return unary(L, DL_SILU); }
static int l_mish(lua_State *L) { return unary(L, DL_MISH); }
static int l_log_sigmoid(lua_State *L) { return unary(L, DL_LOG_SIGMOID); }
static int l_exp2(lua_State *L) { return unary(L, DL_EXP2); }
static int l_floor_op(lua_State *L) { return unary(L, DL_FLOOR); }  /* l_floor is a macro of Lua's configuration header */
static int l_ceil(lua_State *L) { return unary(L, DL_CEIL); }
static int l_round(lua_State *L) { return unary(L, DL_ROUND); }
static int l_trunc(lua_State *L) { return unary(L, DL_TRUNC); }

static int l_clamp(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 3);
  double lo = lt_optnumber(L, 2, -HUGE_VAL), hi = lt_optnumber(L, 3, HUGE_VAL);
  if (isnan(lo)) lt_argerror(L, 2, "min is nan; nil means no lower bound");
  if (isnan(hi)) lt_argerror(L, 3, "max is nan; nil means no upper bound");
  lt_newbox(L);
  return lt_finish(L, dl_clamp(lt_ctx(L), a, lo, hi));
}

static int l_scale(lua_State *L) {         /* t:scale(s [, shift]) = t * s + shift */
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 3);
  double s = lt_checknumber(L, 2), b = lt_optnumber(L, 3, 0);
  lt_newbox(L);
  return lt_finish(L, dl_scale_shift(lt_ctx(L), a, s, b));
}

static int l_where(lua_State *L) {
  lt_checkargs(L, 3);
  dl_tensor *c = lt_coerce(L, 1, DL_U8);
  dl_tensor *a = lt_test(L, 2), *b = lt_test(L, 3);
  if (!a) a = lt_coerce(L, 2, other_dtype(L, 3));
  if (!b) b = lt_coerce(L, 3, a->dtype);
  lt_newbox(L);
  return lt_finish(L, dl_where(lt_ctx(L), c, a, b));
}

static int to_dtype(lua_State *L, dl_dtype d, int nargs) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, nargs);
  if (a->dtype == d) {
    lua_settop(L, 1);
    return 1;
  }
  lt_newbox(L);
  return lt_finish(L, dl_cast(lt_ctx(L), a, d));
}

static int l_to(lua_State *L) {
  lt_check(L, 1);
  return to_dtype(L, lt_checkdtype(L, 2), 2);
}

static int l_float(lua_State *L) { return to_dtype(L, DL_F32, 1); }
static int l_double(lua_State *L) { return to_dtype(L, DL_F64, 1); }
static int l_int(lua_State *L) { return to_dtype(L, DL_I32, 1); }
static int l_long(lua_State *L) { return to_dtype(L, DL_I64, 1); }
static int l_byte(lua_State *L) { return to_dtype(L, DL_U8, 1); }

/* ------------------------------------------------------------ in place */

/* the tensor t of t:op_(...) (nargs arguments in all), refused when it requires grad */
static dl_tensor *inplace_target(lua_State *L, int nargs) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, nargs);
  if (t->requires_grad && lt_ctx(L)->grad_enabled)
    lt_argerror(L, 1, "in-place change of a tensor that requires grad (wrap it in dl.no_grad)");
  return t;
}

/* what t:op_(...) returns: t */
static int return_target(lua_State *L) {
  lua_settop(L, 1);
  return 1;
}

static int l_fill_(lua_State *L) {
  dl_tensor *t = inplace_target(L, 2);
  dl_fill_inplace(lt_ctx(L), t, lt_checknumber(L, 2));
  return return_target(L);
}

static int l_zero_(lua_State *L) {
  dl_fill_inplace(lt_ctx(L), inplace_target(L, 1), 0);
  return return_target(L);
}

static int l_copy_(lua_State *L) {
  dl_tensor *t = inplace_target(L, 2);
  dl_tensor *s = lt_coerce_into(L, 2, t->dtype);
  dl_ctx *ctx = lt_ctx(L);
  if (dl_numel(s) != dl_numel(t) || s->ndim != t->ndim ||
      memcmp(s->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim)) {
    dl_tensor *e = dl_expand(ctx, s, t->ndim, t->shape);
    if (!e) {
      char a[128], b[128];
      dl_shape_str(t->shape, t->ndim, a, sizeof a);
      dl_shape_str(s->shape, s->ndim, b, sizeof b);
      return lt_argerror(L, 2, "source shape %s cannot be broadcast to %s", b, a);
    }
    int rc = dl_copy_into(ctx, t, e);
    dl_tensor_release(e);
    if (rc < 0) return lt_raise(L);
  } else if (dl_copy_into(ctx, t, s) < 0) {
    return lt_raise(L);
  }
  return return_target(L);
}

static int l_add_(lua_State *L) {
  dl_tensor *t = inplace_target(L, 3);
  dl_tensor *s = lt_coerce_into(L, 2, t->dtype);
  double alpha = lt_optnumber(L, 3, 1);
  if (dl_axpy_inplace(lt_ctx(L), t, alpha, s) < 0) return lt_raise(L);
  return return_target(L);
}

/* ------------------------------------------------------------ reductions */

static const char *const reduce_keys[] = {"dim", "keepdim", NULL};
static const char *const var_keys[] = {"correction", "dim", "keepdim", "unbiased", NULL};

typedef struct {
  unsigned mask;            /* reduced dims (0 = all) */
  int keep;                 /* keepdim */
  int single;               /* the one reduced dim, -1 when none or several */
  int correction;           /* var: 1 = Bessel's correction */
} dims_spec;

/* (t [, dim | {dims}] [, keepdim | opts]) or (t, opts): opts {dim =, keepdim =}
 * and for var also {correction =, unbiased =} */
static void parse_dims(lua_State *L, const dl_tensor *t, int var, dims_spec *r) {
  r->mask = 0;
  r->keep = 0;
  r->single = -1;
  r->correction = 1;
  int next = 2;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    r->single = lt_checkdim(L, 2, t->ndim, 0);
    if (t->ndim) r->mask = 1u << r->single;
    next = 3;
  } else if (lua_type(L, 2) == LUA_TTABLE && lua_rawlen(L, 2) > 0) {
    int n = lt_snapshot(L, 2, 2, DL_MAXDIM);
    for (int k = 1; k <= n; k++) {
      lua_rawgeti(L, -1, k);
      if (!lua_isinteger(L, -1))
        lt_argerror(L, 2, "dimension %d is a %s, expected an integer", k,
                    lua_type(L, -1) == LUA_TNUMBER ? "non-integer number" : lt_typename(L, -1));
      int d = lt_dim(L, 2, (int64_t)lua_tointeger(L, -1), t->ndim, 0);
      lua_pop(L, 1);
      if (r->mask >> d & 1) lt_argerror(L, 2, "dimension %d repeated", d + 1);
      r->mask |= 1u << d;
    }
    lua_pop(L, 1);
    if (n == 1) r->single = __builtin_ctz(r->mask);
    next = 3;
  } else if (lua_isnil(L, 2)) {
    next = 3;
  } else if (!lua_isnone(L, 2) && (lua_type(L, 2) != LUA_TTABLE || lt_test(L, 2))) {
    luaL_typeerror(L, 2, "integer, list of integers or options table");
  }
  if (next == 3 && lua_isboolean(L, 3)) {
    r->keep = lua_toboolean(L, 3);
    lt_checkargs(L, 3);
    return;
  }
  lt_opts o;
  lt_options(L, next, var ? var_keys : reduce_keys, &o);
  lt_checkargs(L, next);
  if (lt_opt_push(L, &o, "dim") != LUA_TNIL) {
    if (next == 3) lt_opt_error(L, &o, "dim", "the dimension is already argument #2");
    int64_t d = lt_opt_integer(L, &o, "dim", 0);
    r->single = lt_dim(L, o.arg, d, t->ndim, 0);
    if (t->ndim) r->mask = 1u << r->single;
  }
  lua_pop(L, 1);
  r->keep = lt_opt_boolean(L, &o, "keepdim", 0);
  if (var) {
    int64_t c = lt_opt_integer(L, &o, "correction", 1);
    if (c < 0 || c > 1 << 30) lt_opt_error(L, &o, "correction", "must be between 0 and 2^30, got %I", (lua_Integer)c);
    int has_unbiased = lt_opt_push(L, &o, "unbiased") != LUA_TNIL;
    int has_correction = lt_opt_push(L, &o, "correction") != LUA_TNIL;
    lua_pop(L, 2);
    if (has_unbiased && has_correction)
      lt_opt_error(L, &o, "unbiased", "give correction or unbiased, not both (unbiased = true is correction = 1)");
    r->correction = lt_opt_boolean(L, &o, "unbiased", (int)c);
  }
}

static int reduce(lua_State *L, dl_redop op) {
  dl_tensor *a = lt_check(L, 1);
  dims_spec r;
  parse_dims(L, a, op == DL_RVAR, &r);
  lt_newbox(L);
  return lt_finish(L, dl_reduce(lt_ctx(L), op, a, a->ndim ? r.mask : 0, r.keep, r.correction, NULL));
}

static int l_sum(lua_State *L) { return reduce(L, DL_RSUM); }

static const char *const attention_keys[] = {"causal", "mask", "scale", NULL};

/* q:scaled_dot_product_attention(k, v [, {causal = false, mask = nil, scale = 1/sqrt(D)}]) */
static int l_scaled_dot_product_attention(lua_State *L) {
  dl_tensor *q = lt_check(L, 1), *k = lt_check(L, 2), *v = lt_check(L, 3);
  lt_opts o;
  lt_options(L, 4, attention_keys, &o);
  lt_checkargs(L, 4);
  int causal = lt_opt_boolean(L, &o, "causal", 0);
  dl_tensor *mask = lt_opt_tensor(L, &o, "mask");
  double scale = lt_opt_number(L, &o, "scale", NAN);
  if (lt_opt_push(L, &o, "scale") != LUA_TNIL && !(isfinite(scale) && scale > 0))
    lt_opt_error(L, &o, "scale", "a positive finite number expected, got %f", scale);
  lua_pop(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_attention(lt_ctx(L), q, k, v, mask, causal, scale));
}
static int l_mean(lua_State *L) { return reduce(L, DL_RMEAN); }
static int l_var(lua_State *L) { return reduce(L, DL_RVAR); }
static int l_logsumexp(lua_State *L) { return reduce(L, DL_RLOGSUMEXP); }

/* 0-based int64 indices -> 1-based, in place (idx is fresh) */
static void shift_indices(dl_tensor *idx, int64_t by) {
  int64_t n = dl_numel(idx);
  int64_t *p = dl_data(idx);
  for (int64_t i = 0; i < n; i++) p[i] += by;
}

/* max()/min(): the value; max(dim [, keepdim]): values and 1-based indices;
 * max(other): the elementwise maximum */
static int maxmin(lua_State *L, int min) {
  dl_tensor *a = lt_check(L, 1);
  if (lt_test(L, 2)) return binary(L, min ? DL_MINIMUM : DL_MAXIMUM);
  dims_spec r;
  parse_dims(L, a, 0, &r);
  dl_ctx *ctx = lt_ctx(L);
  if (r.single < 0 || a->ndim == 0) {
    if (dl_numel(a) == 0) return lt_argerror(L, 1, "cannot reduce an empty tensor");
    lt_newbox(L);
    return lt_finish(L, dl_reduce(ctx, min ? DL_RMIN : DL_RMAX, a, a->ndim ? r.mask : 0, r.keep, 0, NULL));
  }
  if (a->shape[r.single] == 0) return lt_argerror(L, 2, "cannot reduce over a dimension of size 0");
  lt_newbox(L);
  lt_newbox(L);
  dl_tensor *idx = NULL;
  dl_tensor *v = dl_reduce(ctx, min ? DL_RMIN : DL_RMAX, a, r.mask, r.keep, 0, &idx);
  if (!v) return lt_raise(L);
  shift_indices(idx, 1);
  ((tensor_box *)lua_touserdata(L, -2))->t = v;
  ((tensor_box *)lua_touserdata(L, -1))->t = idx;
  return 2;
}

static int l_max(lua_State *L) { return maxmin(L, 0); }
static int l_min(lua_State *L) { return maxmin(L, 1); }

static int argmaxmin(lua_State *L, int min) {
  dl_tensor *a = lt_check(L, 1);
  dims_spec r;
  parse_dims(L, a, 0, &r);
  if (dl_numel(a) == 0) return lt_argerror(L, 1, "cannot reduce an empty tensor");
  if (r.single >= 0 && a->ndim && a->shape[r.single] == 0)
    return lt_argerror(L, 2, "cannot reduce over a dimension of size 0");
  lt_newbox(L);
  dl_tensor *res = dl_argmax(lt_ctx(L), a, a->ndim ? r.single : -1, r.keep, min);
  if (res) shift_indices(res, 1);
  return lt_finish(L, res);
}

static int l_argmax(lua_State *L) { return argmaxmin(L, 0); }
static int l_argmin(lua_State *L) { return argmaxmin(L, 1); }

static int softmax(lua_State *L, int log_) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 2);
  if (a->ndim == 0) return lt_argerror(L, 1, "expected at least a 1-d tensor");
  int d = lua_isnoneornil(L, 2) ? a->ndim - 1 : lt_checkdim(L, 2, a->ndim, 0);
  lt_newbox(L);
  return lt_finish(L, dl_softmax(lt_ctx(L), a, d, log_));
}

static int l_softmax(lua_State *L) { return softmax(L, 0); }
static int l_log_softmax(lua_State *L) { return softmax(L, 1); }

static int l_matmul(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 2);
  dl_tensor *b = lt_coerce(L, 2, a->dtype);
  lt_newbox(L);
  return lt_finish(L, dl_matmul(lt_ctx(L), a, b));
}

/* linear(x, w [, b]): x w^T + b, the Linear layer's op */
static int l_linear(lua_State *L) {
  dl_tensor *x = lt_check(L, 1);
  dl_tensor *w = lt_check(L, 2);
  dl_tensor *b = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3);
  lt_checkargs(L, 3);
  lt_newbox(L);
  return lt_finish(L, dl_linear(lt_ctx(L), x, w, b));
}

/* ------------------------------------------------------------ views */

/* reshape(t, sizes...), view(...), expand(...): sizes as varargs or one list */
static int shape_op(lua_State *L, int kind) {
  dl_tensor *a = lt_check(L, 1);
  int64_t shape[DL_MAXDIM];
  int next;
  int nd = lt_checkshape(L, 2, shape, &next, 1);
  if (next == 2 || (!lua_isnoneornil(L, next) && lua_type(L, 2) != LUA_TTABLE)) luaL_typeerror(L, next, "integer");
  lt_checkargs(L, next - 1);
  lt_newbox(L);
  dl_ctx *ctx = lt_ctx(L);
  dl_tensor *r = kind == 0 ? dl_reshape(ctx, a, nd, shape)
               : kind == 1 ? dl_view(ctx, a, nd, shape)
                           : dl_expand(ctx, a, nd, shape);
  return lt_finish(L, r);
}

static int l_reshape(lua_State *L) { return shape_op(L, 0); }
static int l_view(lua_State *L) { return shape_op(L, 1); }
static int l_expand(lua_State *L) { return shape_op(L, 2); }

static int l_flatten(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 3);
  if (a->ndim == 0) {
    int64_t one = 1;
    lt_newbox(L);
    return lt_finish(L, dl_reshape(lt_ctx(L), a, 1, &one));
  }
  int s = lua_isnoneornil(L, 2) ? 0 : lt_checkdim(L, 2, a->ndim, 0);
  int e = lua_isnoneornil(L, 3) ? a->ndim - 1 : lt_checkdim(L, 3, a->ndim, 0);
  if (e < s) return lt_argerror(L, 3, "end dimension %d is before start %d", e + 1, s + 1);
  int64_t sh[DL_MAXDIM];
  int k = 0;
  for (int d = 0; d < s; d++) sh[k++] = a->shape[d];
  int64_t m = 1;                               /* a product of an existing tensor's sizes */
  for (int d = s; d <= e; d++) m *= a->shape[d];
  sh[k++] = m;
  for (int d = e + 1; d < a->ndim; d++) sh[k++] = a->shape[d];
  lt_newbox(L);
  return lt_finish(L, dl_reshape(lt_ctx(L), a, k, sh));
}

static int l_transpose(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 3);
  if (a->ndim < 2 && lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    return 1;
  }
  int d0 = lua_isnoneornil(L, 2) ? a->ndim - 2 : lt_checkdim(L, 2, a->ndim, 0);
  int d1 = lua_isnoneornil(L, 3) ? a->ndim - 1 : lt_checkdim(L, 3, a->ndim, 0);
  lt_newbox(L);
  return lt_finish(L, dl_transpose(lt_ctx(L), a, d0, d1));
}

/* permute(t, d1, d2, ...) or permute(t, {d1, d2, ...}) */
static int l_permute(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int perm[DL_MAXDIM], n = 0;
  if (lua_type(L, 2) == LUA_TTABLE) {
    lt_checkargs(L, 2);
    int len = lt_snapshot(L, 2, 2, DL_MAXDIM);
    if (len != a->ndim) return lt_argerror(L, 2, "%d dimensions given for a %d-d tensor", len, a->ndim);
    for (int k = 1; k <= len; k++) {
      lua_rawgeti(L, -1, k);
      if (!lua_isinteger(L, -1)) lt_argerror(L, 2, "dimension %d is a %s, expected an integer", k, lt_typename(L, -1));
      perm[n++] = lt_dim(L, 2, (int64_t)lua_tointeger(L, -1), a->ndim, 0);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  } else {
    lt_checkargs(L, a->ndim + 1);
    int top = lua_gettop(L);
    if (top - 1 != a->ndim) return lt_argerror(L, top + 1, "%d dimensions given for a %d-d tensor", top - 1, a->ndim);
    for (int k = 2; k <= top; k++) perm[n++] = lt_checkdim(L, k, a->ndim, 0);
  }
  lt_newbox(L);
  return lt_finish(L, dl_permute(lt_ctx(L), a, perm));
}

/* the dimension (argument 2, 0-based) that t:narrow and t:select walk; a 0-d a cannot <verb> */
static int walked_dim(lua_State *L, const dl_tensor *a, const char *verb) {
  if (a->ndim == 0) lt_argerror(L, 1, "cannot %s a 0-d tensor", verb);
  return lt_checkdim(L, 2, a->ndim, 0);
}

static int l_narrow(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 4);
  int d = walked_dim(L, a, "narrow");
  int64_t start = lt_checkinteger(L, 3, "start");
  int64_t len = lt_checkinteger(L, 4, "length");
  int64_t s0 = start < 0 ? a->shape[d] + start : start - 1;
  if (start == 0 || s0 < 0 || s0 > a->shape[d] || len < 0 || len > a->shape[d] - s0)
    return lt_argerror(L, 3, "start %I and length %I out of range for dimension %d of size %I",
                       (lua_Integer)start, (lua_Integer)len, d + 1, (lua_Integer)a->shape[d]);
  lt_newbox(L);
  return lt_finish(L, dl_narrow(lt_ctx(L), a, d, s0, len));
}

static int l_select(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 3);
  int d = walked_dim(L, a, "select from");
  int64_t i = lt_checkinteger(L, 3, "index");
  int64_t r = i < 0 ? a->shape[d] + i : i - 1;
  if (i == 0 || r < 0 || r >= a->shape[d])
    return lt_argerror(L, 3, "index %I out of range for dimension %d of size %I", (lua_Integer)i, d + 1,
                       (lua_Integer)a->shape[d]);
  lt_newbox(L);
  return lt_finish(L, dl_select(lt_ctx(L), a, d, r));
}

static int l_squeeze(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 2);
  int d = lua_isnoneornil(L, 2) || a->ndim == 0 ? -1 : lt_checkdim(L, 2, a->ndim, 0);
  lt_newbox(L);
  return lt_finish(L, dl_squeeze(lt_ctx(L), a, d));
}

static int l_unsqueeze(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 2);
  int d = lt_checkdim(L, 2, a->ndim, 1);
  lt_newbox(L);
  return lt_finish(L, dl_unsqueeze(lt_ctx(L), a, d));
}

static int l_contiguous(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 1);
  if (dl_is_contiguous(a)) {
    lua_settop(L, 1);
    return 1;
  }
  lt_newbox(L);
  return lt_finish(L, dl_contiguous(lt_ctx(L), a));
}

static int l_clone(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_clone(lt_ctx(L), a));
}

/* ------------------------------------------------------------ indexing */

/* a 1-based index tensor (or table) at arg as a new 0-based int64 tensor, boxed on the stack */
static dl_tensor *index_arg(lua_State *L, int arg) {
  dl_tensor *idx = lt_test(L, arg);
  if (!idx) {
    if (lua_type(L, arg) != LUA_TTABLE) luaL_typeerror(L, arg, "integer tensor or table");
    idx = lt_coerce_into(L, arg, DL_I64);
  }
  lt_newbox(L);
  dl_tensor *r = dl_tensor_new_empty(lt_ctx(L), DL_I64, idx->ndim, idx->shape);
  lt_finish(L, r);                             /* boxed before anything can raise */
  int64_t n = dl_numel(idx);
  int64_t *p = r->st->data;
  for (int64_t k = 0; k < n; k++) {
    double v = dl_get_flat(idx, k);
    if (v != floor(v) && !isinf(v)) lt_argerror(L, arg, "index %f is not an integer", v);
    if (!(v >= 1 && v <= 9.0e15))              /* also catches NaN; keeps the cast defined */
      lt_argerror(L, arg, "index %f out of range (indices are 1-based)", v);
    p[k] = (int64_t)v - 1;
  }
  return r;
}

/* t:gather(dim, index) and t:index_select(dim, index) through fn */
static int select_by_index(lua_State *L, dl_tensor *(*fn)(dl_ctx *, dl_tensor *, int, dl_tensor *)) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 3);
  int d = lt_checkdim(L, 2, a->ndim, 0);
  dl_tensor *idx = index_arg(L, 3);
  lt_newbox(L);
  return lt_finish(L, fn(lt_ctx(L), a, d, idx));
}

static int l_gather(lua_State *L) { return select_by_index(L, dl_gather); }
static int l_index_select(lua_State *L) { return select_by_index(L, dl_index_select); }

static int l_scatter_add(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_checkargs(L, 4);
  int d = lt_checkdim(L, 2, a->ndim, 0);
  dl_tensor *idx = index_arg(L, 3);
  dl_tensor *src = lt_coerce_into(L, 4, a->dtype);
  lt_newbox(L);
  return lt_finish(L, dl_scatter_add(lt_ctx(L), a, d, idx, src));
}

static int l_one_hot(lua_State *L) {
  lt_checkargs(L, 2);
  int64_t classes = lt_checkinteger(L, 2, "classes");
  if (classes < 1) return lt_argerror(L, 2, "classes must be positive, got %I", (lua_Integer)classes);
  dl_tensor *idx = index_arg(L, 1);
  int64_t n = dl_numel(idx);
  const int64_t *p = dl_data(idx);
  for (int64_t k = 0; k < n; k++)
    if (p[k] >= classes)
      return lt_argerror(L, 1, "label %I out of range for %I classes", (lua_Integer)p[k] + 1, (lua_Integer)classes);
  lt_newbox(L);
  return lt_finish(L, dl_one_hot(lt_ctx(L), idx, classes));
}

/* cat({t1, t2, ...} [, dim]) and stack(...) */
static int cat_stack(lua_State *L, int stack) {
  lt_checkargs(L, 2);
  lua_settop(L, 2);
  int n = 0;
  dl_tensor **ts = lt_check_tensor_list(L, 1, 100000, &n);   /* its snapshot anchors the tensors */
  if (n < 1) return lt_argerror(L, 1, "expected a non-empty list of tensors");
  int d = lua_isnil(L, 2) ? 0 : lt_checkdim(L, 2, ts[0]->ndim, stack ? 1 : 0);
  if (!stack && ts[0]->ndim == 0) return lt_argerror(L, 1, "cannot concatenate 0-d tensors (use stack)");
  lt_newbox(L);
  return lt_finish(L, stack ? dl_stack(lt_ctx(L), n, ts, d) : dl_cat(lt_ctx(L), n, ts, d));
}

static int l_cat(lua_State *L) { return cat_stack(L, 0); }
static int l_stack(lua_State *L) { return cat_stack(L, 1); }

/* ------------------------------------------------------------ metamethods */

/* Lua calls __unm and __len with the operand twice: no arity check here */
static int m_unm(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_unary(lt_ctx(L), DL_NEG, a));
}

static int m_len(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lua_pushinteger(L, t->ndim ? t->shape[0] : 0);
  return 1;
}

static const luaL_Reg op_funcs[] = {
  {"abs", l_abs},
  {"acos", l_acos},
  {"acosh", l_acosh},
  {"add", l_add},
  {"add_", l_add_},
  {"argmax", l_argmax},
  {"argmin", l_argmin},
  {"asin", l_asin},
  {"asinh", l_asinh},
  {"atan", l_atan},
  {"atanh", l_atanh},
  {"byte", l_byte},
  {"cat", l_cat},
  {"ceil", l_ceil},
  {"clamp", l_clamp},
  {"clone", l_clone},
  {"contiguous", l_contiguous},
  {"copy_", l_copy_},
  {"cos", l_cos},
  {"cosh", l_cosh},
  {"div", l_div},
  {"double", l_double},
  {"eq", l_eq},
  {"erf", l_erf},
  {"erfc", l_erfc},
  {"erfinv", l_erfinv},
  {"exp", l_exp},
  {"exp2", l_exp2},
  {"expand", l_expand},
  {"expm1", l_expm1},
  {"fill_", l_fill_},
  {"flatten", l_flatten},
  {"float", l_float},
  {"floor", l_floor_op},
  {"gather", l_gather},
  {"ge", l_ge},
  {"gelu", l_gelu},
  {"gt", l_gt},
  {"index_select", l_index_select},
  {"int", l_int},
  {"le", l_le},
  {"linear", l_linear},
  {"log", l_log},
  {"log10", l_log10},
  {"log1p", l_log1p},
  {"log2", l_log2},
  {"log_sigmoid", l_log_sigmoid},
  {"log_softmax", l_log_softmax},
  {"logsumexp", l_logsumexp},
  {"long", l_long},
  {"lt", l_lt},
  {"matmul", l_matmul},
  {"max", l_max},
  {"maximum", l_maximum},
  {"mean", l_mean},
  {"min", l_min},
  {"minimum", l_minimum},
  {"mish", l_mish},
  {"mul", l_mul},
  {"narrow", l_narrow},
  {"ne", l_ne},
  {"neg", l_neg},
  {"one_hot", l_one_hot},
  {"permute", l_permute},
  {"pow", l_pow},
  {"relu", l_relu},
  {"reshape", l_reshape},
  {"round", l_round},
  {"rsqrt", l_rsqrt},
  {"scale", l_scale},
  {"scaled_dot_product_attention", l_scaled_dot_product_attention},
  {"scatter_add", l_scatter_add},
  {"select", l_select},
  {"sigmoid", l_sigmoid},
  {"sign", l_sign},
  {"silu", l_silu},
  {"sin", l_sin},
  {"sinh", l_sinh},
  {"softmax", l_softmax},
  {"softplus", l_softplus},
  {"sqrt", l_sqrt},
  {"square", l_square},
  {"squeeze", l_squeeze},
  {"stack", l_stack},
  {"sub", l_sub},
  {"sum", l_sum},
  {"tan", l_tan},
  {"tanh", l_tanh},
  {"to", l_to},
  {"transpose", l_transpose},
  {"trunc", l_trunc},
  {"unsqueeze", l_unsqueeze},
  {"var", l_var},
  {"view", l_view},
  {"where", l_where},
  {"zero_", l_zero_},
  {NULL, NULL}
};

/* one luaL_Reg row per binding: rows and registration alike by design (lua_aux.h) */
static const luaL_Reg meta_funcs[] = {
  {"__add", l_add},
  {"__div", l_div},
  {"__len", m_len},
  {"__mul", l_mul},
  {"__pow", l_pow},
  {"__sub", l_sub},
  {"__unm", m_unm},
  {NULL, NULL}
};

void lt_register_ops(lua_State *L, int mod, int cidx) {
  lt_setfuncs(L, mod, cidx, op_funcs);
  luaL_getmetatable(L, "dlua.Tensor");
  lt_setfuncs(L, lua_gettop(L), cidx, meta_funcs);
  lua_pop(L, 1);
}
