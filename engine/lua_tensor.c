/* lua_tensor.c -- binds the tensor core to Lua as the module "dlua.core".
 *
 * A Lua tensor is a full userdata box holding exactly one reference to a
 * dl_tensor (metatable "dlua.Tensor"). This file owns the Lua conventions:
 * 1-based dims and indices (negative from the end), number and table
 * coercion, option tables, and turning core errors into Lua errors. It
 * also tells Lua's GC about tensor memory, so loops never need
 * collectgarbage(). The dl_ctx reaches every function as upvalue 1.
 */
/* See LICENSE */
#include "lua_tensor.h"
#include "idx.h"

#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>

void openblas_set_num_threads(int n);

/* ------------------------------------------------------------ context */

dl_ctx *lt_ctx(lua_State *L) {
  ctx_box *c = lua_touserdata(L, lua_upvalueindex(1));
  return c->ctx;
}

static ctx_box *lt_cbox(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

static int ctx_gc(lua_State *L) {
  ctx_box *c = luaL_checkudata(L, 1, "dlua.Context");
  dl_ctx_free(c->ctx);
  c->ctx = NULL;
  free(c->dead_refs);
  c->dead_refs = NULL;
  return 0;
}

/* raises ctx->err as a Lua error with position information */
int lt_raise(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  ctx->oom = 0;
  luaL_where(L, 1);
  lua_pushstring(L, ctx->err);
  lua_concat(L, 2);
  return lua_error(L);
}

/* Tells Lua's GC about tensor bytes, which live outside its heap. A collection
 * cycle costs time in proportion to the Lua heap, not to the tensors it frees, so
 * the collector is stepped only once tensor memory has grown by 16 MiB or by an
 * eighth of what is in use, whichever is more, and by that growth: dead tensors
 * then hold at most that much. (Stepping per MiB ran several full cycles of a
 * 0.8 MB heap per MLP training step, 0.3 ms each: 5% of the step.) */
void lt_gc_pressure(lua_State *L, dl_ctx *ctx, size_t *mark) {
  size_t used = ctx->mem.in_use;
  size_t slack = used / 8 > ((size_t)16 << 20) ? used / 8 : ((size_t)16 << 20);
  if (used > *mark + slack) {
    size_t kb = (used - *mark) >> 10;
    *mark = used;
    lua_gc(L, LUA_GCSTEP, kb > (size_t)INT_MAX ? INT_MAX : (int)kb);
  } else if (used < *mark) {
    *mark = used;
  }
}

static void gc_pressure(lua_State *L, dl_ctx *ctx) { lt_gc_pressure(L, ctx, &lt_cbox(L)->gc_mark); }

/* ------------------------------------------------------------ boxes */

tensor_box *lt_newbox(lua_State *L) {
  tensor_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = NULL;
  luaL_setmetatable(L, "dlua.Tensor");
  return b;
}

/* fills the box on top of the stack with t (new ref), or raises */
int lt_finish(lua_State *L, dl_tensor *t) {
  if (!t) return lt_raise(L);
  tensor_box *b = lua_touserdata(L, -1);
  b->t = t;
  gc_pressure(L, lt_ctx(L));
  return 1;
}

int lt_push(lua_State *L, dl_tensor *t) {
  if (!t) return lt_raise(L);
  tensor_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = NULL;
  luaL_setmetatable(L, "dlua.Tensor");
  b->t = t;
  gc_pressure(L, lt_ctx(L));
  return 1;
}

dl_tensor *lt_check(lua_State *L, int i) {
  tensor_box *b = luaL_testudata(L, i, "dlua.Tensor");
  if (!b) {
    const char *got = luaL_typename(L, i);
    luaL_error(L, "bad argument #%d (dlua.Tensor expected, got %s)", i, got);
    return NULL;
  }
  if (!b->t) luaL_error(L, "bad argument #%d (tensor has been released)", i);
  return b->t;
}

dl_tensor *lt_test(lua_State *L, int i) {
  tensor_box *b = luaL_testudata(L, i, "dlua.Tensor");
  return b ? b->t : NULL;
}

/* ---------------------------------------------------- table -> tensor */

static int table_shape(lua_State *L, int idx, int depth, int64_t *shape, int *nd) {
  if (depth >= DL_MAXDIM) return luaL_error(L, "tensor: nested table is deeper than %d levels", DL_MAXDIM);
  lua_Integer n = luaL_len(L, idx);
  shape[depth] = n;
  *nd = depth + 1;
  if (n == 0) return 0;
  lua_geti(L, idx, 1);
  if (lua_istable(L, -1)) table_shape(L, lua_absindex(L, -1), depth + 1, shape, nd);
  lua_pop(L, 1);
  return 0;
}

static void table_fill(lua_State *L, int idx, int depth, const int64_t *shape, int nd, dl_tensor *t,
                       int64_t *pos, char *path, size_t plen) {
  lua_Integer n = luaL_len(L, idx);
  if (n != shape[depth]) {
    dl_tensor_release(t);
    luaL_error(L, "tensor: ragged nested table: element %s has %d entries, expected %d", path[0] ? path : "(top)",
               (int)n, (int)shape[depth]);
  }
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, idx, i);
    size_t k = strlen(path);
    snprintf(path + k, plen - k, "[%d]", (int)i);
    if (depth + 1 < nd) {
      if (!lua_istable(L, -1)) {
        dl_tensor_release(t);
        luaL_error(L, "tensor: ragged nested table: element %s is a %s, expected a table", path,
                   luaL_typename(L, -1));
      }
      table_fill(L, lua_absindex(L, -1), depth + 1, shape, nd, t, pos, path, plen);
    } else {
      int isnum;
      lua_Number v = lua_tonumberx(L, -1, &isnum);
      if (!isnum && lua_isboolean(L, -1)) { v = lua_toboolean(L, -1); isnum = 1; }
      if (!isnum) {
        dl_tensor_release(t);
        luaL_error(L, "tensor: element %s is a %s, expected a number", path, luaL_typename(L, -1));
      }
      dl_store(t->st->data, t->dtype, (*pos)++, v);
    }
    path[k] = 0;
    lua_pop(L, 1);
  }
}

