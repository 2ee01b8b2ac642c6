/* lua_pipeline.c -- binds datasets, the threaded pipeline, the offline cache
 * and the trace recorder (private functions of "dlua.core"; dl.data and
 * dl.trace in lua/dlua/data.lua are the public face).
 *
 * A Lua transform runs in per-worker Lua states: for each worker the main
 * thread makes a fresh state (standard libraries, the same package.path,
 * dlua.core preloaded), copies the function's plan (bytecode and upvalues as
 * plain values, made by data.lua) into it and rebuilds the function there;
 * after that only the worker's thread touches that state. Each state has its
 * own engine context, so tensors made inside a map never cross threads: the
 * example's fields are copied in, the results copied out. Before each call
 * the state's default RNG (dl.rand, dl.randn) and math.random are seeded
 * from the example's key, so Lua maps are as reproducible as the C ones.
 *
 * Index conventions: epochs and examples are 1-based here, 0-based in the
 * core. Errors from the pipeline are raised without a position so that
 * data.lua can blame the caller's line.
 */
/* See LICENSE */
#include "lua_tensor.h"
#include "csv.h"
#include "idx.h"
#include "pipeline.h"
#include "trace.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

typedef struct {
  dl_trace *trace;
  char path[1024];
  int next_id;
} pipe_state;

typedef struct { dl_dataset *ds; } dataset_box;

typedef struct {
  int n, nfn;
  lua_State **L;
  dl_ctx **ctx;
  int *fn;                      /* [n * nfn] registry refs of the rebuilt functions */
  int *seed_fn;                 /* [n] registry ref of math.randomseed */
  size_t *gc_mark;
} lua_workers;

typedef struct {
  dl_pipe *p;
  lua_workers *lw;
} pipe_box;

static pipe_state *check_state(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(2)); }

/* raises ctx->err with no position (the Lua side adds the caller's) */
static int raise_plain(lua_State *L) {
  dl_ctx *ctx = lt_ctx(L);
  ctx->oom = 0;
  lua_pushstring(L, ctx->err);
  return lua_error(L);
}

/* ------------------------------------------------------------ datasets */

static dl_dataset *check_ds(lua_State *L, int i) {
  dataset_box *b = luaL_checkudata(L, i, "dlua.Dataset");
  if (!b->ds) luaL_error(L, "dataset has been released");
  return b->ds;
}

static dataset_box *new_ds_box(lua_State *L) {
  dataset_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->ds = NULL;
  luaL_setmetatable(L, "dlua.Dataset");
  return b;
}

static int ds_gc(lua_State *L) {
  dataset_box *b = luaL_checkudata(L, 1, "dlua.Dataset");
  dl_dataset_release(b->ds);
  b->ds = NULL;
  return 0;
}

/* _ds_new(names, tensors [, ids]) */
static int l_ds_new(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  int n = (int)luaL_len(L, 1);
  if (n < 1 || n > DL_MAXFIELDS) return luaL_error(L, "dataset: %d fields, 1 to %d supported", n, DL_MAXFIELDS);
  const char *names[DL_MAXFIELDS];
  dl_tensor *fields[DL_MAXFIELDS];
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    names[i] = luaL_checkstring(L, -1);          /* stays referenced by the table */
    lua_pop(L, 1);
    lua_geti(L, 2, i + 1);
    fields[i] = lt_check(L, lua_gettop(L));
    lua_pop(L, 1);
  }
  dl_tensor *ids = lua_isnoneornil(L, 3) ? NULL : lt_check(L, 3);
  dataset_box *b = new_ds_box(L);
  b->ds = dl_dataset_new(lt_ctx(L), n, names, fields, ids);
  if (!b->ds) return raise_plain(L);
  return 1;
}

static int l_ds_len(lua_State *L) {
  lua_pushinteger(L, check_ds(L, 1)->len);
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
static int l_ds_get(lua_State *L) {
  dl_dataset *ds = check_ds(L, 1);
  int64_t given = lt_checkint(L, 2, "get", "index"), i = given < 0 ? given + ds->len + 1 : given;
  if (i < 1 || i > ds->len)
    return luaL_error(L, "get: index %I is out of range for a dataset of %I examples", (lua_Integer)given,
                      (lua_Integer)ds->len);
  int64_t row = dl_dataset_row(ds, i - 1);
  lua_createtable(L, 0, ds->nfields);
  for (int f = 0; f < ds->nfields; f++) {
    push_row(L, ds, f, row);
    lua_setfield(L, -2, ds->names[f]);
  }
  return 1;
}

/* _ds_fields(ds) -> {{name =, dtype =, shape = {...}}, ...} (shape of one example) */
static int l_ds_fields(lua_State *L) {
  dl_dataset *ds = check_ds(L, 1);
  lua_createtable(L, ds->nfields, 0);
  for (int f = 0; f < ds->nfields; f++) {
    dl_tensor *t = ds->fields[f];
    lua_createtable(L, 0, 3);
    lua_pushstring(L, ds->names[f]);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, dl_dtype_name(t->dtype));
    lua_setfield(L, -2, "dtype");
    lua_createtable(L, t->ndim - 1, 0);
    for (int k = 1; k < t->ndim; k++) {
      lua_pushinteger(L, t->shape[k]);
      lua_rawseti(L, -2, k);
    }
    lua_setfield(L, -2, "shape");
    lua_rawseti(L, -2, f + 1);
  }
  return 1;
}

