/* lua_dataset.c -- binds datasets (engine/data/dataset.c), image-file datasets
 * (engine/data/imagefiles.c), the IDX, CSV (CSV text too: _csv_rows, for dl.track) and NumPy readers,
 * the offline cache and raw tensor bytes, as private functions of "dlua.core"
 * (dl.data in lua/dlua/data/ is the public face; read_idx is public).
 *
 * Examples are 1-based here and 0-based in the core. Errors from the core are
 * raised without a position (lt_raise_plain) so that lua/dlua/data/ can blame the
 * caller's line; argument errors name the argument.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "io/csv.h"
#include "io/idx.h"
#include "io/npy.h"
#include "io/npz.h"
#include "io/fileio.h"
#include "data/cache.h"
#include "data/imagefiles.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ datasets */

/* _ds_new(names, tensors [, ids]): both lists are read once into snapshots,
 * which keep every name and tensor alive until the dataset holds them */
static int dataset_ds_new(lua_State *L) {
  dl_tensor *ids = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3);
  lt_checkargs(L, 3);
  int n = lt_snapshot(L, 1, 1, DL_MAXFIELDS);
  int sn = lua_gettop(L);
  int nt = lt_snapshot(L, 2, 2, DL_MAXFIELDS);
  int st = lua_gettop(L);
  if (n < 1) return luaL_error(L, "dataset: %d fields, 1 to %d supported", n, DL_MAXFIELDS);
  if (nt != n) return lt_argerror(L, 2, "%d tensors for %d names", nt, n);
  const char *names[DL_MAXFIELDS];
  dl_tensor *fields[DL_MAXFIELDS];
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, sn, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING) lt_argerror(L, 1, "element %d is a %s, expected a string", i + 1, lt_typename(L, -1));
    names[i] = lua_tostring(L, -1);          /* the snapshot anchors it */
    lua_rawgeti(L, st, i + 1);
    tensor_box *b = luaL_testudata(L, -1, "dlua.Tensor");
    if (!b) lt_argerror(L, 2, "element %d is a %s, expected a tensor", i + 1, lt_typename(L, -1));
    if (!b->t) lt_argerror(L, 2, "element %d is a released tensor", i + 1);
    fields[i] = b->t;
    lua_pop(L, 2);
  }
  dataset_box *box = lt_new_dataset_box(L);
  box->ds = dl_dataset_new(lt_ctx(L), n, names, fields, ids);
  if (!box->ds) return lt_raise_plain(L);
  return 1;
}

static int dataset_ds_len(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  lt_checkargs(L, 1);
  lua_pushinteger(L, ds->len);
  return 1;
}

/* a row of field f as a Lua value: a number when 0-d, else a tensor view */
static void push_row(lua_State *L, const dl_dataset *ds, int f, int64_t row) {
  dl_tensor *t = ds->fields[f];
  if (t->ndim == 1) {
    double v = dl_load(dl_data(t), t->dtype, row);
    if (dl_dtype_is_float(t->dtype)) lua_pushnumber(L, v);
    else lua_pushinteger(L, (lua_Integer)v);
    return;
  }
  lt_newbox(L);
  lt_finish(L, dl_view_new(lt_ctx(L), t, t->ndim - 1, t->shape + 1, t->stride + 1, t->offset + row * t->stride[0]));
}

