/* lua_optim.c -- binds the optimizer table and its rules (engine/ops/optim.c):
 * one call updates every parameter.
 *
 *   optim_table()               -> {{name = "SGD", hparams = {{name = "lr", type = "number",
 *                                   default = 0.01, min = 0, max = math.huge, max_open = false,
 *                                   range = "non-negative"}, ...}, state = {{name = "momentum",
 *                                   init = 0}}}, ...}: every row, in the table's order
 *   optim_new(kind [, opts])    -> rule: the options, checked and read once
 *   optim_update(rule, params, states, lr, step)
 *
 * params is a list of contiguous float32 (or float64) tensors; those whose
 * .grad is set are updated (the others are skipped). states holds one list per
 * state slot of the rule's row, each a list of tensors of the parameters'
 * dtypes and shapes. lr is this step's rate (schedules act on it), step the
 * 1-based step number. Each list is read exactly once into a snapshot, which
 * keeps every tensor alive until the update is done, and everything is checked
 * before the first parameter is touched, so an error changes nothing.
 * Nothing here names an optimizer: the names, keys, defaults, ranges and
 * state slots all come from the table.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "ops/optim.h"

#include <lauxlib.h>
#include <string.h>

typedef struct {
  const dl_optim_def *def;
  double h[DL_OPTIM_MAXH];  /* the hyperparameters, as def->hparams lists them */
  int lr;                   /* index of "lr" in h */
} optim_rule;

static const dl_optim_def *check_kind(lua_State *L, int arg) {
  const char *s = luaL_checkstring(L, arg);
  const dl_optim_def *d = dl_optim_find(s);
  if (!d) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; i < dl_optim_count(); i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, dl_optim_get(i)->name);
    }
    luaL_pushresult(&b);
    lt_argerror(L, arg, "unknown optimizer '%s' (valid: %s)", s, lua_tostring(L, -1));
  }
  return d;
}

static void push_hparam(lua_State *L, const dl_optim_hparam *hp) {
  char range[64];
  lua_createtable(L, 0, 7);
  lua_pushstring(L, hp->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, hp->type == DL_OPTIM_BOOLEAN ? "boolean" : "number");
  lua_setfield(L, -2, "type");
  if (hp->type == DL_OPTIM_BOOLEAN) lua_pushboolean(L, hp->def != 0);
  else lua_pushnumber(L, hp->def);
  lua_setfield(L, -2, "default");
  if (hp->type == DL_OPTIM_NUMBER) {
    lua_pushnumber(L, hp->lo);
    lua_setfield(L, -2, "min");
    lua_pushnumber(L, hp->hi);
    lua_setfield(L, -2, "max");
    lua_pushboolean(L, hp->hi_open);
    lua_setfield(L, -2, "max_open");
  }
  lua_pushstring(L, dl_optim_range_text(hp, range, sizeof range));
  lua_setfield(L, -2, "range");
}

