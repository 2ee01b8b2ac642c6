/* lua_tensor.c -- the tensor type in Lua: creation, information, element
 * access, printing, and the "dlua.Tensor" metatable's __index/__newindex.
 *
 * A Lua tensor is a box holding exactly one reference to a dl_tensor (see
 * lua_aux.h). Dims and indices are 1-based (negative from the end) here and
 * 0-based in the core. Creation functions take sizes as varargs or one list,
 * then one optional options table {dtype =, requires_grad =}; anything else
 * in that place, a bare dtype string included, is an error naming the
 * argument (docs/api/tensor.md). Ops live in lua_ops.c, autograd in
 * lua_autograd.c, system functions in lua_sys.c.
 */
/* See LICENSE */
#include "lua/lua_aux.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ creation */

static const char *const create_keys[] = {"dtype", "requires_grad", NULL};

/* reads the creation options at arg (after the last positional argument) */
static dl_dtype creation_options(lua_State *L, int arg, dl_dtype def, int *requires_grad) {
  lt_opts o;
  lt_options(L, arg, create_keys, &o);
  lt_checkargs(L, arg);
  dl_dtype d = lt_opt_dtype(L, &o, "dtype", def);
  *requires_grad = lt_opt_boolean(L, &o, "requires_grad", 0);
  if (*requires_grad && !dl_dtype_is_float(d))
    lt_opt_error(L, &o, "requires_grad", "only float tensors can require grad, got %s", dl_dtype_name(d));
  return d;
}

/* tensor(data [, opts]): data a nested table, a number or a tensor (copied) */
static int tensor_tensor(lua_State *L) {
  dl_tensor *src = lt_test(L, 1);
  if (!src && luaL_testudata(L, 1, "dlua.Tensor")) luaL_argerror(L, 1, "tensor has been released");
  if (!src && lua_type(L, 1) != LUA_TNUMBER && lua_type(L, 1) != LUA_TTABLE)
    luaL_typeerror(L, 1, "table, number or dlua.Tensor");
  int rg;
  dl_dtype d = creation_options(L, 2, src ? src->dtype : DL_F32, &rg);
  lt_newbox(L);
  dl_tensor *t;
  if (src) t = dl_tensor_new_contiguous(lt_ctx(L), src, d);
  else if (lua_type(L, 1) == LUA_TNUMBER) t = dl_tensor_new_scalar(lt_ctx(L), d, lua_tonumber(L, 1));
  else t = lt_from_table(L, 1, d);
  lt_finish(L, t);
  t->requires_grad = rg;
  return 1;
}

enum { ZEROS, ONES, FULL, RANDN, RAND, EMPTY };

