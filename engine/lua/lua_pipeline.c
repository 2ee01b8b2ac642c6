/* lua_pipeline.c -- binds the threaded input pipeline (engine/data/pipeline.c) as
 * private functions of "dlua.core" (_pipe_*; dl.data in lua/dlua/data/pipeline.lua is
 * the public face).
 *
 * A Lua transform runs in per-worker Lua states: for each worker the main
 * thread makes a fresh state (standard libraries, the same package.path,
 * dlua.core preloaded), copies the function's plan (bytecode and upvalues as
 * plain values, made by data/worker.lua) into it and rebuilds the function there;
 * after that only the worker's thread touches that state. Each state has its
 * own engine context, so tensors made inside a map never cross threads: the
 * example's fields are copied in, the results copied out. Before each call
 * the state's default RNG (dl.rand, dl.randn) and math.random are seeded
 * from the example's key, so Lua maps are as reproducible as the C ones.
 *
 * The spec table of _pipe_new is read strictly, nested tables included: an
 * unknown key anywhere is an error naming its path ("transforms[2].sise").
 * Epochs and batches are 1-based here, 0-based in the core. Errors from the
 * pipeline are raised without a position so that data/pipeline.lua can blame the
 * caller's line.
 */
/* See LICENSE */
#include "lua/lua_aux.h"
#include "data/pipeline.h"
#include "data/cache.h"

#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

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
  lua_pushcfunction(W, lt_cbox(L)->open_core);
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


/* ------------------------------------------------------------ reading the spec */

/* o.key as a pair (a, b): a number for both or a list {a, b}; unchanged when absent */
static void pair_opt(lua_State *L, const lt_opts *o, const char *key, double *a, double *b) {
  int t = lt_opt_push(L, o, key);
  if (t == LUA_TNUMBER) {
    *a = *b = lua_tonumber(L, -1);
  } else if (t == LUA_TTABLE) {
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    if (lua_type(L, -2) != LUA_TNUMBER || lua_type(L, -1) != LUA_TNUMBER || lua_rawlen(L, -3) != 2)
      lt_opt_error(L, o, key, "a number or a list of 2 numbers expected");
    *a = lua_tonumber(L, -2);
    *b = lua_tonumber(L, -1);
    lua_pop(L, 2);
  } else if (t != LUA_TNIL) {
    lt_opt_error(L, o, key, "number or {a, b} expected, got %s", lt_typename(L, -1));
  }
  lua_pop(L, 1);
}

/* an integer option that must fit the int64 field and be >= lo */
static int64_t int_opt(lua_State *L, const lt_opts *o, const char *key, int64_t def, int64_t lo) {
  int64_t v = lt_opt_integer(L, o, key, def);
  if (v < lo) lt_opt_error(L, o, key, "must be >= %I, got %I", (lua_Integer)lo, (lua_Integer)v);
  return v;
}

/* the valid keys of each transform kind, a row per kind in dl_tf_kind order (+ field, kind, name, stage) */
static const char *const cast_keys[] = {"dtype", "field", "kind", "name", "stage", NULL};
static const char *const scale_keys[] = {"field", "kind", "name", "scale", "stage", NULL};
static const char *const normalize_keys[] = {"field", "kind", "mean", "name", "stage", "std", NULL};
static const char *const crop_keys[] = {"field", "fill", "kind", "name", "padding", "size", "stage", NULL};
static const char *const flip_keys[] = {"field", "horizontal", "kind", "name", "stage", "vertical", NULL};
static const char *const translate_keys[] = {"field", "fill", "kind", "max", "name", "stage", NULL};
static const char *const affine_keys[] = {"degrees", "field", "fill", "kind", "name", "scale", "stage", "translate", NULL};
static const char *const one_hot_keys[] = {"classes", "field", "kind", "name", "stage", NULL};
static const char *const select_keys[] = {"field", "fields", "kind", "name", "stage", NULL};
static const char *const lua_keys[] = {"field", "kind", "name", "plan", "stage", NULL};
static const char *const resize_keys[] = {"antialias", "field", "interpolation", "kind", "name", "size", "stage", NULL};
static const char *const resized_crop_keys[] = {"antialias", "field", "interpolation", "kind", "name",
                                                "ratio", "scale", "size", "stage", NULL};
