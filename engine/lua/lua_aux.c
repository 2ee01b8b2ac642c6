/* lua_aux.c -- the shared helpers of the binding layer (see lua_aux.h): the
 * context upvalue, tensor and dataset boxes, argument checks in the style of
 * lauxlib, the one option-table reader, list snapshots, and turning core
 * errors into Lua errors. It calls no binding file; they all call it.
 */
/* See LICENSE */
#include "lua/lua_aux.h"

#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ context */

ctx_box *lt_cbox(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

dl_ctx *lt_ctx(lua_State *L) { return lt_cbox(L)->ctx; }

int lt_raise(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  ctx->oom = 0;
  luaL_where(L, 1);
  lua_pushstring(L, ctx->err);
  lua_concat(L, 2);
  return lua_error(L);
}

int lt_raise_plain(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  ctx->oom = 0;
  lua_pushstring(L, ctx->err);
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

/* ------------------------------------------------------------ tensor boxes */

tensor_box *lt_newbox(lua_State *L) {
  tensor_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = NULL;
  luaL_setmetatable(L, "dlua.Tensor");
  return b;
}

int lt_finish(lua_State *L, dl_tensor *t) {
  if (!t) return lt_raise(L);
  tensor_box *b = lua_touserdata(L, -1);
  b->t = t;
  ctx_box *c = lt_cbox(L);
  lt_gc_pressure(L, c->ctx, &c->gc_mark);
  return 1;
}

int lt_push(lua_State *L, dl_tensor *t) {
  if (!t) return lt_raise(L);
  lt_newbox(L);
  return lt_finish(L, t);
}

int lt_tensor_release(lua_State *L) {
  tensor_box *b = luaL_checkudata(L, 1, "dlua.Tensor");
  dl_tensor_release(b->t);
  b->t = NULL;
  return 0;
}

dl_tensor *lt_check(lua_State *L, int arg) {
  tensor_box *b = luaL_checkudata(L, arg, "dlua.Tensor");
  if (!b->t) luaL_argerror(L, arg, "tensor has been released");
  return b->t;
}

dl_tensor *lt_test(lua_State *L, int i) {
  tensor_box *b = luaL_testudata(L, i, "dlua.Tensor");
  return b ? b->t : NULL;
}

/* ---------------------------------------------------- table -> tensor */

/* One pass over a nested table: the shape is fixed by the first entry seen at
 * each depth, every later table must agree, and the leaves go into a scratch
 * userdata at stack index `buf` that doubles as needed (the old one is left to
 * the GC, so a raise strands nothing). */
typedef struct {
  int arg, buf, nd;          /* nd = -1 until the first leaf or empty table fixes it */
  int64_t shape[DL_MAXDIM];
  int known;                 /* depths whose size is fixed */
  double *v;
  int64_t n, cap;
} table_reader;

static void read_leaf(lua_State *L, table_reader *r, double x) {
  if (r->n == r->cap) {
    int64_t cap = r->cap ? 2 * r->cap : 64;
    if (cap > ((int64_t)1 << 40) / (int64_t)sizeof(double)) lt_argerror(L, r->arg, "nested table is too large");
    double *v = lua_newuserdatauv(L, sizeof(double) * (size_t)cap, 0);
    if (r->n) memcpy(v, r->v, sizeof(double) * (size_t)r->n);
    lua_replace(L, r->buf);
    r->v = v;
    r->cap = cap;
  }
  r->v[r->n++] = x;
}

/* 1 when the number at idx is an integer that float64 does not hold exactly (beyond 2^53) */
static int inexact_integer(lua_State *L, int idx) {
  if (!lua_isinteger(L, idx)) return 0;
  lua_Integer i = lua_tointeger(L, idx);
  double d = (double)i;
  return d >= 9223372036854775808.0 || (lua_Integer)d != i;
}

/* A list holds its entries 1..n and nothing else: a key beside them ({2, 3, dtype = "int32"},
 * {1, keepdim = true}, a hole past n) would be read by nobody, so it is an error naming the key.
 * A table with a metatable may be a proxy whose raw keys are its own business: not checked. */
static void check_list_keys(lua_State *L, int arg, int idx, lua_Integer n, const char *what) {
  idx = lua_absindex(L, idx);
  if (lua_getmetatable(L, idx)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1 && lua_tointeger(L, -1) <= n) continue;
    if (lua_type(L, -1) == LUA_TSTRING)
      lt_argerror(L, arg, "%s has the key '%s', which nothing reads: a list holds only its entries 1..%I", what,
                  lua_tostring(L, -1), n);
    if (lua_isinteger(L, -1))
      lt_argerror(L, arg, "%s has the key %I past its length %I: a list holds only its entries 1..%I", what,
                  lua_tointeger(L, -1), n, n);
    lt_argerror(L, arg, "%s has a %s key, which nothing reads: a list holds only its entries 1..%I", what,
                lt_typename(L, -1), n);
  }
}

static void read_table(lua_State *L, table_reader *r, int idx, int depth, char *path, size_t plen) {
  if (depth >= DL_MAXDIM) lt_argerror(L, r->arg, "nested table is deeper than %d levels", DL_MAXDIM);
  luaL_checkstack(L, 4, "reading a nested table");
  lua_Integer n = luaL_len(L, idx);
  if (depth >= r->known) {
    if (n < 0) lt_argerror(L, r->arg, "element %s has a negative length", path[0] ? path : "(top)");
    r->shape[depth] = n;
    r->known = depth + 1;
    if (n == 0 && r->nd < 0) r->nd = depth + 1;
  } else if (n != r->shape[depth]) {
    lt_argerror(L, r->arg, "ragged nested table: element %s has %I entries, expected %I", path[0] ? path : "(top)",
                (lua_Integer)n, (lua_Integer)r->shape[depth]);
  }
  char what[160];
  snprintf(what, sizeof what, path[0] ? "element %s" : "the table", path);
  check_list_keys(L, r->arg, idx, n, what);
  size_t k = strlen(path);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, idx, i);
    snprintf(path + k, plen - k, "[%d]", (int)i);
    if (lua_istable(L, -1)) {
      if (r->nd >= 0 && depth + 1 >= r->nd)
        lt_argerror(L, r->arg, "ragged nested table: element %s is a table, expected a number", path);
      read_table(L, r, lua_gettop(L), depth + 1, path, plen);
    } else {
      if (r->nd < 0) r->nd = depth + 1;
      if (depth + 1 != r->nd)
        lt_argerror(L, r->arg, "ragged nested table: element %s is a %s, expected a table", path, lt_typename(L, -1));
      int isnum;
      lua_Number x = lua_tonumberx(L, -1, &isnum);
      if (!isnum && lua_isboolean(L, -1)) {
        x = lua_toboolean(L, -1);
        isnum = 1;
      }
      if (!isnum || lua_type(L, -1) == LUA_TSTRING)
        lt_argerror(L, r->arg, "element %s is a %s, expected a number", path, lt_typename(L, -1));
      if (inexact_integer(L, -1))
        lt_argerror(L, r->arg, "element %s is %I, beyond 2^53, where table values are no longer exact", path,
                    lua_tointeger(L, -1));
      read_leaf(L, r, x);
    }
    path[k] = 0;
    lua_pop(L, 1);
  }
}

