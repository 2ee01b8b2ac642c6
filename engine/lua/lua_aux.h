/* lua_aux.h -- the bottom of the binding layer: what every engine/lua/lua_*.c file
 * shares, and nothing else. lua_init.c (the top) opens "dlua.core" and calls
 * one lt_register_* function per concern; each per-concern file includes this
 * header and core headers only, never a sibling binding file.
 *
 * Argument checking follows lauxlib: errors go through luaL_argerror and
 * luaL_typeerror, so they carry Lua's standard prefix with the function's
 * name and the argument number as the caller wrote it, methods included:
 *
 *   bad argument #2 to 'view' (size 2.5 is not an integer)
 *   bad argument #3 to 'zeros' (options table expected, got string)
 *   bad argument #3 to 'zeros' (no more than 2 arguments expected, got 3)
 *   bad argument #2 to 'var' (unknown option 'corection'; expected one of: correction, dim, keepdim, unbiased)
 *   bad argument #1 to 'Adam' (option 'lr' (number expected, got string))
 *
 * A worked example, a binding with two positional arguments and options:
 *
 *   static const char *const keys[] = {"dtype", "requires_grad", NULL};   // alphabetical
 *   static int tensor_foo(lua_State *L) {
 *     dl_tensor *t = lt_check(L, 1);
 *     int64_t n = lt_checkinteger(L, 2, "count");
 *     lt_opts o;
 *     lt_options(L, 3, keys, &o);            // nil/none: no options; else keys checked
 *     lt_checkargs(L, 3);                    // a fourth argument is an error
 *     dl_dtype d = lt_opt_dtype(L, &o, "dtype", t->dtype);
 *     lt_newbox(L);                          // the result's box before the C object
 *     return lt_finish(L, dl_foo(lt_ctx(L), t, n, d));
 *   }
 *
 * Bindings share that shape (check the arguments, call the core, raise or push)
 * and are still written out one function each, by design (STYLE.md, pitfall 16:
 * greppable, no generator): runs of lines alike between two bindings are that
 * shape, not a second copy of a mechanism, which lives here or in the core.
 *
 * Tables are read exactly once: list arguments are copied into a snapshot
 * table (lt_snapshot) that stays on the stack, so every element a binding
 * uses is anchored until it returns, and option tables are read with raw
 * access (no metamethod runs while they are parsed).
 */
/* See LICENSE */
#ifndef DL_LUA_AUX_H
#define DL_LUA_AUX_H

#include <lua.h>
#include <lauxlib.h>

#include "ops/ops.h"
#include "data/dataset.h"
#include "io/trace.h"

/* ------------------------------------------------------------ boxes and context */

typedef struct { dl_tensor *t; } tensor_box;      /* t == NULL once released ("dlua.Tensor") */
typedef struct { dl_dataset *ds; } dataset_box;   /* ds == NULL once released ("dlua.Dataset") */

/* The engine context of one Lua state ("dlua.Context"), upvalue 1 of every binding. */
typedef struct {
  dl_ctx *ctx;
  lua_State *L;             /* the state running backward (for Lua-defined functions) */
  size_t gc_mark;           /* tensor bytes in use when the GC was last stepped */
  size_t backward_mark;     /* tensor bytes in use after the last backward */
  int *dead_refs;           /* registry refs of freed Lua-defined nodes, unref'd lazily */
  int ndead, capdead;
  dl_trace *trace;          /* the trace recorder (dl.trace), shared with the pipelines */
  char trace_path[1024];    /* where the recording goes, while one is active */
  int trace_next_id;        /* ids of pipelines in the trace */
  lua_CFunction open_core;  /* luaopen_dlua_core, set by lua_init.c when it runs: worker
                             * Lua states open the module through it (a hook, so the
                             * per-concern files never call up to lua_init.c) */
} ctx_box;

ctx_box *lt_cbox(lua_State *L);                   /* upvalue 1 */
dl_ctx *lt_ctx(lua_State *L);                     /* upvalue 1's engine context */
/* Raises ctx->err as a Lua error with position information (lt_raise) or
 * without (lt_raise_plain: the Lua wrapper adds its caller's position). */
int lt_raise(lua_State *L);
int lt_raise_plain(lua_State *L);
/* Steps L's GC for the tensor bytes ctx gained since *mark (updated). */
void lt_gc_pressure(lua_State *L, dl_ctx *ctx, size_t *mark);

/* Tensors. lt_newbox pushes an empty box; lt_finish fills the box on top of
 * the stack with t (taking its reference) or raises ctx->err when t is NULL;
 * lt_push does both. lt_check is argument i as a live tensor (raises naming
 * the argument); lt_test is the tensor at i or NULL (also NULL when released). */
tensor_box *lt_newbox(lua_State *L);
int lt_finish(lua_State *L, dl_tensor *t);
int lt_push(lua_State *L, dl_tensor *t);
/* t.key = v for the table t on top of the stack (an integer, a float, a string) */
void lt_setinteger(lua_State *L, const char *key, lua_Integer v);
void lt_setnumber(lua_State *L, const char *key, lua_Number v);
void lt_setstring(lua_State *L, const char *key, const char *v);
dl_tensor *lt_check(lua_State *L, int arg);
/* Argument arg as a number: a Lua number only (luaL_checknumber would also take
 * the string "3"); lt_optnumber gives def for none or nil. */
