/* lua_optim.c -- binds the optimizer rules: one call updates every parameter.
 *
 * optim_update(kind, params, states1, states2, opts, t): params is a list of
 * float32 (or float64) tensors whose .grad is set (parameters without a gradient are
 * skipped), states1/states2 lists of state tensors of the same dtype and
 * shapes (entries may be false when the rule keeps fewer). Everything is
 * checked before the first parameter is touched, so an error changes nothing.
 */
/* See LICENSE */
#include "lua_tensor.h"
#include "optim.h"

#include <lauxlib.h>
#include <string.h>

static const char *const kinds[] = {"SGD", "Adam", "NAdam", "AdamW", "Adagrad", "RMSProp", NULL};

static double num_field(lua_State *L, int t, const char *k, double def) {
  lua_getfield(L, t, k);
  double v = luaL_optnumber(L, -1, def);
  lua_pop(L, 1);
  return v;
}

static dl_tensor *state_at(lua_State *L, int list, lua_Integer i) {
  lua_geti(L, list, i);
  dl_tensor *t = lt_test(L, -1);
  lua_pop(L, 1);                /* still referenced by the list */
  return t;
}

static int same_shape(const dl_tensor *a, const dl_tensor *b) {
  return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static int l_optim_update(lua_State *L) {
  dl_optim_kind k = (dl_optim_kind)luaL_checkoption(L, 1, NULL, kinds);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  luaL_checktype(L, 4, LUA_TTABLE);
  luaL_checktype(L, 5, LUA_TTABLE);
  int64_t t = lt_checkint(L, 6, "optim", "step");
  if (t < 1) return luaL_error(L, "%s: step must be >= 1, got %d", kinds[k], (int)t);
  dl_optim_opts o = dl_optim_defaults(k);
  o.lr = num_field(L, 5, "lr", o.lr);
  o.momentum = num_field(L, 5, "momentum", o.momentum);
  o.beta1 = num_field(L, 5, "beta1", o.beta1);
  o.beta2 = num_field(L, 5, "beta2", o.beta2);
  o.rho = num_field(L, 5, "rho", o.rho);
  o.eps = num_field(L, 5, "eps", o.eps);
  o.weight_decay = num_field(L, 5, "weight_decay", o.weight_decay);
  lua_getfield(L, 5, "nesterov");
  o.nesterov = lua_toboolean(L, -1);
  lua_pop(L, 1);
  int ns = dl_optim_nstate(k, &o);
  lua_Integer n = luaL_len(L, 2);
  /* validate everything first */
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 2, i);
    dl_tensor *p = lt_check(L, lua_gettop(L));
    lua_pop(L, 1);
    if ((p->dtype != DL_F32 && p->dtype != DL_F64) || !dl_is_contiguous(p))
      return luaL_error(L, "%s: parameter %d must be a contiguous float32 or float64 tensor", kinds[k], (int)i);
    if (!p->grad) continue;
    if (!same_shape(p, p->grad) || !dl_is_contiguous(p->grad) || p->grad->dtype != p->dtype)
      return luaL_error(L, "%s: gradient of parameter %d does not match it", kinds[k], (int)i);
    for (int s = 0; s < ns; s++) {
      dl_tensor *st = state_at(L, 3 + s, i);
      if (!st || !same_shape(st, p) || st->dtype != p->dtype || !dl_is_contiguous(st))
        return luaL_error(L, "%s: state %d of parameter %d is missing or mis-shaped", kinds[k], s + 1, (int)i);
    }
  }
  /* the buffer list lives in a userdata so an allocation error cannot leak it */
  dl_optim_buf *bufs = lua_newuserdatauv(L, sizeof(dl_optim_buf) * (size_t)(n > 0 ? n : 1), 0);
  int nbuf = 0;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 2, i);
    dl_tensor *p = lt_test(L, -1);
    lua_pop(L, 1);
    if (!p->grad) continue;
    dl_tensor *s1 = ns > 0 ? state_at(L, 3, i) : NULL, *s2 = ns > 1 ? state_at(L, 4, i) : NULL;
    bufs[nbuf++] = (dl_optim_buf){dl_data(p), dl_data(p->grad), s1 ? dl_data(s1) : NULL, s2 ? dl_data(s2) : NULL,
                                  dl_numel(p), p->dtype == DL_F64};
  }
  dl_optim_step(lt_ctx(L)->pool, k, &o, t, bufs, nbuf);
  return 0;
}

static const luaL_Reg optim_funcs[] = {
  {"optim_update", l_optim_update},
  {NULL, NULL}
};

void lt_register_optim(lua_State *L, int mod, int cidx) {
  (void)mod;
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, optim_funcs, 1);
}