/* the nested table at arg as a tensor of dtype d; int_like: d only when every value is a whole
 * number (else float32) */
static dl_tensor *from_table(lua_State *L, int arg, dl_dtype d, int int_like) {
  arg = lua_absindex(L, arg);
  table_reader r;
  memset(&r, 0, sizeof r);
  r.arg = arg;
  r.nd = -1;
  lua_pushnil(L);                          /* the scratch slot */
  r.buf = lua_gettop(L);
  char path[128] = "";
  read_table(L, &r, arg, 0, path, sizeof path);
  if (r.nd < 0) r.nd = r.known;
  for (int64_t i = 0; int_like && i < r.n; i++)
    if (r.v[i] != floor(r.v[i])) d = DL_F32;
  dl_tensor *t = dl_tensor_new_empty(lt_ctx(L), d, r.nd, r.shape);
  if (t)
    for (int64_t i = 0; i < r.n; i++) dl_store(t->st->data, d, i, r.v[i]);
  lua_remove(L, r.buf);
  if (!t) lt_raise(L);
  return t;
}

dl_tensor *lt_from_table(lua_State *L, int arg, dl_dtype d) { return from_table(L, arg, d, 0); }

static dl_tensor *coerce(lua_State *L, int arg, dl_dtype like, int exact) {
  arg = lua_absindex(L, arg);
  tensor_box *b = luaL_testudata(L, arg, "dlua.Tensor");
  if (b) {
    if (!b->t) luaL_argerror(L, arg, "tensor has been released");
    return b->t;
  }
  dl_tensor *n = NULL;
  if (lua_type(L, arg) == LUA_TNUMBER || lua_isboolean(L, arg)) {
    lt_newbox(L);
    double v = lua_isboolean(L, arg) ? lua_toboolean(L, arg) : lua_tonumber(L, arg);
    n = dl_tensor_new_scalar(lt_ctx(L), like, v);
    lt_finish(L, n);
  } else if (lua_istable(L, arg)) {
    lt_newbox(L);
    n = from_table(L, arg, dl_dtype_is_float(like) || exact ? like : DL_F32, exact && !dl_dtype_is_float(like));
    lt_finish(L, n);
  } else {
    luaL_typeerror(L, arg, "dlua.Tensor, number or table");
  }
  lua_replace(L, arg);
  return n;
}

