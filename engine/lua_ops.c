/* lua_ops.c -- Lua bindings of the tensor ops: arithmetic, reductions, views, indexing.
 *
 * Each function checks its arguments (1-based dims, shapes, dtypes) and
 * calls one core op; index tensors cross the boundary 1-based and are
 * shifted here, once. Results are boxed before the op runs so no C memory
 * is stranded if Lua raises.
 */
/* See LICENSE */
#include "lua_tensor.h"
#include "conv.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

static int is_opts(lua_State *L, int i) { return lua_istable(L, i) && !lt_test(L, i); }

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
  dl_tensor *a = lt_test(L, 1), *b = lt_test(L, 2);
  if (!a) a = lt_coerce(L, 1, number_dtype(L, 1, other_dtype(L, 2)));
  if (!b) b = lt_coerce(L, 2, number_dtype(L, 2, a->dtype));
  if (!a->st || !b->st) return luaL_error(L, "%s: tensor has been released", dl_binop_name(op));
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

static int l_clamp(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  double lo = luaL_optnumber(L, 2, -HUGE_VAL), hi = luaL_optnumber(L, 3, HUGE_VAL);
  lt_newbox(L);
  return lt_finish(L, dl_clamp(lt_ctx(L), a, lo, hi));
}

static int l_scale(lua_State *L) {         /* t:scale(s [, shift]) = t * s + shift */
  dl_tensor *a = lt_check(L, 1);
  double s = luaL_checknumber(L, 2), b = luaL_optnumber(L, 3, 0);
  lt_newbox(L);
  return lt_finish(L, dl_scale_shift(lt_ctx(L), a, s, b));
}

static int l_where(lua_State *L) {
  dl_tensor *c = lt_coerce(L, 1, DL_U8);
  dl_tensor *a = lt_test(L, 2), *b = lt_test(L, 3);
  if (!a) a = lt_coerce(L, 2, other_dtype(L, 3));
  if (!b) b = lt_coerce(L, 3, a->dtype);
  lt_newbox(L);
  return lt_finish(L, dl_where(lt_ctx(L), c, a, b));
}

static int to_dtype(lua_State *L, dl_dtype d) {
  dl_tensor *a = lt_check(L, 1);
  if (a->dtype == d) { lua_settop(L, 1); return 1; }
  lt_newbox(L);
  return lt_finish(L, dl_cast(lt_ctx(L), a, d));
}

static int l_to(lua_State *L) {
  const char *name = luaL_checkstring(L, 2);
  int d = dl_dtype_from_name(name);
  if (d < 0) return luaL_error(L, "to: unknown dtype '%s' (valid: float32, float64, int32, int64, uint8)", name);
  return to_dtype(L, (dl_dtype)d);
}

static int l_float(lua_State *L) { return to_dtype(L, DL_F32); }
static int l_double(lua_State *L) { return to_dtype(L, DL_F64); }
static int l_int(lua_State *L) { return to_dtype(L, DL_I32); }
static int l_long(lua_State *L) { return to_dtype(L, DL_I64); }
static int l_byte(lua_State *L) { return to_dtype(L, DL_U8); }

/* ------------------------------------------------------------ in place */

static void check_inplace(lua_State *L, dl_tensor *t, const char *fn) {
  if (t->requires_grad && lt_ctx(L)->grad_enabled)
    luaL_error(L, "%s: in-place change of a tensor that requires grad (wrap it in dl.no_grad)", fn);
}

static int l_fill_(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  check_inplace(L, t, "fill_");
  dl_fill_inplace(lt_ctx(L), t, luaL_checknumber(L, 2));
  lua_settop(L, 1);
  return 1;
}

static int l_zero_(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  check_inplace(L, t, "zero_");
  dl_fill_inplace(lt_ctx(L), t, 0);
  lua_settop(L, 1);
  return 1;
}

