/* lua_checkpoint.c -- binds checkpoint files (engine/io/checkpoint_*.c) to Lua.
 *
 * Private functions of "dlua.core", wrapped by lua/dlua/train/checkpoint.lua, which
 * checks the arguments first and owns the documentation:
 *   _checkpoint_save(path, {name = tensor}, {key = value})  -> true | nil, msg
 *   _checkpoint_load(path)       -> {name = tensor}, {key = value} | nil, msg
 *   _checkpoint_read_meta(path)  -> {key = value}, info | nil, msg
 *   _checkpoint_verify(path)     -> true | nil, msg
 * A bad file is an expected runtime condition (nil, msg); bad arguments and
 * out-of-memory raise. A read checkpoint lives in a "dlua.Checkpoint" box
 * pushed before the file is read, so a raise while building the result
 * tables never strands C memory.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "io/checkpoint.h"

#include <lauxlib.h>
#include <string.h>

typedef struct { dl_checkpoint *ck; } ckpt_box;   /* ck == NULL once released */

/* a release as every class has one (lua_aux.h, lt_newclass): alike by design */
static int ckpt_release(lua_State *L) {
  ckpt_box *b = luaL_checkudata(L, 1, "dlua.Checkpoint");
  dl_checkpoint_release(b->ck);
  b->ck = NULL;
  return 0;
}

static int count_pairs(lua_State *L, int t) {
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    n++;
    lua_pop(L, 1);
  }
  return n;
}

/* nil, ctx->err for a file problem; raises on out-of-memory */
static int push_failure(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  if (ctx->oom) return lt_raise(L);
  lua_pushnil(L);
  lua_pushstring(L, ctx->err);
  return 2;
}

/* pushes a box and reads path into it; NULL on failure (box stays pushed) */
static dl_checkpoint *read_boxed(lua_State *L, const char *path, dl_checkpoint_mode mode) {
  ckpt_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->ck = NULL;
  luaL_setmetatable(L, "dlua.Checkpoint");
  b->ck = dl_checkpoint_read_new(lt_ctx(L), path, mode);
  return b->ck;
}

/* the metadata table; dlua's own keys are left out of a dlua checkpoint's */
static void push_meta(lua_State *L, const dl_checkpoint *ck) {
  lua_createtable(L, 0, ck->nmeta);
  for (int i = 0; i < ck->nmeta; i++) {
    const dl_checkpoint_kv *kv = &ck->meta[i];
    if (ck->checksummed && dl_checkpoint_is_reserved_key(kv->key, kv->key_len)) continue;
    lua_pushlstring(L, kv->key, kv->key_len);
    lua_pushlstring(L, kv->value, kv->value_len);
    lua_rawset(L, -3);
  }
}

static int checkpoint_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 1);
  dl_checkpoint *ck = read_boxed(L, path, DL_CHECKPOINT_DATA);
  if (!ck) return push_failure(L);
  lua_createtable(L, 0, ck->ntensors);
  for (int i = 0; i < ck->ntensors; i++) {
    dl_checkpoint_entry *e = &ck->tensors[i];
    lua_pushlstring(L, e->name, e->name_len);
    lt_push(L, e->t);                            /* the box takes the reference */
    e->t = NULL;
    lua_rawset(L, -3);
  }
  push_meta(L, ck);
  return 2;
}