dl_tensor *lt_from_table(lua_State *L, int idx, dl_dtype d) {
  idx = lua_absindex(L, idx);
  int64_t shape[DL_MAXDIM];
  int nd = 0;
  table_shape(L, idx, 0, shape, &nd);
  dl_tensor *t = dl_tensor_new_empty(lt_ctx(L), d, nd, shape);
  if (!t) { lt_raise(L); return NULL; }
  int64_t pos = 0;
  char path[128] = "";
  table_fill(L, idx, 0, shape, nd, t, &pos, path, sizeof path);
  return t;
}

/* argument i as a tensor: a tensor (borrowed), a number (0-d of dtype like),
 * or a nested table. Converted values are pushed into a new box at the top of
 * the stack and replace slot i, so they are owned by Lua. */
dl_tensor *lt_coerce(lua_State *L, int i, dl_dtype like) {
  i = lua_absindex(L, i);
  dl_tensor *t = lt_test(L, i);
  if (t) return t;
  if (luaL_testudata(L, i, "dlua.Tensor")) luaL_error(L, "bad argument #%d (tensor has been released)", i);
  dl_tensor *n = NULL;
  if (lua_type(L, i) == LUA_TNUMBER || lua_isboolean(L, i)) {
    lt_newbox(L);
    double v = lua_isboolean(L, i) ? lua_toboolean(L, i) : lua_tonumber(L, i);
    n = dl_tensor_new_scalar(lt_ctx(L), like, v);
    lt_finish(L, n);
  } else if (lua_istable(L, i)) {
    lt_newbox(L);
    n = lt_from_table(L, i, like == DL_U8 || like == DL_I32 || like == DL_I64 ? DL_F32 : like);
    lt_finish(L, n);
  } else {
    luaL_error(L, "bad argument #%d (dlua.Tensor, number or table expected, got %s)", i, luaL_typename(L, i));
  }
  lua_replace(L, i);
  return n;
}