static int l_copy_(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  check_inplace(L, t, "copy_");
  dl_tensor *s = lt_coerce(L, 2, t->dtype);
  dl_ctx *ctx = lt_ctx(L);
  if (dl_numel(s) != dl_numel(t) || s->ndim != t->ndim ||
      memcmp(s->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim)) {
    dl_tensor *e = dl_expand(ctx, s, t->ndim, t->shape);
    if (!e) {
      char a[128], b[128];
      dl_shape_str(t->shape, t->ndim, a, sizeof a);
      dl_shape_str(s->shape, s->ndim, b, sizeof b);
      return luaL_error(L, "copy_: source shape %s cannot be broadcast to %s", b, a);
    }
    int rc = dl_copy_into(ctx, t, e);
    dl_tensor_release(e);
    if (rc < 0) return lt_raise(L);
  } else if (dl_copy_into(ctx, t, s) < 0) {
    return lt_raise(L);
  }
  lua_settop(L, 1);
  return 1;
}

static int l_add_(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  check_inplace(L, t, "add_");
  dl_tensor *s = lt_coerce(L, 2, t->dtype);
  double alpha = luaL_optnumber(L, 3, 1);
  if (dl_axpy_inplace(lt_ctx(L), t, alpha, s) < 0) return lt_raise(L);
  lua_settop(L, 1);
  return 1;
}

/* ------------------------------------------------------------ reductions */

/* parses (dim | {dims} | nil, keepdim | {keepdim=}) at i; returns mask (0 = all) */
static unsigned parse_dims(lua_State *L, int i, dl_tensor *t, const char *fn, int *keepdim, int *single) {
  unsigned mask = 0;
  *keepdim = 0;
  *single = -1;
  if (lua_type(L, i) == LUA_TNUMBER) {
    int d = lt_checkdim(L, i, t->ndim, fn, 0);
    if (t->ndim) mask = 1u << d;
    *single = d;
  } else if (lua_istable(L, i) && !lt_test(L, i)) {
    lua_Integer n = luaL_len(L, i);
    if (n == 0) {                             /* {dim = d, keepdim = true, ...} */
      lua_getfield(L, i, "keepdim");
      int kd = lua_toboolean(L, -1);
      lua_pop(L, 1);
      lua_getfield(L, i, "dim");
      if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        *keepdim = kd;
        return 0;
      }
      int d = lt_checkdim(L, lua_gettop(L), t->ndim, fn, 0);
      lua_pop(L, 1);
      *keepdim = kd;
      *single = d;
      return t->ndim ? 1u << d : 0;
    }
    for (lua_Integer k = 1; k <= n; k++) {
      lua_geti(L, i, k);
      int d = lt_checkdim(L, lua_gettop(L), t->ndim, fn, 0);
      lua_pop(L, 1);
      if (mask >> d & 1) luaL_error(L, "%s: dimension %d repeated", fn, d + 1);
      mask |= 1u << d;
    }
    if (n == 1) *single = __builtin_ctz(mask);
  } else if (!lua_isnoneornil(L, i)) {
    luaL_error(L, "%s: dimension must be an integer or a list of integers (argument %d), got %s", fn, i,
               luaL_typename(L, i));
  }
  if (lua_isboolean(L, i + 1)) *keepdim = lua_toboolean(L, i + 1);
  else if (is_opts(L, i + 1)) {
    lua_getfield(L, i + 1, "keepdim");
    *keepdim = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  return mask;
}

static int reduce(lua_State *L, dl_redop op, const char *fn) {
  dl_tensor *a = lt_check(L, 1);
  int keep, single;
  unsigned mask = parse_dims(L, 2, a, fn, &keep, &single);
  int correction = 1;
  if (op == DL_RVAR) {
    int o = is_opts(L, 3) ? 3 : is_opts(L, 2) ? 2 : 0;
    if (o) {
      lua_getfield(L, o, "correction");
      correction = (int)luaL_optinteger(L, -1, 1);
      lua_getfield(L, o, "unbiased");
      if (lua_isboolean(L, -1)) correction = lua_toboolean(L, -1);
      lua_pop(L, 2);
    }
  }
  if (a->ndim == 0) mask = 0;
  lt_newbox(L);
  return lt_finish(L, dl_reduce(lt_ctx(L), op, a, mask, keep, correction, NULL));
}

static int l_sum(lua_State *L) { return reduce(L, DL_RSUM, "sum"); }
static int l_mean(lua_State *L) { return reduce(L, DL_RMEAN, "mean"); }
static int l_var(lua_State *L) { return reduce(L, DL_RVAR, "var"); }
static int l_logsumexp(lua_State *L) { return reduce(L, DL_RLOGSUMEXP, "logsumexp"); }

