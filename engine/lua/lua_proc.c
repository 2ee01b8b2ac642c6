/* lua_proc.c -- binds signals, sleeps and child processes (engine/sys/proc.c).
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
#include "lua/lua_aux.h"
#include "sys/proc.h"

#include <lauxlib.h>
#include <string.h>
#include <unistd.h>

#define check_arity lt_checkargs
#define raise_ctx lt_raise_plain             /* the message names the program or process */

static double check_seconds(lua_State *L, int i) {
  double s = (double)lt_checknumber(L, i);
  if (!(s >= 0)) lt_argerror(L, i, "expected a number of seconds >= 0, got %f", s);
  return s;
}

static int check_signal(lua_State *L, int i) {
  const char *name = luaL_checkstring(L, i);
  int sig = dl_signal_number(name);
  if (!sig)
    lt_argerror(L, i, "unknown signal '%s'; expected one of: CHLD, CONT, HUP, INT, KILL, QUIT, STOP, TERM, USR1, "
                      "USR2, WINCH", name);
  return sig;
}

static long check_pid(lua_State *L, int i) {
  int64_t pid = lt_checkinteger(L, i, "process id");
  if (pid <= 0) lt_argerror(L, i, "expected a process id > 0, got %lld", (long long)pid);
  return (long)pid;
}

/* ------------------------------------------------------------ signals */

/* binding shape (check, call, push), alike by design: see lua_aux.h */
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

/* binding shape (check, call, push), alike by design: see lua_aux.h */
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

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int l_sleep(lua_State *L) {
  check_arity(L, 1);
  double s = check_seconds(L, 1);
  lua_pushboolean(L, dl_sleep(s));
  return 1;
}

static int l_wait_event(lua_State *L) {
  check_arity(L, 1);
  double s = check_seconds(L, 1);
  lua_pushboolean(L, dl_wait_event(s));
  return 1;
}

static int l_term_width(lua_State *L) {
  check_arity(L, 1);
  int64_t fd = lt_optinteger(L, 1, "file descriptor", 1);
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

/* _proc_spawn(argv [, opts]): every string stays anchored on the stack until the spawn returns */
static int l_proc_spawn(lua_State *L) {
  check_arity(L, 2);
  lt_opts o;
  lt_options(L, 2, spawn_keys, &o);
  int n = lt_snapshot(L, 1, 1, 4096);
  if (n < 1) lt_argerror(L, 1, "expected a list with the program and its arguments");
  int snap = lua_gettop(L);
  const char **argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 0);
  for (int i = 1; i <= n; i++) {
    if (lua_rawgeti(L, snap, i) != LUA_TSTRING)
      lt_argerror(L, 1, "element %d is a %s, expected a string", i, lt_typename(L, -1));
    argv[i - 1] = lua_tostring(L, -1);
    lua_pop(L, 1);                              /* the snapshot anchors it */
  }
  argv[n] = NULL;
  dl_proc_opts po = dl_proc_defaults();
  po.argv = argv;
  po.cwd = lt_opt_string(L, &o, "cwd", NULL);
  po.stdout_path = lt_opt_string(L, &o, "stdout", NULL);
  const char *err = lt_opt_string(L, &o, "stderr", NULL);
  if (err && strcmp(err, "stdout") == 0) po.stderr_to_stdout = 1;
  else po.stderr_path = err;
  po.new_group = lt_opt_boolean(L, &o, "group", 1);
  int t = lt_opt_push(L, &o, "death_signal");
  if (t == LUA_TBOOLEAN && !lua_toboolean(L, -1)) po.death_signal = 0;
  else if (t == LUA_TSTRING) {
    po.death_signal = dl_signal_number(lua_tostring(L, -1));
    if (!po.death_signal) lt_opt_error(L, &o, "death_signal", "unknown signal '%s'", lua_tostring(L, -1));
  } else if (t != LUA_TNIL)
    lt_opt_error(L, &o, "death_signal", "signal name or false expected, got %s", lt_typename(L, -1));
  if (lt_opt_push(L, &o, "env") != LUA_TNIL) {
    int env = lua_gettop(L);
    if (!lua_istable(L, env)) lt_opt_error(L, &o, "env", "table expected, got %s", lt_typename(L, env));
    int k = 0;
    lua_pushnil(L);
    while (lua_next(L, env)) { k++; lua_pop(L, 1); }
    const char **list = lua_newuserdatauv(L, (size_t)(k + 1) * sizeof *list, 0);
    lua_newtable(L);                            /* anchors the "NAME=value" strings */
    int anchor = lua_gettop(L);
    int i = 0;
    lua_pushnil(L);
    while (lua_next(L, env)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING || strchr(lua_tostring(L, -2), '='))
        lt_opt_error(L, &o, "env", "expected a table of NAME = value strings");
      list[i++] = lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
      lua_rawseti(L, anchor, i);
      lua_pop(L, 1);
    }
    list[i] = NULL;
    po.env = list;
  }
  long pid = dl_proc_spawn(lt_ctx(L), &po);
  if (pid < 0) return raise_ctx(L);
  lua_pushinteger(L, (lua_Integer)pid);
  return 1;
}

static int l_proc_poll(lua_State *L) {
  check_arity(L, 2);
  long pid = check_pid(L, 1);
  int wait = lua_isnoneornil(L, 2) ? 0 : lt_checkboolean(L, 2);
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
  check_arity(L, 3);
  long pid = check_pid(L, 1);
  int sig = check_signal(L, 2);
  int group = lua_isnoneornil(L, 3) ? 0 : lt_checkboolean(L, 3);
  if (dl_proc_signal(lt_ctx(L), pid, sig, group) < 0) return raise_ctx(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
static int l_proc_alive(lua_State *L) {
  check_arity(L, 1);
  long pid = check_pid(L, 1);
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

void lt_register_proc(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, proc_funcs); }