static int make_filled(lua_State *L, int kind) {
  double v = kind == FULL ? lt_checknumber(L, 1) : 0;
  int64_t shape[DL_MAXDIM];
  int next;
  int nd = lt_checkshape(L, kind == FULL ? 2 : 1, shape, &next, 0);
  int rg;
  dl_dtype d = creation_options(L, next, DL_F32, &rg);
  lt_newbox(L);
  dl_ctx *ctx = lt_ctx(L);
  dl_tensor *t = NULL;
  switch (kind) {
    case ZEROS: t = dl_tensor_new_zeros(ctx, d, nd, shape); break;
    case ONES: t = dl_tensor_new_full(ctx, d, nd, shape, 1); break;
    case FULL: t = dl_tensor_new_full(ctx, d, nd, shape, v); break;
    case RANDN: t = dl_tensor_new_rand(ctx, d, nd, shape, 1); break;
    case RAND: t = dl_tensor_new_rand(ctx, d, nd, shape, 0); break;
    default: t = dl_tensor_new_empty(ctx, d, nd, shape); break;
  }
  lt_finish(L, t);
  t->requires_grad = rg;
  return 1;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int tensor_zeros(lua_State *L) { return make_filled(L, ZEROS); }
static int tensor_ones(lua_State *L) { return make_filled(L, ONES); }
static int tensor_randn(lua_State *L) { return make_filled(L, RANDN); }
static int tensor_rand(lua_State *L) { return make_filled(L, RAND); }
static int tensor_empty(lua_State *L) { return make_filled(L, EMPTY); }
/* full(value, size...) -- value first keeps sizes varargs */
static int tensor_full(lua_State *L) { return make_filled(L, FULL); }

/* arange(stop) or arange(start, stop [, step]) [, opts]: values start,
 * start+step, ... below stop (stop excluded, as in PyTorch and NumPy) */
static int tensor_arange(lua_State *L) {
  int n = 0;
  while (n < 3 && lua_type(L, n + 1) == LUA_TNUMBER) n++;
  double a = 0, b, s = 1;
  if (n <= 1) b = lt_checknumber(L, 1);
  else {
    a = lua_tonumber(L, 1);
    b = lua_tonumber(L, 2);
  }
  if (n == 3) s = lua_tonumber(L, 3);
  int rg;
  dl_dtype d = creation_options(L, n + 1, DL_F32, &rg);
  lt_newbox(L);
  dl_tensor *t = dl_tensor_new_arange(lt_ctx(L), d, a, b, s);
  lt_finish(L, t);
  t->requires_grad = rg;
  return 1;
}

/* randperm(n): a 1-based int64 permutation of 1..n from the default stream */
static int tensor_randperm(lua_State *L) {
  int64_t n = lt_checkinteger(L, 1, "n");
  lt_checkargs(L, 1);
  if (n < 0) return lt_argerror(L, 1, "n must be non-negative, got %I", (lua_Integer)n);
  dl_ctx *ctx = lt_ctx(L);
  lt_newbox(L);
  dl_tensor *t = dl_tensor_new_empty(ctx, DL_I64, 1, &n);
  if (!t) return lt_raise(L);
  int64_t *p = t->st->data;
  for (int64_t i = 0; i < n; i++) p[i] = i + 1;
  uint32_t r[4];
  for (int64_t i = n - 1; i > 0; i--) {        /* Fisher-Yates, one Philox block per swap */
    dl_philox(ctx->seed, ctx->counter++, r);
    uint64_t u = ((uint64_t)r[0] << 32) | r[1];
    int64_t j = (int64_t)(u % (uint64_t)(i + 1));
    int64_t tmp = p[i];
    p[i] = p[j];
    p[j] = tmp;
  }
  return lt_finish(L, t);
}

/* ------------------------------------------------------------ info */

static int push_shape(lua_State *L, const dl_tensor *t) {
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int tensor_shape(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  return push_shape(L, t);
}

/* size(t) is the shape; size(t, dim) one size */
static int tensor_size(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 2);
  if (lua_isnoneornil(L, 2)) return push_shape(L, t);
  int d = lt_checkdim(L, 2, t->ndim, 0);
  lua_pushinteger(L, t->ndim ? t->shape[d] : 1);
  return 1;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int tensor_stride(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->stride[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* the tensor at 1 of a one-argument function */
static dl_tensor *only_tensor(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  return t;
}

static int tensor_dim(lua_State *L) { lua_pushinteger(L, only_tensor(L)->ndim); return 1; }
static int tensor_numel(lua_State *L) { lua_pushinteger(L, dl_numel(only_tensor(L))); return 1; }
static int tensor_dtype(lua_State *L) { lua_pushstring(L, dl_dtype_name(only_tensor(L)->dtype)); return 1; }
static int tensor_is_contiguous(lua_State *L) { lua_pushboolean(L, dl_is_contiguous(only_tensor(L))); return 1; }

/* the element at offset off (in elements from dl_data(t)) as a Lua value: int64 read as an
 * integer, so values beyond 2^53 come back exact */
static void push_elem(lua_State *L, const dl_tensor *t, int64_t off) {
  const void *base = dl_data(t);
  if (t->dtype == DL_I64) lua_pushinteger(L, ((const int64_t *)base)[off]);
  else if (dl_dtype_is_float(t->dtype)) lua_pushnumber(L, dl_load(base, t->dtype, off));
  else lua_pushinteger(L, (lua_Integer)dl_load(base, t->dtype, off));
}

static int tensor_item(lua_State *L) {
  dl_tensor *t = only_tensor(L);
  if (dl_numel(t) != 1) {
    char s[128];
    dl_shape_str(t->shape, t->ndim, s, sizeof s);
    return lt_argerror(L, 1, "tensor of shape %s has %I elements, expected exactly 1", s, (lua_Integer)dl_numel(t));
  }
  push_elem(L, t, dl_flat_offset(t, 0));
  return 1;
}

static void totable_rec(lua_State *L, const dl_tensor *t, int d, int64_t off) {
  luaL_checkstack(L, 4, "totable");
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    int64_t o = off + i * t->stride[d];
    if (d + 1 < t->ndim) totable_rec(L, t, d + 1, o);
    else push_elem(L, t, o);
    lua_rawseti(L, -2, i + 1);
  }
}

static int tensor_totable(lua_State *L) {
  dl_tensor *t = only_tensor(L);
  if (t->ndim == 0) push_elem(L, t, dl_flat_offset(t, 0));
  else totable_rec(L, t, 0, 0);
  return 1;
}

/* flat access used by gradcheck and tests: t:get_flat(i), t:set_flat(i, v), 1-based */
static int64_t flat_index(lua_State *L, const dl_tensor *t) {
  int64_t i = lt_checkinteger(L, 2, "index");
  if (i < 1 || i > dl_numel(t))
    lt_argerror(L, 2, "index %I out of range for %I elements", (lua_Integer)i, (lua_Integer)dl_numel(t));
  return i - 1;
}

static int tensor_get_flat(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 2);
  push_elem(L, t, dl_flat_offset(t, flat_index(L, t)));
  return 1;
}

static int tensor_set_flat(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 3);
  int64_t i = flat_index(L, t);
  dl_set_flat(t, i, lt_checknumber(L, 3));
  return 0;
}

/* release(t): drops the box's reference now (idempotent; __gc and __close do the same) */
static int tensor_release(lua_State *L) {
  luaL_checkudata(L, 1, "dlua.Tensor");
  lt_checkargs(L, 1);
  return lt_tensor_release(L);
}

/* ------------------------------------------------------------ printing */

static void fmt_elem(luaL_Buffer *B, const dl_tensor *t, double v, int width, int prec, int sci) {
  char s[64];
  if (!dl_dtype_is_float(t->dtype)) snprintf(s, sizeof s, "%*lld", width, (long long)v);
  else if (v != v) snprintf(s, sizeof s, "%*s", width, "nan");
  else if (isinf(v)) snprintf(s, sizeof s, "%*s", width, v > 0 ? "inf" : "-inf");
  else if (sci) snprintf(s, sizeof s, "%*.*e", width, prec, v);
  else snprintf(s, sizeof s, "%*.*f", width, prec, v);
  luaL_addstring(B, s);
}

static void print_rec(luaL_Buffer *B, const dl_tensor *t, int d, int64_t off, int indent, int width,
                      int prec, int sci, int summarize) {
  const char *base = dl_data(t);
  luaL_addchar(B, '[');
  int64_t n = t->shape[d];
  for (int64_t i = 0; i < n; i++) {
    if (summarize && n > 6 && i == 3) {
      luaL_addstring(B, d + 1 < t->ndim ? "...," : "...,");
      if (d + 1 < t->ndim) {
        luaL_addchar(B, '\n');
        for (int k = 0; k < indent + 1; k++) luaL_addchar(B, ' ');
      } else luaL_addchar(B, ' ');
      i = n - 3;
    }
    int64_t o = off + i * t->stride[d];
    if (d + 1 < t->ndim) print_rec(B, t, d + 1, o, indent + 1, width, prec, sci, summarize);
    else fmt_elem(B, t, dl_load(base, t->dtype, o), width, prec, sci);
    if (i + 1 < n) {
      luaL_addchar(B, ',');
      if (d + 1 < t->ndim) {
        for (int k = d + 1; k < t->ndim; k++) luaL_addchar(B, '\n');
        for (int k = 0; k < indent + 1; k++) luaL_addchar(B, ' ');
      } else luaL_addchar(B, ' ');
    }
  }
  luaL_addchar(B, ']');
}

static int tensor_tostring(lua_State *L) {
  tensor_box *b = luaL_checkudata(L, 1, "dlua.Tensor");
  lt_checkargs(L, 1);
  if (!b->t) { lua_pushliteral(L, "tensor(released)"); return 1; }
  dl_tensor *t = b->t;
  int64_t n = dl_numel(t);
  int summarize = n > 1000;
  double mx = 0, mn = INFINITY;
  int allint = 1;
  for (int64_t i = 0; i < n && i < 100000; i++) {
    double v = fabs(dl_get_flat(t, i));
    if (v != v || isinf(v)) continue;
    if (v > mx) mx = v;
    if (v > 0 && v < mn) mn = v;
    if (v != floor(v)) allint = 0;
  }
  int sci = dl_dtype_is_float(t->dtype) && (mx >= 1e8 || (mn < 1e-4 && mn > 0) || (mx > 0 && mx / mn > 1e7 && !allint));
  int prec = dl_dtype_is_float(t->dtype) ? (allint && !sci ? 1 : 4) : 0;
  int width;
  char s[64];
  if (sci) width = prec + 7;
  else {
    snprintf(s, sizeof s, "%.*f", prec, mx);
    width = (int)strlen(s) + 1;
  }
  int neg = 0;
  for (int64_t i = 0; i < n && i < 100000; i++) if (dl_get_flat(t, i) < 0) neg = 1;
  if (!neg) width--;
  luaL_Buffer B;
  luaL_buffinit(L, &B);
  luaL_addstring(&B, "tensor(");
  if (t->ndim == 0) fmt_elem(&B, t, dl_get_flat(t, 0), 0, prec, sci);
  else if (n == 0) luaL_addstring(&B, "[]");
  else print_rec(&B, t, 0, 0, 7, width, prec, sci, summarize);
  char sh[160];
  dl_shape_str(t->shape, t->ndim, sh, sizeof sh);
  snprintf(s, sizeof s, ", dtype=%s", dl_dtype_name(t->dtype));
  luaL_addstring(&B, s);
  luaL_addstring(&B, ", shape=");
  luaL_addstring(&B, sh);
  if (t->grad_fn) {
    luaL_addstring(&B, ", grad_fn=");
    luaL_addstring(&B, t->grad_fn->name);
  } else if (t->requires_grad) {
    luaL_addstring(&B, ", requires_grad=true");
  }
  luaL_addchar(&B, ')');
  luaL_pushresult(&B);
  return 1;
}

/* ------------------------------------------------------------ t[i], t.grad */

static int get_grad(lua_State *L, dl_tensor *t) {
  if (!t->grad) {
    lua_pushnil(L);
    return 1;
  }
  return lt_push(L, dl_tensor_retain(t->grad));
}

static int set_grad(lua_State *L, dl_tensor *t, int v) {
  if (lua_isnil(L, v)) {
    dl_tensor_release(t->grad);
    t->grad = NULL;
    return 0;
  }
  dl_tensor *g = lt_check(L, v);
  if (g->ndim != t->ndim || memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim)) {
    char a[128], b[128];
    dl_shape_str(t->shape, t->ndim, a, sizeof a);
    dl_shape_str(g->shape, g->ndim, b, sizeof b);
    return luaL_error(L, "grad: gradient of shape %s assigned to a tensor of shape %s", b, a);
  }
  dl_tensor *c = dl_tensor_new_contiguous(lt_ctx(L), g, t->dtype);
  if (!c) return lt_raise(L);
  dl_tensor_release(t->grad);
  t->grad = c;
  return 0;
}

