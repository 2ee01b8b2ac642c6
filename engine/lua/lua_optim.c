/* lua_optim.c -- binds the optimizer rules (engine/ops/optim.c): one call updates
 * every parameter.
 *
 *   optim_kinds()               -> {"SGD", "Adam", ...}
 *   optim_defaults(kind)        -> {lr = 0.01, momentum = 0, ...}: the kind's options
 *   optim_new(kind [, opts])    -> rule: the options, checked and read once
 *   optim_update(rule, params, states1, states2, lr, step)
 *
 * params is a list of contiguous float32 (or float64) tensors; those whose
 * .grad is set are updated (the others are skipped), states1/states2 lists of
 * state tensors of the parameter's dtype and shape (entries may be false when
 * the rule keeps fewer). lr is this step's rate (schedules act on it), step
 * the 1-based step number. Each list is read exactly once into a snapshot,
 * which keeps every tensor alive until the update is done, and everything is
 * checked before the first parameter is touched, so an error changes nothing.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "ops/optim.h"

#include <lauxlib.h>
#include <string.h>

typedef struct {
  dl_optim_kind kind;
  dl_optim_opts opts;
} optim_rule;

static dl_optim_kind check_kind(lua_State *L, int arg) {
  const char *s = luaL_checkstring(L, arg);
  int k = dl_optim_kind_from_name(s);
  if (k < 0) lt_argerror(L, arg, "unknown optimizer '%s' (valid: SGD, Adam, NAdam, AdamW, Adagrad, RMSProp)", s);
  return (dl_optim_kind)k;
}

static int optim_optim_kinds(lua_State *L) {
  lt_checkargs(L, 0);
  lua_createtable(L, DL_NOPTIM, 0);
  for (int k = 0; k < DL_NOPTIM; k++) {
    lua_pushstring(L, dl_optim_name((dl_optim_kind)k));
    lua_rawseti(L, -2, k + 1);
  }
  return 1;
}

static int optim_optim_defaults(lua_State *L) {
  dl_optim_kind k = check_kind(L, 1);
  lt_checkargs(L, 1);
  dl_optim_opts o = dl_optim_defaults(k);
  lua_newtable(L);
  for (const dl_optim_param *p = dl_optim_params(k); p->name; p++) {
    const char *field = (const char *)&o + p->offset;
    if (p->boolean) lua_pushboolean(L, *(const int *)(const void *)field);
    else lua_pushnumber(L, *(const double *)(const void *)field);
    lua_setfield(L, -2, p->name);
  }
  return 1;
}

static int optim_optim_new(lua_State *L) {
  dl_optim_kind k = check_kind(L, 1);
  const dl_optim_param *params = dl_optim_params(k);
  const char *keys[16];
  int nk = 0;
  for (const dl_optim_param *p = params; p->name && nk < 15; p++) keys[nk++] = p->name;
  keys[nk] = NULL;
  lt_opts o;
  lt_options(L, 2, keys, &o);
  lt_checkargs(L, 2);
  optim_rule *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->kind = k;
  r->opts = dl_optim_defaults(k);
  for (const dl_optim_param *p = params; p->name; p++) {
    char *field = (char *)&r->opts + p->offset;
    if (p->boolean) {
      int *v = (int *)(void *)field;
      *v = lt_opt_boolean(L, &o, p->name, *v);
    } else {
      double *v = (double *)(void *)field;
      *v = lt_opt_number(L, &o, p->name, *v);
      if (!(*v >= 0)) lt_opt_error(L, &o, p->name, "must be a non-negative number, got %f", *v);
    }
  }
  luaL_setmetatable(L, "dlua.OptimRule");
  return 1;
}

static int same_shape(const dl_tensor *a, const dl_tensor *b) {
  return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* the tensor at index i of the snapshot at snap (NULL for a missing entry or false) */
