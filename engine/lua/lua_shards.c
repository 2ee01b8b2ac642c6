/* lua_shards.c -- binds record shards to Lua: the tar reader and writer
 * (engine/io/tar.h) and the shard source of datasets (engine/data/shards.h).
 *
 * Private functions of "dlua.core", for data.shards and `dlua pack`
 * (lua/dlua/data/shards.lua owns the documentation):
 *   _tar_write(path, {{name, data}, ...})  -> bytes written (atomic replace)
 *   _tar_read(path)                        -> {{name =, data =, header =}, ...}
 *   _ds_shards(paths, fields, channels, skip [, max_pixels]) -> dataset, incomplete
 *       fields: {{name, "image" | "class", {ext...}, offset}, ...}
 *   _ds_blocks(dataset) -> {0, start of shard 2, ..., rows} (0-based row starts), or nil
 *   _png_encode(image) -> the PNG file's bytes of a uint8 [C, H, W] tensor (C 1 or 3)
 * Errors name the file (and the member and offset) and carry no position
 * prefix: the file is what the user needs.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "io/tar.h"
#include "data/shards.h"
#include "io/images.h"

#include <string.h>

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

/* a string field k of the table at idx, blamed on argument arg */
static const char *field_string(lua_State *L, int arg, int idx, int k, const char *what, int i) {
  lua_rawgeti(L, idx, k);
  if (lua_type(L, -1) != LUA_TSTRING)
    lt_argerror(L, arg, "field %d: %s is a %s, expected a string", i, what, lt_typename(L, -1));
  const char *s = lua_tostring(L, -1);
  lua_pop(L, 1);                                   /* the snapshot anchors the table, the table the string */
  return s;
}

static int ds_shards(lua_State *L) {
  dl_image_opts o = lt_check_image_opts(L, 3);
  int n;
  const char **paths = lt_check_strings(L, 1, 1 << 20, "path", &n);
  int nf = lt_snapshot(L, 2, 2, DL_MAXFIELDS);
  int fields_at = lua_gettop(L);
  dl_shard_field f[DL_MAXFIELDS];
  memset(f, 0, sizeof f);
  for (int i = 0; i < nf; i++) {
    lua_rawgeti(L, fields_at, i + 1);
    int t = lua_gettop(L);
    if (!lua_istable(L, t)) return lt_argerror(L, 2, "field %d is a %s, expected {name, kind, exts, offset}", i + 1, lt_typename(L, t));
    const char *name = field_string(L, 2, t, 1, "name", i + 1);
    const char *kind = field_string(L, 2, t, 2, "kind", i + 1);
    if (strlen(name) == 0 || strlen(name) >= DL_NAMELEN) return lt_argerror(L, 2, "field %d: name '%s' is empty or too long", i + 1, name);
    snprintf(f[i].name, DL_NAMELEN, "%s", name);
    if (strcmp(kind, "image") == 0) f[i].kind = DL_SHARD_IMAGE;
    else if (strcmp(kind, "class") == 0) f[i].kind = DL_SHARD_CLASS;
    else return lt_argerror(L, 2, "field %d: kind '%s' (image or class expected)", i + 1, kind);
    lua_rawgeti(L, t, 3);
    if (!lua_istable(L, -1)) return lt_argerror(L, 2, "field %d: exts must be a list of strings", i + 1);
    int e = lua_gettop(L);
    f[i].next = (int)luaL_len(L, e);
    if (f[i].next < 1 || f[i].next > DL_SHARDS_MAXEXT) return lt_argerror(L, 2, "field %d: 1 to %d extensions", i + 1, DL_SHARDS_MAXEXT);
    for (int k = 0; k < f[i].next; k++) {
      const char *x = field_string(L, 2, e, k + 1, "an extension", i + 1);
      if (strlen(x) == 0 || strlen(x) >= sizeof f[i].ext[k]) return lt_argerror(L, 2, "field %d: extension '%s' is empty or too long", i + 1, x);
      snprintf(f[i].ext[k], sizeof f[i].ext[k], "%s", x);
    }
    lua_rawgeti(L, t, 4);
    f[i].offset = (int32_t)(lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0);
    lua_settop(L, fields_at);
  }
  dataset_box *box = lt_new_dataset_box(L);
  int64_t incomplete = 0;
  dl_source *src = dl_shards_new(lt_ctx(L), n, paths, nf, f, &o, &incomplete);
  if (!src) return lt_raise_plain(L);
  box->ds = dl_dataset_new_source(lt_ctx(L), src, 0, NULL, NULL, NULL);
  dl_source_release(src);
  if (!box->ds) return lt_raise_plain(L);
  lua_pushinteger(L, (lua_Integer)incomplete);
  return 2;
}

static int ds_blocks(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  lt_checkargs(L, 1);
  if (!ds->src || ds->src->nblocks < 1 || ds->index || ds->len != ds->rows) {
    lua_pushnil(L);
    return 1;
  }
  lua_createtable(L, (int)ds->src->nblocks + 1, 0);
  for (int64_t b = 0; b <= ds->src->nblocks; b++) {
    lua_pushinteger(L, (lua_Integer)ds->src->block_start[b]);
    lua_rawseti(L, -2, (lua_Integer)b + 1);
  }
  return 1;
}

static int png_encode(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  if (t->dtype != DL_U8 || t->ndim != 3 || (t->shape[0] != 1 && t->shape[0] != 3))
    return lt_argerror(L, 1, "expected a uint8 [C, H, W] image with C 1 or 3, got %s of %d dimensions",
                       dl_dtype_name(t->dtype), t->ndim);
  dl_tensor *c = dl_tensor_new_contiguous(lt_ctx(L), t, DL_U8);
  if (!c) return lt_raise_plain(L);
  void *buf;
  size_t n;
  char err[256];
  int rc = dl_image_encode_png(dl_data(c), (int)c->shape[0], c->shape[1], c->shape[2], &buf, &n, err, sizeof err);
  dl_tensor_release(c);
  if (rc < 0) return luaL_error(L, "%s", err);
  lua_pushlstring(L, buf, n);
  free(buf);
  return 1;
}

static const luaL_Reg shards_funcs[] = {
  {"_png_encode", png_encode},
  {"_ds_blocks", ds_blocks},
  {"_ds_shards", ds_shards},
  {"_tar_read", tar_read},
  {"_tar_write", tar_write},
  {NULL, NULL}
};

void lt_register_shards(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, shards_funcs); }