/* --------------------------------------------------------- arguments */

int64_t lt_checkint(lua_State *L, int i, const char *fn, const char *what) {
  int ok;
  lua_Integer v = lua_tointegerx(L, i, &ok);
  if (!ok) {
    if (lua_type(L, i) == LUA_TNUMBER)
      luaL_error(L, "%s: %s %s is not an integer (argument %d)", fn, what, lua_tostring(L, i), i);
    else
      luaL_error(L, "%s: %s must be an integer (argument %d), got %s", fn, what, i, luaL_typename(L, i));
  }
  return (int64_t)v;
}

/* 1-based dim (negative from the end) -> 0-based; ndim_extra allows dim == ndim+1 */
int lt_checkdim(lua_State *L, int i, int ndim, const char *fn, int extra) {
  int64_t d = lt_checkint(L, i, fn, "dimension");
  int n = ndim + extra;
  int64_t r = d < 0 ? n + d : d - 1;
  if (d == 0 || r < 0 || r >= (n > 0 ? n : 1))
    luaL_error(L, "%s: dimension %d out of range for a %d-d tensor (argument %d)", fn, (int)d, ndim, i);
  if (n == 0) return 0;
  return (int)r;
}

/* sizes as varargs from i (2, 3) or one table ({2, 3}); returns ndim */
int lt_checkshape(lua_State *L, int i, const char *fn, int64_t *shape) {
  int top = lua_gettop(L), nd = 0;
  if (lua_istable(L, i) && !lt_test(L, i)) {
    lua_Integer n = luaL_len(L, i);
    if (n > DL_MAXDIM) luaL_error(L, "%s: %d dimensions, at most %d supported", fn, (int)n, DL_MAXDIM);
    for (lua_Integer k = 1; k <= n; k++) {
      lua_geti(L, i, k);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok) luaL_error(L, "%s: size %d must be an integer, got %s", fn, (int)k,
                          lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
      if (v < 0 && v != -1) luaL_error(L, "%s: size %d is negative (%d)", fn, (int)k, (int)v);
      shape[nd++] = v;
      lua_pop(L, 1);
    }
    return nd;
  }
  for (int k = i; k <= top && lua_type(L, k) == LUA_TNUMBER; k++) {
    if (nd >= DL_MAXDIM) luaL_error(L, "%s: more than %d dimensions", fn, DL_MAXDIM);
    int64_t v = lt_checkint(L, k, fn, "size");
    if (v < 0 && v != -1) luaL_error(L, "%s: size %d is negative (argument %d)", fn, (int)v, k);
    shape[nd++] = v;
  }
  return nd;
}

static int is_opts(lua_State *L, int i) { return lua_istable(L, i) && !lt_test(L, i); }

/* reads opts.dtype at index i (may be absent); rejects unknown keys among allowed */
dl_dtype lt_optdtype(lua_State *L, int i, const char *fn, dl_dtype def) {
  if (!is_opts(L, i)) return def;
  lua_pushnil(L);
  while (lua_next(L, i)) {
    if (lua_type(L, -2) != LUA_TSTRING ||
        (strcmp(lua_tostring(L, -2), "dtype") && strcmp(lua_tostring(L, -2), "requires_grad")))
      luaL_error(L, "%s: unknown option '%s' (valid: dtype, requires_grad)", fn,
                 lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2));
    lua_pop(L, 1);
  }
  lua_getfield(L, i, "dtype");
  dl_dtype d = def;
  if (!lua_isnil(L, -1)) {
    const char *name = lua_tostring(L, -1);
    int k = name ? dl_dtype_from_name(name) : -1;
    if (k < 0) luaL_error(L, "%s: unknown dtype '%s' (valid: float32, float64, int32, int64, uint8)", fn,
                          name ? name : luaL_typename(L, -1));
    d = (dl_dtype)k;
  }
  lua_pop(L, 1);
  return d;
}

static void apply_requires_grad(lua_State *L, int opts, dl_tensor *t) {
  if (!is_opts(L, opts)) return;
  lua_getfield(L, opts, "requires_grad");
  if (lua_toboolean(L, -1)) t->requires_grad = 1;
  lua_pop(L, 1);
}