/* the 0-based row of t for the index at 2 (t[i], 1-based, negative from the end) */
static int64_t row_index(lua_State *L, const dl_tensor *t) {
  int64_t i = lt_checkinteger(L, 2, "index");
  if (t->ndim == 0) luaL_error(L, "index: cannot index a 0-d tensor");
  int64_t r = i < 0 ? t->shape[0] + i : i - 1;
  if (i == 0 || r < 0 || r >= t->shape[0])
    luaL_error(L, "index: index %I out of range for dimension 1 of size %I", (lua_Integer)i, (lua_Integer)t->shape[0]);
  return r;
}

/* __index: integers select along dim 1, "grad" reads the gradient, else methods */
static int tensor_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "grad") == 0) return get_grad(L, lt_check(L, 1));
  if (lua_type(L, 2) == LUA_TNUMBER) {
    dl_tensor *t = lt_check(L, 1);
    int64_t r = row_index(L, t);
    lt_newbox(L);
    return lt_finish(L, dl_select(lt_ctx(L), t, 0, r));
  }
  lua_pushvalue(L, 2);                     /* methods: reachable on released boxes too */
  lua_rawget(L, lua_upvalueindex(2));
  return 1;
}

/* __newindex: t.grad = g | nil; t[i] = value or tensor (copied into the row) */
static int tensor_newindex(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "grad") == 0) return set_grad(L, t, 3);
  if (lua_type(L, 2) != LUA_TNUMBER)
    return luaL_error(L, "tensor: cannot set field '%s'", lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
  int64_t r = row_index(L, t);
  dl_ctx *ctx = lt_ctx(L);
  if (t->requires_grad && ctx->grad_enabled)
    return luaL_error(L, "index: in-place assignment to a tensor that requires grad");
  lt_newbox(L);
  dl_tensor *row = dl_select(ctx, t, 0, r);
  lt_finish(L, row);
  dl_tensor *v = lt_coerce_into(L, 3, t->dtype);
  dl_tensor *e = dl_expand(ctx, v, row->ndim, row->shape);
  if (!e) return lt_raise(L);
  int rc = dl_copy_into(ctx, row, e);
  dl_tensor_release(e);
  if (rc < 0) return lt_raise(L);
  return 0;
}

