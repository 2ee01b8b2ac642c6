/* lua_autograd.c -- autograd in Lua: backward, detach, the grad flags, and
 * nodes whose backward is a Lua function.
 *
 * dl.autograd.Function runs its forward in Lua with recording off, then
 * calls core.record_function(out, {inputs}, backward) to attach a node whose
 * C backward calls the Lua function with the output gradient. The Lua
 * function is kept in the registry; when the node dies (possibly inside a
 * finalizer) its reference is queued and released on the next record.
 */
/* See LICENSE */
#include "lua/lua_aux.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  ctx_box *cb;
  int ref;
  int64_t shapes[4][DL_MAXDIM];
  int ndims[4];
  char name[64];          /* the Function's name, for messages (node names are borrowed pointers) */
} lua_fn;

static void fn_free(void *p) {
  lua_fn *f = p;
  ctx_box *cb = f->cb;
  if (cb->ndead == cb->capdead) {
    int cap = cb->capdead ? 2 * cb->capdead : 16;
    int *v = realloc(cb->dead_refs, sizeof *v * (size_t)cap);
    if (v) { cb->dead_refs = v; cb->capdead = cap; }
  }
  if (cb->ndead < cb->capdead) cb->dead_refs[cb->ndead++] = f->ref;
  free(f);
}

static int bw_lua(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  lua_fn *f = n->user;
  lua_State *L = f->cb->L;
  if (!L) {
    dl_fail(ctx, "backward: a Lua-defined function can only run inside tensor:backward()");
    return -1;
  }
  int top = lua_gettop(L);
  if (!lua_checkstack(L, 8)) {
    dl_fail(ctx, "backward: Lua stack overflow");
    return -1;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, f->ref);
  tensor_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = dl_tensor_retain(g);
  luaL_setmetatable(L, "dlua.Tensor");
  int saved = ctx->grad_enabled;
  if (lua_pcall(L, 1, n->nin, 0) != LUA_OK) {
    ctx->grad_enabled = saved;
    dl_fail(ctx, "backward of %s: %s", n->name, lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object)");
    lua_settop(L, top);
    return -1;
  }
  ctx->grad_enabled = saved;
  for (int i = 0; i < n->nin; i++) {
    int k = top + 1 + i;
    if (lua_isnil(L, k)) continue;
    tensor_box *r = luaL_testudata(L, k, "dlua.Tensor");
    if (!r || !r->t) {
      dl_fail(ctx, "backward of %s: result %d is a %s, expected a tensor or nil", n->name, i + 1, luaL_typename(L, k));
      lua_settop(L, top);
      return -1;
    }
    if (r->t->ndim != f->ndims[i] || memcmp(r->t->shape, f->shapes[i], sizeof(int64_t) * (size_t)f->ndims[i])) {
      char a[128], e[128];
      dl_shape_str(r->t->shape, r->t->ndim, a, sizeof a);
      dl_shape_str(f->shapes[i], f->ndims[i], e, sizeof e);
      dl_fail(ctx, "backward of %s: gradient %d has shape %s, expected %s", n->name, i + 1, a, e);
      lua_settop(L, top);
      return -1;
    }
    if (n->in[i]->requires_grad) gin[i] = dl_tensor_retain(r->t);
  }
  lua_settop(L, top);
  return 0;
}

/* record_function(out, {inputs...}, backward [, name]) -> new output with grad_fn */
static int autograd_record_function(lua_State *L) {
  ctx_box *cb = lt_cbox(L);
  for (int i = 0; i < cb->ndead; i++) luaL_unref(L, LUA_REGISTRYINDEX, cb->dead_refs[i]);
  cb->ndead = 0;
  dl_tensor *out = lt_check(L, 1);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  const char *name = luaL_optstring(L, 4, "function");
  lt_checkargs(L, 4);
  int n = 0;
  dl_tensor **in = lt_check_tensor_list(L, 2, 4, &n);   /* anchored by its snapshot */
  if (n < 1) return lt_argerror(L, 2, "%d tensor inputs, 1 to 4 supported", n);
  dl_ctx *ctx = lt_ctx(L);
  lt_newbox(L);
  dl_tensor *r = dl_detach(ctx, out);
  lt_finish(L, r);
  if (!dl_needs_grad(ctx, n, in)) return 1;
  lua_fn *f = calloc(1, sizeof *f);
  if (!f) return luaL_error(L, "autograd.Function: out of memory");
  f->cb = cb;
  for (int i = 0; i < n; i++) {
    f->ndims[i] = in[i]->ndim;
    memcpy(f->shapes[i], in[i]->shape, sizeof(int64_t) * (size_t)in[i]->ndim);
  }
  snprintf(f->name, sizeof f->name, "%s", name);
  tensor_box *box = lua_touserdata(L, -1);
  dl_node *nd = dl_tape_record(ctx, DL_OP_FUNCTION, &box->t, n, in);
  if (!nd) {                  /* the inputs need grad, so NULL is a failure (box->t is NULL) */
    free(f);
    return lt_raise(L);
  }
  lua_pushvalue(L, 3);
  f->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  nd->name = f->name;         /* lives as long as the node: freed with it in fn_free */
  nd->user = f;
  nd->user_backward = bw_lua;
  nd->user_free = fn_free;
  return 1;
}