/* ------------------------------------------------------------ creation */

static int l_tensor(lua_State *L) {
  dl_dtype d = lt_optdtype(L, 2, "tensor", DL_F32);
  dl_tensor *src = lt_test(L, 1);
  lt_newbox(L);
  dl_tensor *t;
  if (src) t = dl_tensor_new_contiguous(lt_ctx(L), src, is_opts(L, 2) ? d : src->dtype);
  else if (lua_type(L, 1) == LUA_TNUMBER) t = dl_tensor_new_scalar(lt_ctx(L), d, lua_tonumber(L, 1));
  else if (lua_istable(L, 1)) t = lt_from_table(L, 1, d);
  else return luaL_error(L, "tensor: expected a nested table, a number or a tensor (argument 1), got %s",
                         luaL_typename(L, 1));
  lt_finish(L, t);
  apply_requires_grad(L, 2, t);
  return 1;
}

static int make_filled(lua_State *L, const char *fn, int kind) {
  int64_t shape[DL_MAXDIM];
  int first = kind == 2 ? 2 : 1;   /* full(size..., value) handled below */
  int nd = lt_checkshape(L, first, fn, shape);
  for (int k = 0; k < nd; k++)
    if (shape[k] < 0) luaL_error(L, "%s: size %d is negative", fn, (int)shape[k]);
  int opt = lua_istable(L, first) ? first + 1 : first + nd;   /* options follow the sizes */
  if (!is_opts(L, opt)) opt = 0;
  dl_dtype d = opt ? lt_optdtype(L, opt, fn, DL_F32) : DL_F32;
  lt_newbox(L);
  dl_ctx *ctx = lt_ctx(L);
  dl_tensor *t = NULL;
  switch (kind) {
    case 0: t = dl_tensor_new_zeros(ctx, d, nd, shape); break;
    case 1: t = dl_tensor_new_full(ctx, d, nd, shape, 1); break;
    case 2: t = dl_tensor_new_full(ctx, d, nd, shape, luaL_checknumber(L, 1)); break;
    case 3: t = dl_tensor_new_rand(ctx, d, nd, shape, 1); break;
    case 4: t = dl_tensor_new_rand(ctx, d, nd, shape, 0); break;
    case 5: t = dl_tensor_new_empty(ctx, d, nd, shape); break;
  }
  lt_finish(L, t);
  if (opt) apply_requires_grad(L, opt, t);
  return 1;
}

static int l_zeros(lua_State *L) { return make_filled(L, "zeros", 0); }
static int l_ones(lua_State *L) { return make_filled(L, "ones", 1); }
static int l_randn(lua_State *L) { return make_filled(L, "randn", 3); }
static int l_rand(lua_State *L) { return make_filled(L, "rand", 4); }
static int l_empty(lua_State *L) { return make_filled(L, "empty", 5); }

/* full(value, size...) -- value first keeps sizes varargs */
static int l_full(lua_State *L) {
  luaL_checknumber(L, 1);
  return make_filled(L, "full", 2);
}

/* arange(stop) or arange(start, stop [, step]): values start, start+step, ...
 * below stop (stop excluded, as in PyTorch and NumPy) */
static int l_arange(lua_State *L) {
  int n = lua_gettop(L);
  int opt = 0;
  if (n > 0 && is_opts(L, n)) opt = n--;
  double a = 0, b, s = 1;
  if (n == 1) b = luaL_checknumber(L, 1);
  else {
    a = luaL_checknumber(L, 1);
    b = luaL_checknumber(L, 2);
  }
  if (n >= 3) s = luaL_checknumber(L, 3);
  dl_dtype d = opt ? lt_optdtype(L, opt, "arange", DL_F32) : DL_F32;
  lt_newbox(L);
  return lt_finish(L, dl_tensor_new_arange(lt_ctx(L), d, a, b, s));
}

/* ------------------------------------------------------------ info */