lua_Number lt_checknumber(lua_State *L, int arg);
lua_Number lt_optnumber(lua_State *L, int arg, lua_Number def);
dl_tensor *lt_test(lua_State *L, int i);
/* Argument arg as a tensor: a tensor (borrowed), a number or boolean (a 0-d
 * tensor of dtype like) or a nested table (float32 unless like is a float
 * dtype). Converted values are boxed and replace slot arg, so Lua owns them. */
dl_tensor *lt_coerce(lua_State *L, int arg, dl_dtype like);
/* The same for a value written into a tensor of dtype like (an assignment, copy_,
 * add_, scatter_add's source, a list of indices as int64): a nested table of whole
 * numbers keeps dtype like, so integer values stay exact up to 2^53 instead of
 * passing through float32 (float32 when a value is not whole). */
dl_tensor *lt_coerce_into(lua_State *L, int arg, dl_dtype like);
/* A new tensor of dtype d from the nested table at argument arg, read once
 * (every entry exactly one time); raises naming arg on ragged tables and
 * non-numbers. The caller boxes the result (push a box first). */
dl_tensor *lt_from_table(lua_State *L, int arg, dl_dtype d);

/* Datasets (the metatable is made by lua_init.c). */
dataset_box *lt_new_dataset_box(lua_State *L);    /* pushes an empty box */
dl_dataset *lt_check_dataset(lua_State *L, int arg);
int lt_dataset_release(lua_State *L);             /* __gc of "dlua.Dataset" */
int lt_tensor_release(lua_State *L);              /* __gc and __close of "dlua.Tensor" */

/* ------------------------------------------------------------ arguments */

/* Raises "bad argument #arg to 'fn' (msg)" with a printf-style message. */
int lt_argerror(lua_State *L, int arg, const char *fmt, ...);
/* The type name of the value at i as errors print it ("dlua.Tensor", "string"). */
const char *lt_typename(lua_State *L, int i);
/* Strict arity: a function taking at most max arguments (self included)
 * raises "no more than N arguments expected, got M" when given more (counted
 * as the caller wrote them; trailing nils are absent arguments). */
void lt_checkargs(lua_State *L, int max);
/* Integer argument: what names it in the message ("size 2.5 is not an integer"). */
int64_t lt_checkinteger(lua_State *L, int arg, const char *what);
int64_t lt_optinteger(lua_State *L, int arg, const char *what, int64_t def);
/* The last arguments of an image reader, (channels, skip [, max_pixels]) from arg on;
 * nothing may follow them. */
dl_image_opts lt_check_image_opts(lua_State *L, int arg);
/* Boolean argument (true or false, nothing else). */
int lt_checkboolean(lua_State *L, int arg);
/* A 1-based dimension (negative from the end) of a tensor with ndim dims as
 * 0-based; extra = 1 also allows ndim + 1 (unsqueeze, stack). lt_dim is the
 * same check for a value read from a table, blamed on argument arg. */
int lt_checkdim(lua_State *L, int arg, int ndim, int extra);
int lt_dim(lua_State *L, int arg, int64_t d, int ndim, int extra);
/* Sizes as varargs from arg on (2, 3) or one list ({2, 3}); with infer, -1
 * is allowed (a size the op infers). Returns ndim; *next is the first
 * argument after the sizes. */
int lt_checkshape(lua_State *L, int arg, int64_t *shape, int *next, int infer);
/* A dtype name at arg ("float32", "float64", "int32", "int64", "uint8"). */
dl_dtype lt_checkdtype(lua_State *L, int arg);

/* ------------------------------------------------------------ option tables */

/* A parsed option table: where it is and which argument to blame. */
typedef struct {
  int idx;                  /* absolute stack index of the table, 0 when none was given */
  int arg;                  /* argument number in messages */
  char path[96];            /* "" at the top, "transforms[2]." for a nested table */
} lt_opts;

/* Options at argument arg: none or nil gives no options (o->idx = 0); a plain
 * table (not a tensor) whose keys are all in keys (NULL-terminated, listed in
 * the message) is accepted; anything else raises. Returns 1 when a table was given. */
int lt_options(lua_State *L, int arg, const char *const keys[], lt_opts *o);
/* The options last in f(..., [x], [opts]) after the optional argument at arg (given: x
 * was passed there): at arg + 1 when x was given or is nil, else at arg; nothing may
 * follow them (lt_checkargs). */
void lt_options_after(lua_State *L, int arg, int given, const char *const keys[], lt_opts *o);
/* The same for the table at stack index idx, named path (e.g. "index[2]"). */
int lt_options_at(lua_State *L, int arg, int idx, const char *path, const char *const keys[], lt_opts *o);
/* Typed reads of one option, def when absent (or nil); a wrong type raises
 * "option 'key' (number expected, got string)". Raw access, each key read once. */
