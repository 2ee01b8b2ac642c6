/* ops.h -- differentiable tensor operations and the autograd tape.
 *
 * Every op takes borrowed inputs and returns a new reference (NULL with
 * ctx->err set on failure; inputs are never modified unless the name says
 * `_inplace`). When ctx->grad_enabled and an input requires grad, the op
 * records a dl_node whose backward is C code built from these same ops.
 * Dimensions here are 0-based; the binding converts from Lua's 1-based.
 */
/* See LICENSE */
#ifndef DL_OPS_H
#define DL_OPS_H

#include "dl.h"

/* ------------------------------------------------------------- autograd */

typedef int (*dl_backward_fn)(dl_ctx *ctx, dl_node *n, dl_tensor *gout, dl_tensor **gin);

struct dl_node {
  atomic_int refs;
  dl_ctx *ctx;                /* allocator that owns the node */
  const char *name;           /* op name, for messages */
  int nin;
  dl_tensor *in[4];           /* inputs, retained until the graph is freed */
  dl_tensor *saved[3];        /* extra tensors the backward needs, retained */
  double sc[4];               /* scalar arguments */
  int64_t iv[2 * DL_MAXDIM];  /* integer arguments (dims, sizes) */
  int niv;
  dl_backward_fn backward;    /* writes new refs (or NULL) into gin[0..nin) */
  void *user;                 /* for Lua-defined functions */
  void (*user_free)(void *user);
  int freed;                  /* inputs dropped after backward */
  /* backward bookkeeping */
  dl_tensor *gacc;
  int mark;
  dl_node *next_free;         /* dl_node_release's pending list */
};

/* Records node n (filled except refs) as grad_fn of out when any input
 * requires grad; takes over n. Returns out, or NULL (and releases out) on failure. */
dl_tensor *dl_record(dl_ctx *ctx, dl_tensor *out, dl_node *n);
dl_node *dl_node_new(dl_ctx *ctx, const char *name, dl_backward_fn bw, int nin, dl_tensor **in);
int dl_needs_grad(dl_ctx *ctx, int n, dl_tensor **in);
void dl_node_release(dl_node *n);

/* Backward from t with gradient g (NULL: t must have one element, g = 1).
 * Accumulates into .grad of leaves that require grad; frees the graph unless keep. */
int dl_backward(dl_ctx *ctx, dl_tensor *t, dl_tensor *g, int keep);
/* Accumulates g into t->grad (allocating it) */
int dl_accumulate_grad(dl_ctx *ctx, dl_tensor *t, dl_tensor *g);

/* --------------------------------------------------------- elementwise */

typedef enum {
  DL_ADD, DL_SUB, DL_MUL, DL_DIV, DL_POW, DL_MAXIMUM, DL_MINIMUM,
  DL_EQ, DL_NE, DL_LT, DL_LE, DL_GT, DL_GE, DL_NBINARY
} dl_binop;

typedef enum {
  DL_NEG, DL_EXP, DL_LOG, DL_SQRT, DL_ABS, DL_RELU, DL_SIGMOID, DL_TANH, DL_GELU,
  DL_SIGN, DL_SQUARE, DL_RSQRT, DL_NUNARY
} dl_unop;

const char *dl_binop_name(dl_binop op);
const char *dl_unop_name(dl_unop op);
dl_tensor *dl_binary(dl_ctx *ctx, dl_binop op, dl_tensor *a, dl_tensor *b);
dl_tensor *dl_unary(dl_ctx *ctx, dl_unop op, dl_tensor *a);
dl_tensor *dl_scale_shift(dl_ctx *ctx, dl_tensor *a, double scale, double shift); /* a*s+b */
dl_tensor *dl_clamp(dl_ctx *ctx, dl_tensor *a, double lo, double hi);
dl_tensor *dl_where(dl_ctx *ctx, dl_tensor *cond, dl_tensor *a, dl_tensor *b);
dl_tensor *dl_cast(dl_ctx *ctx, dl_tensor *a, dl_dtype d);
/* Broadcast shape of a and b into out; -1 (with a message naming op) if incompatible */
int dl_broadcast_shape(dl_ctx *ctx, const char *op, const dl_tensor *a, const dl_tensor *b,
                       int *ndim, int64_t *shape);
/* Sums g down to the given shape (the backward of broadcasting). */
dl_tensor *dl_sum_to(dl_ctx *ctx, dl_tensor *g, int ndim, const int64_t *shape);
/* In place, no autograd: dst += alpha * src (same shape, src broadcast allowed) */
int dl_axpy_inplace(dl_ctx *ctx, dl_tensor *dst, double alpha, dl_tensor *src);
int dl_fill_inplace(dl_ctx *ctx, dl_tensor *t, double v);

/* ---------------------------------------------------------- reductions */

typedef enum { DL_RSUM, DL_RMEAN, DL_RMAX, DL_RMIN, DL_RVAR, DL_RLOGSUMEXP } dl_redop;

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

/* ------------------------------------------------------------ matmul */

dl_tensor *dl_matmul(dl_ctx *ctx, dl_tensor *a, dl_tensor *b);
/* y = x w^T + b over the last dim of x (w [out, in], b [out] or NULL): a Linear layer
 * in one op, no transposed copies; errors name "linear" and the shapes. */
dl_tensor *dl_linear(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b);
/* C = alpha op(A) op(B) + beta C for row-major float32/float64 buffers (op = transpose
 * when ta/tb), split over ctx's thread pool for large products (gemm.c). */
void dl_gemm(dl_ctx *ctx, dl_dtype d, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha,
             const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc);
/* the same for float32 on the calling thread only: for kernels that already run on the pool */
void dl_sgemm_serial(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

#endif
