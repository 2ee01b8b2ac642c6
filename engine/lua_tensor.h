/* lua_tensor.h -- shared helpers of the Lua binding files (engine/lua_*.c). */
/* See LICENSE */
#ifndef DL_LUA_TENSOR_H
#define DL_LUA_TENSOR_H

#include <lua.h>

#include "ops.h"

typedef struct { dl_tensor *t; } tensor_box;      /* t == NULL once released */

typedef struct {
  dl_ctx *ctx;
  lua_State *L;             /* the state running backward (for Lua-defined functions) */
  size_t gc_mark;           /* tensor bytes in use when the GC was last stepped */
  int *dead_refs;           /* registry refs of freed Lua-defined nodes, unref'd lazily */
  int ndead, capdead;
} ctx_box;

dl_ctx *lt_ctx(lua_State *L);                     /* from upvalue 1 */
int lt_raise(lua_State *L);                       /* raises ctx->err */
tensor_box *lt_newbox(lua_State *L);              /* pushes an empty box */
int lt_finish(lua_State *L, dl_tensor *t);        /* fills the box on top, or raises */
int lt_push(lua_State *L, dl_tensor *t);          /* pushes a new box holding t (new ref) */
/* steps L's GC for the tensor bytes ctx gained since *mark (updated) */
void lt_gc_pressure(lua_State *L, dl_ctx *ctx, size_t *mark);
dl_tensor *lt_check(lua_State *L, int i);
dl_tensor *lt_test(lua_State *L, int i);
dl_tensor *lt_coerce(lua_State *L, int i, dl_dtype like);
dl_tensor *lt_from_table(lua_State *L, int idx, dl_dtype d);
int64_t lt_checkint(lua_State *L, int i, const char *fn, const char *what);
int lt_checkdim(lua_State *L, int i, int ndim, const char *fn, int extra);
int lt_checkshape(lua_State *L, int i, const char *fn, int64_t *shape);
dl_dtype lt_optdtype(lua_State *L, int i, const char *fn, dl_dtype def);

void lt_register_ops(lua_State *L, int mod, int cidx);
void lt_register_meta(lua_State *L, int mt, int cidx);
void lt_register_autograd(lua_State *L, int mod, int cidx);
void lt_register_optim(lua_State *L, int mod, int cidx);
void lt_register_batchnorm(lua_State *L, int mod, int cidx);   /* lua_batchnorm.c */
void lt_register_pipeline(lua_State *L, int mod, int cidx);    /* lua_pipeline.c */
void lt_register_checkpoint(lua_State *L, int mod, int cidx);  /* lua_checkpoint.c */
void lt_register_fileio(lua_State *L, int mod, int cidx);      /* lua_fileio.c */
void lt_register_dist(lua_State *L, int mod, int cidx);        /* lua_dist.c */
void lt_register_proc(lua_State *L, int mod, int cidx);        /* lua_proc.c */
/* the cross-rank sum for batch-norm statistics (sync = true), or NULL in a world of one */
const struct dl_bn_reducer *lt_dist_bn_reducer(lua_State *L);  /* lua_dist.c */

int luaopen_dlua_core(lua_State *L);

#endif