/* 0-based int64 indices -> 1-based, in place (idx is fresh) */
static void shift_indices(dl_tensor *idx, int64_t by) {
  int64_t n = dl_numel(idx);
  int64_t *p = dl_data(idx);
  for (int64_t i = 0; i < n; i++) p[i] += by;
}

/* max()/min(): the value; max(dim [, keepdim]): values and 1-based indices */
static int maxmin(lua_State *L, int min) {
  const char *fn = min ? "min" : "max";
  dl_tensor *a = lt_check(L, 1);
  if (lt_test(L, 2)) return binary(L, min ? DL_MINIMUM : DL_MAXIMUM);
  int keep, single;
  unsigned mask = parse_dims(L, 2, a, fn, &keep, &single);
  dl_ctx *ctx = lt_ctx(L);
  if (single < 0 || a->ndim == 0) {
    if (dl_numel(a) == 0) return luaL_error(L, "%s: cannot reduce an empty tensor", fn);
    lt_newbox(L);
    return lt_finish(L, dl_reduce(ctx, min ? DL_RMIN : DL_RMAX, a, a->ndim ? mask : 0, keep, 0, NULL));
  }
  if (a->shape[single] == 0) return luaL_error(L, "%s: cannot reduce over a dimension of size 0", fn);
  lt_newbox(L);
  lt_newbox(L);
  dl_tensor *idx = NULL;
  dl_tensor *v = dl_reduce(ctx, min ? DL_RMIN : DL_RMAX, a, mask, keep, 0, &idx);
  if (!v) return lt_raise(L);
  shift_indices(idx, 1);
  ((tensor_box *)lua_touserdata(L, -2))->t = v;
  ((tensor_box *)lua_touserdata(L, -1))->t = idx;
  return 2;
}

static int l_max(lua_State *L) { return maxmin(L, 0); }
static int l_min(lua_State *L) { return maxmin(L, 1); }

static int argmaxmin(lua_State *L, int min) {
  const char *fn = min ? "argmin" : "argmax";
  dl_tensor *a = lt_check(L, 1);
  int keep, single;
  parse_dims(L, 2, a, fn, &keep, &single);
  if (dl_numel(a) == 0) return luaL_error(L, "%s: cannot reduce an empty tensor", fn);
  if (single >= 0 && a->ndim && a->shape[single] == 0)
    return luaL_error(L, "%s: cannot reduce over a dimension of size 0", fn);
  lt_newbox(L);
  dl_tensor *r = dl_argmax(lt_ctx(L), a, a->ndim ? single : -1, keep, min);
  if (r) shift_indices(r, 1);
  return lt_finish(L, r);
}

static int l_argmax(lua_State *L) { return argmaxmin(L, 0); }
static int l_argmin(lua_State *L) { return argmaxmin(L, 1); }

static int softmax(lua_State *L, int log_) {
  dl_tensor *a = lt_check(L, 1);
  const char *fn = log_ ? "log_softmax" : "softmax";
  if (a->ndim == 0) return luaL_error(L, "%s: expected at least a 1-d tensor", fn);
  int d = lua_isnoneornil(L, 2) ? a->ndim - 1 : lt_checkdim(L, 2, a->ndim, fn, 0);
  lt_newbox(L);
  return lt_finish(L, dl_softmax(lt_ctx(L), a, d, log_));
}

static int l_softmax(lua_State *L) { return softmax(L, 0); }
static int l_log_softmax(lua_State *L) { return softmax(L, 1); }

static int l_matmul(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  dl_tensor *b = lt_coerce(L, 2, a->dtype);
  lt_newbox(L);
  return lt_finish(L, dl_matmul(lt_ctx(L), a, b));
}

/* linear(x, w [, b]): x w^T + b, the Linear layer's op */
static int l_linear(lua_State *L) {
  dl_tensor *x = lt_check(L, 1);
  dl_tensor *w = lt_check(L, 2);
  dl_tensor *b = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3);
  lt_newbox(L);
  return lt_finish(L, dl_linear(lt_ctx(L), x, w, b));
}

/* ------------------------------------------------------------ views */

static int l_reshape(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int64_t shape[DL_MAXDIM];
  int nd = lt_checkshape(L, 2, "reshape", shape);
  lt_newbox(L);
  return lt_finish(L, dl_reshape(lt_ctx(L), a, nd, shape));
}