/* _ds_get(ds, i) -> {field = value}, i 1-based (negative from the end) */
static int dataset_ds_get(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  int64_t given = lt_checkinteger(L, 2, "index");
  lt_checkargs(L, 2);
  int64_t i = given < 0 ? given + ds->len + 1 : given;
  if (i < 1 || i > ds->len)
    return luaL_error(L, "get: index %I is out of range for a dataset of %I examples", (lua_Integer)given,
                      (lua_Integer)ds->len);
  int64_t row = dl_dataset_row(ds, i - 1);
  dl_tensor *read[DL_MAXFIELDS] = {NULL};
  if (ds->src) {                                 /* the source's fields are read (decoded) here, copied, freed */
    dl_example ex;
    memset(&ex, 0, sizeof ex);
    char err[600];
    int rc = dl_dataset_read(ds, i - 1, &ex, err, sizeof err), bad = 0;
    for (int f = 0; rc == 0 && f < ds->nfields; f++) {
      if (ds->fields[f]) continue;
      const dl_exfield *e = &ex.f[dl_example_find(&ex, ds->names[f])];
      read[f] = dl_tensor_new_empty(lt_ctx(L), e->dtype, e->ndim, e->shape);
      if (!read[f]) bad = 1;
      else memcpy(read[f]->st->data, e->data, (size_t)dl_exfield_numel(e) * dl_dtype_size(e->dtype));
    }
    dl_example_free(&ex);
    if (rc != 0 || bad) {
      for (int f = 0; f < ds->nfields; f++) dl_tensor_release(read[f]);
      if (bad) return lt_raise_plain(L);
      lua_pushfstring(L, "get: example %I: %s", (lua_Integer)i, err);
      return lua_error(L);
    }
  }
  lua_createtable(L, 0, ds->nfields);
  for (int f = 0; f < ds->nfields; f++) {        /* the tensors go into boxes first, so nothing leaks on a raise */
    if (ds->fields[f]) continue;
    if (read[f]->ndim == 0) {                    /* a scalar (a record shard's class) is a number, as a tensor row's is */
      double v = dl_get_flat(read[f], 0);
      if (dl_dtype_is_float(read[f]->dtype)) lua_pushnumber(L, v);
      else lua_pushinteger(L, (lua_Integer)v);
      dl_tensor_release(read[f]);
      read[f] = NULL;
      lua_setfield(L, -2, ds->names[f]);
      continue;
    }
    lt_newbox(L);
    lt_finish(L, read[f]);
    read[f] = NULL;
    lua_setfield(L, -2, ds->names[f]);
  }
  for (int f = 0; f < ds->nfields; f++) {
    if (!ds->fields[f]) continue;
    push_row(L, ds, f, row);
    lua_setfield(L, -2, ds->names[f]);
  }
  return 1;
}

/* binding shape (check, call, push), alike by design: see lua_aux.h */
/* _ds_fields(ds) -> {{name =, dtype =, shape = {...}}, ...} (shape of one example) */
static int dataset_ds_fields(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  lt_checkargs(L, 1);
  lua_createtable(L, ds->nfields, 0);
  for (int f = 0; f < ds->nfields; f++) {
    dl_tensor *t = ds->fields[f];
    int k = ds->src_field[f];                    /* a source's field: -1 where examples differ */
    int nd = t ? t->ndim - 1 : ds->src->ndim[k];
    lua_createtable(L, 0, 3);
    lua_pushstring(L, ds->names[f]);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, dl_dtype_name(t ? t->dtype : ds->src->dtype[k]));
    lua_setfield(L, -2, "dtype");
    lua_createtable(L, nd, 0);
    for (int d = 0; d < nd; d++) {
      lua_pushinteger(L, t ? t->shape[d + 1] : ds->src->shape[k][d]);
      lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
    lua_rawseti(L, -2, f + 1);
  }
  return 1;
}

/* _ds_subset(ds, index) with index an integer tensor of 1-based positions */
static int dataset_ds_subset(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  dl_tensor *ix = lt_check(L, 2);
  lt_checkargs(L, 2);
  if (ix->dtype != DL_I64 && ix->dtype != DL_I32) return lt_argerror(L, 2, "the index must be an integer tensor");
  int64_t n = dl_numel(ix);
  int64_t *idx = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *idx, 0);   /* the GC frees it */
  for (int64_t i = 0; i < n; i++) {
    double v = dl_get_flat(ix, i);                 /* exact for int32; int64 beyond 2^53 is out of range anyway */
    if (!(v >= 1 && v <= (double)ds->len))
      return lt_argerror(L, 2, "position %f at index %I is outside [1, %I]", (lua_Number)v, (lua_Integer)(i + 1), (lua_Integer)ds->len);
    idx[i] = (int64_t)v - 1;
  }
  dataset_box *b = lt_new_dataset_box(L);
  b->ds = dl_dataset_new_subset(lt_ctx(L), ds, n, idx);
  if (!b->ds) return lt_raise_plain(L);
  return 1;
}