/* _ds_subset(ds, index) with index an integer tensor of 1-based positions */
static int l_ds_subset(lua_State *L) {
  dl_dataset *ds = check_ds(L, 1);
  dl_tensor *ix = lt_check(L, 2);
  if (ix->dtype != DL_I64 && ix->dtype != DL_I32) return luaL_error(L, "subset: the index must be an integer tensor");
  int64_t n = dl_numel(ix);
  int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
  if (!idx) return luaL_error(L, "subset: out of memory");
  for (int64_t i = 0; i < n; i++) idx[i] = (int64_t)dl_get_flat(ix, i) - 1;
  dataset_box *b = new_ds_box(L);
  b->ds = dl_dataset_new_subset(lt_ctx(L), ds, n, idx);
  free(idx);
  if (!b->ds) return raise_plain(L);
  return 1;
}

/* _ds_split(ds, counts, seed | nil) -> list of datasets */
static int l_ds_split(lua_State *L) {
  dl_dataset *ds = check_ds(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int k = (int)luaL_len(L, 2);
  if (k < 1 || k > 64) return luaL_error(L, "split: 1 to 64 parts, got %d", k);
  int64_t counts[64];
  for (int i = 0; i < k; i++) {
    lua_geti(L, 2, i + 1);
    counts[i] = lt_checkint(L, -1, "split", "count");
    lua_pop(L, 1);
  }
  int shuffled = !lua_isnoneornil(L, 3);
  uint64_t seed = shuffled ? (uint64_t)lt_checkint(L, 3, "split", "seed") : 0;
  dl_dataset *out[64];
  lua_createtable(L, k, 0);
  for (int i = 0; i < k; i++) {          /* boxes first: nothing to strand if a later step raises */
    new_ds_box(L);
    lua_rawseti(L, -2, i + 1);
  }
  if (dl_dataset_split(lt_ctx(L), ds, k, counts, shuffled, seed, out) < 0) return raise_plain(L);
  for (int i = 0; i < k; i++) {
    lua_rawgeti(L, -1, i + 1);
    ((dataset_box *)lua_touserdata(L, -1))->ds = out[i];
    lua_pop(L, 1);
  }
  return 1;
}

/* _ds_ids(ds) -> int64 tensor of the examples' ids (0-based, as the keys use them) */
static int l_ds_ids(lua_State *L) {
  dl_dataset *ds = check_ds(L, 1);
  lt_newbox(L);
  int64_t n = ds->len;
  dl_tensor *t = dl_tensor_new_empty(lt_ctx(L), DL_I64, 1, &n);
  if (t)
    for (int64_t i = 0; i < n; i++) ((int64_t *)t->st->data)[i] = dl_dataset_id(ds, i);
  return lt_finish(L, t);
}

/* _ds_column(ds, name) -> tensor [len, ...] of the field in example order */
static int l_ds_column(lua_State *L) {
  dl_dataset *ds = check_ds(L, 1);
  const char *name = luaL_checkstring(L, 2);
  int f = dl_dataset_field(ds, name);
  if (f < 0) return luaL_error(L, "dataset has no field '%s'", name);
  dl_tensor *t = ds->fields[f];
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

static int l_ds_checksum(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)dl_dataset_checksum(check_ds(L, 1)));
  return 1;
}

/* ------------------------------------------------------------ readers */

/* _read_idx(path [, limit]) -> uint8 tensor of the first limit records (all by default) */
static int l_read_idx(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int64_t limit = lua_isnoneornil(L, 2) ? -1 : lt_checkint(L, 2, "idx", "limit");
  dl_ctx *ctx = lt_ctx(L);
  lt_newbox(L);
  dl_idx_reader *r = dl_idx_open(ctx, path);
  if (!r) return raise_plain(L);
  int64_t shape[DL_MAXDIM];
  memcpy(shape, dl_idx_shape(r), sizeof shape);
  if (limit >= 0 && limit < shape[0]) shape[0] = limit;
  dl_tensor *t = dl_tensor_new_empty(ctx, DL_U8, dl_idx_ndim(r), shape);
  if (t && dl_idx_read(ctx, r, t->st->data, shape[0]) < 0) {
    dl_tensor_release(t);
    t = NULL;
  }
  dl_idx_close(r);
  if (!t) return raise_plain(L);
  return lt_finish(L, t);
}

/* _read_csv(path, {delimiter =, header =, missing =}) -> names, integral, values */
static int l_read_csv(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  dl_csv_opts o = dl_csv_defaults();
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "delimiter");
    if (lua_isstring(L, -1)) o.delimiter = lua_tostring(L, -1)[0];
    lua_getfield(L, 2, "header");
    if (!lua_isnil(L, -1)) o.header = lua_toboolean(L, -1);
    lua_getfield(L, 2, "missing");
    if (lua_isnumber(L, -1)) {
      o.has_missing = 1;
      o.missing = lua_tonumber(L, -1);
    }
    lua_pop(L, 3);
  }
  lt_newbox(L);                                  /* owns the values once filled */
  dl_csv c;
  if (dl_csv_read(lt_ctx(L), path, &o, &c) < 0) return raise_plain(L);
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
  dl_csv_free(&c);
  lua_pushvalue(L, vals);
  return 3;
}