dl_tensor *lt_coerce(lua_State *L, int arg, dl_dtype like) { return coerce(L, arg, like, 0); }

dl_tensor *lt_coerce_into(lua_State *L, int arg, dl_dtype like) { return coerce(L, arg, like, 1); }

/* ------------------------------------------------------------ datasets */

dataset_box *lt_new_dataset_box(lua_State *L) {
  dataset_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->ds = NULL;
  luaL_setmetatable(L, "dlua.Dataset");
  return b;
}

dl_dataset *lt_check_dataset(lua_State *L, int arg) {
  dataset_box *b = luaL_checkudata(L, arg, "dlua.Dataset");
  if (!b->ds) luaL_argerror(L, arg, "dataset has been released");
  return b->ds;
}

int lt_dataset_release(lua_State *L) {
  dataset_box *b = luaL_checkudata(L, 1, "dlua.Dataset");
  dl_dataset_release(b->ds);
  b->ds = NULL;
  return 0;
}

/* ------------------------------------------------------------ arguments */

int lt_argerror(lua_State *L, int arg, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *msg = lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return luaL_argerror(L, arg, msg);
}

const char *lt_typename(lua_State *L, int i) {
  int t = luaL_getmetafield(L, i, "__name");
  if (t == LUA_TSTRING) {
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1);                         /* the metatable keeps the name alive */
    return s;
  }
  if (t != LUA_TNIL) lua_pop(L, 1);
  return luaL_typename(L, i);
}

/* 1 when the running C function was called as a method (obj:name()), so the
 * counts in messages drop self the way luaL_argerror does */
static int called_as_method(lua_State *L) {
  lua_Debug ar;
  if (!lua_getstack(L, 0, &ar)) return 0;
  lua_getinfo(L, "n", &ar);
  return ar.namewhat && strcmp(ar.namewhat, "method") == 0;
}

void lt_checkargs(lua_State *L, int max) {
  int n = lua_gettop(L);
  while (n > max && lua_isnil(L, n)) n--;
  if (n <= max) return;
  int self = called_as_method(L);
  lt_argerror(L, max + 1, "no more than %d argument%s expected, got %d", max - self, max - self == 1 ? "" : "s",
              n - self);
}

int64_t lt_checkinteger(lua_State *L, int arg, const char *what) {
  int ok;
  lua_Integer v = lua_tointegerx(L, arg, &ok);
  if (ok && lua_type(L, arg) == LUA_TNUMBER) return (int64_t)v;
  if (lua_type(L, arg) == LUA_TNUMBER) {
    lua_Number x = lua_tonumber(L, arg);
    lt_argerror(L, arg, "%s %s is not an integer", what, x != x ? "nan" : lua_tostring(L, arg));
  }
  luaL_typeerror(L, arg, "integer");
  return 0;
}

int64_t lt_optinteger(lua_State *L, int arg, const char *what, int64_t def) {
  return lua_isnoneornil(L, arg) ? def : lt_checkinteger(L, arg, what);
}

