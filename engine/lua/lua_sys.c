/* lua_sys.c -- system functions of "dlua.core": the monotonic clock,
 * isatty, compute threads, memory accounting and the default RNG stream.
 * Nothing here touches tensor data.
 */
/* See LICENSE */
#include "lua/lua_aux.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void openblas_set_num_threads(int n);

/* clock(): monotonic wall time in seconds, for progress and benchmarks */
static int sys_clock(lua_State *L) {
  lt_checkargs(L, 0);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
  return 1;
}

/* isatty([fd]): is file descriptor fd (default 1, stdout) a terminal? For progress display. */
static int sys_isatty(lua_State *L) {
  int64_t fd = lt_optinteger(L, 1, "fd", 1);
  lt_checkargs(L, 1);
  lua_pushboolean(L, fd >= 0 && fd <= 1 << 30 && isatty((int)fd));
  return 1;
}

/* threads([n]): the compute threads (with no argument), or sets them to n */
static int sys_threads(lua_State *L) {
  lt_checkargs(L, 1);
  dl_ctx *ctx = lt_ctx(L);
  if (lua_isnoneornil(L, 1)) {
    lua_pushinteger(L, ctx->threads);
    return 1;
  }
  int64_t n = lt_checkinteger(L, 1, "count");
  if (n < 1 || n > 256) return lt_argerror(L, 1, "count must be between 1 and 256, got %I", (lua_Integer)n);
  dl_pool *p = dl_pool_new((int)n);
  if (!p) return luaL_error(L, "threads: cannot start %d threads", (int)n);
  dl_pool_free(ctx->pool);
  ctx->pool = p;
  ctx->threads = (int)n;
  openblas_set_num_threads(1);            /* the pool splits products itself (gemm.c) */
  return 0;
}

/* ------------------------------------------------------------ memory */

static int sys_memory_stats(lua_State *L) {
  lt_checkargs(L, 0);
  dl_ctx *ctx = lt_ctx(L);
  pthread_mutex_lock(&ctx->mem.lock);
  dl_mem m = ctx->mem;          /* copy: building the table may run the GC, which frees */
  pthread_mutex_unlock(&ctx->mem.lock);
  lua_createtable(L, 0, 9);
  lua_pushinteger(L, (lua_Integer)m.in_use); lua_setfield(L, -2, "in_use");
  lua_pushinteger(L, (lua_Integer)m.peak); lua_setfield(L, -2, "peak");
  lua_pushinteger(L, (lua_Integer)m.cached); lua_setfield(L, -2, "cached");
  lua_pushinteger(L, (lua_Integer)m.allocs); lua_setfield(L, -2, "allocs");
  lua_pushinteger(L, (lua_Integer)m.system_allocs); lua_setfield(L, -2, "system_allocs");
  lua_pushinteger(L, (lua_Integer)m.splits); lua_setfield(L, -2, "splits");
  lua_pushinteger(L, (lua_Integer)m.frees); lua_setfield(L, -2, "frees");
  lua_pushinteger(L, (lua_Integer)m.external); lua_setfield(L, -2, "mapped");
  if (m.limit) { lua_pushinteger(L, (lua_Integer)m.limit); lua_setfield(L, -2, "limit"); }
  return 1;
}

/* memory_limit([bytes]): sets the limit (nil: none); returns the previous one or nil */
static int sys_memory_limit(lua_State *L) {
  lt_checkargs(L, 1);
  dl_ctx *ctx = lt_ctx(L);
  size_t old = ctx->mem.limit;
  if (!lua_isnoneornil(L, 1)) {
    int64_t v = lt_checkinteger(L, 1, "bytes");
    if (v <= 0) return lt_argerror(L, 1, "bytes must be positive, got %I", (lua_Integer)v);
    ctx->mem.limit = (size_t)v;
  } else {
    ctx->mem.limit = 0;
  }
  if (old) lua_pushinteger(L, (lua_Integer)old);
  else lua_pushnil(L);
  return 1;
}

static int sys_memory_reset_peak(lua_State *L) {
  lt_checkargs(L, 0);
  dl_ctx *ctx = lt_ctx(L);
  ctx->mem.peak = ctx->mem.in_use;
  return 0;
}

static int sys_memory_trim(lua_State *L) {
  lt_checkargs(L, 0);
  dl_mem_trim(lt_ctx(L));
  return 0;
}

/* ------------------------------------------------------------ RNG */

/* seed(): the default stream's key; seed(k) restarts the stream at key k */
static int sys_seed(lua_State *L) {
  lt_checkargs(L, 1);
  dl_ctx *ctx = lt_ctx(L);
  if (lua_isnoneornil(L, 1)) {
    lua_pushinteger(L, (lua_Integer)ctx->seed);
    return 1;
  }
  ctx->seed = (uint64_t)lt_checkinteger(L, 1, "seed");
  ctx->counter = 0;
  return 0;
}

/* rng_state() -> seed, counter; rng_state(seed, counter) restores them */
static int sys_rng_state(lua_State *L) {
  lt_checkargs(L, 2);
  dl_ctx *ctx = lt_ctx(L);
  if (!lua_isnoneornil(L, 1)) {
    uint64_t seed = (uint64_t)lt_checkinteger(L, 1, "seed");
    ctx->counter = (uint64_t)lt_checkinteger(L, 2, "counter");
    ctx->seed = seed;
    return 0;
  }
  lt_checkargs(L, 0);
  lua_pushinteger(L, (lua_Integer)ctx->seed);
  lua_pushinteger(L, (lua_Integer)ctx->counter);
  return 2;
}

static const luaL_Reg sys_funcs[] = {
  {"clock", sys_clock},
  {"isatty", sys_isatty},
  {"memory_limit", sys_memory_limit},
  {"memory_reset_peak", sys_memory_reset_peak},
  {"memory_stats", sys_memory_stats},
  {"memory_trim", sys_memory_trim},
  {"rng_state", sys_rng_state},
  {"seed", sys_seed},
  {"threads", sys_threads},
  {NULL, NULL}
};

void lt_register_sys(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, sys_funcs); }
