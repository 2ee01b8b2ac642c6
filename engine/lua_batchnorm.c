/* lua_batchnorm.c -- binds the batch normalisation op (engine/batchnorm.c) as
 * dl.batch_norm(x, weight, bias [, opts]).
 *
 * weight and bias may be nil (no affine transform). opts: training (true),
 * running_mean, running_var (float32 [C] or [replicas, C], updated in place
 * in training), momentum (0.1), eps (1e-5), replicas (1), virtual_batch
 * (false = whole replica shard), sync (false). Unknown keys are errors.
 * The moving-average synchronisation and the BatchNorm module live in
 * lua/dlua/batchnorm.lua.
 */
/* See LICENSE */
#include "lua_tensor.h"
#include "batchnorm.h"

#include <lauxlib.h>
#include <string.h>

static const char *const bn_keys[] = {"eps", "momentum", "replicas", "running_mean", "running_var",
                                      "sync", "training", "virtual_batch", NULL};

static void check_bn_keys(lua_State *L, int opts) {
  lua_pushnil(L);
  while (lua_next(L, opts)) {
    int ok = 0;
    if (lua_type(L, -2) == LUA_TSTRING)
      for (int i = 0; bn_keys[i]; i++) ok |= strcmp(lua_tostring(L, -2), bn_keys[i]) == 0;
    if (!ok)
      luaL_error(L, "batch_norm: unknown option '%s' (valid: eps, momentum, replicas, running_mean, running_var, "
                    "sync, training, virtual_batch)",
                 lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?");
    lua_pop(L, 1);
  }
}

/* a tensor argument that may be nil or false */
static dl_tensor *opt_tensor(lua_State *L, int i) {
  if (lua_isnoneornil(L, i) || (lua_isboolean(L, i) && !lua_toboolean(L, i))) return NULL;
  return lt_check(L, i);
}

static double opt_num(lua_State *L, int opts, const char *key, double def) {
  lua_getfield(L, opts, key);
  if (lua_isnil(L, -1)) { lua_pop(L, 1); return def; }
  if (!lua_isnumber(L, -1))
    luaL_error(L, "batch_norm: option '%s' must be a number, got %s", key, luaL_typename(L, -1));
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static int64_t opt_int(lua_State *L, int opts, const char *key, int64_t def) {
  lua_getfield(L, opts, key);
  int64_t v = def;
  if (lua_isboolean(L, -1) && !lua_toboolean(L, -1)) v = 0;       /* virtual_batch = false */
  else if (!lua_isnil(L, -1)) v = lt_checkint(L, lua_gettop(L), "batch_norm", key);
  lua_pop(L, 1);
  return v;
}

static int opt_bool(lua_State *L, int opts, const char *key, int def) {
  lua_getfield(L, opts, key);
  int v = def;
  if (lua_isboolean(L, -1)) v = lua_toboolean(L, -1);
  else if (!lua_isnil(L, -1))
    luaL_error(L, "batch_norm: option '%s' must be a boolean, got %s", key, luaL_typename(L, -1));
  lua_pop(L, 1);
  return v;
}

static dl_tensor *opt_field_tensor(lua_State *L, int opts, const char *key) {
  lua_getfield(L, opts, key);
  dl_tensor *t = NULL;
  if (!lua_isnil(L, -1)) {
    t = lt_test(L, -1);
    if (!t) luaL_error(L, "batch_norm: option '%s' must be a tensor, got %s", key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);                 /* still referenced by the options table */
  return t;
}

/* batch_norm(x, weight, bias [, opts]) */
static int l_batch_norm(lua_State *L) {
  dl_tensor *x = lt_check(L, 1);
  dl_tensor *w = opt_tensor(L, 2), *b = opt_tensor(L, 3);
  dl_bn_opts o = dl_bn_defaults();
  dl_tensor *rm = NULL, *rv = NULL;
  if (!lua_isnoneornil(L, 4)) {
    luaL_checktype(L, 4, LUA_TTABLE);
    check_bn_keys(L, 4);
    o.training = opt_bool(L, 4, "training", o.training);
    o.sync = opt_bool(L, 4, "sync", o.sync);
    o.momentum = opt_num(L, 4, "momentum", o.momentum);
    o.eps = opt_num(L, 4, "eps", o.eps);
    o.replicas = opt_int(L, 4, "replicas", o.replicas);
    o.virtual_batch = opt_int(L, 4, "virtual_batch", o.virtual_batch);
    if (o.sync && o.training) o.reducer = lt_dist_bn_reducer(L);   /* shared across ranks under mpirun */
    rm = opt_field_tensor(L, 4, "running_mean");
    rv = opt_field_tensor(L, 4, "running_var");
  }
  lt_newbox(L);
  return lt_finish(L, dl_batch_norm(lt_ctx(L), x, w, b, rm, rv, &o));
}

static const luaL_Reg bn_funcs[] = {
  {"batch_norm", l_batch_norm},
  {NULL, NULL}
};

void lt_register_batchnorm(lua_State *L, int mod, int cidx) {
  (void)mod;
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, bn_funcs, 1);
}
