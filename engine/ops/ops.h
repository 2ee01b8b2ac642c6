/* ops.h -- differentiable tensor operations and the autograd tape.
 *
 * Every op takes borrowed inputs and returns a new reference (NULL with
 * ctx->err set on failure; inputs are never modified unless the name says
 * `_inplace`). When ctx->grad_enabled and an input requires grad, the op
 * records a dl_node whose backward is C code built from non-recording kernels.
 * Dimensions here are 0-based; the binding converts from Lua's 1-based.
 *
 * How ops/ is cut. A file calls only files on lower lines (and core/), never one on
 * its own line, so no circle of files (tests/lua/engine_graph_spec.lua checks the symbols):
 *   autograd.c   the op table's functions (dl_op_get) and the backward walk
 *                (dl_backward), which calls each node's backward through the table and
 *                sums gradients with kernels: it refers to every op file, none to it
 *   ops_matmul.c a matmul of vectors is unsqueeze, matmul, squeeze (ops_shape.c)
 *   ops_elem.c ops_reduce.c ops_shape.c ops_index.c conv.c batchnorm.c attention.c
 *                the ops: check, compute with kernels, record their node through the
 *                tape. Their backward functions call kernels only, so a backward never
 *                records and never reaches another op file
 *   tape.c       dl_tape_record (a node keeps its op id; its name comes from the
 *                table's strings), dl_needs_grad, dl_detach, node lifetime
 *   elem_kernels.c reduce_kernels.c (kernels.h), conv_winograd.c, conv_f64.c
 *                kernels that never record: broadcasting loops, expand views,
 *                contiguous copies for scratch, reductions and sum_to, Winograd,
 *                float64 convolution and pooling
 *   gemm.c conv_simd.c optim.c   products, AVX-512 rows, optimizer steps
 * Adding an op: its row in DL_OP_TABLE (or in its family's list below), its forward
 * and backward in an op file, kernels where another file needs them.
 */
/* See LICENSE */
#ifndef DL_OPS_H
#define DL_OPS_H

#include "core/dl.h"

/* ------------------------------------------------------------- autograd */

typedef int (*dl_backward_fn)(dl_ctx *ctx, dl_node *n, dl_tensor *gout, dl_tensor **gin);

/* The op table: every differentiable op of the core, once, as
 *   X(id, name, forward, backward, lua)
 *   id        DL_OP_<id>, what the forward passes to dl_tape_record
 *   name      the node's name (t:grad_fn(), "backward: part of the graph (matmul) ...")
 *   forward   the C function that computes the op and records its node
 *   backward  its dl_backward_fn, defined beside the forward
 *   lua       the Lua name that reaches it (a tensor method / dlua function)
 * A node can only be recorded through dl_tape_record, which takes its name from
 * here, and the backward walk calls the backward named here, so no op records a
 * node without an entry; core._ops() lists the entries and
 * tests/lua/op_table_spec.lua requires a gradcheck case for each name.
 * docs/architecture.md walks through adding one.
 *
 * The elementwise and reduction families are lists of their own rows, with the
 * family's forward and backward passed in: the same list makes the family's kernel
 * selector (dl_binop, dl_unop, dl_redop below), its names and its map to DL_OP_<id>,
 * so the op table and the side tables cannot disagree. Rows of these lists are alike by
 * design: one row per op, the family's forward and backward passed through. */
#define DL_BINARY_OPS(X, fw, bw)                                         \
  X(ADD, "add", fw, bw, "add")                                           \
  X(SUB, "sub", fw, bw, "sub")                                           \
  X(MUL, "mul", fw, bw, "mul")                                           \
  X(DIV, "div", fw, bw, "div")                                           \
  X(POW, "pow", fw, bw, "pow")                                           \
  X(MAXIMUM, "maximum", fw, bw, "maximum")                               \
  X(MINIMUM, "minimum", fw, bw, "minimum")