dl_image_opts lt_check_image_opts(lua_State *L, int arg) {
  dl_image_opts o = dl_image_defaults();
  lua_Integer channels = lt_checkinteger(L, arg, "channels");
  if (channels != 1 && channels != 3) lt_argerror(L, arg, "channels must be 1 or 3, got %I", channels);
  o.channels = (int)channels;
  luaL_checktype(L, arg + 1, LUA_TBOOLEAN);
  o.skip = lua_toboolean(L, arg + 1);
  o.max_pixels = lt_optinteger(L, arg + 2, "max_pixels", 0);
  lt_checkargs(L, arg + 2);
  return o;
}

int lt_checkboolean(lua_State *L, int arg) {
  if (!lua_isboolean(L, arg)) luaL_typeerror(L, arg, "boolean");
  return lua_toboolean(L, arg);
}

lua_Number lt_checknumber(lua_State *L, int arg) {
  if (lua_type(L, arg) != LUA_TNUMBER) luaL_typeerror(L, arg, "number");   /* no numeric strings */
  if (inexact_integer(L, arg))
    lt_argerror(L, arg, "integer %I is beyond 2^53, where values passed as numbers are no longer exact",
                lua_tointeger(L, arg));
  return lua_tonumber(L, arg);
}

lua_Number lt_optnumber(lua_State *L, int arg, lua_Number def) {
  return lua_isnoneornil(L, arg) ? def : lt_checknumber(L, arg);
}

int lt_dim(lua_State *L, int arg, int64_t d, int ndim, int extra) {
  int n = ndim + extra;
  int64_t r = d < 0 ? n + d : d - 1;
  if (d == 0 || r < 0 || r >= (n > 0 ? n : 1))
    lt_argerror(L, arg, "dimension %I out of range for a %d-d tensor", (lua_Integer)d, ndim);
  return n == 0 ? 0 : (int)r;
}

int lt_checkdim(lua_State *L, int arg, int ndim, int extra) {
  return lt_dim(L, arg, lt_checkinteger(L, arg, "dimension"), ndim, extra);
}

static int64_t check_size(lua_State *L, int arg, int64_t v, int infer) {
  if (v < 0 && (v != -1 || !infer)) lt_argerror(L, arg, "size %I is negative", (lua_Integer)v);
  return v;
}

int lt_checkshape(lua_State *L, int arg, int64_t *shape, int *next, int infer) {
  int top = lua_gettop(L), nd = 0;
  if (lua_type(L, arg) == LUA_TTABLE) {
    int n = lt_snapshot(L, arg, arg, DL_MAXDIM);
    int snap = lua_gettop(L);
    for (int k = 1; k <= n; k++) {
      lua_rawgeti(L, snap, k);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok || lua_type(L, -1) != LUA_TNUMBER)
        lt_argerror(L, arg, "size %d is a %s, expected an integer", k,
                    lua_type(L, -1) == LUA_TNUMBER ? "non-integer number" : lt_typename(L, -1));
      shape[nd++] = check_size(L, arg, v, infer);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    *next = arg + 1;
    return nd;
  }
  int k = arg;
  for (; k <= top && lua_type(L, k) == LUA_TNUMBER; k++) {
    if (nd >= DL_MAXDIM) lt_argerror(L, k, "more than %d dimensions", DL_MAXDIM);
    shape[nd] = check_size(L, k, lt_checkinteger(L, k, "size"), infer);
    nd++;
  }
  *next = k;
  return nd;
}

dl_dtype lt_checkdtype(lua_State *L, int arg) {
  if (lua_type(L, arg) != LUA_TSTRING) luaL_typeerror(L, arg, "string");
  const char *s = lua_tostring(L, arg);
  int d = dl_dtype_from_name(s);
  if (d < 0) lt_argerror(L, arg, "unknown dtype '%s'; expected one of: float32, float64, int32, int64, uint8", s);
  return (dl_dtype)d;
}

/* ------------------------------------------------------------ option tables */

static void list_keys(luaL_Buffer *B, const char *const keys[]) {
  for (int i = 0; keys[i]; i++) {
    if (i) luaL_addstring(B, ", ");
    luaL_addstring(B, keys[i]);
  }
}