static int l_shape(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_size(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  if (lua_isnoneornil(L, 2)) return l_shape(L);
  int d = lt_checkdim(L, 2, t->ndim, "size", 0);
  lua_pushinteger(L, t->ndim ? t->shape[d] : 1);
  return 1;
}

static int l_stride(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->stride[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_dim(lua_State *L) { lua_pushinteger(L, lt_check(L, 1)->ndim); return 1; }
static int l_numel(lua_State *L) { lua_pushinteger(L, dl_numel(lt_check(L, 1))); return 1; }
static int l_dtype(lua_State *L) { lua_pushstring(L, dl_dtype_name(lt_check(L, 1)->dtype)); return 1; }
static int l_is_contiguous(lua_State *L) { lua_pushboolean(L, dl_is_contiguous(lt_check(L, 1))); return 1; }

static void push_value(lua_State *L, const dl_tensor *t, double v) {
  if (dl_dtype_is_float(t->dtype)) lua_pushnumber(L, v);
  else lua_pushinteger(L, (lua_Integer)v);
}

static int l_item(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  if (dl_numel(t) != 1) {
    char s[128];
    dl_shape_str(t->shape, t->ndim, s, sizeof s);
    return luaL_error(L, "item: tensor of shape %s has %d elements, expected exactly 1", s, (int)dl_numel(t));
  }
  push_value(L, t, dl_get_flat(t, 0));
  return 1;
}

static void totable_rec(lua_State *L, const dl_tensor *t, int d, int64_t off) {
  const char *base = dl_data(t);
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    int64_t o = off + i * t->stride[d];
    if (d + 1 < t->ndim) totable_rec(L, t, d + 1, o);
    else push_value(L, t, dl_load(base, t->dtype, o));
    lua_rawseti(L, -2, i + 1);
  }
}

static int l_totable(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  if (t->ndim == 0) push_value(L, t, dl_get_flat(t, 0));
  else totable_rec(L, t, 0, 0);
  return 1;
}

/* flat access used by gradcheck and tests: t:get_flat(i), t:set_flat(i, v), 1-based */
static int l_get_flat(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  int64_t i = lt_checkint(L, 2, "get_flat", "index");
  if (i < 1 || i > dl_numel(t)) return luaL_error(L, "get_flat: index %d out of range for %d elements", (int)i, (int)dl_numel(t));
  push_value(L, t, dl_get_flat(t, i - 1));
  return 1;
}

static int l_set_flat(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  int64_t i = lt_checkint(L, 2, "set_flat", "index");
  if (i < 1 || i > dl_numel(t)) return luaL_error(L, "set_flat: index %d out of range for %d elements", (int)i, (int)dl_numel(t));
  dl_set_flat(t, i - 1, luaL_checknumber(L, 3));
  return 0;
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

static int l_tostring(lua_State *L) {
  tensor_box *b = luaL_checkudata(L, 1, "dlua.Tensor");
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

/* ------------------------------------------------------------ lifetime */

static int l_release(lua_State *L) {
  tensor_box *b = luaL_checkudata(L, 1, "dlua.Tensor");
  dl_tensor_release(b->t);
  b->t = NULL;
  return 0;
}

/* ------------------------------------------------------------ autograd */

static int l_requires_grad(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  if (lua_isnone(L, 2)) { lua_pushboolean(L, t->requires_grad); return 1; }
  int flag = lua_toboolean(L, 2);
  if (flag && !dl_dtype_is_float(t->dtype))
    return luaL_error(L, "requires_grad: only float tensors can require grad, got %s", dl_dtype_name(t->dtype));
  if (t->grad_fn && !flag)
    return luaL_error(L, "requires_grad: cannot clear the flag of a non-leaf tensor (use detach)");
  t->requires_grad = flag;
  lua_settop(L, 1);
  return 1;
}

static int l_backward(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  dl_tensor *g = NULL;
  int keep = 0;
  /* a table with an array part is a gradient; one with only keys is the options */
  int g_is_table = is_opts(L, 2) && luaL_len(L, 2) > 0;
  if (!lua_isnoneornil(L, 2) && (!is_opts(L, 2) || g_is_table)) g = lt_coerce(L, 2, t->dtype);
  int o = is_opts(L, 2) && !g_is_table ? 2 : is_opts(L, 3) ? 3 : 0;
  if (o) {
    lua_getfield(L, o, "keep_graph");
    keep = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  ctx_box *c = lt_cbox(L);
  lua_State *prev = c->L;
  c->L = L;
  int rc = dl_backward(lt_ctx(L), t, g, keep);
  c->L = prev;
  if (rc < 0) return lt_raise(L);
  return 0;
}

static int l_detach(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_detach(lt_ctx(L), t));
}

static int l_is_leaf(lua_State *L) { lua_pushboolean(L, lt_check(L, 1)->grad_fn == NULL); return 1; }

static int l_grad_fn(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  if (t->grad_fn) lua_pushstring(L, t->grad_fn->name);
  else lua_pushnil(L);
  return 1;
}

static int l_set_grad_enabled(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  lua_pushboolean(L, ctx->grad_enabled);
  ctx->grad_enabled = lua_toboolean(L, 1);
  return 1;
}

static int l_is_grad_enabled(lua_State *L) { lua_pushboolean(L, lt_ctx(L)->grad_enabled); return 1; }

/* grad access: t.grad and t.grad = nil | tensor */
static int get_grad(lua_State *L, dl_tensor *t) {
  if (!t->grad) { lua_pushnil(L); return 1; }
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

/* ------------------------------------------------------ memory, seeds */

static int l_memory_stats(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  pthread_mutex_lock(&ctx->mem.lock);
  dl_mem m = ctx->mem;          /* copy: building the table may run the GC, which frees */
  pthread_mutex_unlock(&ctx->mem.lock);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, (lua_Integer)m.in_use); lua_setfield(L, -2, "in_use");
  lua_pushinteger(L, (lua_Integer)m.peak); lua_setfield(L, -2, "peak");
  lua_pushinteger(L, (lua_Integer)m.cached); lua_setfield(L, -2, "cached");
  lua_pushinteger(L, (lua_Integer)m.allocs); lua_setfield(L, -2, "allocs");
  lua_pushinteger(L, (lua_Integer)m.system_allocs); lua_setfield(L, -2, "system_allocs");
  lua_pushinteger(L, (lua_Integer)m.frees); lua_setfield(L, -2, "frees");
  if (m.limit) { lua_pushinteger(L, (lua_Integer)m.limit); lua_setfield(L, -2, "limit"); }
  return 1;
}

static int l_memory_limit(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  size_t old = ctx->mem.limit;
  if (!lua_isnoneornil(L, 1)) {
    int64_t v = lt_checkint(L, 1, "memory.limit", "bytes");
    if (v <= 0) return luaL_error(L, "memory.limit: bytes must be positive, got %d", (int)v);
    ctx->mem.limit = (size_t)v;
  } else {
    ctx->mem.limit = 0;
  }
  if (old) lua_pushinteger(L, (lua_Integer)old);
  else lua_pushnil(L);
  return 1;
}

static int l_memory_reset_peak(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  ctx->mem.peak = ctx->mem.in_use;
  return 0;
}

static int l_memory_trim(lua_State *L) { dl_mem_trim(lt_ctx(L)); return 0; }

static int l_seed(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  if (lua_isnone(L, 1)) { lua_pushinteger(L, (lua_Integer)ctx->seed); return 1; }
  ctx->seed = (uint64_t)lt_checkint(L, 1, "seed", "seed");
  ctx->counter = 0;
  return 0;
}

static int l_rng_state(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  if (!lua_isnone(L, 1)) {
    ctx->seed = (uint64_t)lt_checkint(L, 1, "rng_state", "seed");
    ctx->counter = (uint64_t)lt_checkint(L, 2, "rng_state", "counter");
    return 0;
  }
  lua_pushinteger(L, (lua_Integer)ctx->seed);
  lua_pushinteger(L, (lua_Integer)ctx->counter);
  return 2;
}

static int l_threads(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  if (lua_isnone(L, 1)) { lua_pushinteger(L, ctx->threads); return 1; }
  int64_t n = lt_checkint(L, 1, "threads", "count");
  if (n < 1 || n > 256) return luaL_error(L, "threads: count must be between 1 and 256, got %d", (int)n);
  dl_pool *p = dl_pool_new((int)n);
  if (!p) return luaL_error(L, "threads: cannot start %d threads", (int)n);
  dl_pool_free(ctx->pool);
  ctx->pool = p;
  ctx->threads = (int)n;
  openblas_set_num_threads(1);            /* the pool splits products itself (gemm.c) */
  return 0;
}

/* randperm(n): a 1-based int64 permutation of 1..n from the default stream */
static int l_randperm(lua_State *L) {
  int64_t n = lt_checkint(L, 1, "randperm", "n");
  if (n < 0) return luaL_error(L, "randperm: n must be non-negative, got %d", (int)n);
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

/* clock(): monotonic wall time in seconds, for progress and benchmarks */
static int l_clock(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
  return 1;
}

/* isatty(fd): is file descriptor fd (default 1, stdout) a terminal? For progress display. */
static int l_isatty(lua_State *L) {
  lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 1)));
  return 1;
}

/* fsync(path): flushes a file or directory to disk; true, or nil and the reason */
static int l_fsync(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(e));
    return 2;
  }
  close(fd);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_read_idx(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_idx_read_new(lt_ctx(L), path));
}

