/* lua_onnx.c -- binds the ONNX writer (engine/io/onnx.c) to Lua.
 *
 * One private function of "dlua.core", called by lua/dlua/nn/onnx.lua, which owns the
 * documentation (dl.onnx.export) and builds the graph:
 *   _onnx_write(path, model) -> true
 * where model is
 *   {opset = 13, producer = "dlua", version = "0.1.0",
 *    inputs = {value...}, outputs = {value...},   value: {name =, dtype =, dims = {-1, 28}, dynamic = "batch"}
 *    initializers = {{name =, tensor =}...},
 *    nodes = {{op =, name =, inputs = {...}, outputs = {...}, attrs = {{name =, int|ints|float = v}...}}...}}
 * Every table is checked (unknown keys, types, lengths), naming the element
 * ("option 'nodes[3].op' (string expected, got nil)"); a failed write raises the
 * file's message. The builder lives in a userdata whose __gc frees it, so an error
 * raised half way leaks nothing.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "io/onnx.h"

#include <lauxlib.h>
#include <stdio.h>

#define MAX_LIST 1000000
#define BUILDER "dlua.OnnxBuilder"

typedef struct { dl_onnx *m; } onnx_box;

static int builder_gc(lua_State *L) {
  onnx_box *b = luaL_checkudata(L, 1, BUILDER);
  dl_onnx_free(b->m);
  b->m = NULL;
  return 0;
}

/* the required string o.key */
static const char *need_string(lua_State *L, const lt_opts *o, const char *key) {
  const char *s = lt_opt_string(L, o, key, NULL);
  if (!s) lt_opt_error(L, o, key, "string expected, got nil");
  return s;
}

/* the list o.key as a snapshot pushed on the stack (an empty one when absent and
 * optional); returns its length */
static int need_list(lua_State *L, const lt_opts *o, const char *key, int optional) {
  int ty = lt_opt_push(L, o, key);
  if (ty == LUA_TNIL && optional) {
    lua_pop(L, 1);
    lua_newtable(L);
    return 0;
  }
  if (ty != LUA_TTABLE) lt_opt_error(L, o, key, "table expected, got %s", lt_typename(L, -1));
  int n = lt_snapshot(L, o->arg, -1, MAX_LIST);
  lua_remove(L, -2);
  return n;
}

/* the strings of list o.key into an array allocated as a userdata (left on the stack) */
static const char **string_list(lua_State *L, const lt_opts *o, const char *key, int *n) {
  *n = need_list(L, o, key, 0);
  int snap = lua_gettop(L);
  const char **a = lua_newuserdatauv(L, (size_t)(*n > 0 ? *n : 1) * sizeof *a, 0);
  for (int i = 0; i < *n; i++) {
    if (lua_rawgeti(L, snap, i + 1) != LUA_TSTRING)
      lt_opt_error(L, o, key, "element %d is a %s, expected a string", i + 1, lt_typename(L, -1));
    a[i] = lua_tostring(L, -1);              /* anchored by the snapshot */
    lua_pop(L, 1);
  }
  return a;
}

/* the n integers of the list at index list into v, each >= lo, else "element k is not <what>" */
static void int_list(lua_State *L, const lt_opts *o, const char *key, int list, int n, int64_t *v,
                     lua_Integer lo, const char *what) {
  for (int k = 0; k < n; k++) {
    lua_rawgeti(L, list, k + 1);
    int isint;
    lua_Integer x = lua_tointegerx(L, -1, &isint);
    if (!isint || x < lo) lt_opt_error(L, o, key, "element %d is not %s", k + 1, what);
    v[k] = (int64_t)x;
    lua_pop(L, 1);
  }
}

static void raise_if(lua_State *L, int rc) {
  if (rc < 0) lt_raise_plain(L);
}

/* what reads one entry of a model's list into m; flag: add_value's output */
typedef void (*entry_fn)(lua_State *L, dl_onnx *m, const lt_opts *o, int flag);

/* fn on each entry of the list parent.key (absent: none when optional, else an error), each
 * read as an options table with keys, "<parent's path><key>[i]" in messages; the stack is
 * as it was after each entry */
static void each_entry(lua_State *L, dl_onnx *m, const lt_opts *parent, const char *key, int optional,
                       const char *const keys[], entry_fn fn, int flag) {
  int n = need_list(L, parent, key, optional);
  int snap = lua_gettop(L);
  for (int i = 0; i < n; i++) {
    char path[128];
    snprintf(path, sizeof path, "%s%s[%d]", parent->path, key, i + 1);
    lua_rawgeti(L, snap, i + 1);
    lt_opts o;
    lt_options_at(L, parent->arg, -1, path, keys, &o);
    if (!o.idx) lt_argerror(L, parent->arg, "option '%s' (table expected, got nil)", path);
    fn(L, m, &o, flag);
    lua_settop(L, snap);
  }
  lua_pop(L, 1);
}

static const char *const value_keys[] = {"dims", "dtype", "dynamic", "name", NULL};

