/* lua_fileio.c -- binds the file I/O module (engine/io/fileio.c) to Lua.
 *
 * Private functions of "dlua.core", exposed by lua/dlua/util/fs.lua, which owns
 * the documentation:
 *   _fileio_replace(path, s)          -> true   atomic replacement
 *   _fileio_append(path, s [, sync])  -> true   one O_APPEND write
 *   _fileio_fsync(path)               -> true
 *   _fileio_fail_from(n)              -> nothing (test hook; 0 turns it off)
 *   _fileio_write_count()             -> integer (data writes so far)
 * A write that fails raises the module's message ("cannot write '<path>':
 * <reason> (<stage>)", "cannot append to '<path>': <reason>"), without a
 * position prefix: it names the file, which is what the user needs.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "io/fileio.h"

#include <lauxlib.h>

/* a failed write raises ctx->err as it is: it names the file; a position would be noise */
#define raise_io lt_raise_plain
#define check_arity lt_checkargs

static int fileio_replace(lua_State *L) {
  size_t n;
  const char *path = luaL_checkstring(L, 1);
  const char *s = luaL_checklstring(L, 2, &n);
  check_arity(L, 2);
  if (dl_fileio_replace(lt_ctx(L), path, s, n) < 0) return raise_io(L);
  lua_pushboolean(L, 1);
  return 1;
}

static int fileio_append(lua_State *L) {
  size_t n;
  const char *path = luaL_checkstring(L, 1);
  const char *s = luaL_checklstring(L, 2, &n);
  int sync = lua_isnoneornil(L, 3) ? 0 : lt_checkboolean(L, 3);
  check_arity(L, 3);
  if (dl_fileio_append(lt_ctx(L), path, s, n, sync) < 0) return raise_io(L);
  lua_pushboolean(L, 1);
  return 1;
}

static int fileio_fsync(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  check_arity(L, 1);
  if (dl_fileio_fsync(lt_ctx(L), path) < 0) return raise_io(L);
  lua_pushboolean(L, 1);
  return 1;
}

static int fileio_fail_from(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  check_arity(L, 1);
  luaL_argcheck(L, n >= 0, 1, "expected a write number >= 0 (0 turns the hook off)");
  dl_fileio_fail_from((long)n);
  return 0;
}

static int fileio_write_count(lua_State *L) {
  check_arity(L, 0);
  lua_pushinteger(L, (lua_Integer)dl_fileio_write_count());
  return 1;
}

static const luaL_Reg fileio_funcs[] = {
  {"_fileio_append", fileio_append},
  {"_fileio_fail_from", fileio_fail_from},
  {"_fileio_fsync", fileio_fsync},
  {"_fileio_replace", fileio_replace},
  {"_fileio_write_count", fileio_write_count},
  {NULL, NULL}
};

void lt_register_fileio(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, fileio_funcs); }
