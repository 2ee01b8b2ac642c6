/* lua_gp.c -- binds the Gaussian-process surrogate (engine/search/gp.c) to Lua.
 *
 * Private functions of "dlua.core", wrapped by lua/dlua/search/gp.lua, which owns the
 * documentation; feature vectors are Lua lists of numbers:
 *   _gp_fit(X, y, {theta =, fit =, iters =, starts =, max_points =, classify =, dim =}) -> gp
 *   _gp_objective(X, y, theta [, classify]) -> value, {gradient}
 *   gp:predict(Xs [, want_var]) -> {mean}, {var}    gp:ei(Xs, best [, noise]) -> {ei}
 *   gp:predict_grad(Xs) -> {mean}, {var}, {{dmean}}, {{dvar}}   (gradients in x, gp_acq.c)
 *   gp:log_ei(Xs, best [, want_grad]) -> {log ei} [, {{gradient}}]
 *   gp:cross_cov(Xs, Zs) -> {mean}, {var}, {{cov(f(x_s), f(z_j))}}
 *   gp:train_mean() -> {mean}              gp:add(x, y, noise)
 *   gp:clone() -> gp    gp:theta() -> {theta}    gp:lml()  gp:noise()  gp:points()  gp:dim()
 *   gp:mean()  gp:sd()   (the standardisation y = mean + sd * z)
 *   gp:release()  (also __gc and __close)
 *   gp:nei(Xb, z) -> nei (noisy EI over the baseline Xb with base samples z, a list
 *   of S lists of #Xb numbers; it keeps gp alive)    nei:eval(Xs) -> {nei}
 *   nei:release()  (also __gc and __close)
 * Arrays read from Lua live in userdata scratch buffers, so a raise while
 * reading them leaks nothing; a fitted GP lives in a "dlua.GP" box pushed
 * before the fit.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "search/gp.h"

#include <lauxlib.h>
#include <string.h>

typedef struct { dl_gp *g; } gp_box;   /* g == NULL once released */