/* ------------------------------------------------------------ plain values between states */

/* copies the plain value (nil, boolean, number, string, table of these) at
 * index i of L onto the top of W */
static void copy_plain(lua_State *L, int i, lua_State *W, int depth) {
  i = lua_absindex(L, i);
  if (depth > 200) luaL_error(L, "map: the function's plan is nested too deeply");
  luaL_checkstack(W, 4, "copying a plan");
  switch (lua_type(L, i)) {
    case LUA_TNIL: lua_pushnil(W); break;
    case LUA_TBOOLEAN: lua_pushboolean(W, lua_toboolean(L, i)); break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, i)) lua_pushinteger(W, lua_tointeger(L, i));
      else lua_pushnumber(W, lua_tonumber(L, i));
      break;
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, i, &n);
      lua_pushlstring(W, s, n);
      break;
    }
    case LUA_TTABLE:
      lua_newtable(W);
      lua_pushnil(L);
      while (lua_next(L, i)) {
        copy_plain(L, -2, W, depth + 1);
        copy_plain(L, -1, W, depth + 1);
        lua_rawset(W, -3);
        lua_pop(L, 1);
      }
      break;
    default: luaL_error(L, "map: cannot copy a %s into a worker state", luaL_typename(L, i));
  }
}

/* ------------------------------------------------------------ Lua workers */

static void lw_free(lua_workers *lw) {
  if (!lw) return;
  for (int i = 0; i < lw->n; i++)
    if (lw->L && lw->L[i]) lua_close(lw->L[i]);
  free(lw->L);
  free(lw->ctx);
  free(lw->fn);
  free(lw->seed_fn);
  free(lw->gc_mark);
  free(lw);
}

/* a worker state with the plans of the nfn Lua transforms (in plans, a list
 * at index `plans` of L) rebuilt; raises in L on failure (W closed) */