int lt_options_at(lua_State *L, int arg, int idx, const char *path, const char *const keys[], lt_opts *o) {
  idx = lua_absindex(L, idx);
  o->idx = 0;
  o->arg = arg;
  snprintf(o->path, sizeof o->path, "%s%s", path, path[0] ? "." : "");
  if (lua_isnoneornil(L, idx)) return 0;
  if (lua_type(L, idx) != LUA_TTABLE) {
    if (!path[0]) luaL_typeerror(L, arg, "options table");
    lt_argerror(L, arg, "option '%s' (table expected, got %s)", path, lt_typename(L, idx));
  }
  luaL_checkstack(L, 4, "reading options");
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int ok = 0;
    if (lua_type(L, -2) == LUA_TSTRING)
      for (int i = 0; keys[i] && !ok; i++) ok = strcmp(lua_tostring(L, -2), keys[i]) == 0;
    if (!ok) {
      luaL_Buffer B;
      luaL_buffinit(L, &B);
      list_keys(&B, keys);
      luaL_pushresult(&B);
      const char *valid = lua_tostring(L, -1);
      if (lua_type(L, -3) == LUA_TSTRING)
        lt_argerror(L, arg, "unknown option '%s%s'; expected one of: %s", o->path, lua_tostring(L, -3), valid);
      if (lua_type(L, -3) == LUA_TNUMBER) {
        lua_pushvalue(L, -3);
        lt_argerror(L, arg, "unknown option [%s] in '%s'; expected one of: %s", lua_tostring(L, -1),
                    path[0] ? path : "options", valid);
      }
      lt_argerror(L, arg, "unknown option (a %s key) in '%s'; expected one of: %s", lt_typename(L, -3),
                  path[0] ? path : "options", valid);
    }
    lua_pop(L, 1);
  }
  o->idx = idx;
  return 1;
}

int lt_options(lua_State *L, int arg, const char *const keys[], lt_opts *o) {
  return lt_options_at(L, arg, arg, "", keys, o);
}

void lt_options_after(lua_State *L, int arg, int given, const char *const keys[], lt_opts *o) {
  int at = given || lua_isnil(L, arg) ? arg + 1 : arg;
  lt_options(L, at, keys, o);
  lt_checkargs(L, at);
}

int lt_opt_push(lua_State *L, const lt_opts *o, const char *key) {
  if (!o->idx) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  lua_pushstring(L, key);
  return lua_rawget(L, o->idx);
}

int lt_opt_error(lua_State *L, const lt_opts *o, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *msg = lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return lt_argerror(L, o->arg, "option '%s%s' (%s)", o->path, key, msg);
}

static int absent(lua_State *L, const lt_opts *o, const char *key) {
  if (lt_opt_push(L, o, key) != LUA_TNIL) return 0;
  lua_pop(L, 1);
  return 1;
}

double lt_opt_number(lua_State *L, const lt_opts *o, const char *key, double def) {
  if (absent(L, o, key)) return def;
  if (lua_type(L, -1) != LUA_TNUMBER) lt_opt_error(L, o, key, "number expected, got %s", lt_typename(L, -1));
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

int64_t lt_opt_integer(lua_State *L, const lt_opts *o, const char *key, int64_t def) {
  if (absent(L, o, key)) return def;
  int ok;
  lua_Integer v = lua_tointegerx(L, -1, &ok);
  if (!ok || lua_type(L, -1) != LUA_TNUMBER) {
    if (lua_type(L, -1) == LUA_TNUMBER) lt_opt_error(L, o, key, "%s is not an integer", lua_tostring(L, -1));
    lt_opt_error(L, o, key, "integer expected, got %s", lt_typename(L, -1));
  }
  lua_pop(L, 1);
  return (int64_t)v;
}

int lt_opt_boolean(lua_State *L, const lt_opts *o, const char *key, int def) {
  if (absent(L, o, key)) return def;
  if (!lua_isboolean(L, -1)) lt_opt_error(L, o, key, "boolean expected, got %s", lt_typename(L, -1));
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

const char *lt_opt_string(lua_State *L, const lt_opts *o, const char *key, const char *def) {
  if (absent(L, o, key)) return def;
  if (lua_type(L, -1) != LUA_TSTRING) lt_opt_error(L, o, key, "string expected, got %s", lt_typename(L, -1));
  return lua_tostring(L, -1);              /* left on the stack: anchored */
}

dl_dtype lt_opt_dtype(lua_State *L, const lt_opts *o, const char *key, dl_dtype def) {
  if (absent(L, o, key)) return def;
  if (lua_type(L, -1) != LUA_TSTRING) lt_opt_error(L, o, key, "string expected, got %s", lt_typename(L, -1));
  int d = dl_dtype_from_name(lua_tostring(L, -1));
  if (d < 0)
    lt_opt_error(L, o, key, "unknown dtype '%s'; expected one of: float32, float64, int32, int64, uint8",
                 lua_tostring(L, -1));
  lua_pop(L, 1);
  return (dl_dtype)d;
}

dl_tensor *lt_opt_tensor(lua_State *L, const lt_opts *o, const char *key) {
  if (absent(L, o, key)) return NULL;
  tensor_box *b = luaL_testudata(L, -1, "dlua.Tensor");
  if (!b) lt_opt_error(L, o, key, "dlua.Tensor expected, got %s", lt_typename(L, -1));
  if (!b->t) lt_opt_error(L, o, key, "tensor has been released");
  lua_pop(L, 1);                           /* the options table (an argument) anchors it */
  return b->t;
}

/* ------------------------------------------------------------ lists */

int lt_snapshot(lua_State *L, int arg, int idx, int max) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE) {
    if (idx == arg) luaL_typeerror(L, arg, "table");
    lt_argerror(L, arg, "table expected, got %s", lt_typename(L, idx));
  }
  lua_Integer n = luaL_len(L, idx);
  if (n < 0 || n > max) lt_argerror(L, arg, "list of %I entries (at most %d)", (lua_Integer)n, max);
  check_list_keys(L, arg, idx, n, "the list");
  lua_createtable(L, (int)n, 0);
  int snap = lua_gettop(L);
  for (lua_Integer k = 1; k <= n; k++) {
    lua_geti(L, idx, k);
    lua_rawseti(L, snap, k);
  }
  return (int)n;
}