static dl_tensor *entry(lua_State *L, int arg, int snap, int i) {
  lua_rawgeti(L, snap, i);
  dl_tensor *t = NULL;
  if (!lua_isnil(L, -1) && !(lua_isboolean(L, -1) && !lua_toboolean(L, -1))) {
    tensor_box *b = luaL_testudata(L, -1, "dlua.Tensor");
    if (!b) lt_argerror(L, arg, "element %d is a %s, expected a tensor", i, lt_typename(L, -1));
    if (!b->t) lt_argerror(L, arg, "element %d is a released tensor", i);
    t = b->t;
  }
  lua_pop(L, 1);                           /* the snapshot anchors it */
  return t;
}

#define MAX_PARAMS (1 << 24)

static int optim_optim_update(lua_State *L) {
  optim_rule *r = luaL_checkudata(L, 1, "dlua.OptimRule");
  const char *kind = dl_optim_name(r->kind);
  double lr = luaL_checknumber(L, 5);
  if (!(lr >= 0)) return lt_argerror(L, 5, "lr must be a non-negative number, got %f", lr);
  int64_t t = lt_checkinteger(L, 6, "step");
  if (t < 1) return lt_argerror(L, 6, "step must be >= 1, got %I", (lua_Integer)t);
  lt_checkargs(L, 6);
  dl_optim_opts o = r->opts;
  o.lr = lr;
  int ns = dl_optim_nstate(r->kind, &o);
  int n = lt_snapshot(L, 2, 2, MAX_PARAMS);
  int sp = lua_gettop(L);
  int snap[2] = {0, 0}, len[2] = {0, 0};
  for (int s = 0; s < 2; s++) {
    len[s] = lt_snapshot(L, 3 + s, 3 + s, MAX_PARAMS);
    snap[s] = lua_gettop(L);
  }
  /* one pass: check every parameter and collect its buffers; the update runs after */
  dl_optim_buf *bufs = lua_newuserdatauv(L, sizeof(dl_optim_buf) * (size_t)(n > 0 ? n : 1), 0);
  int nbuf = 0;
  for (int i = 1; i <= n; i++) {
    dl_tensor *p = entry(L, 2, sp, i);
    if (!p) return lt_argerror(L, 2, "element %d is missing, expected a tensor", i);
    if ((p->dtype != DL_F32 && p->dtype != DL_F64) || !dl_is_contiguous(p))
      return luaL_error(L, "%s: parameter %d must be a contiguous float32 or float64 tensor", kind, i);
    if (!p->grad) continue;
    if (!same_shape(p, p->grad) || !dl_is_contiguous(p->grad) || p->grad->dtype != p->dtype)
      return luaL_error(L, "%s: gradient of parameter %d does not match it", kind, i);
    dl_tensor *st[2] = {NULL, NULL};
    for (int s = 0; s < ns; s++) {
      st[s] = i <= len[s] ? entry(L, 3 + s, snap[s], i) : NULL;
      if (!st[s] || !same_shape(st[s], p) || st[s]->dtype != p->dtype || !dl_is_contiguous(st[s]))
        return luaL_error(L, "%s: state %d of parameter %d is missing or mis-shaped", kind, s + 1, i);
    }
    bufs[nbuf++] = (dl_optim_buf){dl_data(p), dl_data(p->grad), st[0] ? dl_data(st[0]) : NULL,
                                  st[1] ? dl_data(st[1]) : NULL, dl_numel(p), p->dtype == DL_F64};
  }
  dl_optim_step(lt_ctx(L)->pool, r->kind, &o, t, bufs, nbuf);
  return 0;
}

static const luaL_Reg optim_funcs[] = {
  {"optim_defaults", optim_optim_defaults},
  {"optim_kinds", optim_optim_kinds},
  {"optim_new", optim_optim_new},
  {"optim_update", optim_optim_update},
  {NULL, NULL}
};

void lt_register_optim(lua_State *L, int mod, int cidx) {
  luaL_newmetatable(L, "dlua.OptimRule");   /* plain data: no __gc */
  lua_pop(L, 1);
  lt_setfuncs(L, mod, cidx, optim_funcs);
}
