/* lua_tar.c -- binds the tar reader and writer of record shards
 * (engine/io/tar.h) to Lua.
 *
 * Private functions of "dlua.core", for the shard datasets and `dlua pack`:
 *   _tar_write(path, {{name, data}, ...})  -> bytes written (atomic replace)
 *   _tar_read(path)                        -> {{name =, data =, header =}, ...}
 * Errors name the file (and the member and offset) and carry no position
 * prefix: the file is what the user needs.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "io/tar.h"

#include <lauxlib.h>
#include <stdlib.h>

#define MAX_MEMBERS (1 << 24)

static int tar_write(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 2);
  int n = lt_snapshot(L, 2, 2, MAX_MEMBERS);
  int snap = lua_gettop(L);
  /* check every member before the file is created */
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, snap, i);
    if (!lua_istable(L, -1)) return lt_argerror(L, 2, "member %d is a %s, expected {name, data}", i, lt_typename(L, -1));
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      return lt_argerror(L, 2, "member %d: expected {name, data} with two strings, got {%s, %s}", i,
                         lt_typename(L, -2), lt_typename(L, -1));
    lua_pop(L, 3);
  }
  dl_ctx *ctx = lt_ctx(L);
  dl_tar_writer w;
  if (dl_tar_writer_open(ctx, &w, path)) return lt_raise_plain(L);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, snap, i);
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    size_t len;
    const char *name = lua_tostring(L, -2);
    const char *data = lua_tolstring(L, -1, &len);
    if (dl_tar_writer_add(ctx, &w, name, data, (int64_t)len)) return lt_raise_plain(L);
    lua_pop(L, 3);
  }
  if (dl_tar_writer_close(ctx, &w)) return lt_raise_plain(L);
  lua_pushinteger(L, (lua_Integer)w.bytes);
  return 1;
}

static int tar_read(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 1);
  char err[1024];
  dl_tar *t = dl_tar_open(path, err, sizeof err);
  if (!t) return luaL_error(L, "%s", err);
  lua_newtable(L);
  dl_tar_member m;
  int r, k = 0;
  char *buf = NULL;
  while ((r = dl_tar_next(t, &m, err, sizeof err)) == 1) {
    free(buf);
    buf = malloc(m.size ? (size_t)m.size : 1);
    if (!buf) {
      dl_tar_close(t);
      return luaL_error(L, "%s: member '%s': out of memory", path, m.name);
    }
    if (dl_tar_read(t, &m, buf, err, sizeof err)) break;
    lua_createtable(L, 0, 3);
    lua_pushstring(L, m.name);
    lua_setfield(L, -2, "name");
    lua_pushlstring(L, buf, (size_t)m.size);
    lua_setfield(L, -2, "data");
    lua_pushinteger(L, (lua_Integer)m.header);
    lua_setfield(L, -2, "header");
    lua_rawseti(L, -2, ++k);
  }
  free(buf);
  dl_tar_close(t);
  if (r != 0) return luaL_error(L, "%s", err);
  return 1;
}

static const luaL_Reg tar_funcs[] = {
  {"_tar_read", tar_read},
  {"_tar_write", tar_write},
  {NULL, NULL}
};

void lt_register_tar(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, tar_funcs); }