/* _ds_split(ds, counts [, seed]) -> list of datasets */
static int dataset_ds_split(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  int shuffled = !lua_isnoneornil(L, 3);
  uint64_t seed = shuffled ? (uint64_t)lt_checkinteger(L, 3, "seed") : 0;
  lt_checkargs(L, 3);
  int k = lt_snapshot(L, 2, 2, 64);
  if (k < 1) return lt_argerror(L, 2, "1 to 64 parts, got %d", k);
  int64_t counts[64];
  for (int i = 0; i < k; i++) {
    lua_rawgeti(L, -1, i + 1);
    if (!lua_isinteger(L, -1)) lt_argerror(L, 2, "count %d is a %s, expected an integer", i + 1, lt_typename(L, -1));
    counts[i] = (int64_t)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  dl_dataset *out[64];
  lua_createtable(L, k, 0);
  for (int i = 0; i < k; i++) {          /* boxes first: nothing to strand if a later step raises */
    lt_new_dataset_box(L);
    lua_rawseti(L, -2, i + 1);
  }
  if (dl_dataset_split(lt_ctx(L), ds, k, counts, shuffled, seed, out) < 0) return lt_raise_plain(L);
  for (int i = 0; i < k; i++) {
    lua_rawgeti(L, -1, i + 1);
    ((dataset_box *)lua_touserdata(L, -1))->ds = out[i];
    lua_pop(L, 1);
  }
  return 1;
}

/* _ds_ids(ds) -> int64 tensor of the examples' ids (0-based, as the keys use them) */
static int dataset_ds_ids(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  lt_checkargs(L, 1);
  lt_newbox(L);
  int64_t n = ds->len;
  dl_tensor *t = dl_tensor_new_empty(lt_ctx(L), DL_I64, 1, &n);
  if (t)
    for (int64_t i = 0; i < n; i++) ((int64_t *)t->st->data)[i] = dl_dataset_id(ds, i);
  return lt_finish(L, t);
}

/* _ds_column(ds, name) -> tensor [len, ...] of the field in example order */
static int dataset_ds_column(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lt_checkargs(L, 2);
  int f = dl_dataset_field(ds, name);
  if (f < 0) return luaL_error(L, "dataset has no field '%s'", name);
  dl_tensor *t = ds->fields[f];
  if (!t) return luaL_error(L, "column: field '%s' is read from files when an example is read, not held in memory", name);
  if (!ds->index) return lt_push(L, dl_tensor_retain(t));
  int64_t shape[DL_MAXDIM];
  memcpy(shape, t->shape, sizeof shape);
  shape[0] = ds->len;
  lt_newbox(L);
  dl_tensor *o = dl_tensor_new_empty(lt_ctx(L), t->dtype, t->ndim, shape);
  if (o) {
    size_t row = (size_t)(t->shape[0] ? dl_numel(t) / t->shape[0] : 0) * dl_dtype_size(t->dtype);
    for (int64_t i = 0; i < ds->len; i++)
      memcpy((char *)o->st->data + (size_t)i * row, (const char *)dl_data(t) + (size_t)ds->index[i] * row, row);
  }
  return lt_finish(L, o);
}

static int dataset_ds_checksum(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  lt_checkargs(L, 1);
  lua_pushinteger(L, (lua_Integer)dl_dataset_checksum(ds));
  return 1;
}

/* ------------------------------------------------------------ readers */

/* _ds_images(root, paths, labels, channels, skip [, max_pixels]) -> dataset: field image
 * read from root/paths[i] (decoded when read), field label the int32 tensor labels */
static int dataset_ds_images(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  dl_tensor *labels = lt_check(L, 3);
  dl_image_opts o = lt_check_image_opts(L, 4);
  int n;
  const char **paths = lt_check_strings(L, 2, 1 << 26, "path", &n);   /* 67M files */
  dataset_box *box = lt_new_dataset_box(L);
  dl_source *src = dl_imagefiles_new(lt_ctx(L), root, n, paths, &o);
  if (!src) return lt_raise_plain(L);
  const char *names[1] = {"label"};
  box->ds = dl_dataset_new_source(lt_ctx(L), src, 1, names, &labels, NULL);
  dl_source_release(src);
  if (!box->ds) return lt_raise_plain(L);
  return 1;
}

/* the first limit records (all when limit < 0) of the IDX file at path, boxed on the stack */
static int read_idx(lua_State *L, const char *path, int64_t limit, int plain) {
  dl_ctx *ctx = lt_ctx(L);
  lt_newbox(L);
  dl_idx_reader *r = dl_idx_open(ctx, path);
  if (!r) return plain ? lt_raise_plain(L) : lt_raise(L);
  int64_t shape[DL_MAXDIM];
  memcpy(shape, dl_idx_shape(r), sizeof shape);
  if (limit >= 0 && limit < shape[0]) shape[0] = limit;
  dl_tensor *t = dl_tensor_new_empty(ctx, DL_U8, dl_idx_ndim(r), shape);
  if (t && dl_idx_read(ctx, r, t->st->data, shape[0]) < 0) {
    dl_tensor_release(t);
    t = NULL;
  }
  dl_idx_close(r);
  if (!t) return plain ? lt_raise_plain(L) : lt_raise(L);
  return lt_finish(L, t);
}

/* read_idx(path) -> uint8 tensor of the whole file */
static int dataset_read_idx(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 1);
  return read_idx(L, path, -1, 0);
}

