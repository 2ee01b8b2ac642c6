/* lua_dist.c -- binds the multi-process layer (engine/sys/dist.c) as private
 * functions of dlua.core (_dist_*); lua/dlua/dist/init.lua turns them into dl.dist.
 * Every function initialises MPI on first use when the process was started by
 * mpirun, so a script that never touches dl.dist never starts MPI.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "sys/dist.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

static dl_ctx *ready(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  if (dl_dist_init(ctx) < 0) lt_raise(L);
  return ctx;
}

static const char *const op_names[] = {"sum", "mean", "max", "min", NULL};

static dl_dist_op check_op(lua_State *L, int i) {
  const char *s = luaL_optstring(L, i, "sum");
  for (int k = 0; op_names[k]; k++)
    if (strcmp(s, op_names[k]) == 0) return (dl_dist_op)k;
  lt_argerror(L, i, "unknown op '%s'; expected sum, mean, max or min", s);
  return DL_DIST_SUM;
}

/* a rank or a root: an integer in int range (the layer checks it against the world) */
static int check_rank(lua_State *L, int arg, const char *what) {
  int64_t r = lt_checkinteger(L, arg, what);
  if (r < -1 || r > 1 << 30) lt_argerror(L, arg, "%s %I is out of range", what, (lua_Integer)r);
  return (int)r;
}

static int dist_available(lua_State *L) {
  lt_checkargs(L, 0);
  lua_pushboolean(L, dl_dist_available());
  return 1;
}

static int dist_rank(lua_State *L) {
  lt_checkargs(L, 0);
  ready(L);
  lua_pushinteger(L, dl_dist_rank());
  return 1;
}

static int dist_world(lua_State *L) {
  lt_checkargs(L, 0);
  ready(L);
  lua_pushinteger(L, dl_dist_world());
  return 1;
}

/* _dist_solo(delta) -> depth; delta is +1 (enter) or -1 (leave) */
static int dist_solo(lua_State *L) {
  int64_t d = lt_checkinteger(L, 1, "delta");
  lt_checkargs(L, 1);
  if (d != 1 && d != -1) return lt_argerror(L, 1, "delta must be 1 or -1, got %I", (lua_Integer)d);
  ready(L);
  lua_pushinteger(L, dl_dist_solo((int)d));
  return 1;
}

/* _dist_allreduce(t [, op]) -> a new tensor */
static int dist_allreduce(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  dl_dist_op op = check_op(L, 2);
  lt_checkargs(L, 2);
  dl_ctx *ctx = ready(L);
  tensor_box *b = lt_newbox(L);
  dl_tensor *out = NULL;
  if (dl_dist_allreduce_new(ctx, &out, &t, 1, op) < 0) return lt_raise(L);
  b->t = out;
  return 1;
}

/* _dist_allreduce_many({t1, t2, ...} [, op]) -> {r1, r2, ...}: one fused reduction */
static int dist_allreduce_many(lua_State *L) {
  dl_dist_op op = check_op(L, 2);
  lt_checkargs(L, 2);
  int n = 0;
  dl_tensor **ts = lt_check_tensor_list(L, 1, 1 << 24, &n);   /* anchored by its snapshot */
  dl_ctx *ctx = ready(L);
  lua_createtable(L, n, 0);
  int res = lua_gettop(L);
  dl_tensor **out = lua_newuserdatauv(L, sizeof(dl_tensor *) * (size_t)(n > 0 ? n : 1), 0);
  for (int k = 1; k <= n; k++) {   /* the boxes first: filling them cannot fail */
    lt_newbox(L);
    lua_rawseti(L, res, k);
  }
  if (dl_dist_allreduce_new(ctx, out, ts, n, op) < 0) return lt_raise(L);
  for (int k = 1; k <= n; k++) {
    lua_rawgeti(L, res, k);
    ((tensor_box *)lua_touserdata(L, -1))->t = out[k - 1];
    lua_pop(L, 1);
  }
  lua_pushvalue(L, res);
  return 1;
}

/* _dist_broadcast(t, root) -> t, with root's values (in place) */
static int dist_broadcast(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  int root = check_rank(L, 2, "root");
  lt_checkargs(L, 2);
  dl_ctx *ctx = ready(L);
  size_t nb = (size_t)dl_numel(t) * dl_dtype_size(t->dtype);
  if (dl_is_contiguous(t)) {
    if (dl_dist_broadcast(ctx, dl_data(t), nb, root) < 0) return lt_raise(L);
  } else {
    dl_tensor *c = dl_tensor_new_contiguous(ctx, t, t->dtype);
    if (!c) return lt_raise(L);
    int rc = dl_dist_broadcast(ctx, dl_data(c), nb, root);
    if (!rc) rc = dl_copy_into(ctx, t, c);
    dl_tensor_release(c);
    if (rc < 0) return lt_raise(L);
  }
  lua_settop(L, 1);
  return 1;
}

static int dist_barrier(lua_State *L) {
  lt_checkargs(L, 0);
  dl_ctx *ctx = ready(L);
  if (dl_dist_barrier(ctx) < 0) return lt_raise(L);
  return 0;
}

/* _dist_bcast_string(s or nil, root) -> root's string (nil on root = "") */
static int dist_bcast_string(lua_State *L) {
  size_t n = 0;
  const char *s = luaL_optlstring(L, 1, "", &n);
  int root = check_rank(L, 2, "root");
  lt_checkargs(L, 2);
  dl_ctx *ctx = ready(L);
  int64_t len = dl_dist_rank() == root ? (int64_t)n : 0;
  if (dl_dist_broadcast(ctx, &len, sizeof len, root) < 0) return lt_raise(L);
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, (size_t)len);
  if (dl_dist_rank() == root) memcpy(p, s, (size_t)len);
  if (dl_dist_broadcast(ctx, p, (size_t)len, root) < 0) return lt_raise(L);
  luaL_pushresultsize(&b, (size_t)len);
  return 1;
}

