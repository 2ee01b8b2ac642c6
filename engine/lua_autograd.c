/* lua_autograd.c -- autograd nodes whose backward is a Lua function.
 *
 * dl.autograd.Function runs its forward in Lua with recording off, then
 * calls core.record_function(out, {inputs}, backward) to attach a node whose
 * C backward calls the Lua function with the output gradient. The Lua
 * function is kept in the registry; when the node dies (possibly inside a
 * finalizer) its reference is queued and released on the next record.
 */
/* See LICENSE */
#include "lua_tensor.h"

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

/* record_function(out, {inputs...}, backward) -> new output with grad_fn */
static int l_record_function(lua_State *L) {
  ctx_box *cb = lua_touserdata(L, lua_upvalueindex(1));
  for (int i = 0; i < cb->ndead; i++) luaL_unref(L, LUA_REGISTRYINDEX, cb->dead_refs[i]);
  cb->ndead = 0;
  dl_tensor *out = lt_check(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  lua_Integer n = luaL_len(L, 2);
  if (n < 1 || n > 4) return luaL_error(L, "autograd.Function: %d tensor inputs, 1 to 4 supported", (int)n);
  dl_tensor *in[4];
  for (lua_Integer k = 1; k <= n; k++) {
    lua_geti(L, 2, k);
    in[k - 1] = lt_check(L, lua_gettop(L));
    lua_pop(L, 1);                          /* still referenced by the table */
  }
  dl_ctx *ctx = lt_ctx(L);
  lt_newbox(L);
  dl_tensor *r = dl_detach(ctx, out);
  lt_finish(L, r);
  if (!dl_needs_grad(ctx, (int)n, in)) return 1;
  lua_fn *f = calloc(1, sizeof *f);
  if (!f) return luaL_error(L, "autograd.Function: out of memory");
  f->cb = cb;
  for (int i = 0; i < n; i++) {
    f->ndims[i] = in[i]->ndim;
    memcpy(f->shapes[i], in[i]->shape, sizeof(int64_t) * (size_t)in[i]->ndim);
  }
  snprintf(f->name, sizeof f->name, "%s", luaL_optstring(L, 4, "function"));
  tensor_box *box = lua_touserdata(L, -1);
  dl_node *nd = dl_tape_record(ctx, DL_OP_FUNCTION, &box->t, (int)n, in);
  if (!nd) { free(f); return lt_raise(L); }  /* (inputs need grad: NULL is a failure, box->t is NULL) */
  lua_pushvalue(L, 3);
  f->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  nd->name = f->name;         /* lives as long as the node: freed with it in fn_free */
  nd->user = f;
  nd->user_backward = bw_lua;
  nd->user_free = fn_free;
  return 1;
}

/* _ops() -> {{name =, forward =, backward =, lua =}, ...}: the core's op table (ops.h), in order */
static int l_ops(lua_State *L) {
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

static const luaL_Reg ag_funcs[] = {
  {"_ops", l_ops},
  {"record_function", l_record_function},
  {NULL, NULL}
};

void lt_register_autograd(lua_State *L, int mod, int cidx) {
  (void)mod;
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, ag_funcs, 1);
}