/* ------------------------------------------------------------ registration */

static const luaL_Reg core_funcs[] = {
  {"arange", l_arange},
  {"backward", l_backward},
  {"clock", l_clock},
  {"isatty", l_isatty},
  {"fsync", l_fsync},
  {"detach", l_detach},
  {"dim", l_dim},
  {"dtype", l_dtype},
  {"empty", l_empty},
  {"full", l_full},
  {"get_flat", l_get_flat},
  {"grad_fn", l_grad_fn},
  {"is_contiguous", l_is_contiguous},
  {"is_grad_enabled", l_is_grad_enabled},
  {"is_leaf", l_is_leaf},
  {"item", l_item},
  {"memory_limit", l_memory_limit},
  {"memory_reset_peak", l_memory_reset_peak},
  {"memory_stats", l_memory_stats},
  {"memory_trim", l_memory_trim},
  {"numel", l_numel},
  {"ones", l_ones},
  {"rand", l_rand},
  {"randperm", l_randperm},
  {"read_idx", l_read_idx},
  {"randn", l_randn},
  {"release", l_release},
  {"requires_grad", l_requires_grad},
  {"rng_state", l_rng_state},
  {"seed", l_seed},
  {"set_flat", l_set_flat},
  {"set_grad_enabled", l_set_grad_enabled},
  {"shape", l_shape},
  {"size", l_size},
  {"stride", l_stride},
  {"tensor", l_tensor},
  {"threads", l_threads},
  {"tostring", l_tostring},
  {"totable", l_totable},
  {"zeros", l_zeros},
  {NULL, NULL}
};