static const char *const center_crop_keys[] = {"field", "kind", "name", "size", "stage", NULL};
static const char *const jitter_keys[] = {"brightness", "contrast", "field", "hue", "kind", "name", "saturation",
                                          "stage", NULL};
static const char *const *const tf_keys[DL_TF_NKINDS] = {
  cast_keys, scale_keys, normalize_keys, crop_keys, flip_keys, translate_keys, affine_keys, one_hot_keys, select_keys,
  lua_keys, resize_keys, resized_crop_keys, center_crop_keys, jitter_keys,
};

/* o.size as {h, w} (a number n: {n, n}, or {n, 0} with short_side: the shorter side), each >= 1 */
static void size_opt(lua_State *L, const lt_opts *o, int64_t *size, int short_side) {
  int t = lt_opt_push(L, o, "size");
  lua_pop(L, 1);
  double a = 0, b = 0;
  pair_opt(L, o, "size", &a, &b);
  if (t == LUA_TNIL) lt_opt_error(L, o, "size", "required");
  if (a < 1 || b < 1 || a != floor(a) || b != floor(b) || a > 1 << 30 || b > 1 << 30)
    lt_opt_error(L, o, "size", "whole numbers in 1..2^30 expected");
  size[0] = (int64_t)a;
  size[1] = t == LUA_TNUMBER && short_side ? 0 : (int64_t)b;
}

/* the interpolation and antialias options of resize and random_resized_crop */
static void interp_opts(lua_State *L, const lt_opts *o, dl_transform *tf) {
  static const char *const modes[] = {"bilinear", "area", "nearest", NULL};
  const char *m = lt_opt_string(L, o, "interpolation", "bilinear");
  int k = 0;
  while (modes[k] && strcmp(modes[k], m)) k++;
  if (!modes[k]) lt_opt_error(L, o, "interpolation", "bilinear, area or nearest expected, got '%s'", m);
  tf->interp = (dl_interp)k;
  tf->antialias = lt_opt_boolean(L, o, "antialias", 1);
}

/* o.key as a range {lo, hi} with lo0 <= lo <= hi (<= hi0); *a, *b unchanged when absent */
static int range_opt(lua_State *L, const lt_opts *o, const char *key, double *a, double *b, double lo0, double hi0) {
  double x = *a, y = *b;
  int t = lt_opt_push(L, o, key);
  lua_pop(L, 1);
  pair_opt(L, o, key, &x, &y);
  if (t == LUA_TNIL) return 0;
  if (!(x >= lo0 && x <= y && y <= hi0))
    lt_opt_error(L, o, key, "{lo, hi} with %f <= lo <= hi <= %f expected", lo0, hi0);
  *a = x;
  *b = y;
  return 1;
}

/* the list in o.key as a snapshot pushed on the stack (1..max entries); returns its length */
static int list_opt(lua_State *L, const lt_opts *o, const char *key, int max) {
  if (lt_opt_push(L, o, key) != LUA_TTABLE) lt_opt_error(L, o, key, "list expected, got %s", lt_typename(L, -1));
  lua_Integer n = luaL_len(L, -1);
  if (n < 1 || n > max) lt_opt_error(L, o, key, "1 to %d entries expected, got %I", max, (lua_Integer)n);
  lt_snapshot(L, o->arg, -1, max);
  lua_remove(L, -2);
  return (int)n;
}

