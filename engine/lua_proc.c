/* lua_proc.c -- binds signals, sleeps and child processes (engine/proc.c).
 *
 * Private functions of "dlua.core"; lua/dlua/util/proc.lua is the public face
 * and owns the documentation:
 *   _signal_catch()               -> nothing    handlers for SIGINT/TERM/WINCH/CHLD (nests)
 *   _signal_release()             -> nothing    undoes one catch
 *   _signal_pending()             -> name|nil, count   the first interrupt caught ("SIGINT")
 *   _signal_clear()               -> nothing
 *   _signal_winch()               -> integer    SIGWINCH seen so far
 *   _sleep(seconds)               -> boolean    true when an interrupt cut it short
 *   _wait_event(seconds)          -> boolean    true on a child/signal event, false on timeout
 *   _term_width([fd])             -> integer|nil   columns of the terminal on fd (default 1)
 *   _getpid()                     -> integer
 *   _proc_spawn(argv, opts)       -> pid        opts: cwd, env, group, death_signal, stderr, stdout
 *   _proc_poll(pid [, wait])      -> nil | code, signal name|nil
 *   _proc_signal(pid, sig [, group]) -> true
 *   _proc_alive(pid)              -> boolean
 * Arguments and options are checked strictly (lauxlib messages naming the
 * argument; an unknown option lists the valid ones); a failing spawn, wait or
 * signal raises the module's message, which names the program or process.
 */
/* See LICENSE */
#include "lua_tensor.h"
#include "proc.h"

#include <lauxlib.h>
#include <string.h>
#include <unistd.h>

static int raise_ctx(lua_State *L) {
  lua_pushstring(L, lt_ctx(L)->err);
  return lua_error(L);
}

/* no more than n arguments */
static void check_arity(lua_State *L, int n) {
  if (lua_gettop(L) > n)
    luaL_argerror(L, n + 1, lua_pushfstring(L, "no more than %d argument%s expected, got %d", n, n == 1 ? "" : "s",
                                            lua_gettop(L)));
}

static double check_seconds(lua_State *L, int i) {
  double s = (double)luaL_checknumber(L, i);
  luaL_argcheck(L, s >= 0 && s == s, i, "expected a number of seconds >= 0");
  return s;
}

static int check_signal(lua_State *L, int i) {
  const char *name = luaL_checkstring(L, i);
  int sig = dl_signal_number(name);
  if (!sig)
    luaL_argerror(L, i, lua_pushfstring(L, "unknown signal '%s' (expected one of: CHLD, CONT, HUP, INT, KILL, QUIT, "
                                           "STOP, TERM, USR1, USR2, WINCH)", name));
  return sig;
}

static long check_pid(lua_State *L, int i) {
  lua_Integer pid = luaL_checkinteger(L, i);
  luaL_argcheck(L, pid > 0, i, "expected a process id > 0");
  return (long)pid;
}

/* ------------------------------------------------------------ signals */

static int l_signal_catch(lua_State *L) {
  check_arity(L, 0);
  if (dl_signal_catch(lt_ctx(L)) < 0) return raise_ctx(L);
  return 0;
}

static int l_signal_release(lua_State *L) {
  check_arity(L, 0);
  dl_signal_release();
  return 0;
}

static int l_signal_pending(lua_State *L) {
  check_arity(L, 0);
  int count;
  int sig = dl_signal_pending(&count);
  if (sig) lua_pushstring(L, dl_signal_name(sig));
  else lua_pushnil(L);
  lua_pushinteger(L, count);
  return 2;
}

static int l_signal_clear(lua_State *L) {
  check_arity(L, 0);
  dl_signal_clear();
  return 0;
}

static int l_signal_winch(lua_State *L) {
  check_arity(L, 0);
  lua_pushinteger(L, (lua_Integer)dl_signal_winch_count());
  return 1;
}

static int l_sleep(lua_State *L) {
  double s = check_seconds(L, 1);
  check_arity(L, 1);
  lua_pushboolean(L, dl_sleep(s));
  return 1;
}

static int l_wait_event(lua_State *L) {
  double s = check_seconds(L, 1);
  check_arity(L, 1);
  lua_pushboolean(L, dl_wait_event(s));
  return 1;
}

static int l_term_width(lua_State *L) {
  lua_Integer fd = luaL_optinteger(L, 1, 1);
  check_arity(L, 1);
  luaL_argcheck(L, fd >= 0, 1, "expected a file descriptor >= 0");
  int w = dl_term_width((int)fd);
  if (w <= 0) return 0;
  lua_pushinteger(L, w);
  return 1;
}