#define DL_UNARY_OPS(X, fw, bw)                                          \
  X(NEG, "neg", fw, bw, "neg")                                           \
  X(EXP, "exp", fw, bw, "exp")                                           \
  X(LOG, "log", fw, bw, "log")                                           \
  X(SQRT, "sqrt", fw, bw, "sqrt")                                        \
  X(ABS, "abs", fw, bw, "abs")                                           \
  X(RELU, "relu", fw, bw, "relu")                                        \
  X(SIGMOID, "sigmoid", fw, bw, "sigmoid")                               \
  X(TANH, "tanh", fw, bw, "tanh")                                        \
  X(GELU, "gelu", fw, bw, "gelu")                                        \
  X(SIGN, "sign", fw, bw, "sign")                                        \
  X(SQUARE, "square", fw, bw, "square")                                  \
  X(RSQRT, "rsqrt", fw, bw, "rsqrt")                                     \
  X(SIN, "sin", fw, bw, "sin")                                           \
  X(COS, "cos", fw, bw, "cos")                                           \
  X(TAN, "tan", fw, bw, "tan")                                           \
  X(ASIN, "asin", fw, bw, "asin")                                        \
  X(ACOS, "acos", fw, bw, "acos")                                        \
  X(ATAN, "atan", fw, bw, "atan")                                        \
  X(SINH, "sinh", fw, bw, "sinh")                                        \
  X(COSH, "cosh", fw, bw, "cosh")                                        \
  X(ASINH, "asinh", fw, bw, "asinh")                                     \
  X(ACOSH, "acosh", fw, bw, "acosh")                                     \
  X(ATANH, "atanh", fw, bw, "atanh")                                     \
  X(EXPM1, "expm1", fw, bw, "expm1")                                     \
  X(LOG1P, "log1p", fw, bw, "log1p")                                     \
  X(LOG2, "log2", fw, bw, "log2")                                        \
  X(LOG10, "log10", fw, bw, "log10")                                     \
  X(ERF, "erf", fw, bw, "erf")                                           \
  X(ERFC, "erfc", fw, bw, "erfc")                                        \
  X(ERFINV, "erfinv", fw, bw, "erfinv")                                  \
  X(SOFTPLUS, "softplus", fw, bw, "softplus")                            \
  X(SILU, "silu", fw, bw, "silu")                                        \
  X(MISH, "mish", fw, bw, "mish")                                        \
  X(LOG_SIGMOID, "log_sigmoid", fw, bw, "log_sigmoid")                   \
  X(EXP2, "exp2", fw, bw, "exp2")                                        \
  X(FLOOR, "floor", fw, bw, "floor")                                     \
  X(CEIL, "ceil", fw, bw, "ceil")                                        \
  X(ROUND, "round", fw, bw, "round")                                     \
  X(TRUNC, "trunc", fw, bw, "trunc")

/* rows alike by design, as in the lists above */
#define DL_REDUCE_OPS(X, fw, bw)                                         \
  X(SUM, "sum", fw, bw, "sum")                                           \
  X(MEAN, "mean", fw, bw, "mean")                                        \
  X(MAX, "max", fw, bw, "max")                                           \
  X(MIN, "min", fw, bw, "min")                                           \
  X(VAR, "var", fw, bw, "var")                                           \
  X(LOGSUMEXP, "logsumexp", fw, bw, "logsumexp")