/* _read_idx(path [, limit]) -> uint8 tensor of the first limit records (all by default) */
static int dataset__read_idx(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int64_t limit = lt_optinteger(L, 2, "limit", -1);
  lt_checkargs(L, 2);
  return read_idx(L, path, limit, 1);
}

static const char *const csv_keys[] = {"delimiter", "header", "missing", "text", NULL};

/* the text option, {field = column name or 1-based number}, into t (strings anchored by the
 * options table); returns the count */
static int csv_text(lua_State *L, const lt_opts *opts, dl_csv_text *t) {
  if (lt_opt_push(L, opts, "text") == LUA_TNIL) return lua_pop(L, 1), 0;
  if (!lua_istable(L, -1)) lt_opt_error(L, opts, "text", "table expected, got %s", lt_typename(L, -1));
  int n = 0, tab = lua_gettop(L);
  for (lua_pushnil(L); lua_next(L, tab); lua_pop(L, 1)) {
    if (n == DL_CSV_MAXTEXT) lt_opt_error(L, opts, "text", "more than %d columns", DL_CSV_MAXTEXT);
    if (lua_type(L, -2) != LUA_TSTRING) lt_opt_error(L, opts, "text", "keys must be field names");
    t[n].field = lua_tostring(L, -2);
    t[n].name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_Integer num = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    t[n].number = num >= 1 && num <= INT_MAX ? (int)num : 0;
    if (!t[n].name && !lua_isinteger(L, -1))
      lt_opt_error(L, opts, "text", "column of '%s' must be a name or a number, got %s", t[n].field, lt_typename(L, -1));
    n++;
  }
  lua_pop(L, 1);
  return n;
}

/* _read_csv(path [, {delimiter =, header =, missing =, text =}]) -> names, integral, values, problems, vocab
 * with problems[column][dtype] why an integer dtype cannot hold the column
 * (present only where it cannot: out of range, not an integer), and vocab[field] the sorted
 * names of each text column, whose values are their 1-based positions there */
