/* dlua.c -- the dlua executable: a Lua 5.4 standalone interpreter that
 * knows the engine.
 *
 * It behaves like lua.c where the two overlap (script and arguments, the
 * global 'arg', -e, -l, -i, -v, -W, -E, '-', '--', a prompt when stdin is a
 * terminal, stdin as the script otherwise, errors with a traceback and
 * exit status 1). On top of that it makes 'require "dlua"' work with no
 * environment variables: the engine's C modules go into package.preload,
 * and the directory of the Lua library (installed layout first:
 * <prefix>/share/lua/5.4 next to <prefix>/bin/dlua; then the source tree it
 * was built from) is prepended to package.path. A bare word that is no file
 * ('dlua study FILE', 'dlua help') is a command of dlua.cli.commands. The prompt
 * reads lines with fgets, so there is no readline dependency, and there is
 * no SIGINT handler (lua.c needs a global lua_State for one).
 */
/* See LICENSE */
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#if !defined(DLUA_VERSION)
#error "DLUA_VERSION must be defined by the build"
#endif
#if !defined(DLUA_SOURCE_LUA_DIR)
#error "DLUA_SOURCE_LUA_DIR must be defined by the build"
#endif

#define DLUA_PROGNAME   "dlua"
#define DLUA_VERSION_LINE  DLUA_PROGNAME " " DLUA_VERSION " (" LUA_RELEASE ")"
#define DLUA_PROMPT     "> "
#define DLUA_PROMPT2    ">> "
#define DLUA_MAXINPUT   512     /* fgets chunk; longer lines are joined */
#define DLUA_INSTALLED  "/share/lua/5.4"    /* relative to the prefix */
#define DLUA_MARKER     "/dlua/init.lua"    /* what makes it the library */
#define EOFMARK         "<eof>"
#define MARKLEN         (sizeof(EOFMARK) - 1)


/* C modules of the engine, defined in engine/lua/lua_*.c */
int luaopen_dlua_core (lua_State *L);

/* every C module of the engine: add new ones here */
static const luaL_Reg preloaded[] = {
  {"dlua.core", luaopen_dlua_core},
  {NULL, NULL}
};


/* ------------------------------------------------------------ messages */

/* prints an error message, prefixed with the program name unless NULL */
static void l_message (const char *pname, const char *msg) {
  if (pname) lua_writestringerror("%s: ", pname);
  lua_writestringerror("%s\n", msg);
}

/* reports the error object on the top of the stack (if status is an
 * error) and pops it */
static int report (lua_State *L, int status, const char *pname) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) {  /* msghandler makes strings: only from outside it */
      msg = lua_pushfstring(L, "(error object is a %s value)",
                               luaL_typename(L, -1));
      lua_remove(L, -2);
    }
    l_message(pname, msg);
    lua_pop(L, 1);  /* remove message */
  }
  return status;
}

static void print_version (void) {
  lua_writestring(DLUA_VERSION_LINE, strlen(DLUA_VERSION_LINE));
  lua_writeline();
}

static void print_usage (FILE *f) {
  fprintf(f,
  "usage: %s [options] [script [args]]\n"
  "       %s COMMAND [args]   (%s help lists the commands: run, study, report, ...)\n"
  "Available options are:\n"
  "  -e stat   execute string 'stat'\n"
  "  -i        enter interactive mode after executing 'script'\n"
  "  -l mod    require library 'mod' into global 'mod'\n"
  "  -l g=mod  require library 'mod' into global 'g'\n"
  "  -v        show version information (also --version)\n"
  "  -h        show this help (also --help)\n"
  "  -E        ignore environment variables\n"
  "  -W        turn warnings on\n"
  "  --        stop handling options\n"
  "  -         stop handling options and execute stdin\n"
  "With no script: a prompt if stdin is a terminal, else stdin is the script.\n",
  DLUA_PROGNAME, DLUA_PROGNAME, DLUA_PROGNAME);
  fflush(f);
}

/* bad option 'opt': a message and the usage, on stderr */
static void print_badoption (const char *opt) {
  if (opt[1] == 'e' || opt[1] == 'l')
    lua_writestringerror(DLUA_PROGNAME ": '%s' needs argument\n", opt);
  else
    lua_writestringerror(DLUA_PROGNAME ": unrecognized option '%s'\n", opt);
  print_usage(stderr);
}


/* ------------------------------------------------------------ calls */

/* pushes dlua.util.blame.traceback(msg): the message led by the user's
 * file:line and the user's frames only (library frames with DLUA_DEBUG=1);
 * returns 0 with nothing pushed if the library cannot do it */