double lt_opt_number(lua_State *L, const lt_opts *o, const char *key, double def);
int64_t lt_opt_integer(lua_State *L, const lt_opts *o, const char *key, int64_t def);
int lt_opt_boolean(lua_State *L, const lt_opts *o, const char *key, int def);
/* The string is pushed on the stack (anchored until the binding returns). */
const char *lt_opt_string(lua_State *L, const lt_opts *o, const char *key, const char *def);
dl_dtype lt_opt_dtype(lua_State *L, const lt_opts *o, const char *key, dl_dtype def);
/* A tensor option (borrowed; the options table anchors it), NULL when absent. */
dl_tensor *lt_opt_tensor(lua_State *L, const lt_opts *o, const char *key);
/* Pushes the raw value of o.key (nil when absent or no options); returns its type. */
int lt_opt_push(lua_State *L, const lt_opts *o, const char *key);
/* Raises "option 'key' (msg)" blamed on o's argument. */
int lt_opt_error(lua_State *L, const lt_opts *o, const char *key, const char *fmt, ...);

/* ------------------------------------------------------------ lists */

/* Copies the list at stack index idx (a table, else raises naming arg) into a
 * new table pushed on the stack: elements 1..#t, each read exactly once, at
 * most max of them. Later reads go to the snapshot (lua_rawgeti), which keeps
 * every element alive until the binding returns. Returns the length. */
int lt_snapshot(lua_State *L, int arg, int idx, int max);
/* The strings of the list at argument arg (at most max) as an array the GC frees,
 * pushed after the list's snapshot, which anchors them; *n gets their count. An element
 * that is not a string raises "element i is a <type>, expected a <what>". */
const char **lt_check_strings(lua_State *L, int arg, int max, const char *what, int *n);
/* The tensors of a list argument as a scratch array (a userdata pushed after
 * the snapshot; both stay on the stack): raises "element k is a string,
 * expected a tensor" naming arg. */
dl_tensor **lt_check_tensor_list(lua_State *L, int arg, int max, int *n);

/* ------------------------------------------------------------ registration */

/* Adds fns (sorted, NULL-terminated) to the table at mod with the context at
 * cidx as upvalue 1; leaves the stack as it was. */
void lt_setfuncs(lua_State *L, int mod, int cidx, const luaL_Reg *fns);
/* Sets release as both __gc and __close of the metatable on top of the stack: one
 * idempotent release for the collector and for `local x <close>`. */
void lt_set_release(lua_State *L, lua_CFunction release);
/* Creates the metatable name of a userdata class once: release as __gc and __close
 * (lt_set_release), and methods (NULL: none; the context at cidx as upvalue 1) reached
 * through __index, the metatable itself; leaves the stack as it was. */
void lt_newclass(lua_State *L, const char *name, lua_CFunction release, const luaL_Reg *methods, int cidx);

/* Hooks called once by luaopen_dlua_core (lua_init.c), in this order: each
 * adds its functions to the module table at index mod with the context at
 * index cidx as upvalue 1, and leaves the stack as it found it. */
void lt_register_tensor(lua_State *L, int mod, int cidx);      /* lua_tensor.c */
void lt_register_ops(lua_State *L, int mod, int cidx);         /* lua_ops.c */
void lt_register_conv(lua_State *L, int mod, int cidx);        /* lua_conv.c */
void lt_register_autograd(lua_State *L, int mod, int cidx);    /* lua_autograd.c */
void lt_register_sys(lua_State *L, int mod, int cidx);         /* lua_sys.c */
void lt_register_machine(lua_State *L, int mod, int cidx);     /* lua_machine.c */
/* a malformed environment switch (lua_machine.c's table)? 1 and the message, else 0 */
int lt_switches_error(char *msg, size_t cap);
void lt_register_optim(lua_State *L, int mod, int cidx);       /* lua_optim.c */
void lt_register_batchnorm(lua_State *L, int mod, int cidx);   /* lua_batchnorm.c */
void lt_register_dataset(lua_State *L, int mod, int cidx);     /* lua_dataset.c */
void lt_register_pipeline(lua_State *L, int mod, int cidx);    /* lua_pipeline.c */
void lt_register_trace(lua_State *L, int mod, int cidx);       /* lua_trace.c */
void lt_register_checkpoint(lua_State *L, int mod, int cidx);  /* lua_checkpoint.c */
void lt_register_dist(lua_State *L, int mod, int cidx);        /* lua_dist.c */
void lt_register_fileio(lua_State *L, int mod, int cidx);      /* lua_fileio.c */
void lt_register_gp(lua_State *L, int mod, int cidx);          /* lua_gp.c */
void lt_register_proc(lua_State *L, int mod, int cidx);        /* lua_proc.c */
void lt_register_shards(lua_State *L, int mod, int cidx);          /* lua_shards.c */
void lt_register_onnx(lua_State *L, int mod, int cidx);        /* lua_onnx.c */

int luaopen_dlua_core(lua_State *L);

#endif