static void add_value(lua_State *L, dl_onnx *m, const lt_opts *o, int output) {
  const char *name = need_string(L, o, "name");
  dl_dtype d = lt_opt_dtype(L, o, "dtype", DL_F32);
  const char *dyn = lt_opt_string(L, o, "dynamic", NULL);
  int nd = need_list(L, o, "dims", 0);
  if (nd > DL_MAXDIM) lt_opt_error(L, o, "dims", "%d dims, at most %d", nd, DL_MAXDIM);
  int64_t dims[DL_MAXDIM];
  int_list(L, o, "dims", lua_gettop(L), nd, dims, -1, "a size or -1 (dynamic)");
  raise_if(L, dl_onnx_value(m, output, name, d, nd, dims, dyn));
}

static const char *const init_keys[] = {"name", "tensor", NULL};

static void add_initializer(lua_State *L, dl_onnx *m, const lt_opts *o, int flag) {
  (void)flag;
  const char *name = need_string(L, o, "name");
  dl_tensor *t = lt_opt_tensor(L, o, "tensor");
  if (!t) lt_opt_error(L, o, "tensor", "dlua.Tensor expected, got nil");
  raise_if(L, dl_onnx_initializer(m, name, t));
}

static const char *const attr_keys[] = {"float", "int", "ints", "name", NULL};

static void add_attr(lua_State *L, dl_onnx *m, const lt_opts *o, int flag) {
  (void)flag;
  const char *name = need_string(L, o, "name");
  int given = 0;
  if (lt_opt_push(L, o, "int") != LUA_TNIL) {
    given++;
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint) lt_opt_error(L, o, "int", "integer expected, got %s", lt_typename(L, -1));
    raise_if(L, dl_onnx_attr_int(m, name, (int64_t)v));
  }
  if (lt_opt_push(L, o, "float") != LUA_TNIL) {
    given++;
    if (lua_type(L, -1) != LUA_TNUMBER) lt_opt_error(L, o, "float", "number expected, got %s", lt_typename(L, -1));
    raise_if(L, dl_onnx_attr_float(m, name, (float)lua_tonumber(L, -1)));
  }
  if (lt_opt_push(L, o, "ints") != LUA_TNIL) {
    given++;
    int n = need_list(L, o, "ints", 0);
    int64_t *v = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *v, 0);
    int_list(L, o, "ints", lua_gettop(L) - 1, n, v, LUA_MININTEGER, "an integer");
    raise_if(L, dl_onnx_attr_ints(m, name, n, v));
  }
  if (given != 1) lt_opt_error(L, o, "name", "attribute '%s' needs exactly one of int, ints, float", name);
}

static const char *const node_keys[] = {"attrs", "inputs", "name", "op", "outputs", NULL};

static void add_node(lua_State *L, dl_onnx *m, const lt_opts *o, int flag) {
  (void)flag;
  const char *op = need_string(L, o, "op");
  const char *name = lt_opt_string(L, o, "name", "");
  int nin, nout;
  const char **in = string_list(L, o, "inputs", &nin);
  const char **out = string_list(L, o, "outputs", &nout);
  raise_if(L, dl_onnx_node(m, op, name, nin, in, nout, out));
  each_entry(L, m, o, "attrs", 1, attr_keys, add_attr, 0);   /* after the node: attributes join the last one */
}

static const char *const model_keys[] = {"initializers", "inputs", "nodes", "opset", "outputs",
                                         "producer", "version", NULL};

static int onnx_write(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_opts o;
  if (!lt_options(L, 2, model_keys, &o)) luaL_typeerror(L, 2, "table");
  lt_checkargs(L, 2);
  luaL_checkstack(L, 40, "onnx model");
  int64_t opset = lt_opt_integer(L, &o, "opset", 13);
  const char *producer = lt_opt_string(L, &o, "producer", "dlua");
  const char *version = lt_opt_string(L, &o, "version", "");
  onnx_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->m = NULL;
  luaL_setmetatable(L, BUILDER);
  b->m = dl_onnx_new(lt_ctx(L), producer, version, opset);
  if (!b->m) return lt_raise_plain(L);
  each_entry(L, b->m, &o, "inputs", 0, value_keys, add_value, 0);
  each_entry(L, b->m, &o, "outputs", 0, value_keys, add_value, 1);
  each_entry(L, b->m, &o, "initializers", 1, init_keys, add_initializer, 0);
  each_entry(L, b->m, &o, "nodes", 0, node_keys, add_node, 0);
  raise_if(L, dl_onnx_write(b->m, path));
  dl_onnx_free(b->m);
  b->m = NULL;
  lua_pushboolean(L, 1);
  return 1;
}

static const luaL_Reg onnx_funcs[] = {
  {"_onnx_write", onnx_write},
  {NULL, NULL}
};

void lt_register_onnx(lua_State *L, int mod, int cidx) {
  if (luaL_newmetatable(L, BUILDER)) {
    lua_pushcfunction(L, builder_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lt_setfuncs(L, mod, cidx, onnx_funcs);
}