static int l_view(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int64_t shape[DL_MAXDIM];
  int nd = lt_checkshape(L, 2, "view", shape);
  lt_newbox(L);
  return lt_finish(L, dl_view(lt_ctx(L), a, nd, shape));
}

static int l_flatten(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  if (a->ndim == 0) {
    int64_t one = 1;
    lt_newbox(L);
    return lt_finish(L, dl_reshape(lt_ctx(L), a, 1, &one));
  }
  int s = lua_isnoneornil(L, 2) ? 0 : lt_checkdim(L, 2, a->ndim, "flatten", 0);
  int e = lua_isnoneornil(L, 3) ? a->ndim - 1 : lt_checkdim(L, 3, a->ndim, "flatten", 0);
  if (e < s) return luaL_error(L, "flatten: end dimension %d is before start %d", e + 1, s + 1);
  int64_t sh[DL_MAXDIM];
  int k = 0;
  for (int d = 0; d < s; d++) sh[k++] = a->shape[d];
  int64_t m = 1;
  for (int d = s; d <= e; d++) m *= a->shape[d];
  sh[k++] = m;
  for (int d = e + 1; d < a->ndim; d++) sh[k++] = a->shape[d];
  lt_newbox(L);
  return lt_finish(L, dl_reshape(lt_ctx(L), a, k, sh));
}

static int l_transpose(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  if (a->ndim < 2 && lua_isnoneornil(L, 2)) { lua_settop(L, 1); return 1; }
  int d0 = lua_isnoneornil(L, 2) ? a->ndim - 2 : lt_checkdim(L, 2, a->ndim, "transpose", 0);
  int d1 = lua_isnoneornil(L, 3) ? a->ndim - 1 : lt_checkdim(L, 3, a->ndim, "transpose", 0);
  lt_newbox(L);
  return lt_finish(L, dl_transpose(lt_ctx(L), a, d0, d1));
}

static int l_permute(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int perm[DL_MAXDIM], n = 0;
  if (lua_istable(L, 2)) {
    lua_Integer len = luaL_len(L, 2);
    if (len != a->ndim) return luaL_error(L, "permute: %d dimensions given for a %d-d tensor", (int)len, a->ndim);
    for (lua_Integer k = 1; k <= len; k++) {
      lua_geti(L, 2, k);
      perm[n++] = lt_checkdim(L, lua_gettop(L), a->ndim, "permute", 0);
      lua_pop(L, 1);
    }
  } else {
    int top = lua_gettop(L);
    if (top - 1 != a->ndim) return luaL_error(L, "permute: %d dimensions given for a %d-d tensor", top - 1, a->ndim);
    for (int k = 2; k <= top; k++) perm[n++] = lt_checkdim(L, k, a->ndim, "permute", 0);
  }
  lt_newbox(L);
  return lt_finish(L, dl_permute(lt_ctx(L), a, perm));
}

static int l_narrow(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  if (a->ndim == 0) return luaL_error(L, "narrow: cannot narrow a 0-d tensor");
  int d = lt_checkdim(L, 2, a->ndim, "narrow", 0);
  int64_t start = lt_checkint(L, 3, "narrow", "start");
  int64_t len = lt_checkint(L, 4, "narrow", "length");
  int64_t s0 = start < 0 ? a->shape[d] + start : start - 1;
  if (start == 0 || s0 < 0 || len < 0 || s0 > a->shape[d] || len > a->shape[d] - s0)
    return luaL_error(L, "narrow: start %I and length %I out of range for dimension %d of size %I",
                      (lua_Integer)start, (lua_Integer)len, d + 1, (lua_Integer)a->shape[d]);
  lt_newbox(L);
  return lt_finish(L, dl_narrow(lt_ctx(L), a, d, s0, len));
}

static int l_select(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  if (a->ndim == 0) return luaL_error(L, "select: cannot select from a 0-d tensor");
  int d = lt_checkdim(L, 2, a->ndim, "select", 0);
  int64_t i = lt_checkint(L, 3, "select", "index");
  int64_t r = i < 0 ? a->shape[d] + i : i - 1;
  if (i == 0 || r < 0 || r >= a->shape[d])
    return luaL_error(L, "select: index %d out of range for dimension %d of size %d", (int)i, d + 1, (int)a->shape[d]);
  lt_newbox(L);
  return lt_finish(L, dl_select(lt_ctx(L), a, d, r));
}