static int dataset_read_csv(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_opts opts;
  lt_options(L, 2, csv_keys, &opts);
  lt_checkargs(L, 2);
  dl_csv_opts o = dl_csv_defaults();
  const char *delim = lt_opt_string(L, &opts, "delimiter", NULL);
  if (delim) {
    if (strlen(delim) != 1) lt_opt_error(L, &opts, "delimiter", "one character expected, got '%s'", delim);
    o.delimiter = delim[0];
  }
  o.header = lt_opt_boolean(L, &opts, "header", o.header);
  if (lt_opt_push(L, &opts, "missing") != LUA_TNIL) {
    o.has_missing = 1;
    o.missing = lt_opt_number(L, &opts, "missing", 0);
  }
  lua_pop(L, 1);
  dl_csv_text text[DL_CSV_MAXTEXT];
  o.ntext = csv_text(L, &opts, text);
  o.text = text;
  lt_newbox(L);                                  /* owns the values once filled */
  dl_csv c;
  if (dl_csv_read(lt_ctx(L), path, &o, &c) < 0) return lt_raise_plain(L);
  ((tensor_box *)lua_touserdata(L, -1))->t = c.values;
  c.values = NULL;
  int vals = lua_gettop(L);
  lua_createtable(L, c.ncols, 0);
  lua_createtable(L, c.ncols, 0);
  for (int i = 0; i < c.ncols; i++) {
    lua_pushstring(L, c.names[i]);
    lua_rawseti(L, -3, i + 1);
    lua_pushboolean(L, c.integral[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushvalue(L, vals);
  static const dl_dtype checked[DL_CSV_NCHECK] = {DL_I32, DL_I64, DL_U8, DL_F32};   /* csv.c's order */
  lua_createtable(L, 0, 0);
  for (int i = 0; i < c.ncols; i++)
    for (int k = 0; k < DL_CSV_NCHECK; k++) {
      char m[600];
      if (!dl_csv_dtype_problem(&c, path, i, checked[k], m, sizeof m)) continue;
      if (lua_rawgeti(L, -1, i + 1) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_createtable(L, 0, 3);
        lua_pushvalue(L, -1);
        lua_rawseti(L, -3, i + 1);
      }
      lua_pushstring(L, m);
      lua_setfield(L, -2, dl_dtype_name(checked[k]));
      lua_pop(L, 1);
    }
  lua_createtable(L, 0, o.ntext);
  for (int k = 0; k < o.ntext; k++) {
    lua_newtable(L);
    for (int j = 0; c.vocab[k][j]; j++) {
      lua_pushstring(L, c.vocab[k][j]);
      lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -2, text[k].field);
  }
  dl_csv_free(&c);
  return 5;
}

/* _csv_rows(text) -> {{field, ...}, ...}: CSV text as rows of strings (dl_csv_split_text) */
static int dataset_csv_rows(lua_State *L) {
  size_t n;
  const char *text = luaL_checklstring(L, 1, &n);
  lt_checkargs(L, 1);
  char *buf, **fields;
  int64_t *starts;
  int *counts;
  int64_t rows = dl_csv_split_text(lt_ctx(L), text, n, ',', &buf, &fields, &starts, &counts);
  if (rows < 0) return lt_raise_plain(L);
  /* as in _read_csv, only a Lua memory error while the tables are filled strands the buffers */
  lua_createtable(L, rows > INT_MAX ? INT_MAX : (int)rows, 0);
  for (int64_t r = 0; r < rows; r++) {
    lua_createtable(L, counts[r], 0);
    for (int k = 0; k < counts[r]; k++) {
      lua_pushstring(L, fields[starts[r] + k]);
      lua_rawseti(L, -2, k + 1);
    }
    lua_rawseti(L, -2, (lua_Integer)r + 1);
  }
  free(buf);
  free(fields);
  free(starts);
  free(counts);
  return 1;
}

/* _read_npy(path [, map]) -> the array of a .npy file (memory-mapped when map and the layout
 * allow; map defaults to true) */
static int dataset_read_npy(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int map = lua_isnoneornil(L, 2) ? 1 : lt_checkboolean(L, 2);
  lt_checkargs(L, 2);
  lt_newbox(L);
  dl_tensor *t = dl_npy_read_new(lt_ctx(L), path, map);
  if (!t) return lt_raise_plain(L);
  return lt_finish(L, t);
}

/* An open archive owned by a userdata, so that a Lua error (memory) between opening and
 * closing it strands nothing: the box's __gc closes what is still open. */
static int npz_gc(lua_State *L) {
  dl_npz **b = lua_touserdata(L, 1);
  dl_npz_close(*b);
  *b = NULL;
  return 0;
}

static dl_npz **npz_box(lua_State *L) {
  dl_npz **b = lua_newuserdatauv(L, sizeof *b, 0);
  *b = NULL;
  if (luaL_newmetatable(L, "dlua.Npz")) {
    lua_pushcfunction(L, npz_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b;
}

/* _npz_members(path) -> {name, ...} in directory order ("x_train.npy") */
static int dataset_npz_members(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 1);
  dl_npz **b = npz_box(L);
  if (!(*b = dl_npz_open(lt_ctx(L), path))) return lt_raise_plain(L);
  int n = dl_npz_count(*b);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, dl_npz_name(*b, i));
    lua_rawseti(L, -2, i + 1);
  }
  dl_npz_close(*b);
  *b = NULL;
  return 1;
}

/* _read_npz(path, {member, ...}) -> {tensor, ...}: the members named (".npy" may be left out) */
static int dataset_read_npz(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lt_checkargs(L, 2);
  int n = lt_snapshot(L, 2, 2, DL_NPZ_MAX_MEMBERS);
  int snap = lua_gettop(L);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, snap, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING) lt_argerror(L, 2, "element %d is a %s, expected a member name", i + 1, lt_typename(L, -1));
    lua_pop(L, 1);
  }
  lua_createtable(L, n, 0);
  int out = lua_gettop(L);
  for (int i = 0; i < n; i++) {                 /* boxes first: a raise below strands nothing */
    lt_newbox(L);
    lua_rawseti(L, out, i + 1);
  }
  dl_ctx *ctx = lt_ctx(L);
  dl_npz **b = npz_box(L);
  if (!(*b = dl_npz_open(ctx, path))) return lt_raise_plain(L);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, snap, i + 1);
    const char *name = lua_tostring(L, -1);
    lua_pop(L, 1);                              /* the snapshot anchors it */
    int k = dl_npz_find(*b, name);
    dl_tensor *t = NULL;
    if (k < 0) dl_fail(ctx, "npz: '%s' has no member '%s'", path, name);
    else t = dl_npz_read_new(ctx, *b, k);
    if (!t) return lt_raise_plain(L);
    lua_rawgeti(L, out, i + 1);
    ((tensor_box *)lua_touserdata(L, -1))->t = t;
    lua_pop(L, 1);
    ctx_box *c = lt_cbox(L);
    lt_gc_pressure(L, c->ctx, &c->gc_mark);
  }
  dl_npz_close(*b);
  *b = NULL;
  lua_pushvalue(L, out);
  return 1;
}