const char **lt_check_strings(lua_State *L, int arg, int max, const char *what, int *n) {
  *n = lt_snapshot(L, arg, arg, max);
  int snap = lua_gettop(L);
  const char **s = lua_newuserdatauv(L, (size_t)(*n ? *n : 1) * sizeof *s, 0);
  for (int i = 0; i < *n; i++) {
    lua_rawgeti(L, snap, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      lt_argerror(L, arg, "element %d is a %s, expected a %s", i + 1, lt_typename(L, -1), what);
    s[i] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return s;
}

dl_tensor **lt_check_tensor_list(lua_State *L, int arg, int max, int *n) {
  int len = lt_snapshot(L, arg, arg, max);
  int snap = lua_gettop(L);
  dl_tensor **ts = lua_newuserdatauv(L, sizeof(dl_tensor *) * (size_t)(len > 0 ? len : 1), 0);
  for (int k = 1; k <= len; k++) {
    lua_rawgeti(L, snap, k);
    tensor_box *b = luaL_testudata(L, -1, "dlua.Tensor");
    if (!b) lt_argerror(L, arg, "element %d is a %s, expected a tensor", k, lt_typename(L, -1));
    if (!b->t) lt_argerror(L, arg, "element %d is a released tensor", k);
    ts[k - 1] = b->t;
    lua_pop(L, 1);                         /* the snapshot anchors it */
  }
  *n = len;
  return ts;
}

/* ------------------------------------------------------------ registration */

void lt_setinteger(lua_State *L, const char *key, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, key);
}

void lt_setnumber(lua_State *L, const char *key, lua_Number v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

void lt_setstring(lua_State *L, const char *key, const char *v) {
  lua_pushstring(L, v);
  lua_setfield(L, -2, key);
}

void lt_setfuncs(lua_State *L, int mod, int cidx, const luaL_Reg *fns) {
  lua_pushvalue(L, mod);
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, fns, 1);
  lua_pop(L, 1);
}

void lt_set_release(lua_State *L, lua_CFunction release) {
  lua_pushcfunction(L, release);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, release);
  lua_setfield(L, -2, "__close");
}

void lt_newclass(lua_State *L, const char *name, lua_CFunction release, const luaL_Reg *methods, int cidx) {
  if (luaL_newmetatable(L, name)) {
    if (methods) {
      lua_pushvalue(L, cidx);
      luaL_setfuncs(L, methods, 1);
      lua_pushvalue(L, -1);
      lua_setfield(L, -2, "__index");
    }
    lt_set_release(L, release);
  }
  lua_pop(L, 1);
}