static int checkpoint_read_meta(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 1);
  dl_checkpoint *ck = read_boxed(L, path, DL_CHECKPOINT_HEADER);
  if (!ck) return push_failure(L);
  push_meta(L, ck);
  lua_createtable(L, 0, 6);
  const char *fmt = "safetensors";
  for (int i = 0; i < ck->nmeta && ck->checksummed; i++)
    if (strcmp(ck->meta[i].key, "format_version") == 0) {
      lua_pushlstring(L, ck->meta[i].value, ck->meta[i].value_len);
      lua_setfield(L, -2, "format_version");
      fmt = "dlua-checkpoint";
    }
  lua_pushstring(L, fmt);
  lua_setfield(L, -2, "format");
  lua_pushboolean(L, ck->checksummed);
  lua_setfield(L, -2, "checksummed");
  lua_pushinteger(L, (lua_Integer)ck->header_len);
  lua_setfield(L, -2, "header_bytes");
  lua_pushinteger(L, (lua_Integer)ck->data_len);
  lua_setfield(L, -2, "data_bytes");
  lua_createtable(L, ck->ntensors, 0);
  for (int i = 0; i < ck->ntensors; i++) {
    const dl_checkpoint_entry *e = &ck->tensors[i];
    lua_createtable(L, 0, 4);
    lua_pushlstring(L, e->name, e->name_len);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, dl_dtype_name(e->dtype));
    lua_setfield(L, -2, "dtype");
    lua_createtable(L, e->ndim, 0);
    for (int d = 0; d < e->ndim; d++) {
      lua_pushinteger(L, (lua_Integer)e->shape[d]);
      lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
    lua_createtable(L, 2, 0);
    lua_pushinteger(L, (lua_Integer)e->begin);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, (lua_Integer)e->end);
    lua_rawseti(L, -2, 2);
    lua_setfield(L, -2, "offsets");
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "tensors");
  return 2;
}

static int checkpoint_save(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int has_meta = !lua_isnoneornil(L, 3);
  if (has_meta) luaL_checktype(L, 3, LUA_TTABLE);
  lt_checkargs(L, 3);
  lua_settop(L, 3);
  int n = count_pairs(L, 2), nmeta = has_meta ? count_pairs(L, 3) : 0;
  dl_checkpoint_item *items = lua_newuserdatauv(L, sizeof *items * (size_t)(n ? n : 1), 0);
  dl_checkpoint_kv *kv = lua_newuserdatauv(L, sizeof *kv * (size_t)(nmeta ? nmeta : 1), 0);
  int i = 0;
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    if (i >= n) return luaL_error(L, "checkpoint.save: the tensor table changed while it was read");
    if (lua_type(L, -2) != LUA_TSTRING)
      return luaL_error(L, "checkpoint.save: tensor names must be strings, got a %s key", luaL_typename(L, -2));
    tensor_box *b = luaL_testudata(L, -1, "dlua.Tensor");
    if (!b)
      return luaL_error(L, "checkpoint.save: value for '%s' is a %s, expected a tensor", lua_tostring(L, -2),
                        luaL_typename(L, -1));
    if (!b->t) return luaL_error(L, "checkpoint.save: tensor '%s' has been released", lua_tostring(L, -2));
    items[i].name = lua_tolstring(L, -2, &items[i].name_len);
    items[i].t = b->t;
    i++;
    lua_pop(L, 1);
  }
  i = 0;
  if (has_meta) {
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      if (i >= nmeta) return luaL_error(L, "checkpoint.save: the metadata table changed while it was read");
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "checkpoint.save: metadata must map strings to strings, got %s -> %s",
                          luaL_typename(L, -2), luaL_typename(L, -1));
      kv[i].key = lua_tolstring(L, -2, &kv[i].key_len);
      kv[i].value = lua_tolstring(L, -1, &kv[i].value_len);
      i++;
      lua_pop(L, 1);
    }
  }
  dl_ctx *ctx = lt_ctx(L);
  int rc = dl_checkpoint_save(ctx, path, items, n, kv, nmeta);
  if (rc == DL_CHECKPOINT_EARG) return luaL_error(L, "%s", ctx->err);
  if (rc < 0) return push_failure(L);
  lua_pushboolean(L, 1);
  return 1;
}

static int checkpoint_verify(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 1);
  if (!read_boxed(L, path, DL_CHECKPOINT_VERIFY)) return push_failure(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* one luaL_Reg row per binding: rows and registration alike by design (lua_aux.h) */
static const luaL_Reg checkpoint_funcs[] = {
  {"_checkpoint_load", checkpoint_load},
  {"_checkpoint_read_meta", checkpoint_read_meta},
  {"_checkpoint_save", checkpoint_save},
  {"_checkpoint_verify", checkpoint_verify},
  {NULL, NULL}
};

void lt_register_checkpoint(lua_State *L, int mod, int cidx) {
  lt_newclass(L, "dlua.Checkpoint", ckpt_release, NULL, cidx);
  lt_setfuncs(L, mod, cidx, checkpoint_funcs);
}