/* ------------------------------------------------------------ cache, bytes */

/* _cache_save(path, ds, fingerprint) */
static int dataset_cache_save(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  dl_dataset *ds = lt_check_dataset(L, 2);
  const char *fp = luaL_checkstring(L, 3);
  lt_checkargs(L, 3);
  if (dl_cache_write(lt_ctx(L), path, ds, fp) < 0) return lt_raise_plain(L);
  return 0;
}

/* _cache_load(path, fingerprint) -> ds | nil, "missing" | "stale" | "corrupt", message */
static int dataset_cache_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  const char *fp = luaL_checkstring(L, 2);
  lt_checkargs(L, 2);
  dataset_box *b = lt_new_dataset_box(L);
  dl_cache_status st;
  b->ds = dl_cache_read_new(lt_ctx(L), path, fp, &st);
  if (b->ds) return 1;
  static const char *const names[] = {"ok", "missing", "stale", "corrupt"};
  lua_pushnil(L);
  lua_pushstring(L, names[st]);
  lua_pushstring(L, lt_ctx(L)->err);
  return 3;
}

/* _crc32(s [, crc]) -> the CRC-32 of s, continuing from crc */
static int dataset_crc32(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  int64_t crc = lt_optinteger(L, 2, "crc", 0);
  lt_checkargs(L, 2);
  if (crc < 0 || crc > 0xffffffffLL) return lt_argerror(L, 2, "crc %I is not a 32-bit value", (lua_Integer)crc);
  lua_pushinteger(L, (lua_Integer)dl_crc32((uint32_t)crc, s, n));
  return 1;
}

