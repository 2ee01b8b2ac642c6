/* lua_trace.c -- binds the trace recorder (engine/io/trace.c) as private
 * functions of "dlua.core" (_trace_*; dl.trace in lua/dlua/data/trace.lua is the
 * public face). The recorder lives in the context box (lua_aux.h), which the
 * pipelines share, so their worker spans land in the same trace.
 */
/* See LICENSE */
#include "lua/lua_aux.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

/* _trace_start(path): records from now on; path must be writable */
static int trace_trace_start(lua_State *L) {
  ctx_box *cb = lt_cbox(L);
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 1);
  if (dl_trace_active(cb->trace)) return luaL_error(L, "trace: already recording to '%s'", cb->trace_path);
  if (strlen(path) >= sizeof cb->trace_path)
    return luaL_error(L, "trace: the path has %d bytes, at most %d", (int)strlen(path), (int)sizeof cb->trace_path - 1);
  snprintf(cb->trace_path, sizeof cb->trace_path, "%s", path);
  dl_trace_start(cb->trace);
  dl_trace_thread_name(cb->trace, DL_TRACE_MAIN_TID, "main (Lua)");
  char err[1200];                             /* a valid empty trace now: JSON whenever the process ends */
  if (dl_trace_flush(cb->trace, path, err, sizeof err) < 0) {
    dl_trace_discard(cb->trace);
    return luaL_error(L, "%s", err);
  }
  return 0;
}

/* _trace_stop() -> path, spans written | nil when not recording */
static int trace_trace_stop(lua_State *L) {
  lt_checkargs(L, 0);
  ctx_box *cb = lt_cbox(L);
  if (!dl_trace_active(cb->trace)) return 0;
  char err[1200];
  long n = dl_trace_write_stop(cb->trace, cb->trace_path, err, sizeof err);
  if (n < 0) return luaL_error(L, "%s", err);
  lua_pushstring(L, cb->trace_path);
  lua_pushinteger(L, n);
  return 2;
}

/* _trace_active() -> recording?, path | nil */
static int trace_trace_active(lua_State *L) {
  lt_checkargs(L, 0);
  ctx_box *cb = lt_cbox(L);
  int a = dl_trace_active(cb->trace);
  lua_pushboolean(L, a);
  if (a) lua_pushstring(L, cb->trace_path);
  else lua_pushnil(L);
  return 2;
}

/* _trace_now() -> the trace clock in nanoseconds */
static int trace_trace_now(lua_State *L) {
  lt_checkargs(L, 0);
  lua_pushinteger(L, dl_trace_now());
  return 1;
}

/* _trace_span(name, t0, t1 [, cat]) on the main thread */
static int trace_trace_span(lua_State *L) {
  ctx_box *cb = lt_cbox(L);
  const char *name = luaL_checkstring(L, 1);
  int64_t t0 = lt_checkinteger(L, 2, "start"), t1 = lt_checkinteger(L, 3, "end");
  const char *cat = luaL_optstring(L, 4, "train");
  lt_checkargs(L, 4);
  dl_trace_span(cb->trace, name, cat, DL_TRACE_MAIN_TID, t0, t1);
  return 0;
}

static const luaL_Reg trace_funcs[] = {
  {"_trace_active", trace_trace_active},
  {"_trace_now", trace_trace_now},
  {"_trace_span", trace_trace_span},
  {"_trace_start", trace_trace_start},
  {"_trace_stop", trace_trace_stop},
  {NULL, NULL}
};

void lt_register_trace(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, trace_funcs); }