/* a release as every class has one (lua_aux.h, lt_newclass): alike by design */
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
  int n = (int)lua_rawlen(L, idx);
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
  int n = (int)lua_rawlen(L, idx);
  if (*dim < 0 && n > 0) {
    if (lua_rawgeti(L, idx, 1) != LUA_TTABLE) luaL_error(L, "%s: %s[1] must be a list of numbers", fn, what);
    *dim = (int)lua_rawlen(L, -1);
    lua_pop(L, 1);
  }
  int d = *dim > 0 ? *dim : 1;
  double *X = scratch(L, (size_t)n * d);
  for (int i = 0; i < n; i++) {
    if (lua_rawgeti(L, idx, i + 1) != LUA_TTABLE) luaL_error(L, "%s: %s[%d] must be a list of numbers", fn, what, i + 1);
    if ((int)lua_rawlen(L, -1) != *dim)
      luaL_error(L, "%s: %s[%d] has %d features, expected %d", fn, what, i + 1, (int)lua_rawlen(L, -1), *dim);
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

/* the *m points Xs at argument 2 of the GP method fn, each with the GP's dim features */
static double *read_points(lua_State *L, const dl_gp *g, const char *fn, int *m) {
  int dim = dl_gp_dim(g);
  *m = 0;
  return read_matrix(L, 2, fn, "Xs", m, &dim);
}

static void push_list(lua_State *L, const double *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static const char *const fit_keys[] = {"classify", "coarse_points", "dim",   "fine_iters", "fit", "fit_points",
                                       "iters",    "max_points",    "starts", "theta",      NULL};

/* an integer option in [min, 1000000] */
static int opt_count(lua_State *L, const lt_opts *o, const char *key, int def, int min) {
  int64_t x = lt_opt_integer(L, o, key, def);
  if (x < min || x > 1000000) lt_opt_error(L, o, key, "must be in [%d, 1000000], got %d", min, (int)x);
  return (int)x;
}

static int gp_fit(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  dl_gp_opts o = dl_gp_defaults();
  int dim = -1, n = 0, ny = 0;
  lt_opts opts;
  lt_options(L, 3, fit_keys, &opts);
  lt_checkargs(L, 3);
  lua_settop(L, 3);                                  /* scratch buffers go above the arguments */
  o.classify = lt_opt_boolean(L, &opts, "classify", 0);
  o.fit = lt_opt_boolean(L, &opts, "fit", 1);
  o.iters = opt_count(L, &opts, "iters", o.iters, 0);
  o.starts = opt_count(L, &opts, "starts", o.starts, 0);
  o.max_points = opt_count(L, &opts, "max_points", o.max_points, 0);
  o.coarse_points = opt_count(L, &opts, "coarse_points", o.coarse_points, 0);
  o.fine_iters = opt_count(L, &opts, "fine_iters", o.fine_iters, 0);
  o.fit_points = opt_count(L, &opts, "fit_points", o.fit_points, 0);
  dim = opt_count(L, &opts, "dim", -1, -1);
  if (dim == 0) lt_opt_error(L, &opts, "dim", "must be in [1, 1000000], got 0");
  double *X = read_matrix(L, 1, "_gp_fit", "X", &n, &dim);
  double *y = read_vector(L, 2, "_gp_fit", "y", &ny);
  if (ny != n) luaL_error(L, "_gp_fit: X has %d rows but y has %d values", n, ny);
  if (dim < 1) luaL_error(L, "_gp_fit: no points and no option 'dim'");
  double *theta = NULL;
  int ty = lt_opt_push(L, &opts, "theta");
  if (ty != LUA_TNIL) {
    if (ty != LUA_TTABLE) lt_opt_error(L, &opts, "theta", "table expected, got %s", lua_typename(L, ty));
    int tn = 0;
    theta = read_vector(L, lua_gettop(L), "_gp_fit", "theta", &tn);
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
  lt_checkargs(L, 4);
  lua_settop(L, 4);
  int classify = lua_isnil(L, 4) ? 0 : lt_checkboolean(L, 4);
  double *X = read_matrix(L, 1, "_gp_objective", "X", &n, &dim);
  double *y = read_vector(L, 2, "_gp_objective", "y", &ny);
  double *theta = read_vector(L, 3, "_gp_objective", "theta", &tn);
  if (ny != n) luaL_error(L, "_gp_objective: X has %d rows but y has %d values", n, ny);
  if (dim < 1) dim = tn - 2;
  if (dim < 1 || tn != dim + 2) luaL_error(L, "_gp_objective: theta has %d values, expected dim + 2", tn);
  double *grad = scratch(L, (size_t)tn);
  double v = dl_gp_objective(ctx, X, y, n, dim, theta, classify, grad);
  if (v != v) return lt_raise(L);
  lua_pushnumber(L, v);
  push_list(L, grad, tn);
  return 2;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int gp_predict(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 3);
  lua_settop(L, 3);
  int want_var = lua_isnil(L, 3) || lt_checkboolean(L, 3);
  int m;
  double *Xs = read_points(L, g, "predict", &m);
  double *mean = scratch(L, (size_t)m), *var = want_var ? scratch(L, (size_t)m) : NULL;
  if (dl_gp_predict(lt_ctx(L), g, Xs, m, mean, var) != 0) return lt_raise(L);
  push_list(L, mean, m);
  if (!want_var) return 1;
  push_list(L, var, m);
  return 2;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int gp_ei(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 4);
  lua_settop(L, 4);
  int m;
  double *Xs = read_points(L, g, "ei", &m);
  double best = lt_checknumber(L, 3), noise = lt_optnumber(L, 4, 0);
  double *ei = scratch(L, (size_t)m);
  if (dl_gp_ei(lt_ctx(L), g, Xs, m, best, noise, ei) != 0) return lt_raise(L);
  push_list(L, ei, m);
  return 1;
}

/* m rows of dim numbers as a list of lists */
static void push_rows(lua_State *L, const double *v, int m, int dim) {
  lua_createtable(L, m, 0);
  for (int s = 0; s < m; s++) {
    push_list(L, v + (size_t)s * dim, dim);
    lua_rawseti(L, -2, s + 1);
  }
}

static int gp_predict_grad(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 2);
  int m, dim = dl_gp_dim(g);
  double *Xs = read_points(L, g, "predict_grad", &m);
  double *mean = scratch(L, (size_t)m), *var = scratch(L, (size_t)m);
  double *dmean = scratch(L, (size_t)m * dim), *dvar = scratch(L, (size_t)m * dim);
  if (dl_gp_predict_grad(lt_ctx(L), g, Xs, m, mean, var, dmean, dvar) != 0) return lt_raise(L);
  push_list(L, mean, m);
  push_list(L, var, m);
  push_rows(L, dmean, m, dim);
  push_rows(L, dvar, m, dim);
  return 4;
}

static int gp_log_ei(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 4);
  lua_settop(L, 4);
  int m, dim = dl_gp_dim(g);
  double *Xs = read_points(L, g, "log_ei", &m);
  double best = lt_checknumber(L, 3);
  int want_grad = !lua_isnil(L, 4) && lt_checkboolean(L, 4);
  double *v = scratch(L, (size_t)m), *grad = want_grad ? scratch(L, (size_t)m * dim) : NULL;
  if (dl_gp_log_ei(lt_ctx(L), g, Xs, m, best, v, grad) != 0) return lt_raise(L);
  push_list(L, v, m);
  if (!want_grad) return 1;
  push_rows(L, grad, m, dim);
  return 2;
}

static int gp_cross_cov(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 3);
  lua_settop(L, 3);
  int m, q = 0, dim = dl_gp_dim(g);
  double *Xs = read_points(L, g, "cross_cov", &m);
  double *Zs = read_matrix(L, 3, "cross_cov", "Zs", &q, &dim);
  double *mean = scratch(L, (size_t)m), *var = scratch(L, (size_t)m), *cov = scratch(L, (size_t)m * q);
  if (dl_gp_cross_cov(lt_ctx(L), g, Xs, m, Zs, q, mean, var, cov) != 0) return lt_raise(L);
  push_list(L, mean, m);
  push_list(L, var, m);
  push_rows(L, cov, m, q);
  return 3;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int gp_train_mean(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 1);
  int n = dl_gp_points(g);
  double *mean = scratch(L, (size_t)n);
  dl_gp_train_mean(g, mean);
  push_list(L, mean, n);
  return 1;
}