static int optim_optim_table(lua_State *L) {
  lt_checkargs(L, 0);
  lua_createtable(L, dl_optim_count(), 0);
  for (int i = 0; i < dl_optim_count(); i++) {
    const dl_optim_def *d = dl_optim_get(i);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, d->name);
    lua_setfield(L, -2, "name");
    lua_createtable(L, dl_optim_nhparams(d), 0);
    for (int k = 0; d->hparams[k].name; k++) {
      push_hparam(L, &d->hparams[k]);
      lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "hparams");
    lua_createtable(L, dl_optim_nslots(d), 0);
    for (int k = 0; d->slots[k].name; k++) {
      lua_createtable(L, 0, 2);
      lua_pushstring(L, d->slots[k].name);
      lua_setfield(L, -2, "name");
      lua_pushnumber(L, d->slots[k].init);
      lua_setfield(L, -2, "init");
      lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "state");
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int optim_optim_new(lua_State *L) {
  const dl_optim_def *d = check_kind(L, 1);
  const char *keys[DL_OPTIM_MAXH + 1];
  int nh = dl_optim_nhparams(d);
  for (int k = 0; k < nh; k++) keys[k] = d->hparams[k].name;
  keys[nh] = NULL;
  lt_opts o;
  lt_options(L, 2, keys, &o);
  lt_checkargs(L, 2);
  optim_rule *r = lua_newuserdatauv(L, sizeof *r, 0);
  r->def = d;
  r->lr = dl_optim_hparam_index(d, "lr");
  dl_optim_defaults(d, r->h);
  for (int k = 0; k < nh; k++) {
    const dl_optim_hparam *hp = &d->hparams[k];
    if (hp->type == DL_OPTIM_BOOLEAN) r->h[k] = lt_opt_boolean(L, &o, hp->name, r->h[k] != 0);
    else r->h[k] = lt_opt_number(L, &o, hp->name, r->h[k]);
  }
  int bad = dl_optim_check(d, r->h);
  if (bad >= 0) {
    char range[64];
    lt_opt_error(L, &o, d->hparams[bad].name, "must be %s, got %f",
                 dl_optim_range_text(&d->hparams[bad], range, sizeof range), r->h[bad]);
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
  const char *kind = r->def->name;
  double h[DL_OPTIM_MAXH];
  memcpy(h, r->h, sizeof h);
  h[r->lr] = lt_checknumber(L, 4);
  if (dl_optim_check(r->def, h) == r->lr) {
    char range[64];
    return lt_argerror(L, 4, "lr must be %s, got %f", dl_optim_range_text(&r->def->hparams[r->lr], range, sizeof range),
                       h[r->lr]);
  }
  int64_t t = lt_checkinteger(L, 5, "step");
  if (t < 1) return lt_argerror(L, 5, "step must be >= 1, got %I", (lua_Integer)t);
  lt_checkargs(L, 5);
  int ns = dl_optim_nslots(r->def);
  int n = lt_snapshot(L, 2, 2, MAX_PARAMS);
  int sp = lua_gettop(L);
  int nlists = lt_snapshot(L, 3, 3, DL_OPTIM_MAXS);
  int lists = lua_gettop(L);
  int snap[DL_OPTIM_MAXS] = {0}, len[DL_OPTIM_MAXS] = {0};
  for (int s = 0; s < ns; s++) {
    if (s >= nlists) return luaL_error(L, "%s: state slot %d of %d is missing", kind, s + 1, ns);
    lua_rawgeti(L, lists, s + 1);              /* the outer snapshot anchors it */
    len[s] = lt_snapshot(L, 3, lua_gettop(L), MAX_PARAMS);
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
    dl_optim_buf *b = &bufs[nbuf++];
    *b = (dl_optim_buf){dl_data(p), dl_data(p->grad), {NULL}, dl_numel(p), p->dtype == DL_F64};
    for (int s = 0; s < ns; s++) {
      dl_tensor *st = i <= len[s] ? entry(L, 3, snap[s], i) : NULL;
      if (!st || !same_shape(st, p) || st->dtype != p->dtype || !dl_is_contiguous(st))
        return luaL_error(L, "%s: state %d of parameter %d is missing or mis-shaped", kind, s + 1, i);
      b->s[s] = dl_data(st);
    }
  }
  dl_optim_step(lt_ctx(L)->pool, r->def, h, t, bufs, nbuf);
  return 0;
}

static const luaL_Reg optim_funcs[] = {
  {"optim_new", optim_optim_new},
  {"optim_table", optim_optim_table},
  {"optim_update", optim_optim_update},
  {NULL, NULL}
};

void lt_register_optim(lua_State *L, int mod, int cidx) {
  luaL_newmetatable(L, "dlua.OptimRule");   /* plain data: no __gc */
  lua_pop(L, 1);
  lt_setfuncs(L, mod, cidx, optim_funcs);
}
