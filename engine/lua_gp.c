/* lua_gp.c -- binds the Gaussian-process surrogate (engine/gp.c) to Lua.
 *
 * Private functions of "dlua.core", wrapped by lua/dlua/gp.lua, which owns the
 * documentation; feature vectors are Lua lists of numbers:
 *   _gp_fit(X, y, {theta =, fit =, iters =, starts =, max_points =, classify =, dim =}) -> gp
 *   _gp_objective(X, y, theta [, classify]) -> value, {gradient}
 *   gp:predict(Xs [, want_var]) -> {mean}, {var}    gp:ei(Xs, best [, noise]) -> {ei}
 *   gp:train_mean() -> {mean}              gp:add(x, y, noise)
 *   gp:clone() -> gp    gp:theta() -> {theta}    gp:lml()  gp:noise()  gp:points()  gp:dim()
 *   gp:mean()  gp:sd()   (the standardisation y = mean + sd * z)
 *   gp:release()  (also __gc and __close)
 * Arrays read from Lua live in userdata scratch buffers, so a raise while
 * reading them leaks nothing; a fitted GP lives in a "dlua.GP" box pushed
 * before the fit.
 */
/* See LICENSE */
#include "lua_tensor.h"
#include "gp.h"

#include <lauxlib.h>
#include <string.h>

typedef struct { dl_gp *g; } gp_box;   /* g == NULL once released */

static int gp_release(lua_State *L) {
  gp_box *b = luaL_checkudata(L, 1, "dlua.GP");
  dl_gp_release(b->g);
  b->g = NULL;
  return 0;
}

static dl_gp *check_gp(lua_State *L, int i) {
  gp_box *b = luaL_checkudata(L, i, "dlua.GP");
  if (!b->g) luaL_argerror(L, i, "the gp has been released");
  return b->g;
}

static double *scratch(lua_State *L, size_t n) {   /* pushed; collected with the stack */
  return lua_newuserdatauv(L, (n ? n : 1) * sizeof(double), 0);
}