/* _ops() -> {{name =, forward =, backward =, lua =}, ...}: the core's op table (ops.h), in order */
static int autograd__ops(lua_State *L) {
  lt_checkargs(L, 0);
  lua_createtable(L, DL_NOPS, 0);
  for (int i = 0; i < DL_NOPS; i++) {
    const dl_op_info *o = dl_op_get((dl_op)i);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, o->name); lua_setfield(L, -2, "name");
    lua_pushstring(L, o->forward); lua_setfield(L, -2, "forward");
    lua_pushstring(L, o->backward); lua_setfield(L, -2, "backward");
    lua_pushstring(L, o->lua); lua_setfield(L, -2, "lua");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ------------------------------------------------------------ flags, backward */

/* requires_grad(t) -> flag; requires_grad(t, flag) sets it and returns t */
static int autograd_requires_grad(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 2);
  if (lua_isnoneornil(L, 2)) {
    lua_pushboolean(L, t->requires_grad);
    return 1;
  }
  if (dl_set_requires_grad(lt_ctx(L), t, lt_checkboolean(L, 2)) < 0) return lt_raise(L);
  lua_settop(L, 1);
  return 1;
}

static const char *const backward_keys[] = {"keep_graph", NULL};

/* backward(t [, gradient] [, {keep_graph =}]): a table with entries is a
 * gradient, one without is the options */
static int autograd_backward(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  int given = !lua_isnoneornil(L, 2) && !(lua_type(L, 2) == LUA_TTABLE && lua_rawlen(L, 2) == 0);
  dl_tensor *g = given ? lt_coerce(L, 2, t->dtype) : NULL;
  lt_opts o;
  lt_options_after(L, 2, given, backward_keys, &o);
  int keep = lt_opt_boolean(L, &o, "keep_graph", 0);
  ctx_box *c = lt_cbox(L);
  dl_ctx *ctx = lt_ctx(L);
  /* The forward's intermediate tensors are garbage to Lua by now, but each keeps its storage
   * until the collector finalizes its box, and the walk can free an activation after its last
   * use only if nothing else holds it. When a forward allocated 64 MiB or more since the last
   * backward, a full collection first (its cost follows the Lua heap, about a millisecond for
   * ResNet-18's, not the tensors): ResNet-18's backward at batch 64 then peaks 54 MiB lower. */
  if (ctx->mem.in_use > c->backward_mark + ((size_t)64 << 20)) lua_gc(L, LUA_GCCOLLECT);
  lua_State *prev = c->L;
  c->L = L;
  int rc = dl_backward(ctx, t, g, keep);
  c->L = prev;
  c->backward_mark = ctx->mem.in_use;
  if (rc < 0) return lt_raise(L);
  return 0;
}

static int autograd_detach(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  lt_newbox(L);
  return lt_finish(L, dl_detach(lt_ctx(L), t));
}

static int autograd_is_leaf(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  lua_pushboolean(L, t->grad_fn == NULL);
  return 1;
}

static int autograd_grad_fn(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  if (t->grad_fn) lua_pushstring(L, t->grad_fn->name);
  else lua_pushnil(L);
  return 1;
}

/* set_grad_enabled(flag) -> the previous flag */
static int autograd_set_grad_enabled(lua_State *L) {
  int flag = lt_checkboolean(L, 1);
  lt_checkargs(L, 1);
  dl_ctx *ctx = lt_ctx(L);
  lua_pushboolean(L, ctx->grad_enabled);
  ctx->grad_enabled = flag;
  return 1;
}

static int autograd_is_grad_enabled(lua_State *L) {
  lt_checkargs(L, 0);
  lua_pushboolean(L, lt_ctx(L)->grad_enabled);
  return 1;
}

static const luaL_Reg autograd_funcs[] = {
  {"_ops", autograd__ops},
  {"backward", autograd_backward},
  {"detach", autograd_detach},
  {"grad_fn", autograd_grad_fn},
  {"is_grad_enabled", autograd_is_grad_enabled},
  {"is_leaf", autograd_is_leaf},
  {"record_function", autograd_record_function},
  {"requires_grad", autograd_requires_grad},
  {"set_grad_enabled", autograd_set_grad_enabled},
  {NULL, NULL}
};

void lt_register_autograd(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, autograd_funcs); }