#define DL_OP_TABLE(X)                                                   \
  DL_BINARY_OPS(X, dl_binary, dl_bw_binary)                              \
  DL_UNARY_OPS(X, dl_unary, dl_bw_unary)                                 \
  X(SCALE, "scale", dl_scale_shift, dl_bw_scale, "scale")                \
  X(CLAMP, "clamp", dl_clamp, dl_bw_clamp, "clamp")                      \
  X(WHERE, "where", dl_where, dl_bw_where, "where")                      \
  X(CAST, "cast", dl_cast, dl_bw_cast, "to")                             \
  DL_REDUCE_OPS(X, dl_reduce, dl_bw_reduce)                              \
  X(SOFTMAX, "softmax", dl_softmax, dl_bw_softmax, "softmax")            \
  X(LOG_SOFTMAX, "log_softmax", dl_softmax, dl_bw_softmax, "log_softmax") \
  X(RESHAPE, "reshape", dl_reshape, dl_bw_reshape, "reshape")            \
  X(PERMUTE, "permute", dl_permute, dl_bw_permute, "permute")            \
  X(NARROW, "narrow", dl_narrow, dl_bw_narrow, "narrow")                 \
  X(EXPAND, "expand", dl_expand, dl_bw_expand, "expand")                 \
  X(CLONE, "clone", dl_clone, dl_bw_identity, "clone")                   \
  X(CAT, "cat", dl_cat, dl_bw_cat, "cat")                                \
  X(GATHER, "gather", dl_gather, dl_bw_gather, "gather")                 \
  X(INDEX_SELECT, "index_select", dl_index_select, dl_bw_index_select, "index_select") \
  X(SCATTER_ADD, "scatter_add", dl_scatter_add, dl_bw_scatter_add, "scatter_add") \
  X(MATMUL, "matmul", dl_matmul, dl_bw_matmul, "matmul")                 \
  X(LINEAR, "linear", dl_linear, dl_bw_linear, "linear")                 \
  X(CONV2D, "conv2d", dl_conv2d, dl_bw_conv2d, "conv2d")                 \
  X(MAX_POOL2D, "max_pool2d", dl_pool2d, dl_bw_pool2d, "max_pool2d")     \
  X(AVG_POOL2D, "avg_pool2d", dl_pool2d, dl_bw_pool2d, "avg_pool2d")     \
  X(BATCH_NORM, "batch_norm", dl_batch_norm, dl_bw_batch_norm, "batch_norm") \
  X(SCALED_DOT_PRODUCT_ATTENTION, "scaled_dot_product_attention", dl_attention, dl_bw_attention, \
    "scaled_dot_product_attention")                                      \
  X(FUNCTION, "function", dl_tape_record, dl_bw_function, "autograd.Function")

#define DL_OP_ENUM_(id, name, fw, bw, lua) DL_OP_##id,
typedef enum { DL_OP_TABLE(DL_OP_ENUM_) DL_NOPS } dl_op;
#undef DL_OP_ENUM_

typedef struct {
  const char *name, *forward, *backward, *lua;
  dl_backward_fn fn;
} dl_op_info;

/* the entry of op (0 <= op < DL_NOPS): autograd.c, above every op file */
const dl_op_info *dl_op_get(dl_op op);

