/* kernels.h -- the non-recording internals of ops/: what op files, their backward
 * functions and the backward walk compute with.
 *
 * Nothing declared here records a tape node, whatever ctx->grad_enabled says and
 * whether or not an input requires grad: results are plain tensors (no grad_fn,
 * requires_grad 0). An op file computes with these, then records its own node through
 * dl_tape_record; a backward function calls only these (and core), so a backward never
 * records and never calls another op file. Defined in elem_kernels.c (elementwise
 * loops, broadcasting, expand views, contiguous copies) and reduce_kernels.c
 * (reductions, sum_to); they call only core/. Ownership as everywhere: a returned
 * tensor is a new reference, NULL with ctx->err set on failure.
 */
/* See LICENSE */
#ifndef DL_KERNELS_H
#define DL_KERNELS_H

#include "ops/ops.h"

/* internal elementwise selectors past the public ones, for backward functions */
/* x > 0 ? 1 : 0; d gelu(x) / dx; DL_U_DERIV + op: d op(x) / dx for the unary ops from DL_SIN on */
enum { DL_U_STEP = DL_NUNARY, DL_U_GELU_GRAD, DL_U_DERIV };
enum { DL_B_MASK = DL_NBINARY };                /* a where b > 0, else 0: ReLU's backward in one pass */

/* ------------------------------------------------------------ elementwise (elem_kernels.c) */

/* the dtype of a binary op's result on a and b: the wider of the two (f64 > f32 > i64 > i32 > u8) */
dl_dtype dl_dtype_promote(dl_dtype a, dl_dtype b);
/* dl_binary's result dtype for op on a and b: uint8 for a comparison, else the promoted one,
 * float32 for div and pow of integers */
dl_dtype dl_binary_dtype(int op, dl_dtype a, dl_dtype b);
/* Broadcast shape of a and b into (*ndim, shape); -1 with a message naming op if incompatible */
int dl_broadcast_shape(dl_ctx *ctx, const char *op, const dl_tensor *a, const dl_tensor *b,
                       int *ndim, int64_t *shape);
/* out = op(a, b) of dtype outd over the broadcast shape of a and b; op a dl_binop or DL_B_MASK.
 * Fails on shapes that do not broadcast (the message names op), memory. */
dl_tensor *dl_binary_raw(dl_ctx *ctx, int op, dl_tensor *a, dl_tensor *b, dl_dtype outd);
/* out = op(a) of a's shape; op a dl_unop or DL_U_*; the dtype is a's, or float32 for an integer a
 * under an op with fractional results (exp, log, ...). Fails on memory. */
dl_tensor *dl_unary_raw(dl_ctx *ctx, int op, dl_tensor *a);
/* out = a * scale + shift, contiguous, a's dtype (float32 for an integer a and a fractional
 * scale or shift). Fails on memory. */
dl_tensor *dl_scale_shift_raw(dl_ctx *ctx, dl_tensor *a, double scale, double shift);
/* out = cond != 0 ? a : b of dtype d over the broadcast shape of cond, a and b. Fails on shapes that
 * do not broadcast ("where: ..."), memory. */
dl_tensor *dl_where_raw(dl_ctx *ctx, dl_tensor *cond, dl_tensor *a, dl_tensor *b, dl_dtype d);
/* A view of a broadcast to shape[0..ndim) (a size -1 keeps a's size): a's dims right-aligned,
 * broadcast dims of stride 0. Fails (message "expand: ...") when a's shape does not broadcast. */
dl_tensor *dl_expand_raw(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape);
/* a itself (retained) when contiguous, else a contiguous copy of a's dtype: scratch for a kernel */
dl_tensor *dl_contiguous_raw(dl_ctx *ctx, dl_tensor *a);

/* ------------------------------------------------------------ reductions (reduce_kernels.c) */

/* dl_reduce without the node: op over the dims flagged in mask (0 = all), a double accumulator
 * per output element; *idx (if not NULL, max/min) receives int64 positions along the reduced
 * dims. Fails on max/min of nothing, memory. */
dl_tensor *dl_reduce_raw(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int keepdim,
                         int correction, dl_tensor **idx);
/* The backward of broadcasting: g summed over the dims that shape broadcast (leading ones and
 * size-1 ones), reshaped to shape; g itself (retained) when it already has that shape. */
dl_tensor *dl_sum_to(dl_ctx *ctx, dl_tensor *g, int ndim, const int64_t *shape);
/* a with the dims flagged in mask moved last, contiguous (a itself, retained, when nothing
 * moves): *rows x *R, row r holding the R elements that reduce into output element r */
dl_tensor *dl_rows_of(dl_ctx *ctx, dl_tensor *a, unsigned mask, int64_t *rows, int64_t *R);

/* ------------------------------------------------------------ a backward's last step */

/* The n gradients g (NULL ones allowed) of a backward that ends with status rc: rc != 0
 * releases them all and returns -1; rc == 0 hands them to gin[0..n) and returns 0. */
static inline int dl_grads_out(int rc, dl_tensor **gin, int n, dl_tensor *const *g) {
  for (int i = 0; i < n; i++) {
    if (rc) dl_tensor_release(g[i]);
    else gin[i] = g[i];
  }
  return rc ? -1 : 0;
}

#endif