/* the transform described by the table at idx (path names it in messages) */
static void parse_transform(lua_State *L, int idx, const char *path, dl_transform *tf) {
  lua_pushliteral(L, "kind");
  lua_rawget(L, idx);
  int kind = lua_type(L, -1) == LUA_TSTRING ? dl_transform_kind(lua_tostring(L, -1)) : -1;
  if (kind < 0) lt_argerror(L, 2, "option '%s.kind' (unknown transform)", path);
  lua_pop(L, 1);
  lt_opts o;
  lt_options_at(L, 2, idx, path, tf_keys[kind], &o);
  const char *field = lt_opt_string(L, &o, "field", "image");       /* the strings stay on the stack */
  if (strlen(field) == 0 || strlen(field) >= DL_NAMELEN)
    lt_opt_error(L, &o, "field", "names have 1 to %d characters", DL_NAMELEN - 1);
  *tf = dl_transform_defaults((dl_tf_kind)kind, field);
  const char *name = lt_opt_string(L, &o, "name", NULL);
  if (name) snprintf(tf->name, sizeof tf->name, "%s", name);
  int64_t stage = int_opt(L, &o, "stage", 0, 0);
  if (stage > DL_PIPE_MAXTF) lt_opt_error(L, &o, "stage", "at most %d, got %I", DL_PIPE_MAXTF, (lua_Integer)stage);
  tf->stage = (int)stage - 1;
  double a = 0, b = 0;
  switch (tf->kind) {
    case DL_TF_CAST: tf->dtype = lt_opt_dtype(L, &o, "dtype", DL_F32); break;
    case DL_TF_SCALE: tf->scale = (float)lt_opt_number(L, &o, "scale", 1.0); break;
    case DL_TF_NORMALIZE: {
      int n = list_opt(L, &o, "mean", DL_MAXCH);
      int m = list_opt(L, &o, "std", DL_MAXCH);
      if (n != m) lt_opt_error(L, &o, "std", "%d values for %d means", m, n);
      tf->nch = n;
      for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -2, i + 1);
        lua_rawgeti(L, -2, i + 1);
        if (lua_type(L, -2) != LUA_TNUMBER || lua_type(L, -1) != LUA_TNUMBER)
          lt_opt_error(L, &o, "mean", "means and stds must be numbers");
        tf->mean[i] = (float)lua_tonumber(L, -2);
        tf->std[i] = (float)lua_tonumber(L, -1);
        lua_pop(L, 2);
      }
      lua_pop(L, 2);
      break;
    }
    case DL_TF_CROP:
      pair_opt(L, &o, "size", &a, &b);
      tf->size[0] = (int64_t)a;
      tf->size[1] = (int64_t)b;
      tf->padding = int_opt(L, &o, "padding", 0, 0);
      tf->fill = (float)lt_opt_number(L, &o, "fill", 0.0);
      break;
    case DL_TF_FLIP:
      tf->p_h = (float)lt_opt_number(L, &o, "horizontal", 0.0);
      tf->p_v = (float)lt_opt_number(L, &o, "vertical", 0.0);
      break;
    case DL_TF_TRANSLATE:
      pair_opt(L, &o, "max", &a, &b);
      tf->max_shift[0] = (int64_t)a;
      tf->max_shift[1] = (int64_t)b;
      tf->fill = (float)lt_opt_number(L, &o, "fill", 0.0);
      break;
    case DL_TF_AFFINE:
      tf->degrees = (float)lt_opt_number(L, &o, "degrees", 0.0);
      tf->translate = (float)lt_opt_number(L, &o, "translate", 0.0);
      a = b = 1.0;
      pair_opt(L, &o, "scale", &a, &b);
      tf->scale_lo = (float)a;
      tf->scale_hi = (float)b;
      tf->fill = (float)lt_opt_number(L, &o, "fill", 0.0);
      break;
    case DL_TF_ONE_HOT: tf->classes = int_opt(L, &o, "classes", 0, 0); break;
    case DL_TF_SELECT: {
      int n = list_opt(L, &o, "fields", DL_MAXFIELDS);
      tf->nsel = n;
      for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -1, i + 1);
        if (lua_type(L, -1) != LUA_TSTRING) lt_opt_error(L, &o, "fields", "field names must be strings");
        snprintf(tf->sel[i], DL_NAMELEN, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
      break;
    }
    case DL_TF_RESIZE:
      size_opt(L, &o, tf->size, 1);
      interp_opts(L, &o, tf);
      break;
    case DL_TF_RESIZED_CROP: {
      size_opt(L, &o, tf->size, 0);
      interp_opts(L, &o, tf);
      double lo = tf->scale_lo, hi = tf->scale_hi;
      range_opt(L, &o, "scale", &lo, &hi, 0, 1);
      tf->scale_lo = (float)lo;
      tf->scale_hi = (float)hi;
      range_opt(L, &o, "ratio", &tf->ratio_lo, &tf->ratio_hi, 1e-6, 1e6);
      if (tf->scale_hi <= 0) lt_opt_error(L, &o, "scale", "the upper end must be positive");
      break;
    }
    case DL_TF_CENTER_CROP: size_opt(L, &o, tf->size, 0); break;
    case DL_TF_COLOR_JITTER: {
      static const char *const keys[4] = {"brightness", "contrast", "saturation", "hue"};
      for (int k = 0; k < 4; k++)
        tf->jitter_on[k] =
            range_opt(L, &o, keys[k], &tf->jitter[k][0], &tf->jitter[k][1], k < 3 ? 0 : -0.5, k < 3 ? 1e6 : 0.5);
      break;
    }
    case DL_TF_NKINDS: break;
    case DL_TF_CALL:
      if (lt_opt_push(L, &o, "plan") != LUA_TTABLE) lt_opt_error(L, &o, "plan", "table expected");
      lua_pop(L, 1);
      tf->call = lua_tf_call;
      break;
  }
}

