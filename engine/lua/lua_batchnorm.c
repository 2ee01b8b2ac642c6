/* lua_batchnorm.c -- binds the batch normalisation op (engine/ops/batchnorm.c) as
 * dl.batch_norm(x, weight, bias [, opts]).
 *
 * weight and bias may be nil or false (no affine transform). opts: training
 * (true), running_mean, running_var (float32 or float64 [C] or [replicas, C], updated in
 * place in training), momentum (0.1), eps (1e-5), replicas (1), virtual_batch
 * (false = whole replica shard), sync (false). Unknown keys are errors. With
 * sync in training the cross-rank sum comes from the distributed layer
 * (dl_dist_bn_reducer). The moving-average synchronisation and the BatchNorm
 * module live in lua/dlua/nn/batchnorm.lua.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "ops/batchnorm.h"
#include "sys/dist.h"

#include <lauxlib.h>

static const char *const bn_keys[] = {"eps", "momentum", "replicas", "running_mean", "running_var",
                                      "sync", "training", "virtual_batch", NULL};

/* a tensor argument that may be nil or false */
static dl_tensor *opt_tensor(lua_State *L, int i) {
  if (lua_isnoneornil(L, i) || (lua_isboolean(L, i) && !lua_toboolean(L, i))) return NULL;
  return lt_check(L, i);
}

/* batch_norm(x, weight, bias [, opts]) */
static int batchnorm_batch_norm(lua_State *L) {
  dl_tensor *x = lt_check(L, 1);
  dl_tensor *w = opt_tensor(L, 2), *b = opt_tensor(L, 3);
  lt_opts o;
  lt_options(L, 4, bn_keys, &o);
  lt_checkargs(L, 4);
  dl_bn_opts bo = dl_bn_defaults();
  bo.training = lt_opt_boolean(L, &o, "training", bo.training);
  bo.sync = lt_opt_boolean(L, &o, "sync", bo.sync);
  bo.momentum = lt_opt_number(L, &o, "momentum", bo.momentum);
  bo.eps = lt_opt_number(L, &o, "eps", bo.eps);
  bo.replicas = lt_opt_integer(L, &o, "replicas", bo.replicas);
  if (lt_opt_push(L, &o, "virtual_batch") == LUA_TBOOLEAN && !lua_toboolean(L, -1)) bo.virtual_batch = 0;
  else bo.virtual_batch = lt_opt_integer(L, &o, "virtual_batch", bo.virtual_batch);
  lua_pop(L, 1);
  dl_tensor *rm = lt_opt_tensor(L, &o, "running_mean");
  dl_tensor *rv = lt_opt_tensor(L, &o, "running_var");
  if (bo.sync && bo.training && dl_dist_bn_reducer(lt_ctx(L), &bo.reducer) < 0) return lt_raise(L);
  lt_newbox(L);
  return lt_finish(L, dl_batch_norm(lt_ctx(L), x, w, b, rm, rv, &bo));
}

static const luaL_Reg bn_funcs[] = {
  {"batch_norm", batchnorm_batch_norm},
  {NULL, NULL}
};

void lt_register_batchnorm(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, bn_funcs); }