static int l_expand(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int64_t shape[DL_MAXDIM];
  int nd = lt_checkshape(L, 2, "expand", shape);
  lt_newbox(L);
  return lt_finish(L, dl_expand(lt_ctx(L), a, nd, shape));
}

static int l_squeeze(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int d = lua_isnoneornil(L, 2) || a->ndim == 0 ? -1 : lt_checkdim(L, 2, a->ndim, "squeeze", 0);
  lt_newbox(L);
  return lt_finish(L, dl_squeeze(lt_ctx(L), a, d));
}

static int l_unsqueeze(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int d = lt_checkdim(L, 2, a->ndim, "unsqueeze", 1);
  lt_newbox(L);
  return lt_finish(L, dl_unsqueeze(lt_ctx(L), a, d));
}

static int l_contiguous(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  if (dl_is_contiguous(a)) { lua_settop(L, 1); return 1; }
  lt_newbox(L);
  return lt_finish(L, dl_contiguous(lt_ctx(L), a));
}

static int l_clone(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_clone(lt_ctx(L), a));
}

/* ------------------------------------------------------------ indexing */

/* a 1-based index tensor (or table) at i as a new 0-based int64 tensor, boxed on the stack */
static dl_tensor *index_arg(lua_State *L, int i, const char *fn) {
  dl_tensor *idx = lt_test(L, i);
  if (!idx) {
    if (!lua_istable(L, i))
      luaL_error(L, "%s: index must be an integer tensor or a table (argument %d), got %s", fn, i, luaL_typename(L, i));
    idx = lt_coerce(L, i, DL_I64);
  }
  if (dl_dtype_is_float(idx->dtype)) {
    int64_t n = dl_numel(idx);
    for (int64_t k = 0; k < n; k++) {
      double v = dl_get_flat(idx, k);
      if (v != floor(v)) luaL_error(L, "%s: index %f is not an integer", fn, v);
    }
  }
  dl_ctx *ctx = lt_ctx(L);
  lt_newbox(L);
  dl_tensor *r = dl_tensor_new_empty(ctx, DL_I64, idx->ndim, idx->shape);
  if (!r) lt_raise(L);
  int64_t n = dl_numel(idx);
  int64_t *p = r->st->data;
  for (int64_t k = 0; k < n; k++) {
    double v = dl_get_flat(idx, k);
    if (!(v >= 1 && v <= 9.0e15)) {         /* also catches NaN; keeps the cast defined */
      dl_tensor_release(r);
      luaL_error(L, "%s: index %f out of range (indices are 1-based)", fn, v);
    }
    p[k] = (int64_t)v - 1;
  }
  lt_finish(L, r);
  return r;
}

static int l_gather(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int d = lt_checkdim(L, 2, a->ndim, "gather", 0);
  dl_tensor *idx = index_arg(L, 3, "gather");
  lt_newbox(L);
  return lt_finish(L, dl_gather(lt_ctx(L), a, d, idx));
}

static int l_index_select(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int d = lt_checkdim(L, 2, a->ndim, "index_select", 0);
  dl_tensor *idx = index_arg(L, 3, "index_select");
  lt_newbox(L);
  return lt_finish(L, dl_index_select(lt_ctx(L), a, d, idx));
}

static int l_scatter_add(lua_State *L) {
  dl_tensor *a = lt_check(L, 1);
  int d = lt_checkdim(L, 2, a->ndim, "scatter_add", 0);
  dl_tensor *idx = index_arg(L, 3, "scatter_add");
  dl_tensor *src = lt_coerce(L, 4, a->dtype);
  lt_newbox(L);
  return lt_finish(L, dl_scatter_add(lt_ctx(L), a, d, idx, src));
}

static int l_one_hot(lua_State *L) {
  int64_t classes = lt_checkint(L, 2, "one_hot", "classes");
  if (classes < 1) return luaL_error(L, "one_hot: classes must be positive, got %d", (int)classes);
  dl_tensor *idx = index_arg(L, 1, "one_hot");
  int64_t n = dl_numel(idx);
  const int64_t *p = dl_data(idx);
  for (int64_t k = 0; k < n; k++)
    if (p[k] >= classes)
      return luaL_error(L, "one_hot: label %d out of range for %d classes", (int)p[k] + 1, (int)classes);
  lt_newbox(L);
  return lt_finish(L, dl_one_hot(lt_ctx(L), idx, classes));
}