/* __index: integers select along dim 1, "grad" reads the gradient, else methods */
static int l_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "grad") != 0) {
    lua_pushvalue(L, lua_upvalueindex(2));   /* methods: reachable on released boxes too */
    lua_pushvalue(L, 2);
    lua_rawget(L, -2);
    return 1;
  }
  dl_tensor *t = lt_check(L, 1);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    int64_t i = lt_checkint(L, 2, "index", "index");
    if (t->ndim == 0) return luaL_error(L, "index: cannot index a 0-d tensor");
    int64_t r = i < 0 ? t->shape[0] + i : i - 1;
    if (i == 0 || r < 0 || r >= t->shape[0])
      return luaL_error(L, "index: index %d out of range for dimension 1 of size %d", (int)i, (int)t->shape[0]);
    lt_newbox(L);
    return lt_finish(L, dl_select(lt_ctx(L), t, 0, r));
  }
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "grad") == 0) return get_grad(L, t);
  lua_pushvalue(L, lua_upvalueindex(2));   /* methods */
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

/* __newindex: t.grad = g | nil; t[i] = value or tensor (copy into the row) */
static int l_newindex(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING && strcmp(lua_tostring(L, 2), "grad") == 0) return set_grad(L, t, 3);
  if (lua_type(L, 2) == LUA_TNUMBER) {
    int64_t i = lt_checkint(L, 2, "index", "index");
    if (t->ndim == 0) return luaL_error(L, "index: cannot index a 0-d tensor");
    int64_t r = i < 0 ? t->shape[0] + i : i - 1;
    if (i == 0 || r < 0 || r >= t->shape[0])
      return luaL_error(L, "index: index %d out of range for dimension 1 of size %d", (int)i, (int)t->shape[0]);
    dl_ctx *ctx = lt_ctx(L);
    if (t->requires_grad && ctx->grad_enabled)
      return luaL_error(L, "index: in-place assignment to a tensor that requires grad");
    lt_newbox(L);
    dl_tensor *row = dl_select(ctx, t, 0, r);
    lt_finish(L, row);
    dl_tensor *v = lt_coerce(L, 3, t->dtype);
    dl_tensor *e = dl_expand(ctx, v, row->ndim, row->shape);
    if (!e) return lt_raise(L);
    int rc = dl_copy_into(ctx, row, e);
    dl_tensor_release(e);
    if (rc < 0) return lt_raise(L);
    return 0;
  }
  return luaL_error(L, "tensor: cannot set field '%s'", lua_tostring(L, 2) ? lua_tostring(L, 2) : "?");
}