static int blame_traceback (lua_State *L, const char *msg) {
  int top = lua_gettop(L);  /* msg stays referenced below top */
  if (lua_getglobal(L, "require") == LUA_TFUNCTION) {
    lua_pushliteral(L, "dlua.util.blame");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)
        && lua_getfield(L, -1, "traceback") == LUA_TFUNCTION) {
      lua_pushstring(L, msg);
      lua_pushinteger(L, 2);  /* level 1 is this handler */
      if (lua_pcall(L, 2, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING)
        return 1;  /* the result on the top */
    }
  }
  lua_settop(L, top);
  return 0;
}

/* message handler: appends a traceback to the error message; a non-string
 * error object goes through its __tostring, if it has one */
static int msghandler (lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {  /* is error object not a string? */
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
      msg = lua_tostring(L, -1);  /* that is the message */
    else
      msg = lua_pushfstring(L, "(error object is a %s value)",
                               luaL_typename(L, 1));
  }
  if (blame_traceback(L, msg)) return 1;
  luaL_traceback(L, L, msg, 1);  /* append a standard traceback */
  return 1;
}

/* calls the function below 'narg' arguments with the message handler */
static int docall (lua_State *L, int narg, int nres) {
  int status;
  int base = lua_gettop(L) - narg;  /* function index */
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);  /* put it under the function and arguments */
  status = lua_pcall(L, narg, nres, base);
  lua_remove(L, base);
  return status;
}

static int dochunk (lua_State *L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status, DLUA_PROGNAME);
}

static int dostring (lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l 'mod' or -l 'g=mod': global g (or mod) = require(mod) */
static int dolibrary (lua_State *L, const char *spec) {
  int status;
  const char *eq = strchr(spec, '=');
  const char *modname = eq ? eq + 1 : spec;
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  status = docall(L, 1, 1);
  if (status == LUA_OK) {
    if (eq) lua_pushlstring(L, spec, (size_t)(eq - spec));
    else lua_pushstring(L, spec);
    lua_insert(L, -2);
    lua_setglobal(L, lua_tostring(L, -2));  /* globname = require(modname) */
    lua_pop(L, 1);  /* globname */
  }
  return report(L, status, DLUA_PROGNAME);
}

/* pushes arg[1], ..., arg[#arg]; returns how many */
static int pushargs (lua_State *L) {
  int i, n;
  if (lua_getglobal(L, "arg") != LUA_TTABLE)
    luaL_error(L, "'arg' is not a table");
  n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  for (i = 1; i <= n; i++)
    lua_rawgeti(L, -i, i);
  lua_remove(L, -i);  /* remove table from the stack */
  return n;
}

/* a word of lowercase letters and '-' that is no regular file (none, or a
 * directory such as ./report): a command ('dlua agent', 'dlua batch-size') */
static int is_command (const char *name) {
  const char *c;
  struct stat st;
  for (c = name; *c; c++)
    if ((*c < 'a' || *c > 'z') && *c != '-') return 0;
  return c != name && name[0] != '-' && (stat(name, &st) != 0 || !S_ISREG(st.st_mode));
}

/* does an argument after the script look like a flag ('--x')? */
static int has_flag (char **argv) {
  int i;
  for (i = 1; argv[i] != NULL; i++)
    if (strncmp(argv[i], "--", 2) == 0 && argv[i][2] != '\0') return 1;
  return 0;
}

/* runs the script argv[0] ('-' alone: stdin) with arg[1..] as '...' */
static int handle_script (lua_State *L, char **argv) {
  int status, command = 0, watched = 0;
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
    fname = NULL;  /* stdin */
  status = luaL_loadfile(L, fname);
  if (status == LUA_ERRFILE && fname != NULL && is_command(fname)) {
    /* 'dlua agent DIR ...': a bare word that is no file names a command of dlua.cli.commands */
    lua_pop(L, 1);
    status = luaL_loadstring(L, "return require('dlua.cli.commands').main(arg[0], ...)");
    command = 1;
  }
  if (status == LUA_OK) {
    int n = pushargs(L);
    if (!command && has_flag(argv)) {  /* notes whether the script reads arg (flags.check_unused) */
      int w = luaL_dostring(L, "require('dlua.train.flags').watch_arg()");
      if (w != LUA_OK) lua_pop(L, 1);  /* no library: no check */
      else watched = 1;
    }
    status = docall(L, n, 1);
  }
  /* what the main chunk returned goes to dlua.cli.finish, as for 'dlua run SCRIPT': an
   * experiment or a study is run; dlua's flags (--out, --steps, ...) given to a script
   * that returned neither would be ignored silently, an error there. Plain scripts
   * without flags never load the library. */
  if (status == LUA_OK) {
    int kind = LUA_TNIL;
    if (lua_type(L, -1) == LUA_TTABLE) {
      kind = lua_getfield(L, -1, "_dlua_kind");
      lua_pop(L, 1);
    }
    if (kind == LUA_TSTRING || watched) {
      status = luaL_loadstring(L, "return require('dlua.cli').finish(...)");
      if (status == LUA_OK) {
        lua_insert(L, -2);                     /* finish, result */
        lua_pushstring(L, fname ? fname : "stdin");
        status = lua_pcall(L, 2, 0, 0);        /* a usage error: the message alone, no traceback */
      }
    }
  }
  return report(L, status, DLUA_PROGNAME);
}


/* ------------------------------------------------------------ arguments */

#define has_error   1   /* bad option */
#define has_i       2   /* -i */
#define has_v       4   /* -v */
#define has_e       8   /* -e */
#define has_E       16  /* -E */
#define has_h       32  /* -h, --help */

/* scans the options; '*first' gets the index of the script name (0 if
 * none), or of the bad option on error */
static int collectargs (char **argv, int *first) {
  int args = 0;
  int i;
  *first = 0;
  if (argv[0] == NULL) return 0;  /* no program name */
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-')  /* not an option? */
      return args;  /* this is the script */
    switch (argv[i][1]) {
      case '-':  /* '--', '--help' or '--version' */
        if (strcmp(argv[i], "--version") == 0) {
          args |= has_v;
          break;
        }
        if (strcmp(argv[i], "--help") == 0)
          return args | has_h;
        if (argv[i][2] != '\0')
          return has_error;
        *first = (argv[i + 1] != NULL) ? i + 1 : 0;
        return args;
      case '\0':  /* '-' */
        return args;  /* script "name" is '-' */
      case 'h':
        if (argv[i][2] != '\0') return has_error;
        return args | has_h;
      case 'E':
        if (argv[i][2] != '\0') return has_error;
        args |= has_E;
        break;
      case 'W':
        if (argv[i][2] != '\0') return has_error;
        break;
      case 'i':
        args |= has_i;  /* (-i implies -v) */
        /* FALLTHROUGH */
      case 'v':
        if (argv[i][2] != '\0') return has_error;
        args |= has_v;
        break;
      case 'e':
        args |= has_e;
        /* FALLTHROUGH */
      case 'l':  /* both options need an argument */
        if (argv[i][2] == '\0') {  /* no concatenated argument? */
          i++;
          if (argv[i] == NULL || argv[i][0] == '-')
            return has_error;  /* no next argument or it is another option */
        }
        break;
      default:
        return has_error;
    }
  }
  *first = 0;  /* no script name */
  return args;
}