/* a list of n numbers at idx into a pushed scratch buffer */
static double *read_vector(lua_State *L, int idx, const char *fn, const char *what, int *n_out) {
  luaL_checktype(L, idx, LUA_TTABLE);
  int n = (int)luaL_len(L, idx);
  double *v = scratch(L, (size_t)n);
  for (int i = 0; i < n; i++) {
    int t = lua_rawgeti(L, idx, i + 1);
    if (t != LUA_TNUMBER) luaL_error(L, "%s: %s[%d] must be a number, got %s", fn, what, i + 1, lua_typename(L, t));
    v[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
  }
  *n_out = n;
  return v;
}

/* a list of n lists of dim numbers at idx (dim: -1 = from the first row) */
static double *read_matrix(lua_State *L, int idx, const char *fn, const char *what, int *n_out, int *dim) {
  luaL_checktype(L, idx, LUA_TTABLE);
  int n = (int)luaL_len(L, idx);
  if (*dim < 0 && n > 0) {
    if (lua_rawgeti(L, idx, 1) != LUA_TTABLE) luaL_error(L, "%s: %s[1] must be a list of numbers", fn, what);
    *dim = (int)luaL_len(L, -1);
    lua_pop(L, 1);
  }
  int d = *dim > 0 ? *dim : 1;
  double *X = scratch(L, (size_t)n * d);
  for (int i = 0; i < n; i++) {
    if (lua_rawgeti(L, idx, i + 1) != LUA_TTABLE) luaL_error(L, "%s: %s[%d] must be a list of numbers", fn, what, i + 1);
    if ((int)luaL_len(L, -1) != *dim)
      luaL_error(L, "%s: %s[%d] has %d features, expected %d", fn, what, i + 1, (int)luaL_len(L, -1), *dim);
    for (int k = 0; k < *dim; k++) {
      int t = lua_rawgeti(L, -1, k + 1);
      if (t != LUA_TNUMBER) luaL_error(L, "%s: %s[%d][%d] must be a number, got %s", fn, what, i + 1, k + 1,
                                       lua_typename(L, t));
      X[(size_t)i * d + k] = lua_tonumber(L, -1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  *n_out = n;
  return X;
}

static void push_list(lua_State *L, const double *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static const char *const fit_keys[] = {"classify", "dim", "fit", "iters", "max_points", "starts", "theta", NULL};

static int opt_int(lua_State *L, int t, const char *key, int def, int min) {
  int ty = lua_getfield(L, t, key);
  int v = def;
  if (ty != LUA_TNIL) {
    if (!lua_isinteger(L, -1)) luaL_error(L, "_gp_fit: option '%s' must be an integer", key);
    lua_Integer x = lua_tointeger(L, -1);
    if (x < min || x > 1000000) luaL_error(L, "_gp_fit: option '%s' must be in [%d, 1000000], got %d", key, min, (int)x);
    v = (int)x;
  }
  lua_pop(L, 1);
  return v;
}

static int opt_bool(lua_State *L, int t, const char *key, int def) {
  int ty = lua_getfield(L, t, key);
  int v = ty == LUA_TNIL ? def : lua_toboolean(L, -1);
  if (ty != LUA_TNIL && ty != LUA_TBOOLEAN) luaL_error(L, "_gp_fit: option '%s' must be a boolean", key);
  lua_pop(L, 1);
  return v;
}

static int gp_fit(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  dl_gp_opts o = dl_gp_defaults();
  int dim = -1, n = 0, ny = 0;
  lua_settop(L, 3);                                  /* scratch buffers go above the arguments */
  if (!lua_isnil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      int ok = 0;
      for (int i = 0; fit_keys[i]; i++) ok |= lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), fit_keys[i]) == 0;
      if (!ok) luaL_error(L, "_gp_fit: unknown option '%s' (valid: classify, dim, fit, iters, max_points, starts, theta)",
                          lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2));
      lua_pop(L, 1);
    }
    o.classify = opt_bool(L, 3, "classify", 0);
    o.fit = opt_bool(L, 3, "fit", 1);
    o.iters = opt_int(L, 3, "iters", o.iters, 0);
    o.starts = opt_int(L, 3, "starts", o.starts, 0);
    o.max_points = opt_int(L, 3, "max_points", o.max_points, 0);
    dim = opt_int(L, 3, "dim", -1, 1);
  }
  double *X = read_matrix(L, 1, "_gp_fit", "X", &n, &dim);
  double *y = read_vector(L, 2, "_gp_fit", "y", &ny);
  if (ny != n) luaL_error(L, "_gp_fit: X has %d rows but y has %d values", n, ny);
  if (dim < 1) luaL_error(L, "_gp_fit: no points and no option 'dim'");
  double *theta = NULL;
  if (!lua_isnil(L, 3) && lua_getfield(L, 3, "theta") != LUA_TNIL) {
    int tn = 0;
    int tidx = lua_gettop(L);
    theta = read_vector(L, tidx, "_gp_fit", "theta", &tn);
    if (tn != dim + 2) luaL_error(L, "_gp_fit: option 'theta' has %d values, expected %d (dim + 2)", tn, dim + 2);
  }
  o.theta = theta;
  gp_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->g = NULL;
  luaL_setmetatable(L, "dlua.GP");
  b->g = dl_gp_fit_new(ctx, X, y, n, dim, &o);
  if (!b->g) return lt_raise(L);
  return 1;
}

static int gp_objective(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  int dim = -1, n = 0, ny = 0, tn = 0;
  lua_settop(L, 4);
  double *X = read_matrix(L, 1, "_gp_objective", "X", &n, &dim);
  double *y = read_vector(L, 2, "_gp_objective", "y", &ny);
  double *theta = read_vector(L, 3, "_gp_objective", "theta", &tn);
  if (ny != n) luaL_error(L, "_gp_objective: X has %d rows but y has %d values", n, ny);
  if (dim < 1) dim = tn - 2;
  if (dim < 1 || tn != dim + 2) luaL_error(L, "_gp_objective: theta has %d values, expected dim + 2", tn);
  double *grad = scratch(L, (size_t)tn);
  double v = dl_gp_objective(ctx, X, y, n, dim, theta, lua_toboolean(L, 4), grad);
  if (v != v) return lt_raise(L);
  lua_pushnumber(L, v);
  push_list(L, grad, tn);
  return 2;
}

static int gp_predict(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lua_settop(L, 3);
  int want_var = lua_isnil(L, 3) || lua_toboolean(L, 3);
  int m = 0, dim = dl_gp_dim(g);
  double *Xs = read_matrix(L, 2, "predict", "Xs", &m, &dim);
  double *mean = scratch(L, (size_t)m), *var = want_var ? scratch(L, (size_t)m) : NULL;
  if (dl_gp_predict(lt_ctx(L), g, Xs, m, mean, var) != 0) return lt_raise(L);
  push_list(L, mean, m);
  if (!want_var) return 1;
  push_list(L, var, m);
  return 2;
}

static int gp_ei(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lua_settop(L, 4);
  int m = 0, dim = dl_gp_dim(g);
  double *Xs = read_matrix(L, 2, "ei", "Xs", &m, &dim);
  double best = luaL_checknumber(L, 3), noise = luaL_optnumber(L, 4, 0);
  double *ei = scratch(L, (size_t)m);
  if (dl_gp_ei(lt_ctx(L), g, Xs, m, best, noise, ei) != 0) return lt_raise(L);
  push_list(L, ei, m);
  return 1;
}

static int gp_train_mean(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  int n = dl_gp_points(g);
  double *mean = scratch(L, (size_t)n);
  dl_gp_train_mean(g, mean);
  push_list(L, mean, n);
  return 1;
}

static int gp_add(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lua_settop(L, 4);
  int d = 0;
  double *x = read_vector(L, 2, "add", "x", &d);
  if (d != dl_gp_dim(g)) luaL_error(L, "add: x has %d features, expected %d", d, dl_gp_dim(g));
  double y = luaL_checknumber(L, 3), noise = luaL_checknumber(L, 4);
  if (dl_gp_add(lt_ctx(L), g, x, y, noise) != 0) return lt_raise(L);
  return 0;
}

static int gp_clone(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  gp_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->g = NULL;
  luaL_setmetatable(L, "dlua.GP");
  b->g = dl_gp_clone_new(lt_ctx(L), g);
  if (!b->g) return lt_raise(L);
  return 1;
}

static int gp_theta(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  double *t = scratch(L, (size_t)dl_gp_dim(g) + 2);
  dl_gp_theta(g, t);
  push_list(L, t, dl_gp_dim(g) + 2);
  return 1;
}

static int gp_lml(lua_State *L) { lua_pushnumber(L, dl_gp_lml(check_gp(L, 1))); return 1; }
static int gp_noise(lua_State *L) { lua_pushnumber(L, dl_gp_noise(check_gp(L, 1))); return 1; }
static int gp_mean(lua_State *L) { lua_pushnumber(L, dl_gp_mean(check_gp(L, 1))); return 1; }
static int gp_sd(lua_State *L) { lua_pushnumber(L, dl_gp_sd(check_gp(L, 1))); return 1; }
static int gp_points(lua_State *L) { lua_pushinteger(L, dl_gp_points(check_gp(L, 1))); return 1; }
static int gp_dim(lua_State *L) { lua_pushinteger(L, dl_gp_dim(check_gp(L, 1))); return 1; }

static const luaL_Reg gp_methods[] = {
  {"add", gp_add},
  {"clone", gp_clone},
  {"dim", gp_dim},
  {"ei", gp_ei},
  {"lml", gp_lml},
  {"mean", gp_mean},
  {"noise", gp_noise},
  {"points", gp_points},
  {"predict", gp_predict},
  {"release", gp_release},
  {"sd", gp_sd},
  {"theta", gp_theta},
  {"train_mean", gp_train_mean},
  {NULL, NULL}
};

static const luaL_Reg gp_funcs[] = {
  {"_gp_fit", gp_fit},
  {"_gp_objective", gp_objective},
  {NULL, NULL}
};

void lt_register_gp(lua_State *L, int mod, int cidx) {
  if (luaL_newmetatable(L, "dlua.GP")) {
    lua_pushvalue(L, cidx);
    luaL_setfuncs(L, gp_methods, 1);                 /* methods see the context as upvalue 1 */
    lua_pushvalue(L, -1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, gp_release);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, gp_release);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  lua_pushvalue(L, mod);
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, gp_funcs, 1);
  lua_pop(L, 1);
}