static int gp_add(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 4);
  lua_settop(L, 4);
  int d = 0;
  double *x = read_vector(L, 2, "add", "x", &d);
  if (d != dl_gp_dim(g)) lt_argerror(L, 2, "x has %d features, expected %d", d, dl_gp_dim(g));
  double y = lt_checknumber(L, 3), noise = lt_checknumber(L, 4);
  if (dl_gp_add(lt_ctx(L), g, x, y, noise) != 0) return lt_raise(L);
  return 0;
}

static int gp_clone(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 1);
  gp_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->g = NULL;
  luaL_setmetatable(L, "dlua.GP");
  b->g = dl_gp_clone_new(lt_ctx(L), g);
  if (!b->g) return lt_raise(L);
  return 1;
}

static int gp_theta(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 1);
  double *t = scratch(L, (size_t)dl_gp_dim(g) + 2);
  dl_gp_theta(g, t);
  push_list(L, t, dl_gp_dim(g) + 2);
  return 1;
}

/* the scalar accessors: g:lml(), g:noise(), g:mean(), g:sd() and g:points(), g:dim() */
static int push_number(lua_State *L, double (*get)(const dl_gp *)) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 1);
  lua_pushnumber(L, get(g));
  return 1;
}

static int push_count(lua_State *L, int (*get)(const dl_gp *)) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 1);
  lua_pushinteger(L, get(g));
  return 1;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int gp_lml(lua_State *L) { return push_number(L, dl_gp_lml); }