/* ------------------------------------------------------------ iterators */

static int pipe_gc(lua_State *L) {
  pipe_box *b = luaL_checkudata(L, 1, "dlua.PipelineIter");
  dl_pipe_free(b->p);                 /* joins the workers first */
  b->p = NULL;
  lw_free(b->lw);                     /* then their Lua states can go */
  b->lw = NULL;
  return 0;
}

static pipe_box *check_pipe(lua_State *L, int i) { return luaL_checkudata(L, i, "dlua.PipelineIter"); }

/* the pipeline of the handle h in _pipe_*(h), the only argument; NULL once closed */
static dl_pipe *pipe_arg(lua_State *L) {
  pipe_box *b = check_pipe(L, 1);
  lt_checkargs(L, 1);
  return b->p;
}

static const char *const spec_keys[] = {"batch", "drop_remainder", "epochs", "index", "pad", "prefetch", "rank",
                                        "seed", "start_batch", "start_epoch", "transforms", "workers", NULL};
static const char *const index_keys[] = {"blocks", "kind", "rank", "seed", "window", "world", NULL};

/* _pipe_new(ds, spec) -> handle; spec as data/pipeline.lua builds it */
static int pipeline_pipe_new(lua_State *L) {
  dl_dataset *ds = lt_check_dataset(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lt_checkargs(L, 2);
  luaL_checkstack(L, 40, "reading a pipeline spec");
  lt_opts so;
  lt_options(L, 2, spec_keys, &so);
  ctx_box *cb = lt_cbox(L);
  dl_pipe_opts o = dl_pipe_defaults();
  o.ds = ds;
  o.batch = int_opt(L, &so, "batch", 0, 0);
  o.pad = lt_opt_boolean(L, &so, "pad", 0);
  o.drop_remainder = lt_opt_boolean(L, &so, "drop_remainder", 0);
  int64_t workers = int_opt(L, &so, "workers", 1, 0), prefetch = int_opt(L, &so, "prefetch", 2, 0);
  if (workers > 1024) lt_opt_error(L, &so, "workers", "at most 1024, got %I", (lua_Integer)workers);
  if (prefetch > 1 << 20) lt_opt_error(L, &so, "prefetch", "at most 2^20, got %I", (lua_Integer)prefetch);
  o.workers = (int)workers;
  o.prefetch = (int)prefetch;
  o.seed = (uint64_t)lt_opt_integer(L, &so, "seed", 0);
  o.rank = int_opt(L, &so, "rank", 0, 0);
  o.start_epoch = int_opt(L, &so, "start_epoch", 1, 1) - 1;
  o.start_batch = int_opt(L, &so, "start_batch", 0, 0);
  o.epochs = int_opt(L, &so, "epochs", 1, -1);
  o.trace = cb->trace;
  o.trace_id = ++cb->trace_next_id;
  char path[64];
  o.nindex = 0;
  /* the index stages and the transforms below are read alike (a snapshot, then each entry's
   * table), by design: each entry has its own parser (lua_aux.h on binding shape) */
  if (lt_opt_push(L, &so, "index") != LUA_TNIL) {
    o.nindex = lt_snapshot(L, 2, -1, DL_PIPE_MAXSTAGES);
    int ix = lua_gettop(L);
    for (int i = 0; i < o.nindex; i++) {
      lua_rawgeti(L, ix, i + 1);
      snprintf(path, sizeof path, "index[%d]", i + 1);
      lt_opts io;
      lt_options_at(L, 2, -1, path, index_keys, &io);
      const char *kind = lt_opt_string(L, &io, "kind", "shuffle");
      dl_index_stage *st = &o.index[i];
      memset(st, 0, sizeof *st);
      if (strcmp(kind, "shard") && strcmp(kind, "shuffle")) lt_opt_error(L, &io, "kind", "shard or shuffle expected");
      st->kind = strcmp(kind, "shard") == 0 ? DL_IX_SHARD : DL_IX_SHUFFLE;
      st->seed = (uint64_t)lt_opt_integer(L, &io, "seed", 0);
      st->window = int_opt(L, &io, "window", 0, 0);
      st->rank = int_opt(L, &io, "rank", 0, 0);
      st->world = int_opt(L, &io, "world", 1, 1);
      st->blocks = lt_opt_boolean(L, &io, "blocks", 0);
      lua_settop(L, ix);
    }
  }
  dl_transform tf[DL_PIPE_MAXTF];
  int nfn = 0;
  lua_newtable(L);                         /* the plans of the Lua transforms */
  int plans = lua_gettop(L);
  o.ntf = 0;
  if (lt_opt_push(L, &so, "transforms") != LUA_TNIL) {   /* read like the index stages above */
    o.ntf = lt_snapshot(L, 2, -1, DL_PIPE_MAXTF);
    int tt = lua_gettop(L);
    for (int i = 0; i < o.ntf; i++) {
      lua_rawgeti(L, tt, i + 1);
      int t = lua_gettop(L);
      snprintf(path, sizeof path, "transforms[%d]", i + 1);
      if (lua_type(L, t) != LUA_TTABLE) lt_argerror(L, 2, "option '%s' (table expected, got %s)", path, lt_typename(L, t));
      parse_transform(L, t, path, &tf[i]);
      if (tf[i].kind == DL_TF_CALL) {
        lua_pushliteral(L, "plan");
        lua_rawget(L, t);
        lua_rawseti(L, plans, nfn + 1);
        tf[i].user_index = nfn++;
      }
      lua_settop(L, tt);
    }
  }
  o.tf = tf;
  pipe_box *b = lua_newuserdatauv(L, sizeof *b, 1);
  b->p = NULL;
  b->lw = NULL;
  luaL_setmetatable(L, "dlua.PipelineIter");
  lua_pushvalue(L, lua_upvalueindex(1));   /* keeps the context and its trace recorder alive */
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
  if (!b->p) return lt_raise_plain(L);
  return 1;
}

/* _pipe_next(h) -> batch, epoch, batch index (1-based) | nil at the end */
static int pipeline_pipe_next(lua_State *L) {
  dl_pipe *p = pipe_arg(L);
  if (!p) return 0;
  dl_batch bt;
  int rc = dl_pipe_next(lt_ctx(L), p, &bt);
  if (rc < 0) return lt_raise_plain(L);
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
static int pipeline_pipe_position(lua_State *L) {
  dl_pipe *p = pipe_arg(L);
  if (!p) return 0;
  int64_t e, bt;
  dl_pipe_position(p, &e, &bt);
  lua_pushinteger(L, e + 1);
  lua_pushinteger(L, bt);
  return 2;
}

static int pipeline_pipe_stats(lua_State *L) {
  dl_pipe *p = pipe_arg(L);
  if (!p) return 0;
  dl_pipe_stats s;
  dl_pipe_get_stats(p, &s);
  lua_createtable(L, 0, 8);
  lt_setinteger(L, "batches", s.batches);
  lt_setnumber(L, "wait", s.wait_s);
  lt_setnumber(L, "startup", s.startup_s);
  lt_setnumber(L, "span", s.span_s);
  lt_setinteger(L, "workers", s.workers);
  lt_setinteger(L, "prefetch", s.prefetch);
  lt_setinteger(L, "skipped", s.skipped);
  if (s.skipped > 0) {
    lua_pushstring(L, s.first_skip);
    lua_setfield(L, -2, "first_skip");
  }
  lua_createtable(L, s.nstages, 0);
  for (int i = 0; i < s.nstages; i++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, s.stage[i]);
    lua_setfield(L, -2, "name");
    lt_setnumber(L, "seconds", s.stage_s[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "stages");
  return 1;
}

static int pipeline_pipe_close(lua_State *L) {
  pipe_arg(L);
  return pipe_gc(L);
}


/* _tf_apply(image, desc, key) -> tensor: one built-in transform (desc as data.lua
 * builds it) on one image tensor, its stream keyed by key; errors raised plain */
static int pipeline_tf_apply(lua_State *L) {
  dl_tensor *t = lt_check(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int64_t key = lt_checkinteger(L, 3, "key");
  lt_checkargs(L, 3);
  dl_transform tf;
  parse_transform(L, 2, "transform", &tf);
  if (tf.kind == DL_TF_CALL || tf.kind == DL_TF_SELECT) return luaL_error(L, "apply: not for a %s stage", tf.name);
  dl_ctx *ctx = lt_ctx(L);
  dl_tensor *c = dl_is_contiguous(t) ? dl_tensor_retain(t) : dl_tensor_new_contiguous(ctx, t, t->dtype);
  if (!c) return lt_raise_plain(L);
  dl_example ex;
  memset(&ex, 0, sizeof ex);
  int i = dl_example_add(&ex, tf.field);
  ex.f[i].dtype = c->dtype;
  ex.f[i].ndim = c->ndim;
  for (int k = 0; k < c->ndim; k++) ex.f[i].shape[k] = c->shape[k];
  ex.f[i].data = dl_data(c);
  char err[512];
  int rc = dl_transform_apply(&tf, &ex, 0, 0, (uint64_t)key, err, sizeof err);
  dl_tensor *out = rc < 0 ? NULL : dl_tensor_new_empty(ctx, ex.f[i].dtype, ex.f[i].ndim, ex.f[i].shape);
  if (out) memcpy(dl_data(out), ex.f[i].data, (size_t)dl_numel(out) * dl_dtype_size(out->dtype));
  dl_example_free(&ex);
  dl_tensor_release(c);
  if (rc < 0) return luaL_error(L, "apply: %s", err);
  if (!out) return lt_raise_plain(L);
  return lt_push(L, out);
}

/* one luaL_Reg row per binding: rows and registration alike by design (lua_aux.h) */
static const luaL_Reg pipeline_funcs[] = {
  {"_pipe_close", pipeline_pipe_close},
  {"_pipe_new", pipeline_pipe_new},
  {"_pipe_next", pipeline_pipe_next},
  {"_pipe_position", pipeline_pipe_position},
  {"_pipe_stats", pipeline_pipe_stats},
  {"_tf_apply", pipeline_tf_apply},
  {NULL, NULL}
};

void lt_register_pipeline(lua_State *L, int mod, int cidx) {
  lt_newclass(L, "dlua.PipelineIter", pipe_gc, NULL, cidx);
  lt_setfuncs(L, mod, cidx, pipeline_funcs);
}