/* the backward functions of the table (each defined beside its forward) */
int dl_bw_binary(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_unary(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_scale(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_clamp(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_where(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_cast(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_reduce(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_softmax(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_reshape(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_permute(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_narrow(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_expand(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_identity(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_cat(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_gather(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_index_select(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_scatter_add(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_matmul(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_linear(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_conv2d(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_pool2d(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_batch_norm(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_attention(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);
int dl_bw_function(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin);  /* calls n->user_backward */

struct dl_node {
  dl_node_ref ref;            /* first: the core's view of the node (references, destroy) */
  dl_ctx *ctx;                /* allocator that owns the node */
  const char *name;           /* op name, for messages */
  int nin;
  dl_tensor *in[4];           /* inputs, retained until the graph is freed */
  dl_tensor *saved[3];        /* extra tensors the backward needs, retained */
  double sc[4];               /* scalar arguments */
  int64_t iv[2 * DL_MAXDIM];  /* integer arguments (dims, sizes) */
  int niv;
  dl_op op;                   /* its entry in the op table, whose backward the walk calls */
  void *user;                 /* for Lua-defined functions (DL_OP_FUNCTION) */
  dl_backward_fn user_backward;
  void (*user_free)(void *user);
  int freed;                  /* inputs dropped after backward */
  /* backward bookkeeping */
  dl_tensor *gacc;
  int mark;
};

/* The tape helper (tape.c): the one way an op records its node. When recording is on and
 * any of in[0..nin) (NULL entries allowed) requires grad, makes a node of op --
 * name from the op table, inputs retained -- the grad_fn of *out and
 * returns it, for the caller to fill its arguments (iv, niv, sc, saved). Returns
 * NULL when there is nothing to record (*out untouched), and also when the node
 * cannot be allocated: then *out is released and set to NULL, with the message in
 * ctx->err. So an op ends with:
 *     dl_node *n = dl_tape_record(ctx, DL_OP_X, &out, 1, &a);
 *     if (!n) return out;
 *     n->iv[0] = dim;                    (a failure here: release out, which frees n)
 *     return out; */
dl_node *dl_tape_record(dl_ctx *ctx, dl_op op, dl_tensor **out, int nin, dl_tensor **in);
/* For an op whose backward reads only its inputs' shapes (add, sub, relu from its saved
 * output): replaces each input an op produced by an edge (tape.c), a header of its shape and
 * dtype with its grad_fn but no data, so the node routes gradients without keeping the input's
 * memory alive. Leaves stay (their .grad is accumulated). Returns 0, or -1 (ctx->err set). */
int dl_node_edges_only(dl_ctx *ctx, dl_node *n);
/* Drops n's inputs, saved tensors and user data and marks it freed (tape.c): the walk
 * calls it after a backward that does not keep the graph; the node itself lives on
 * while tensors hold it. */
void dl_node_drop_inputs(dl_node *n);
/* 1 when recording is on and one of in[0..n) (NULL entries allowed) requires grad */
int dl_needs_grad(dl_ctx *ctx, int n, dl_tensor **in);
/* Sets t's requires_grad flag: only float tensors may require grad, and a tensor an op
 * produced (non-leaf) cannot clear it. Returns 0, or -1 with "requires_grad: ..." in ctx->err. */
int dl_set_requires_grad(dl_ctx *ctx, dl_tensor *t, int flag);

/* Backward from t with gradient g (NULL: t must have one element, g = 1).
 * Accumulates into .grad of leaves that require grad; frees the graph unless keep. */
int dl_backward(dl_ctx *ctx, dl_tensor *t, dl_tensor *g, int keep);
/* Accumulates g into t->grad (allocating it) */
int dl_accumulate_grad(dl_ctx *ctx, dl_tensor *t, dl_tensor *g);

/* --------------------------------------------------------- elementwise */

/* comparisons: elementwise with broadcasting like the binary family, uint8 results, no
 * gradient (so no rows in the op table) */
#define DL_COMPARE_OPS(X) X(EQ, "eq") X(NE, "ne") X(LT, "lt") X(LE, "le") X(GT, "gt") X(GE, "ge")

/* a family's kernel selectors, in its list's order: DL_ADD.., DL_NEG.., DL_RSUM.. */
#define DL_FAMILY_ENUM_(id, name, fw, bw, lua) DL_##id,
#define DL_COMPARE_ENUM_(id, name) DL_##id,
#define DL_REDUCE_ENUM_(id, name, fw, bw, lua) DL_R##id,
/* a family row's entry in the op table, for `static const dl_op map[] = {DL_UNARY_OPS(DL_OP_ID_, , )}` */
#define DL_OP_ID_(id, name, fw, bw, lua) DL_OP_##id,

typedef enum { DL_BINARY_OPS(DL_FAMILY_ENUM_, , ) DL_COMPARE_OPS(DL_COMPARE_ENUM_) DL_NBINARY } dl_binop;
typedef enum { DL_UNARY_OPS(DL_FAMILY_ENUM_, , ) DL_NUNARY } dl_unop;

dl_tensor *dl_binary(dl_ctx *ctx, dl_binop op, dl_tensor *a, dl_tensor *b);
dl_tensor *dl_unary(dl_ctx *ctx, dl_unop op, dl_tensor *a);
dl_tensor *dl_scale_shift(dl_ctx *ctx, dl_tensor *a, double scale, double shift); /* a*s+b */
dl_tensor *dl_clamp(dl_ctx *ctx, dl_tensor *a, double lo, double hi);
dl_tensor *dl_where(dl_ctx *ctx, dl_tensor *cond, dl_tensor *a, dl_tensor *b);
dl_tensor *dl_cast(dl_ctx *ctx, dl_tensor *a, dl_dtype d);
/* In place, no autograd (elem_kernels.c): dst += alpha * src (same shape, src broadcast allowed) */
int dl_axpy_inplace(dl_ctx *ctx, dl_tensor *dst, double alpha, dl_tensor *src);
int dl_fill_inplace(dl_ctx *ctx, dl_tensor *t, double v);

/* ---------------------------------------------------------- reductions */

typedef enum { DL_REDUCE_OPS(DL_REDUCE_ENUM_, , ) DL_NREDUCE } dl_redop;

/* Reduce over the dims flagged in mask (bit d = dim d); mask 0 = all dims.
 * For max/min, *idx (if not NULL) receives int64 indices (single dim only). */
dl_tensor *dl_reduce(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int keepdim,
                     int correction, dl_tensor **idx);
dl_tensor *dl_softmax(dl_ctx *ctx, dl_tensor *a, int dim, int log);
dl_tensor *dl_argmax(dl_ctx *ctx, dl_tensor *a, int dim, int keepdim, int min);

/* ------------------------------------------------------------ shapes */

dl_tensor *dl_reshape(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape);
dl_tensor *dl_view(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape);
dl_tensor *dl_permute(dl_ctx *ctx, dl_tensor *a, const int *perm);
dl_tensor *dl_transpose(dl_ctx *ctx, dl_tensor *a, int d0, int d1);
dl_tensor *dl_narrow(dl_ctx *ctx, dl_tensor *a, int dim, int64_t start, int64_t len);
dl_tensor *dl_select(dl_ctx *ctx, dl_tensor *a, int dim, int64_t index);
dl_tensor *dl_expand(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape);
dl_tensor *dl_unsqueeze(dl_ctx *ctx, dl_tensor *a, int dim);
dl_tensor *dl_squeeze(dl_ctx *ctx, dl_tensor *a, int dim);  /* dim < 0: all size-1 dims */
dl_tensor *dl_contiguous(dl_ctx *ctx, dl_tensor *a);       /* a itself (retained) if already */
dl_tensor *dl_clone(dl_ctx *ctx, dl_tensor *a);
dl_tensor *dl_detach(dl_ctx *ctx, dl_tensor *a);
dl_tensor *dl_cat(dl_ctx *ctx, int n, dl_tensor **ts, int dim);
dl_tensor *dl_stack(dl_ctx *ctx, int n, dl_tensor **ts, int dim);

/* ------------------------------------------------------------ indexing */

dl_tensor *dl_gather(dl_ctx *ctx, dl_tensor *a, int dim, dl_tensor *index);
dl_tensor *dl_index_select(dl_ctx *ctx, dl_tensor *a, int dim, dl_tensor *index);
/* out = a with src added at index along dim (a copy; differentiable in a and src) */
dl_tensor *dl_scatter_add(dl_ctx *ctx, dl_tensor *a, int dim, dl_tensor *index, dl_tensor *src);
dl_tensor *dl_one_hot(dl_ctx *ctx, dl_tensor *labels, int64_t classes);
/* index tensors hold 0-based positions here; the binding converts from 1-based */

/* ------------------------------------------------------------ attention */

/* softmax(scale q k^T + mask) v (attention.c): q [B, H, T, D], k [B, H, S, D], v [B, H, S, Dv]
 * -> [B, H, T, Dv]; causal: query i sees keys j <= i; mask NULL, uint8 (keep where non-zero)
 * or q's dtype (added), broadcast to [B, H, T, S]; scale NAN: 1 / sqrt(D). */
dl_tensor *dl_attention(dl_ctx *ctx, dl_tensor *q, dl_tensor *k, dl_tensor *v, dl_tensor *mask, int causal,
                        double scale);

/* ------------------------------------------------------------ matmul */

dl_tensor *dl_matmul(dl_ctx *ctx, dl_tensor *a, dl_tensor *b);
/* y = x w^T + b over the last dim of x (w [out, in], b [out] or NULL): a Linear layer
 * in one op, no transposed copies; errors name "linear" and the shapes. */
dl_tensor *dl_linear(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b);
/* C = alpha op(A) op(B) + beta C for row-major float32/float64 buffers (op = transpose
 * when ta/tb), split over ctx's thread pool for large products (gemm.c). */
void dl_gemm(dl_ctx *ctx, dl_dtype d, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha,
             const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc);
/* C = op(A) op(B) + bias broadcast over C's rows (bias [N], same dtype): each task writes
 * the bias into its own block of C just before its product adds onto it */
void dl_gemm_bias(dl_ctx *ctx, dl_dtype d, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A,
                  int64_t lda, const void *B, int64_t ldb, const void *bias, void *C, int64_t ldc);
/* the same for float32 on the calling thread only: for kernels that already run on the pool */
void dl_sgemm_serial(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* the same for float32 or float64 (d), on the calling thread only */
void dl_gemm_serial(dl_dtype d, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const void *A,
                    int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc);

#endif