/* _tensor_bytes(t) -> the raw contiguous bytes */
static int dataset_tensor_bytes(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  lt_checkargs(L, 1);
  dl_tensor *c = dl_is_contiguous(t) ? dl_tensor_retain(t) : dl_tensor_new_contiguous(lt_ctx(L), t, t->dtype);
  if (!c) return lt_raise_plain(L);
  lt_push(L, c);                                 /* boxed: a raise below strands nothing */
  lua_pushlstring(L, dl_data(c), (size_t)dl_numel(c) * dl_dtype_size(c->dtype));
  return 1;
}

/* _tensor_from_bytes(s, dtype, shape) */
static int dataset_tensor_from_bytes(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  dl_dtype d = lt_checkdtype(L, 2);
  if (lua_type(L, 3) != LUA_TTABLE) luaL_typeerror(L, 3, "table");
  int64_t shape[DL_MAXDIM];
  int next;
  int nd = lt_checkshape(L, 3, shape, &next, 0);
  lt_checkargs(L, 3);
  lt_newbox(L);
  dl_tensor *t = dl_tensor_new_empty(lt_ctx(L), d, nd, shape);
  lt_finish(L, t);
  if (t->st->nbytes != n)
    return luaL_error(L, "tensor_from_bytes: %I bytes for a tensor of %I", (lua_Integer)n, (lua_Integer)t->st->nbytes);
  memcpy(t->st->data, s, n);
  return 1;
}

static const luaL_Reg dataset_funcs[] = {
  {"_cache_load", dataset_cache_load},
  {"_cache_save", dataset_cache_save},
  {"_crc32", dataset_crc32},
  {"_csv_rows", dataset_csv_rows},
  {"_ds_checksum", dataset_ds_checksum},
  {"_ds_column", dataset_ds_column},
  {"_ds_fields", dataset_ds_fields},
  {"_ds_get", dataset_ds_get},
  {"_ds_ids", dataset_ds_ids},
  {"_ds_images", dataset_ds_images},
  {"_ds_len", dataset_ds_len},
  {"_ds_new", dataset_ds_new},
  {"_ds_split", dataset_ds_split},
  {"_ds_subset", dataset_ds_subset},
  {"_read_csv", dataset_read_csv},
  {"_npz_members", dataset_npz_members},
  {"_read_idx", dataset__read_idx},
  {"_read_npy", dataset_read_npy},
  {"_read_npz", dataset_read_npz},
  {"_tensor_bytes", dataset_tensor_bytes},
  {"_tensor_from_bytes", dataset_tensor_from_bytes},
  {"read_idx", dataset_read_idx},
  {NULL, NULL}
};

void lt_register_dataset(lua_State *L, int mod, int cidx) { lt_setfuncs(L, mod, cidx, dataset_funcs); }