/* the global 'arg' exactly as lua.c builds it: the script at 0, its
 * arguments at 1.., the interpreter and its options at negative indices
 * (with no script, argv[0] is at 0) */
static void createargtable (lua_State *L, char **argv, int argc, int script) {
  int i, narg;
  narg = argc - (script + 1);  /* number of positive indices */
  lua_createtable(L, narg > 0 ? narg : 0, script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* runs the -e and -l options (and -W) in order, up to argv[n] */
static int runargs (lua_State *L, char **argv, int n) {
  int i;
  for (i = 1; i < n; i++) {
    int option = argv[i][1];
    switch (option) {
      case 'e': case 'l': {
        int status;
        const char *extra = argv[i] + 2;
        if (*extra == '\0') extra = argv[++i];
        status = (option == 'e')
                 ? dostring(L, extra, "=(command line)")
                 : dolibrary(L, extra);
        if (status != LUA_OK) return 0;
        break;
      }
      case 'W':
        lua_warning(L, "@on", 0);
        break;
    }
  }
  return 1;
}


/* ------------------------------------------------------------ library path */

/* pushes the directory of the running executable (no trailing '/'), or
 * returns 0 if /proc/self/exe cannot be read */
static int push_exedir (lua_State *L) {
  size_t cap = 256;
  for (;;) {
    char *buf = (char *)lua_newuserdatauv(L, cap, 0);  /* freed by the GC */
    ssize_t n = readlink("/proc/self/exe", buf, cap);
    if (n < 0) {
      lua_pop(L, 1);
      return 0;
    }
    if ((size_t)n < cap) {  /* not truncated? */
      const char *slash;
      buf[n] = '\0';
      slash = strrchr(buf, '/');
      if (slash == NULL) {
        lua_pop(L, 1);
        return 0;
      }
      lua_pushlstring(L, buf, (size_t)(slash - buf));
      lua_remove(L, -2);
      return 1;
    }
    lua_pop(L, 1);
    cap *= 2;
  }
}

static int isfile (const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* pushes the Lua library directory: <exe dir>/../share/lua/5.4 if it holds
 * dlua/init.lua (installed layout), else the source tree's lua/ (build tree) */
static void push_libdir (lua_State *L) {
  if (push_exedir(L)) {
    const char *dir = lua_tostring(L, -1);
    const char *slash = strrchr(dir, '/');  /* strip 'bin' */
    if (slash != NULL) {
      const char *cand;
      lua_pushlstring(L, dir, (size_t)(slash - dir));
      lua_pushliteral(L, DLUA_INSTALLED);
      lua_concat(L, 2);
      lua_pushfstring(L, "%s" DLUA_MARKER, lua_tostring(L, -1));
      cand = lua_tostring(L, -1);
      if (isfile(cand)) {
        lua_pop(L, 1);  /* marker path */
        lua_remove(L, -2);  /* exe dir */
        return;
      }
      lua_pop(L, 2);  /* marker path, candidate */
    }
    lua_pop(L, 1);
  }
  lua_pushliteral(L, DLUA_SOURCE_LUA_DIR);
}

/* package.path = <libdir>/?.lua;<libdir>/?/init.lua;<old path>, and the
 * engine's C modules into package.preload */
static void setup_package (lua_State *L) {
  const luaL_Reg *lib;
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, LUA_LOADLIBNAME);  /* package */
  if (!lua_istable(L, -1))
    luaL_error(L, "package library is not loaded");
  push_libdir(L);
  lua_getfield(L, -2, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", lua_tostring(L, -2),
                     lua_tostring(L, -2), luaL_optstring(L, -1, ""));
  lua_setfield(L, -4, "path");
  lua_pop(L, 4);  /* old path, libdir, package, LOADED */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (lib = preloaded; lib->func; lib++) {
    lua_pushcfunction(L, lib->func);
    lua_setfield(L, -2, lib->name);
  }
  lua_pop(L, 1);  /* PRELOAD */
}


/* ------------------------------------------------------------ prompt */

/* pushes the prompt: _PROMPT or _PROMPT2 if they are strings (or
 * numbers), else the default */
static const char *push_prompt (lua_State *L, int firstline) {
  const char *p;
  lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2");
  p = lua_tostring(L, -1);
  if (p == NULL) {
    lua_pop(L, 1);
    p = lua_pushstring(L, firstline ? DLUA_PROMPT : DLUA_PROMPT2);
  }
  return p;
}

/* prints the prompt and pushes the next line of stdin without its
 * newline (any length, read with fgets); returns 0 at the end of input */
static int pushline (lua_State *L, int firstline) {
  luaL_Buffer b;
  int got = 0;
  fputs(push_prompt(L, firstline), stdout);
  fflush(stdout);
  lua_pop(L, 1);  /* prompt */
  luaL_buffinit(L, &b);
  for (;;) {
    char *p = luaL_prepbuffsize(&b, DLUA_MAXINPUT);
    size_t len;
    if (fgets(p, DLUA_MAXINPUT, stdin) == NULL) break;
    got = 1;
    len = strlen(p);
    if (len > 0 && p[len - 1] == '\n') {  /* end of the line? */
      luaL_addsize(&b, len - 1);
      break;
    }
    luaL_addsize(&b, len);
  }
  luaL_pushresult(&b);
  if (!got) {  /* end of input */
    lua_pop(L, 1);
    return 0;
  }
  if (firstline && lua_tostring(L, -1)[0] == '=') {  /* 5.2's '=x' */
    lua_pushfstring(L, "return %s", lua_tostring(L, -1) + 1);
    lua_remove(L, -2);
  }
  return 1;
}

/* is a syntax error an incomplete statement (message ends in <eof>)? */
static int incomplete (lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= MARKLEN && strcmp(msg + lmsg - MARKLEN, EOFMARK) == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

/* tries the line on the top as 'return <line>;', to print its values */
static int addreturn (lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
  if (status == LUA_OK)
    lua_remove(L, -2);  /* modified line */
  else
    lua_pop(L, 2);  /* error message and modified line */
  return status;
}

/* compiles the line at index 1 as a statement, reading more lines while
 * it is incomplete */
static int multiline (lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, line, len, "=stdin");
    if (!incomplete(L, status) || !pushline(L, 0))
      return status;
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);  /* between the two lines */
    lua_concat(L, 3);
  }
}