static int gp_noise(lua_State *L) { return push_number(L, dl_gp_noise); }
static int gp_mean(lua_State *L) { return push_number(L, dl_gp_mean); }
static int gp_sd(lua_State *L) { return push_number(L, dl_gp_sd); }
static int gp_points(lua_State *L) { return push_count(L, dl_gp_points); }
static int gp_dim(lua_State *L) { return push_count(L, dl_gp_dim); }

typedef struct { dl_gp_nei *e; } nei_box;   /* e == NULL once released */

/* a release as every class has one (lua_aux.h, lt_newclass): alike by design */
static int nei_release(lua_State *L) {
  nei_box *b = luaL_checkudata(L, 1, "dlua.GPNEI");
  dl_gp_nei_release(b->e);
  b->e = NULL;
  return 0;
}

/* gp:nei(Xb, z): the box's user value is the gp's box, so the borrowed GP lives as long */
static int gp_nei(lua_State *L) {
  dl_gp *g = check_gp(L, 1);
  lt_checkargs(L, 3);
  lua_settop(L, 3);
  int dim = dl_gp_dim(g), nb = 0, S = 0, zdim = -1;
  double *Xb = read_matrix(L, 2, "nei", "Xb", &nb, &dim);
  if (nb < 1) lt_argerror(L, 2, "the baseline Xb needs at least 1 point");
  double *z = read_matrix(L, 3, "nei", "z", &S, &zdim);
  if (S < 1) lt_argerror(L, 3, "z needs at least 1 base sample");
  if (zdim != nb) lt_argerror(L, 3, "each base sample needs %d values (one per baseline point), got %d", nb, zdim);
  nei_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->e = NULL;
  luaL_setmetatable(L, "dlua.GPNEI");
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  b->e = dl_gp_nei_new(lt_ctx(L), g, Xb, nb, z, S);
  if (!b->e) return lt_raise(L);
  return 1;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int nei_eval(lua_State *L) {
  nei_box *b = luaL_checkudata(L, 1, "dlua.GPNEI");
  if (!b->e) luaL_argerror(L, 1, "the nei has been released");
  lt_checkargs(L, 2);
  lua_getiuservalue(L, 1, 1);
  dl_gp *g = check_gp(L, lua_gettop(L));
  int dim = dl_gp_dim(g), m = 0;
  double *Xs = read_matrix(L, 2, "eval", "Xs", &m, &dim);
  double *out = scratch(L, (size_t)m);
  if (dl_gp_nei_eval(lt_ctx(L), b->e, Xs, m, out) != 0) return lt_raise(L);
  push_list(L, out, m);
  return 1;
}

static const luaL_Reg nei_methods[] = {
  {"eval", nei_eval},
  {"release", nei_release},
  {NULL, NULL}
};

/* one luaL_Reg row per binding: rows and registration alike by design (lua_aux.h) */
static const luaL_Reg gp_methods[] = {
  {"add", gp_add},
  {"clone", gp_clone},
  {"cross_cov", gp_cross_cov},
  {"dim", gp_dim},
  {"ei", gp_ei},
  {"lml", gp_lml},
  {"log_ei", gp_log_ei},
  {"mean", gp_mean},
  {"nei", gp_nei},
  {"noise", gp_noise},
  {"points", gp_points},
  {"predict", gp_predict},
  {"predict_grad", gp_predict_grad},
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
  lt_newclass(L, "dlua.GP", gp_release, gp_methods, cidx);
  lt_newclass(L, "dlua.GPNEI", nei_release, nei_methods, cidx);
  lt_setfuncs(L, mod, cidx, gp_funcs);
}