/* cat({t1, t2, ...}, dim) and stack(...) */
static int cat_stack(lua_State *L, int stack) {
  const char *fn = stack ? "stack" : "cat";
  lua_settop(L, 2);                           /* the pointer array below must not pose as the dim */
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  if (n < 1) return luaL_error(L, "%s: expected a non-empty list of tensors", fn);
  if (n > 100000) return luaL_error(L, "%s: %d tensors is too many", fn, (int)n);
  dl_tensor **ts = lua_newuserdatauv(L, sizeof(dl_tensor *) * (size_t)n, 0);   /* GC owns the array */
  int base = lua_gettop(L);
  for (lua_Integer k = 1; k <= n; k++) {
    lua_geti(L, 1, k);
    dl_tensor *t = lt_test(L, -1);
    if (!t) return luaL_error(L, "%s: element %d is a %s, expected a tensor", fn, (int)k, luaL_typename(L, -1));
    ts[k - 1] = t;
  }
  int d = lua_isnoneornil(L, 2) ? 0 : lt_checkdim(L, 2, ts[0]->ndim, fn, stack ? 1 : 0);
  if (!stack && ts[0]->ndim == 0) return luaL_error(L, "%s: cannot concatenate 0-d tensors (use stack)", fn);
  lt_newbox(L);
  dl_tensor *r = stack ? dl_stack(lt_ctx(L), (int)n, ts, d) : dl_cat(lt_ctx(L), (int)n, ts, d);
  lt_finish(L, r);
  lua_replace(L, base);
  lua_settop(L, base);
  return 1;
}

static int l_cat(lua_State *L) { return cat_stack(L, 0); }
static int l_stack(lua_State *L) { return cat_stack(L, 1); }

/* ------------------------------------------------------------ conv, pool */

