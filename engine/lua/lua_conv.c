/* lua_conv.c -- Lua bindings of 2-D convolution and pooling (engine/ops/conv.c):
 *   conv2d(x, w [, b] [, {dilation =, groups =, padding =, stride =}])
 *   max_pool2d(x, k | {kh, kw} [, {padding =, stride =}]), avg_pool2d(...)
 * Pair options take a number (both dims) or {h, w}. The core checks the
 * shapes and the sizes' ranges; here only types and keys.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "ops/conv.h"

#include <lauxlib.h>

/* one int of a pair, kept in a range where the int cast is defined */
static int pair_int(lua_State *L, const lt_opts *o, const char *key, int idx) {
  int ok;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok || lua_type(L, idx) != LUA_TNUMBER)
    lt_opt_error(L, o, key, "integer or {h, w} expected, got %s",
                 lua_type(L, idx) == LUA_TNUMBER ? "a non-integer number" : lt_typename(L, idx));
  if (v < -(1 << 30) || v > 1 << 30) lt_opt_error(L, o, key, "%I is out of range", v);
  return (int)v;
}

/* o.key as a pair (h, w): a number or a {h, w} list; def when absent */
static void pair_opt(lua_State *L, const lt_opts *o, const char *key, int def, int out[2]) {
  if (def >= 0) out[0] = out[1] = def;     /* def < 0: keep out as it is */
  int t = lt_opt_push(L, o, key);
  if (t == LUA_TTABLE) {
    int entries = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) lua_pop(L, 1), entries++;
    if (lua_rawlen(L, -1) != 2 || entries != 2) lt_opt_error(L, o, key, "expected {h, w}, a list of 2 integers");
    for (int i = 0; i < 2; i++) {
      lua_rawgeti(L, -1 - i, i + 1);
      out[i] = pair_int(L, o, key, lua_gettop(L));
    }
    lua_pop(L, 2);
  } else if (t != LUA_TNIL) {
    out[0] = out[1] = pair_int(L, o, key, lua_gettop(L));
  }
  lua_pop(L, 1);
}

static const char *const conv_keys[] = {"dilation", "groups", "padding", "stride", NULL};

/* conv2d(x, w [, b] [, opts]) */
static int conv_conv2d(lua_State *L) {
  dl_tensor *x = lt_check(L, 1), *w = lt_check(L, 2);
  int given = luaL_testudata(L, 3, "dlua.Tensor") != NULL;
  dl_tensor *b = given ? lt_check(L, 3) : NULL;
  lt_opts o;
  lt_options_after(L, 3, given, conv_keys, &o);
  dl_conv_opts co;
  pair_opt(L, &o, "stride", 1, co.stride);
  pair_opt(L, &o, "padding", 0, co.pad);
  pair_opt(L, &o, "dilation", 1, co.dil);
  int64_t g = lt_opt_integer(L, &o, "groups", 1);
  if (g < 1 || g > 1 << 30) lt_opt_error(L, &o, "groups", "must be positive, got %I", (lua_Integer)g);
  co.groups = (int)g;
  lt_newbox(L);
  return lt_finish(L, dl_conv2d(lt_ctx(L), x, w, b, &co));
}

static const char *const pool_keys[] = {"padding", "stride", NULL};

static int pool(lua_State *L, int max) {
  dl_tensor *x = lt_check(L, 1);
  int k[2], s[2], p[2];
  lt_opts ko = {0, 2, ""};                 /* the kernel, read like a pair option */
  if (lua_type(L, 2) == LUA_TTABLE) {
    if (lua_rawlen(L, 2) != 2) lt_argerror(L, 2, "kernel: expected {h, w}, a list of 2 integers");
    for (int i = 0; i < 2; i++) {
      lua_rawgeti(L, 2, i + 1);
      k[i] = pair_int(L, &ko, "kernel", lua_gettop(L));
      lua_pop(L, 1);
    }
  } else {
    k[0] = k[1] = (int)lt_checkinteger(L, 2, "kernel");
    if (k[0] != lua_tointeger(L, 2)) lt_argerror(L, 2, "kernel %I is out of range", lua_tointeger(L, 2));
  }
  lt_opts o;
  lt_options(L, 3, pool_keys, &o);
  lt_checkargs(L, 3);
  s[0] = k[0];                             /* the default stride is the kernel */
  s[1] = k[1];
  pair_opt(L, &o, "stride", -1, s);
  pair_opt(L, &o, "padding", 0, p);
  lt_newbox(L);
  return lt_finish(L, dl_pool2d(lt_ctx(L), x, k, s, p, max));
}

static int conv_max_pool2d(lua_State *L) { return pool(L, 1); }
static int conv_avg_pool2d(lua_State *L) { return pool(L, 0); }

static const luaL_Reg conv_funcs[] = {
  {"avg_pool2d", conv_avg_pool2d},
  {"conv2d", conv_conv2d},
  {"max_pool2d", conv_max_pool2d},
  {NULL, NULL}
};

void lt_register_conv(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, conv_funcs); }