/* reads and compiles one input; leaves the function (or an error
 * message) alone on the stack; returns -1 at the end of input */
static int loadline (lua_State *L) {
  int status;
  lua_settop(L, 0);
  if (!pushline(L, 1))
    return -1;
  if ((status = addreturn(L)) != LUA_OK)
    status = multiline(L);
  lua_remove(L, 1);  /* the line */
  return status;
}

/* prints all its arguments with luaL_tolstring, tab-separated */
static int print_values (lua_State *L) {
  int i, n = lua_gettop(L);
  for (i = 1; i <= n; i++) {
    size_t l;
    const char *s = luaL_tolstring(L, i, &l);
    if (i > 1) lua_writestring("\t", 1);
    lua_writestring(s, l);
    lua_pop(L, 1);
  }
  lua_writeline();
  return 0;
}

/* prints the values left on the stack, if any */
static void l_print (lua_State *L) {
  int n = lua_gettop(L);
  if (n > 0) {
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_pushcfunction(L, print_values);
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
      l_message(NULL, lua_pushfstring(L, "error printing results (%s)",
                                         lua_tostring(L, -1)));
  }
}

/* the read-eval-print loop; errors are shown without the program name */
static void doREPL (lua_State *L) {
  int status;
  while ((status = loadline(L)) != -1) {
    if (status == LUA_OK)
      status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) l_print(L);
    else report(L, status, NULL);
  }
  lua_settop(L, 0);
  lua_writeline();
}