/* opts.key as a pair (h, w): a number or a {h, w} list; def when absent */
static void pair_opt(lua_State *L, int opts, const char *fn, const char *key, int def, int out[2]) {
  out[0] = out[1] = def;
  if (!opts) return;
  lua_getfield(L, opts, key);
  if (lua_type(L, -1) == LUA_TNUMBER) {
    out[0] = out[1] = (int)lt_checkint(L, lua_gettop(L), fn, key);
  } else if (lua_istable(L, -1)) {
    for (int i = 0; i < 2; i++) {
      lua_geti(L, -1 - i, i + 1);
      out[i] = (int)lt_checkint(L, lua_gettop(L), fn, key);
    }
    lua_pop(L, 2);
  } else if (!lua_isnil(L, -1)) {
    luaL_error(L, "%s: option '%s' must be a number or {h, w}, got %s", fn, key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
}

static void check_keys(lua_State *L, int opts, const char *fn, const char *const *keys, const char *list) {
  if (!opts) return;
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    int ok = 0;
    if (lua_type(L, -2) == LUA_TSTRING)
      for (int i = 0; keys[i]; i++) ok |= strcmp(lua_tostring(L, -2), keys[i]) == 0;
    if (!ok) luaL_error(L, "%s: unknown option '%s' (valid: %s)", fn,
                        lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?", list);
    lua_pop(L, 1);
  }
}

/* conv2d(x, w [, b] [, {stride, padding, dilation, groups}]) */
static int l_conv2d(lua_State *L) {
  dl_tensor *x = lt_check(L, 1), *w = lt_check(L, 2);
  dl_tensor *b = lt_test(L, 3);
  int opts = is_opts(L, 3) ? 3 : is_opts(L, 4) ? 4 : 0;
  static const char *const keys[] = {"stride", "padding", "dilation", "groups", NULL};
  check_keys(L, opts, "conv2d", keys, "dilation, groups, padding, stride");
  dl_conv_opts o;
  pair_opt(L, opts, "conv2d", "stride", 1, o.stride);
  pair_opt(L, opts, "conv2d", "padding", 0, o.pad);
  pair_opt(L, opts, "conv2d", "dilation", 1, o.dil);
  o.groups = 1;
  if (opts) {
    lua_getfield(L, opts, "groups");
    if (!lua_isnil(L, -1)) o.groups = (int)lt_checkint(L, lua_gettop(L), "conv2d", "groups");
    lua_pop(L, 1);
  }
  lt_newbox(L);
  return lt_finish(L, dl_conv2d(lt_ctx(L), x, w, b, &o));
}

static int pool(lua_State *L, int max) {
  const char *fn = max ? "max_pool2d" : "avg_pool2d";
  dl_tensor *x = lt_check(L, 1);
  int k[2], s[2], p[2];
  if (lua_istable(L, 2)) {
    for (int i = 0; i < 2; i++) {
      lua_geti(L, 2, i + 1);
      k[i] = (int)lt_checkint(L, lua_gettop(L), fn, "kernel");
      lua_pop(L, 1);
    }
  } else {
    k[0] = k[1] = (int)lt_checkint(L, 2, fn, "kernel");
  }
  int opts = is_opts(L, 3) ? 3 : 0;
  static const char *const keys[] = {"stride", "padding", NULL};
  check_keys(L, opts, fn, keys, "padding, stride");
  pair_opt(L, opts, fn, "stride", 0, s);
  if (s[0] == 0) { s[0] = k[0]; s[1] = k[1]; }
  pair_opt(L, opts, fn, "padding", 0, p);
  lt_newbox(L);
  return lt_finish(L, dl_pool2d(lt_ctx(L), x, k, s, p, max));
}

static int l_max_pool2d(lua_State *L) { return pool(L, 1); }
static int l_avg_pool2d(lua_State *L) { return pool(L, 0); }

/* ------------------------------------------------------------ metamethods */

static int m_unm(lua_State *L) { return unary(L, DL_NEG); }

static int m_len(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lua_pushinteger(L, t->ndim ? t->shape[0] : 0);
  return 1;
}

static const luaL_Reg op_funcs[] = {
  {"abs", l_abs},
  {"add", l_add},
  {"add_", l_add_},
  {"argmax", l_argmax},
  {"argmin", l_argmin},
  {"avg_pool2d", l_avg_pool2d},
  {"byte", l_byte},
  {"cat", l_cat},
  {"clamp", l_clamp},
  {"clone", l_clone},
  {"contiguous", l_contiguous},
  {"conv2d", l_conv2d},
  {"copy_", l_copy_},
  {"div", l_div},
  {"double", l_double},
  {"eq", l_eq},
  {"exp", l_exp},
  {"expand", l_expand},
  {"fill_", l_fill_},
  {"flatten", l_flatten},
  {"float", l_float},
  {"gather", l_gather},
  {"ge", l_ge},
  {"gelu", l_gelu},
  {"gt", l_gt},
  {"index_select", l_index_select},
  {"int", l_int},
  {"le", l_le},
  {"log", l_log},
  {"log_softmax", l_log_softmax},
  {"logsumexp", l_logsumexp},
  {"long", l_long},
  {"lt", l_lt},
  {"matmul", l_matmul},
  {"linear", l_linear},
  {"max", l_max},
  {"max_pool2d", l_max_pool2d},
  {"maximum", l_maximum},
  {"mean", l_mean},
  {"min", l_min},
  {"minimum", l_minimum},
  {"mul", l_mul},
  {"narrow", l_narrow},
  {"ne", l_ne},
  {"neg", l_neg},
  {"one_hot", l_one_hot},
  {"permute", l_permute},
  {"pow", l_pow},
  {"relu", l_relu},
  {"reshape", l_reshape},
  {"rsqrt", l_rsqrt},
  {"scale", l_scale},
  {"scatter_add", l_scatter_add},
  {"select", l_select},
  {"sigmoid", l_sigmoid},
  {"sign", l_sign},
  {"softmax", l_softmax},
  {"sqrt", l_sqrt},
  {"square", l_square},
  {"squeeze", l_squeeze},
  {"stack", l_stack},
  {"sub", l_sub},
  {"sum", l_sum},
  {"tanh", l_tanh},
  {"to", l_to},
  {"transpose", l_transpose},
  {"unsqueeze", l_unsqueeze},
  {"var", l_var},
  {"view", l_view},
  {"where", l_where},
  {"zero_", l_zero_},
  {NULL, NULL}
};

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
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, op_funcs, 1);
  (void)mod;
}

void lt_register_meta(lua_State *L, int mt, int cidx) {
  (void)mt;
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, meta_funcs, 1);
}