int luaopen_dlua_core(lua_State *L) {
  luaL_checkversion(L);
  /* the context box: created first, so finalized last when the state closes */
  ctx_box *c = lua_newuserdatauv(L, sizeof *c, 0);
  c->ctx = NULL;
  c->L = NULL;
  c->gc_mark = 0;
  c->dead_refs = NULL;
  c->ndead = c->capdead = 0;
  if (luaL_newmetatable(L, "dlua.Context")) {
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  c->ctx = dl_ctx_new();
  if (!c->ctx) return luaL_error(L, "dlua: cannot create the engine context");
  openblas_set_num_threads(1);
  int cidx = lua_gettop(L);

  lua_newtable(L);                                   /* module = methods */
  int mod = lua_gettop(L);
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, core_funcs, 1);
  lt_register_ops(L, mod, cidx);
  lt_register_autograd(L, mod, cidx);
  lt_register_optim(L, mod, cidx);
  lt_register_batchnorm(L, mod, cidx);
  lt_register_pipeline(L, mod, cidx);
  lt_register_checkpoint(L, mod, cidx);
  lt_register_fileio(L, mod, cidx);
  lt_register_dist(L, mod, cidx);
  lt_register_proc(L, mod, cidx);

  luaL_newmetatable(L, "dlua.Tensor");
  int mt = lua_gettop(L);
  lua_pushvalue(L, cidx);
  lua_pushvalue(L, mod);
  lua_pushcclosure(L, l_index, 2);
  lua_setfield(L, mt, "__index");
  lua_pushvalue(L, cidx);
  lua_pushcclosure(L, l_newindex, 1);
  lua_setfield(L, mt, "__newindex");
  lua_pushvalue(L, cidx);
  lua_pushcclosure(L, l_release, 1);
  lua_setfield(L, mt, "__gc");
  lua_pushvalue(L, cidx);
  lua_pushcclosure(L, l_release, 1);
  lua_setfield(L, mt, "__close");
  lua_pushvalue(L, cidx);
  lua_pushcclosure(L, l_tostring, 1);
  lua_setfield(L, mt, "__tostring");
  lt_register_meta(L, mt, cidx);
  lua_pushvalue(L, mt);
  lua_setfield(L, mod, "Tensor");                    /* the metatable, for type checks */
  lua_pop(L, 1);
  lua_pushvalue(L, cidx);
  lua_setfield(L, mod, "_context");                  /* keeps the context alive */
  lua_pushvalue(L, mod);
  return 1;
}
