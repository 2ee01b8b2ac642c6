/* lua_init.c -- the top of the binding layer: opens the module "dlua.core".
 *
 * It creates the engine context (a "dlua.Context" box, upvalue 1 of every
 * binding), the metatables of the boxes that several files share
 * ("dlua.Tensor", "dlua.Dataset"), complete with __gc before any object
 * exists, and the module table, which is also the tensor method table
 * (t:sum(2) is core.sum(t, 2)). Then each concern registers its functions
 * through one lt_register_* call; those files use lua_aux.c and the core,
 * never each other.
 */
/* See LICENSE */
#include "lua/lua_aux.h"

#include <lauxlib.h>
#include <stdlib.h>

void openblas_set_num_threads(int n);

static int ctx_gc(lua_State *L) {
  ctx_box *c = luaL_checkudata(L, 1, "dlua.Context");
  dl_trace_free(c->trace);
  c->trace = NULL;
  dl_ctx_free(c->ctx);
  c->ctx = NULL;
  free(c->dead_refs);
  c->dead_refs = NULL;
  return 0;
}

/* the context box: created first, so finalized last when the state closes */
static int new_context(lua_State *L) {
  ctx_box *c = lua_newuserdatauv(L, sizeof *c, 0);
  c->ctx = NULL;
  c->L = NULL;
  c->gc_mark = 0;
  c->backward_mark = 0;
  c->dead_refs = NULL;
  c->ndead = c->capdead = 0;
  c->trace = NULL;
  c->trace_path[0] = 0;
  c->trace_next_id = 0;
  c->open_core = luaopen_dlua_core;
  if (luaL_newmetatable(L, "dlua.Context")) {
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  c->ctx = dl_ctx_new();
  if (!c->ctx) return luaL_error(L, "dlua: cannot create the engine context");
  c->trace = dl_trace_new();
  if (!c->trace) return luaL_error(L, "dlua: cannot create the trace recorder");
  return lua_gettop(L);
}

int luaopen_dlua_core(lua_State *L) {
  luaL_checkversion(L);
  char switch_err[200];
  if (lt_switches_error(switch_err, sizeof switch_err)) return luaL_error(L, "%s", switch_err);
  int cidx = new_context(L);
  openblas_set_num_threads(1);            /* the pool splits products itself (gemm.c) */

  luaL_newmetatable(L, "dlua.Tensor");    /* filled by lua_tensor.c and lua_ops.c */
  lt_set_release(L, lt_tensor_release);
  int mt = lua_gettop(L);
  if (luaL_newmetatable(L, "dlua.Dataset")) {
    lua_pushcfunction(L, lt_dataset_release);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);

  lua_newtable(L);                        /* module = tensor methods */
  int mod = lua_gettop(L);
  lt_register_tensor(L, mod, cidx);
  lt_register_ops(L, mod, cidx);
  lt_register_conv(L, mod, cidx);
  lt_register_autograd(L, mod, cidx);
  lt_register_sys(L, mod, cidx);
  lt_register_machine(L, mod, cidx);
  lt_register_optim(L, mod, cidx);
  lt_register_batchnorm(L, mod, cidx);
  lt_register_dataset(L, mod, cidx);
  lt_register_pipeline(L, mod, cidx);
  lt_register_trace(L, mod, cidx);
  lt_register_checkpoint(L, mod, cidx);
  lt_register_fileio(L, mod, cidx);
  lt_register_gp(L, mod, cidx);
  lt_register_dist(L, mod, cidx);
  lt_register_proc(L, mod, cidx);
  lt_register_shards(L, mod, cidx);
  lt_register_onnx(L, mod, cidx);

  lua_pushvalue(L, mt);
  lua_setfield(L, mod, "Tensor");         /* the metatable, for type checks */
  lua_pushvalue(L, cidx);
  lua_setfield(L, mod, "_context");       /* keeps the context alive */
  return 1;
}