/* ------------------------------------------------------------ registration */

/* one luaL_Reg row per binding: rows and registration alike by design (lua_aux.h) */
static const luaL_Reg tensor_funcs[] = {
  {"arange", tensor_arange},
  {"dim", tensor_dim},
  {"dtype", tensor_dtype},
  {"empty", tensor_empty},
  {"full", tensor_full},
  {"get_flat", tensor_get_flat},
  {"is_contiguous", tensor_is_contiguous},
  {"item", tensor_item},
  {"numel", tensor_numel},
  {"ones", tensor_ones},
  {"rand", tensor_rand},
  {"randn", tensor_randn},
  {"randperm", tensor_randperm},
  {"release", tensor_release},
  {"set_flat", tensor_set_flat},
  {"shape", tensor_shape},
  {"size", tensor_size},
  {"stride", tensor_stride},
  {"tensor", tensor_tensor},
  {"tostring", tensor_tostring},
  {"totable", tensor_totable},
  {"zeros", tensor_zeros},
  {NULL, NULL}
};

void lt_register_tensor(lua_State *L, int mod, int cidx) {
  lt_setfuncs(L, mod, cidx, tensor_funcs);
  luaL_getmetatable(L, "dlua.Tensor");
  lua_pushvalue(L, cidx);
  lua_pushvalue(L, mod);
  lua_pushcclosure(L, tensor_index, 2);
  lua_setfield(L, -2, "__index");
  lua_pushvalue(L, cidx);
  lua_pushcclosure(L, tensor_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_pushvalue(L, cidx);
  lua_pushcclosure(L, tensor_tostring, 1);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}