/* _dist_allgather(s) -> {rank 0's s, rank 1's s, ...} */
static int dist_allgather(lua_State *L) {
  size_t n = 0;
  const char *s = luaL_checklstring(L, 1, &n);
  lt_checkargs(L, 1);
  dl_ctx *ctx = ready(L);
  char *all = NULL;
  size_t total = 0;
  int64_t *lens = NULL;
  if (dl_dist_allgather(ctx, s, n, &all, &total, &lens) < 0) return lt_raise(L);
  int w = dl_dist_world();
  /* copy out before anything can raise */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addlstring(&b, all, total);
  dl_free(ctx, all, total + 1);
  luaL_pushresult(&b);
  int whole = lua_gettop(L);
  lua_Integer *lv = lua_newuserdatauv(L, sizeof(lua_Integer) * (size_t)w, 0);
  for (int r = 0; r < w; r++) lv[r] = (lua_Integer)lens[r];
  dl_free(ctx, lens, sizeof(int64_t) * (size_t)w);
  lua_createtable(L, w, 0);
  const char *base = lua_tostring(L, whole);
  size_t off = 0;
  for (int r = 0; r < w; r++) {
    lua_pushlstring(L, base + off, (size_t)lv[r]);
    lua_rawseti(L, -2, r + 1);
    off += (size_t)lv[r];
  }
  return 1;
}

/* _dist_send(dest, s) */
static int dist_send(lua_State *L) {
  int dest = check_rank(L, 1, "dest");
  size_t n = 0;
  const char *s = luaL_checklstring(L, 2, &n);
  lt_checkargs(L, 2);
  dl_ctx *ctx = ready(L);
  if (dl_dist_send(ctx, dest, s, n) < 0) return lt_raise(L);
  return 0;
}

/* whether a message from src waits (its length in *len); raises on a failure */
static int waiting(lua_State *L, dl_ctx *ctx, int src, size_t *len) {
  int ok = 0;
  *len = 0;
  if (dl_dist_probe(ctx, src, &ok, len) < 0) lt_raise(L);
  return ok;
}

/* _dist_probe(src) -> true if a message from src waits */
static int dist_probe(lua_State *L) {
  int src = check_rank(L, 1, "src");
  lt_checkargs(L, 1);
  size_t len;
  lua_pushboolean(L, waiting(L, ready(L), src, &len));
  return 1;
}

/* _dist_recv(src) -> s (blocks until a message from src arrives) */
static int dist_recv(lua_State *L) {
  int src = check_rank(L, 1, "src");
  lt_checkargs(L, 1);
  dl_ctx *ctx = ready(L);
  size_t len;
  while (!waiting(L, ctx, src, &len)) {}
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, len);
  if (dl_dist_recv(ctx, src, p, len) < 0) return lt_raise(L);
  luaL_pushresultsize(&b, len);
  return 1;
}

/* _dist_checksum({t1, ...}) -> 16 hex digits */
static int dist_checksum(lua_State *L) {
  lt_checkargs(L, 1);
  int n = 0;
  dl_tensor **ts = lt_check_tensor_list(L, 1, 1 << 24, &n);
  uint64_t h = 0;
  if (dl_dist_checksum(lt_ctx(L), ts, n, &h) < 0) return lt_raise(L);
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  lua_pushstring(L, hex);
  return 1;
}

/* _dist_stats() -> {allreduce_seconds =, allreduce_calls =, allreduce_bytes =, broadcast_seconds =, ...} */
static int dist_stats(lua_State *L) {
  lt_checkargs(L, 0);
  dl_dist_stats s = dl_dist_get_stats();
  lua_createtable(L, 0, 5);
  lua_pushnumber(L, s.allreduce_seconds);
  lua_setfield(L, -2, "allreduce_seconds");
  lua_pushinteger(L, (lua_Integer)s.allreduce_calls);
  lua_setfield(L, -2, "allreduce_calls");
  lua_pushinteger(L, (lua_Integer)s.allreduce_bytes);
  lua_setfield(L, -2, "allreduce_bytes");
  lua_pushnumber(L, s.broadcast_seconds);
  lua_setfield(L, -2, "broadcast_seconds");
  lua_pushinteger(L, (lua_Integer)s.broadcast_calls);
  lua_setfield(L, -2, "broadcast_calls");
  return 1;
}

static const luaL_Reg dist_funcs[] = {
  {"_dist_allgather", dist_allgather},
  {"_dist_allreduce", dist_allreduce},
  {"_dist_allreduce_many", dist_allreduce_many},
  {"_dist_available", dist_available},
  {"_dist_barrier", dist_barrier},
  {"_dist_bcast_string", dist_bcast_string},
  {"_dist_broadcast", dist_broadcast},
  {"_dist_checksum", dist_checksum},
  {"_dist_probe", dist_probe},
  {"_dist_rank", dist_rank},
  {"_dist_recv", dist_recv},
  {"_dist_send", dist_send},
  {"_dist_solo", dist_solo},
  {"_dist_stats", dist_stats},
  {"_dist_world", dist_world},
  {NULL, NULL}
};

void lt_register_dist(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, dist_funcs); }