static int l_getpid(lua_State *L) {
  check_arity(L, 0);
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

/* ------------------------------------------------------------ processes */

static const char *const spawn_keys[] = {"cwd", "death_signal", "env", "group", "stderr", "stdout", NULL};

/* option key of the table at idx as a string of type t (or nil); raises naming it */
static int opt_field(lua_State *L, int idx, const char *key, int t) {
  int got = lua_getfield(L, idx, key);
  if (got != LUA_TNIL && got != t)
    luaL_argerror(L, 2, lua_pushfstring(L, "option '%s' (%s expected, got %s)", key, lua_typename(L, t),
                                        luaL_typename(L, -1)));
  return got != LUA_TNIL;
}

/* _proc_spawn(argv, opts): every string is anchored on the stack until the spawn returns */
static int l_proc_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  check_arity(L, 2);
  lua_settop(L, 2);
  if (lua_isnil(L, 2)) {
    lua_newtable(L);
    lua_replace(L, 2);
  }
  lua_pushnil(L);                                   /* unknown options */
  while (lua_next(L, 2)) {
    int ok = 0;
    if (lua_type(L, -2) == LUA_TSTRING)
      for (int i = 0; spawn_keys[i]; i++) ok |= strcmp(lua_tostring(L, -2), spawn_keys[i]) == 0;
    if (!ok)
      luaL_argerror(L, 2, lua_pushfstring(L, "unknown option '%s'; expected one of: cwd, death_signal, env, group, "
                                             "stderr, stdout", lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?"));
    lua_pop(L, 1);
  }
  lua_Integer n = luaL_len(L, 1);
  luaL_argcheck(L, n >= 1, 1, "expected a list with the program and its arguments");
  const char **argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 0);   /* index 3 */
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_geti(L, 1, i) != LUA_TSTRING)
      luaL_argerror(L, 1, lua_pushfstring(L, "element %d is a %s, expected a string", (int)i, luaL_typename(L, -1)));
    argv[i - 1] = lua_tostring(L, -1);              /* anchored: the string stays on the stack */
  }
  argv[n] = NULL;
  dl_proc_opts o = dl_proc_defaults();
  o.argv = argv;
  if (opt_field(L, 2, "cwd", LUA_TSTRING)) o.cwd = lua_tostring(L, -1);
  if (opt_field(L, 2, "stdout", LUA_TSTRING)) o.stdout_path = lua_tostring(L, -1);
  if (opt_field(L, 2, "stderr", LUA_TSTRING)) {
    if (strcmp(lua_tostring(L, -1), "stdout") == 0) o.stderr_to_stdout = 1;
    else o.stderr_path = lua_tostring(L, -1);
  }
  if (opt_field(L, 2, "group", LUA_TBOOLEAN)) o.new_group = lua_toboolean(L, -1);
  int t = lua_getfield(L, 2, "death_signal");
  if (t == LUA_TBOOLEAN && !lua_toboolean(L, -1)) o.death_signal = 0;
  else if (t == LUA_TSTRING) {
    o.death_signal = dl_signal_number(lua_tostring(L, -1));
    if (!o.death_signal)
      luaL_argerror(L, 2, lua_pushfstring(L, "option 'death_signal': unknown signal '%s'", lua_tostring(L, -1)));
  } else if (t != LUA_TNIL)
    luaL_argerror(L, 2, lua_pushfstring(L, "option 'death_signal' (signal name or false expected, got %s)",
                                        luaL_typename(L, -1)));
  if (opt_field(L, 2, "env", LUA_TTABLE)) {
    int env = lua_gettop(L);
    int k = 0;
    lua_pushnil(L);
    while (lua_next(L, env)) { k++; lua_pop(L, 1); }
    const char **list = lua_newuserdatauv(L, (size_t)(k + 1) * sizeof *list, 0);
    int i = 0;
    lua_pushnil(L);
    while (lua_next(L, env)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING || strchr(lua_tostring(L, -2), '='))
        luaL_argerror(L, 2, "option 'env' (expected a table of NAME = value strings)");
      list[i++] = lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
      lua_insert(L, env);                           /* anchored below the iteration */
      env++;
      lua_pop(L, 1);
    }
    list[i] = NULL;
    o.env = list;
  }
  long pid = dl_proc_spawn(lt_ctx(L), &o);
  if (pid < 0) return raise_ctx(L);
  lua_pushinteger(L, (lua_Integer)pid);
  return 1;
}

static int l_proc_poll(lua_State *L) {
  long pid = check_pid(L, 1);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TBOOLEAN);
  int wait = lua_toboolean(L, 2);
  check_arity(L, 2);
  int code = 0, sig = 0;
  int r = dl_proc_poll(lt_ctx(L), pid, wait, &code, &sig);
  if (r < 0) return raise_ctx(L);
  if (r == 0) return 0;
  lua_pushinteger(L, code);
  if (sig) lua_pushstring(L, dl_signal_name(sig));
  else lua_pushnil(L);
  return 2;
}

static int l_proc_signal(lua_State *L) {
  long pid = check_pid(L, 1);
  int sig = check_signal(L, 2);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TBOOLEAN);
  int group = lua_toboolean(L, 3);
  check_arity(L, 3);
  if (dl_proc_signal(lt_ctx(L), pid, sig, group) < 0) return raise_ctx(L);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_proc_alive(lua_State *L) {
  long pid = check_pid(L, 1);
  check_arity(L, 1);
  lua_pushboolean(L, dl_proc_alive(pid));
  return 1;
}

static const luaL_Reg proc_funcs[] = {
  {"_getpid", l_getpid},
  {"_proc_alive", l_proc_alive},
  {"_proc_poll", l_proc_poll},
  {"_proc_signal", l_proc_signal},
  {"_proc_spawn", l_proc_spawn},
  {"_signal_catch", l_signal_catch},
  {"_signal_clear", l_signal_clear},
  {"_signal_pending", l_signal_pending},
  {"_signal_release", l_signal_release},
  {"_signal_winch", l_signal_winch},
  {"_sleep", l_sleep},
  {"_term_width", l_term_width},
  {"_wait_event", l_wait_event},
  {NULL, NULL}
};

void lt_register_proc(lua_State *L, int mod, int cidx) {
  lua_pushvalue(L, mod);
  lua_pushvalue(L, cidx);
  luaL_setfuncs(L, proc_funcs, 1);
  lua_pop(L, 1);
}