static lua_State *lw_state(lua_State *L, int plans, int nfn, int *fn, int *seed_fn, dl_ctx **wctx) {
  lua_State *W = luaL_newstate();
  if (!W) luaL_error(L, "map: cannot create a worker Lua state");
  luaL_openlibs(W);
  lua_getglobal(L, "package");
  lua_getglobal(W, "package");
  lua_getfield(L, -1, "path");
  lua_getfield(L, -2, "cpath");
  lua_pushstring(W, lua_tostring(L, -2));
  lua_setfield(W, -2, "path");
  lua_pushstring(W, lua_tostring(L, -1));
  lua_setfield(W, -2, "cpath");
  lua_pop(L, 3);
  lua_pop(W, 1);
  luaL_getsubtable(W, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(W, luaopen_dlua_core);
  lua_setfield(W, -2, "dlua.core");
  lua_pop(W, 1);
  lua_getglobal(W, "require");
  lua_pushliteral(W, "dlua.data");
  if (lua_pcall(W, 1, 1, 0) != LUA_OK) goto fail;
  int data = lua_gettop(W);
  for (int k = 0; k < nfn; k++) {
    lua_getfield(W, data, "_worker_load");
    lua_geti(L, plans, k + 1);
    copy_plain(L, -1, W, 0);
    lua_pop(L, 1);
    if (lua_pcall(W, 1, 1, 0) != LUA_OK) goto fail;
    fn[k] = luaL_ref(W, LUA_REGISTRYINDEX);
  }
  lua_pop(W, 1);
  lua_getglobal(W, "math");
  lua_getfield(W, -1, "randomseed");
  *seed_fn = luaL_ref(W, LUA_REGISTRYINDEX);
  lua_pop(W, 1);
  lua_getfield(W, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(W, -1, "dlua.core");
  lua_getfield(W, -1, "_context");
  ctx_box *cb = lua_touserdata(W, -1);
  lua_pop(W, 3);
  if (!cb || !cb->ctx) {
    lua_pushliteral(W, "worker state has no engine context");
    goto fail;
  }
  *wctx = cb->ctx;
  return W;
fail:
  lua_pushfstring(L, "map: cannot load the function into a worker state: %s", lua_tostring(W, -1));
  lua_close(W);
  lua_error(L);
  return NULL;
}

/* pushes a tensor box in W holding t (W's own context made it) */
static void push_worker_tensor(lua_State *W, dl_tensor *t) {
  tensor_box *b = lua_newuserdatauv(W, sizeof *b, 0);
  b->t = t;
  luaL_setmetatable(W, "dlua.Tensor");
}

/* the dl_tf_call of a Lua transform: ex -> function(example, info) -> fields */
static int lua_tf_call(const dl_transform *tf, int worker, dl_example *ex, int64_t epoch, uint64_t key, char *err,
                       size_t errlen) {
  lua_workers *lw = tf->user;
  lua_State *W = lw->L[worker];
  dl_ctx *wctx = lw->ctx[worker];
  int top = lua_gettop(W), rc = -1;
  if (!lua_checkstack(W, 8)) {
    snprintf(err, errlen, "worker Lua stack overflow");
    return -1;
  }
  lua_rawgeti(W, LUA_REGISTRYINDEX, lw->seed_fn[worker]);
  lua_pushinteger(W, (lua_Integer)key);
  if (lua_pcall(W, 1, 0, 0) != LUA_OK) lua_pop(W, 1);
  wctx->seed = key;
  wctx->counter = 0;
  lua_rawgeti(W, LUA_REGISTRYINDEX, lw->fn[worker * lw->nfn + tf->user_index]);
  lua_createtable(W, 0, ex->n);
  for (int i = 0; i < ex->n; i++) {
    const dl_exfield *f = &ex->f[i];
    if (f->ndim == 0) {
      double v = dl_load(f->data, f->dtype, 0);
      if (dl_dtype_is_float(f->dtype)) lua_pushnumber(W, v);
      else lua_pushinteger(W, (lua_Integer)v);
    } else {
      dl_tensor *t = dl_tensor_new_empty(wctx, f->dtype, f->ndim, f->shape);
      if (!t) {
        snprintf(err, errlen, "%s", wctx->err);
        goto done;
      }
      memcpy(t->st->data, f->data, t->st->nbytes);
      push_worker_tensor(W, t);
    }
    lua_setfield(W, -2, f->name);
  }
  lua_createtable(W, 0, 3);
  lua_pushinteger(W, epoch + 1);
  lua_setfield(W, -2, "epoch");
  lua_pushinteger(W, ex->index + 1);
  lua_setfield(W, -2, "index");
  lua_pushinteger(W, ex->id);
  lua_setfield(W, -2, "id");
  if (lua_pcall(W, 2, 1, 0) != LUA_OK) {
    snprintf(err, errlen, "%s", lua_tostring(W, -1) ? lua_tostring(W, -1) : "(error object is not a string)");
    goto done;
  }
  if (!lua_istable(W, -1)) {
    snprintf(err, errlen, "the function returned a %s, expected a table of fields", luaL_typename(W, -1));
    goto done;
  }
  int res = lua_gettop(W);
  int seen[DL_MAXFIELDS] = {0};
  lua_pushnil(W);
  while (lua_next(W, res)) {
    if (lua_type(W, -2) != LUA_TSTRING) {
      snprintf(err, errlen, "the function returned a table with a %s key; field names are strings",
               luaL_typename(W, -2));
      goto done;
    }
    const char *name = lua_tostring(W, -2);
    if (strlen(name) == 0 || strlen(name) >= DL_NAMELEN) {
      snprintf(err, errlen, "field name '%s' must have 1 to %d characters", name, DL_NAMELEN - 1);
      goto done;
    }
    int i = dl_example_find(ex, name), had = i >= 0;
    if (i < 0 && (i = dl_example_add(ex, name)) < 0) {
      snprintf(err, errlen, "more than %d fields", DL_MAXFIELDS);
      goto done;
    }
    seen[i] = 1;
    tensor_box *b = luaL_testudata(W, -1, "dlua.Tensor");
    if (b) {
      dl_tensor *t = b->t;
      if (!t) {
        snprintf(err, errlen, "field '%s' is a released tensor", name);
        goto done;
      }
      dl_tensor *c = dl_is_contiguous(t) ? dl_tensor_retain(t) : dl_tensor_new_contiguous(wctx, t, t->dtype);
      void *dst = c ? dl_example_begin(ex, i, t->dtype, t->ndim, t->shape) : NULL;
      if (!dst) {
        dl_tensor_release(c);
        snprintf(err, errlen, "out of memory copying field '%s'", name);
        goto done;
      }
      memcpy(dst, dl_data(c), (size_t)dl_numel(c) * dl_dtype_size(c->dtype));
      dl_tensor_release(c);
      dl_example_commit(ex, i);
    } else if (lua_type(W, -1) == LUA_TNUMBER || lua_type(W, -1) == LUA_TBOOLEAN) {
      dl_dtype d = had && ex->f[i].ndim == 0 ? ex->f[i].dtype : lua_isinteger(W, -1) ? DL_I32 : DL_F32;
      double v = lua_type(W, -1) == LUA_TBOOLEAN ? lua_toboolean(W, -1) : lua_tonumber(W, -1);
      void *dst = dl_example_begin(ex, i, d, 0, NULL);
      if (!dst) {
        snprintf(err, errlen, "out of memory");
        goto done;
      }
      dl_store(dst, d, 0, v);
      dl_example_commit(ex, i);
    } else {
      snprintf(err, errlen, "field '%s' is a %s, expected a tensor or a number", name, luaL_typename(W, -1));
      goto done;
    }
    lua_pop(W, 1);
  }
  for (int i = ex->n - 1; i >= 0; i--)
    if (!seen[i]) dl_example_remove(ex, i);
  rc = 0;
done:
  lua_settop(W, top);
  lt_gc_pressure(W, wctx, &lw->gc_mark[worker]);   /* tell the worker's GC about tensor bytes */
  return rc;
}

/* ------------------------------------------------------------ building a pipe */

static double num_field(lua_State *L, int t, const char *k, double def) {
  lua_getfield(L, t, k);
  double v = lua_isnil(L, -1) ? def : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return v;
}

static int64_t int_field(lua_State *L, int t, const char *k, int64_t def) {
  lua_getfield(L, t, k);
  int64_t v = lua_isnil(L, -1) ? def : (int64_t)luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  return v;
}

static int bool_field(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static const char *str_field(lua_State *L, int t, const char *k, const char *def) {
  lua_getfield(L, t, k);
  const char *s = lua_isnil(L, -1) ? def : luaL_checkstring(L, -1);
  lua_pop(L, 1);                                  /* the spec table keeps it alive */
  return s;
}

/* reads t[k][1], t[k][2] (or a single number for both) */
static void pair_field(lua_State *L, int t, const char *k, double *a, double *b) {
  lua_getfield(L, t, k);
  if (lua_istable(L, -1)) {
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    *a = luaL_checknumber(L, -2);
    *b = luaL_checknumber(L, -1);
    lua_pop(L, 2);
  } else if (!lua_isnil(L, -1)) {
    *a = *b = luaL_checknumber(L, -1);
  }
  lua_pop(L, 1);
}

static const char *const tf_kinds[] = {"cast", "scale", "normalize", "random_crop", "flip",
                                       "random_translate", "random_affine", "one_hot", "select", "lua", NULL};

static void parse_transform(lua_State *L, int t, dl_transform *tf) {
  lua_getfield(L, t, "kind");
  int kind = luaL_checkoption(L, -1, NULL, tf_kinds);
  lua_pop(L, 1);
  *tf = dl_transform_defaults((dl_tf_kind)kind, str_field(L, t, "field", "image"));
  const char *name = str_field(L, t, "name", NULL);
  if (name) snprintf(tf->name, sizeof tf->name, "%s", name);
  tf->stage = (int)int_field(L, t, "stage", 0) - 1;
  double a = 0, b = 0;
  switch (tf->kind) {
    case DL_TF_CAST: {
      int d = dl_dtype_from_name(str_field(L, t, "dtype", "float32"));
      if (d < 0) luaL_error(L, "cast: unknown dtype");
      tf->dtype = (dl_dtype)d;
      break;
    }
    case DL_TF_SCALE: tf->scale = (float)num_field(L, t, "scale", 1.0); break;
    case DL_TF_NORMALIZE: {
      lua_getfield(L, t, "mean");
      lua_getfield(L, t, "std");
      int n = (int)luaL_len(L, -2);
      if (n < 1 || n > DL_MAXCH || luaL_len(L, -1) != n) luaL_error(L, "normalize: mean and std need 1 to %d values each", DL_MAXCH);
      tf->nch = n;
      for (int i = 0; i < n; i++) {
        lua_geti(L, -2, i + 1);
        lua_geti(L, -2, i + 1);
        tf->mean[i] = (float)luaL_checknumber(L, -2);
        tf->std[i] = (float)luaL_checknumber(L, -1);
        lua_pop(L, 2);
      }
      lua_pop(L, 2);
      break;
    }
    case DL_TF_CROP:
      pair_field(L, t, "size", &a, &b);
      tf->size[0] = (int64_t)a;
      tf->size[1] = (int64_t)b;
      tf->padding = int_field(L, t, "padding", 0);
      tf->fill = (float)num_field(L, t, "fill", 0.0);
      break;
    case DL_TF_FLIP:
      tf->p_h = (float)num_field(L, t, "horizontal", 0.0);
      tf->p_v = (float)num_field(L, t, "vertical", 0.0);
      break;
    case DL_TF_TRANSLATE:
      pair_field(L, t, "max", &a, &b);
      tf->max_shift[0] = (int64_t)a;
      tf->max_shift[1] = (int64_t)b;
      tf->fill = (float)num_field(L, t, "fill", 0.0);
      break;
    case DL_TF_AFFINE:
      tf->degrees = (float)num_field(L, t, "degrees", 0.0);
      tf->translate = (float)num_field(L, t, "translate", 0.0);
      a = b = 1.0;
      pair_field(L, t, "scale", &a, &b);
      tf->scale_lo = (float)a;
      tf->scale_hi = (float)b;
      tf->fill = (float)num_field(L, t, "fill", 0.0);
      break;
    case DL_TF_ONE_HOT: tf->classes = int_field(L, t, "classes", 0); break;
    case DL_TF_SELECT: {
      lua_getfield(L, t, "fields");
      int n = (int)luaL_len(L, -1);
      if (n < 1 || n > DL_MAXFIELDS) luaL_error(L, "select: 1 to %d fields", DL_MAXFIELDS);
      tf->nsel = n;
      for (int i = 0; i < n; i++) {
        lua_geti(L, -1, i + 1);
        snprintf(tf->sel[i], DL_NAMELEN, "%s", luaL_checkstring(L, -1));
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
      break;
    }
    case DL_TF_CALL: tf->call = lua_tf_call; break;
  }
}

static int pipe_gc(lua_State *L) {
  pipe_box *b = luaL_checkudata(L, 1, "dlua.PipelineIter");
  dl_pipe_free(b->p);                 /* joins the workers first */
  b->p = NULL;
  lw_free(b->lw);                     /* then their Lua states can go */
  b->lw = NULL;
  return 0;
}

static pipe_box *check_pipe(lua_State *L, int i) { return luaL_checkudata(L, i, "dlua.PipelineIter"); }

/* _pipe_new(ds, spec) -> handle; spec as data.lua builds it */
static int l_pipe_new(lua_State *L) {
  dl_dataset *ds = check_ds(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  pipe_state *ps = check_state(L);
  dl_pipe_opts o = dl_pipe_defaults();
  o.ds = ds;
  o.batch = int_field(L, 2, "batch", 0);
  o.pad = bool_field(L, 2, "pad");
  o.drop_remainder = bool_field(L, 2, "drop_remainder");
  o.workers = (int)int_field(L, 2, "workers", 1);
  o.prefetch = (int)int_field(L, 2, "prefetch", 2);
  o.seed = (uint64_t)int_field(L, 2, "seed", 0);
  o.rank = int_field(L, 2, "rank", 0);
  o.start_epoch = int_field(L, 2, "start_epoch", 1) - 1;
  o.start_batch = int_field(L, 2, "start_batch", 0);
  o.epochs = int_field(L, 2, "epochs", 1);
  o.trace = ps->trace;
  o.trace_id = ++ps->next_id;
  lua_getfield(L, 2, "index");
  int ix = lua_gettop(L);
  o.nindex = lua_istable(L, ix) ? (int)luaL_len(L, ix) : 0;
  if (o.nindex > DL_PIPE_MAXSTAGES) return luaL_error(L, "pipeline: more than %d shuffle/shard stages", DL_PIPE_MAXSTAGES);
  for (int i = 0; i < o.nindex; i++) {
    lua_geti(L, ix, i + 1);
    int s = lua_gettop(L);
    const char *kind = str_field(L, s, "kind", "shuffle");
    dl_index_stage *st = &o.index[i];
    memset(st, 0, sizeof *st);
    st->kind = strcmp(kind, "shard") == 0 ? DL_IX_SHARD : DL_IX_SHUFFLE;
    st->seed = (uint64_t)int_field(L, s, "seed", 0);
    st->window = int_field(L, s, "window", 0);
    st->rank = int_field(L, s, "rank", 0);
    st->world = int_field(L, s, "world", 1);
    lua_pop(L, 1);
  }
  lua_getfield(L, 2, "transforms");
  int tt = lua_gettop(L);
  o.ntf = lua_istable(L, tt) ? (int)luaL_len(L, tt) : 0;
  if (o.ntf > DL_PIPE_MAXTF) return luaL_error(L, "pipeline: more than %d map stages", DL_PIPE_MAXTF);
  dl_transform tf[DL_PIPE_MAXTF];
  int nfn = 0;
  lua_newtable(L);                         /* the plans of the Lua transforms */
  int plans = lua_gettop(L);
  for (int i = 0; i < o.ntf; i++) {
    lua_geti(L, tt, i + 1);
    parse_transform(L, lua_gettop(L), &tf[i]);
    if (tf[i].kind == DL_TF_CALL) {
      lua_getfield(L, -1, "plan");
      lua_rawseti(L, plans, nfn + 1);
      tf[i].user_index = nfn++;
    }
    lua_pop(L, 1);
  }
  o.tf = tf;
  pipe_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->p = NULL;
  b->lw = NULL;
  luaL_setmetatable(L, "dlua.PipelineIter");
  lua_pushvalue(L, lua_upvalueindex(2));   /* keeps the trace recorder alive */
  lua_setiuservalue(L, -2, 1);
  if (nfn > 0) {
    lua_workers *lw = calloc(1, sizeof *lw);
    if (!lw) return luaL_error(L, "pipeline: out of memory");
    b->lw = lw;
    lw->nfn = nfn;
    int n = o.workers > 0 ? o.workers : 1;
    lw->L = calloc((size_t)n, sizeof *lw->L);
    lw->ctx = calloc((size_t)n, sizeof *lw->ctx);
    lw->fn = calloc((size_t)(n * nfn), sizeof *lw->fn);
    lw->seed_fn = calloc((size_t)n, sizeof *lw->seed_fn);
    lw->gc_mark = calloc((size_t)n, sizeof *lw->gc_mark);
    if (!lw->L || !lw->ctx || !lw->fn || !lw->seed_fn || !lw->gc_mark) return luaL_error(L, "pipeline: out of memory");
    int blas = openblas_get_num_threads();  /* opening dlua.core in a state resets OpenBLAS' threads */
    for (int w = 0; w < n; w++) {
      lw->L[w] = lw_state(L, plans, nfn, lw->fn + w * nfn, &lw->seed_fn[w], &lw->ctx[w]);
      lw->n = w + 1;
    }
    openblas_set_num_threads(blas);
    for (int i = 0; i < o.ntf; i++)
      if (tf[i].kind == DL_TF_CALL) tf[i].user = lw;
  }
  b->p = dl_pipe_new(lt_ctx(L), &o);
  if (!b->p) return raise_plain(L);
  return 1;
}

/* _pipe_next(h) -> batch, epoch, batch index (1-based) | nil at the end */
static int l_pipe_next(lua_State *L) {
  pipe_box *b = check_pipe(L, 1);
  if (!b->p) return 0;
  dl_batch bt;
  int rc = dl_pipe_next(lt_ctx(L), b->p, &bt);
  if (rc < 0) return raise_plain(L);
  if (rc == 0) return 0;
  lua_createtable(L, 0, bt.n);
  for (int j = 0; j < bt.n; j++) {
    dl_tensor *t = bt.t[j];
    bt.t[j] = NULL;
    if (t->ndim == 0) {                           /* one example's scalar field */
      double v = dl_get_flat(t, 0);
      if (dl_dtype_is_float(t->dtype)) lua_pushnumber(L, v);
      else lua_pushinteger(L, (lua_Integer)v);
      dl_tensor_release(t);
    } else {
      lt_push(L, t);
    }
    lua_setfield(L, -2, bt.names[j]);
  }
  lua_pushinteger(L, bt.epoch + 1);
  lua_pushinteger(L, bt.batch + 1);
  return 3;
}

/* _pipe_position(h) -> epoch (1-based), batches already taken in it */
static int l_pipe_position(lua_State *L) {
  pipe_box *b = check_pipe(L, 1);
  if (!b->p) return 0;
  int64_t e, bt;
  dl_pipe_position(b->p, &e, &bt);
  lua_pushinteger(L, e + 1);
  lua_pushinteger(L, bt);
  return 2;
}

static int l_pipe_stats(lua_State *L) {
  pipe_box *b = check_pipe(L, 1);
  if (!b->p) return 0;
  dl_pipe_stats s;
  dl_pipe_get_stats(b->p, &s);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, s.batches);
  lua_setfield(L, -2, "batches");
  lua_pushnumber(L, s.wait_s);
  lua_setfield(L, -2, "wait");
  lua_pushnumber(L, s.startup_s);
  lua_setfield(L, -2, "startup");
  lua_pushnumber(L, s.span_s);
  lua_setfield(L, -2, "span");
  lua_pushinteger(L, s.workers);
  lua_setfield(L, -2, "workers");
  lua_pushinteger(L, s.prefetch);
  lua_setfield(L, -2, "prefetch");
  lua_createtable(L, s.nstages, 0);
  for (int i = 0; i < s.nstages; i++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, s.stage[i]);
    lua_setfield(L, -2, "name");
    lua_pushnumber(L, s.stage_s[i]);
    lua_setfield(L, -2, "seconds");
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "stages");
  return 1;
}

static int l_pipe_close(lua_State *L) {
  check_pipe(L, 1);
  return pipe_gc(L);
}

/* ------------------------------------------------------------ cache */

static int l_cache_save(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  dl_dataset *ds = check_ds(L, 2);
  const char *fp = luaL_checkstring(L, 3);
  if (dl_cache_write(lt_ctx(L), path, ds, fp) < 0) return raise_plain(L);
  return 0;
}

/* _cache_load(path, fingerprint) -> ds | nil, "missing" | "stale" | "corrupt", message */
static int l_cache_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  const char *fp = luaL_checkstring(L, 2);
  dataset_box *b = new_ds_box(L);
  dl_cache_status st;
  b->ds = dl_cache_read_new(lt_ctx(L), path, fp, &st);
  if (b->ds) return 1;
  static const char *const names[] = {"ok", "missing", "stale", "corrupt"};
  lua_pushnil(L);
  lua_pushstring(L, names[st]);
  lua_pushstring(L, lt_ctx(L)->err);
  return 3;
}

static int l_crc32(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  lua_pushinteger(L, (lua_Integer)dl_crc32((uint32_t)luaL_optinteger(L, 2, 0), s, n));
  return 1;
}

/* _tensor_bytes(t) -> the raw contiguous bytes; _tensor_from_bytes(s, dtype, shape) */
static int l_tensor_bytes(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  dl_tensor *c = dl_is_contiguous(t) ? dl_tensor_retain(t) : dl_tensor_new_contiguous(lt_ctx(L), t, t->dtype);
  if (!c) return raise_plain(L);
  lua_pushlstring(L, dl_data(c), (size_t)dl_numel(c) * dl_dtype_size(c->dtype));
  dl_tensor_release(c);
  return 1;
}

static int l_tensor_from_bytes(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  int d = dl_dtype_from_name(luaL_checkstring(L, 2));
  if (d < 0) return luaL_error(L, "unknown dtype '%s'", lua_tostring(L, 2));
  int64_t shape[DL_MAXDIM];
  int nd = lt_checkshape(L, 3, "tensor_from_bytes", shape);
  lt_newbox(L);
  dl_tensor *t = dl_tensor_new_empty(lt_ctx(L), (dl_dtype)d, nd, shape);
  if (t && t->st->nbytes != n) {
    size_t want = t->st->nbytes;
    dl_tensor_release(t);
    return luaL_error(L, "tensor_from_bytes: %d bytes for a tensor of %d", (int)n, (int)want);
  }
  if (t) memcpy(t->st->data, s, n);
  return lt_finish(L, t);
}

/* ------------------------------------------------------------ trace */

static int l_trace_start(lua_State *L) {
  pipe_state *ps = check_state(L);
  const char *path = luaL_checkstring(L, 1);
  if (dl_trace_active(ps->trace)) return luaL_error(L, "trace: already recording to '%s'", ps->path);
  snprintf(ps->path, sizeof ps->path, "%s", path);
  dl_trace_start(ps->trace);
  dl_trace_thread_name(ps->trace, DL_TRACE_MAIN_TID, "main (Lua)");
  char err[1200];                             /* a valid empty trace now: JSON whenever the process ends */
  if (dl_trace_flush(ps->trace, path, err, sizeof err) < 0) {
    dl_trace_discard(ps->trace);
    return luaL_error(L, "%s", err);
  }
  return 0;
}

/* _trace_stop() -> path, spans written | nil when not recording */
static int l_trace_stop(lua_State *L) {
  pipe_state *ps = check_state(L);
  if (!dl_trace_active(ps->trace)) return 0;
  char err[1200];
  long n = dl_trace_write_stop(ps->trace, ps->path, err, sizeof err);
  if (n < 0) return luaL_error(L, "%s", err);
  lua_pushstring(L, ps->path);
  lua_pushinteger(L, n);
  return 2;
}

static int l_trace_active(lua_State *L) {
  pipe_state *ps = check_state(L);
  int a = dl_trace_active(ps->trace);
  lua_pushboolean(L, a);
  if (a) lua_pushstring(L, ps->path);
  else lua_pushnil(L);
  return 2;
}

static int l_trace_now(lua_State *L) {
  lua_pushinteger(L, dl_trace_now());
  return 1;
}

/* _trace_span(name, t0, t1 [, cat]) on the main thread */
static int l_trace_span(lua_State *L) {
  pipe_state *ps = check_state(L);
  const char *name = luaL_checkstring(L, 1);
  int64_t t0 = (int64_t)luaL_checkinteger(L, 2), t1 = (int64_t)luaL_checkinteger(L, 3);
  dl_trace_span(ps->trace, name, luaL_optstring(L, 4, "train"), DL_TRACE_MAIN_TID, t0, t1);
  return 0;
}

static int state_gc(lua_State *L) {
  pipe_state *ps = luaL_checkudata(L, 1, "dlua.PipelineState");
  dl_trace_free(ps->trace);
  ps->trace = NULL;
  return 0;
}

/* ------------------------------------------------------------ registration */

static const luaL_Reg pipeline_funcs[] = {
  {"_cache_load", l_cache_load},
  {"_cache_save", l_cache_save},
  {"_crc32", l_crc32},
  {"_ds_checksum", l_ds_checksum},
  {"_ds_column", l_ds_column},
  {"_ds_fields", l_ds_fields},
  {"_ds_get", l_ds_get},
  {"_ds_ids", l_ds_ids},
  {"_ds_len", l_ds_len},
  {"_ds_new", l_ds_new},
  {"_ds_split", l_ds_split},
  {"_ds_subset", l_ds_subset},
  {"_pipe_close", l_pipe_close},
  {"_pipe_new", l_pipe_new},
  {"_pipe_next", l_pipe_next},
  {"_pipe_position", l_pipe_position},
  {"_pipe_stats", l_pipe_stats},
  {"_read_csv", l_read_csv},
  {"_read_idx", l_read_idx},
  {"_tensor_bytes", l_tensor_bytes},
  {"_tensor_from_bytes", l_tensor_from_bytes},
  {"_trace_active", l_trace_active},
  {"_trace_now", l_trace_now},
  {"_trace_span", l_trace_span},
  {"_trace_start", l_trace_start},
  {"_trace_stop", l_trace_stop},
  {NULL, NULL}
};

void lt_register_pipeline(lua_State *L, int mod, int cidx) {
  if (luaL_newmetatable(L, "dlua.Dataset")) {
    lua_pushcfunction(L, ds_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, "dlua.PipelineIter")) {
    lua_pushcfunction(L, pipe_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, pipe_gc);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, "dlua.PipelineState")) {
    lua_pushcfunction(L, state_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  pipe_state *ps = lua_newuserdatauv(L, sizeof *ps, 0);   /* after the context: finalized before it */
  memset(ps, 0, sizeof *ps);
  luaL_setmetatable(L, "dlua.PipelineState");
  ps->trace = dl_trace_new();
  if (!ps->trace) luaL_error(L, "dlua: cannot create the trace recorder");
  int st = lua_gettop(L);
  lua_pushvalue(L, mod);
  lua_pushvalue(L, cidx);
  lua_pushvalue(L, st);
  luaL_setfuncs(L, pipeline_funcs, 2);
  lua_pop(L, 2);
}