/* ------------------------------------------------------------ main */

/* the interpreter, in protected mode: argc and argv are arguments 1 and 2;
 * returns true on success */
static int pmain (lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script;
  int args = collectargs(argv, &script);
  int optlim = (script > 0) ? script : argc;  /* first argv not an option */
  luaL_checkversion(L);
  if (args == has_error) {
    print_badoption(argv[script]);
    return 0;
  }
  if (args & has_h) {
    print_usage(stdout);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (args & has_v)
    print_version();
  if (args & has_E) {  /* signal for libraries to ignore env. vars. */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  setup_package(L);
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART);  /* incremental, unlike lua.c's generational:
                                tensors are outside the Lua heap and the
                                bindings step the collector for them */
  if (!runargs(L, argv, optlim))
    return 0;
  if (script > 0) {
    if (handle_script(L, argv + script) != LUA_OK)
      return 0;
  }
  if (args & has_i)
    doREPL(L);
  else if (script == 0 && !(args & (has_e | has_v))) {  /* nothing to do? */
    if (isatty(STDIN_FILENO)) {
      print_version();
      doREPL(L);
    }
    else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK)  /* stdin */
      return 0;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* OpenBLAS starts its own threads when it is loaded, before main, unless
 * OPENBLAS_NUM_THREADS says 1; dlua never uses them (the pool splits products,
 * lua_init.c sets one BLAS thread), and they cost: under a small `ulimit -v` such
 * a thread retries a failed allocation forever and the process hangs at exit.
 * So the first start re-executes itself with OPENBLAS_NUM_THREADS=1, and the
 * second puts the user's setting back for the processes dlua starts (Python,
 * trials). DLUA_BLAS_ENV carries it across ("-" for unset). If the exec fails,
 * dlua runs on as it is. */
static void blas_single_thread_start(char **argv) {
  const char *carried = getenv("DLUA_BLAS_ENV");
  if (carried) {
    if (strcmp(carried, "-") == 0) unsetenv("OPENBLAS_NUM_THREADS");
    else setenv("OPENBLAS_NUM_THREADS", carried, 1);
    unsetenv("DLUA_BLAS_ENV");
    return;
  }
  const char *mine = getenv("OPENBLAS_NUM_THREADS");
  if (mine && strcmp(mine, "1") == 0) return;
  if (setenv("DLUA_BLAS_ENV", mine ? mine : "-", 1) != 0) return;
  if (setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0) execv("/proc/self/exe", argv);
  /* the exec failed: run on, with the environment as it was */
  if (mine) setenv("OPENBLAS_NUM_THREADS", mine, 1);
  else unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv("DLUA_BLAS_ENV");
}

int main (int argc, char **argv) {
  int status, result;
  blas_single_thread_start(argv);
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    l_message(DLUA_PROGNAME, "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP);  /* stop GC while building state */
  lua_pushcfunction(L, &pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  status = lua_pcall(L, 2, 1, 0);
  result = lua_toboolean(L, -1);
  report(L, status, DLUA_PROGNAME);
  lua_close(L);
  return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
