/* ops_shape.c -- differentiable views and copies: reshape, permute, narrow, expand...
 *
 * Views share storage with their input (dl_view_new); their backward maps
 * the output gradient back to the input's shape (reshape back, inverse
 * permutation, zero-padding for narrow/select, sum for expand) with views and
 * kernels that record nothing.
 */
/* See LICENSE */
#include "ops/kernels.h"

#include <string.h>

int dl_bw_reshape(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0];
  gin[0] = dl_view_new_reshape(ctx, g, a->ndim, a->shape);
  return gin[0] ? 0 : -1;
}

/* out with a node of op over a alone, which needs no arguments */
static dl_tensor *record1(dl_ctx *ctx, dl_tensor *out, dl_tensor *a, dl_op op) {
  dl_tape_record(ctx, op, &out, 1, &a);
  return out;
}

dl_tensor *dl_reshape(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape) {
  return record1(ctx, dl_view_new_reshape(ctx, a, ndim, shape), a, DL_OP_RESHAPE);
}

dl_tensor *dl_view(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape) {
  int64_t sh[DL_MAXDIM];
  if (ndim < 0 || ndim > DL_MAXDIM) return dl_fail(ctx, "view: %d dimensions, at most %d supported", ndim, DL_MAXDIM);
  memcpy(sh, shape, sizeof(int64_t) * (size_t)ndim);
  if (dl_shape_resolve(ctx, "view", ndim, sh, dl_numel(a), NULL) < 0) return NULL;
  if (!dl_view_possible(a, ndim, sh)) {
    char x[128], y[128];
    dl_shape_str(a->shape, a->ndim, x, sizeof x);
    dl_shape_str(sh, ndim, y, sizeof y);
    return dl_fail(ctx, "view: a tensor of shape %s with these strides cannot be viewed as %s "
                        "without a copy (use reshape)", x, y);
  }
  return dl_reshape(ctx, a, ndim, sh);
}

/* a [..] -> [a->shape[perm[0]], ...]: a view; -1 with a message on a bad perm */
static dl_tensor *permuted(dl_ctx *ctx, dl_tensor *a, const int *perm) {
  int seen[DL_MAXDIM] = {0};
  int64_t sh[DL_MAXDIM], st[DL_MAXDIM];
  for (int d = 0; d < a->ndim; d++) {
    if (perm[d] < 0 || perm[d] >= a->ndim || seen[perm[d]])
      return dl_fail(ctx, "permute: dimension %d is repeated or out of range for a %d-d tensor",
                     perm[d] + 1, a->ndim);
    seen[perm[d]] = 1;
    sh[d] = a->shape[perm[d]];
    st[d] = a->stride[perm[d]];
  }
  return dl_view_new(ctx, a, a->ndim, sh, st, a->offset);
}

int dl_bw_permute(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  int inv[DL_MAXDIM];
  for (int d = 0; d < n->niv; d++) inv[n->iv[d]] = d;
  gin[0] = permuted(ctx, g, inv);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_permute(dl_ctx *ctx, dl_tensor *a, const int *perm) {
  dl_tensor *out = permuted(ctx, a, perm);
  dl_node *n = dl_tape_record(ctx, DL_OP_PERMUTE, &out, 1, &a);
  if (!n) return out;
  n->niv = a->ndim;
  for (int d = 0; d < a->ndim; d++) n->iv[d] = perm[d];
  return out;
}

dl_tensor *dl_transpose(dl_ctx *ctx, dl_tensor *a, int d0, int d1) {
  int perm[DL_MAXDIM];
  if (d0 < 0 || d0 >= a->ndim || d1 < 0 || d1 >= a->ndim)
    return dl_fail(ctx, "transpose: dimensions %d and %d out of range for a %d-d tensor", d0 + 1,
                   d1 + 1, a->ndim);
  for (int d = 0; d < a->ndim; d++) perm[d] = d;
  perm[d0] = d1;
  perm[d1] = d0;
  return dl_permute(ctx, a, perm);
}

/* backward of narrow: zeros of the input shape with g copied into the slice */
int dl_bw_narrow(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0];
  dl_tensor *z = dl_tensor_new_zeros(ctx, g->dtype, a->ndim, a->shape);
  if (!z) return -1;
  int dim = (int)n->iv[0];
  int64_t sh[DL_MAXDIM];
  memcpy(sh, z->shape, sizeof sh);
  sh[dim] = n->iv[2];
  dl_tensor *v = dl_view_new(ctx, z, z->ndim, sh, z->stride, n->iv[1] * z->stride[dim]);
  if (!v) { dl_tensor_release(z); return -1; }
  int rc = dl_copy_into(ctx, v, g);
  dl_tensor_release(v);
  if (rc < 0) { dl_tensor_release(z); return -1; }
  gin[0] = z;
  return 0;
}

dl_tensor *dl_narrow(dl_ctx *ctx, dl_tensor *a, int dim, int64_t start, int64_t len) {
  if (dim < 0 || dim >= a->ndim)
    return dl_fail(ctx, "narrow: dimension %d out of range for a %d-d tensor", dim + 1, a->ndim);
  if (start < 0 || len < 0 || start > a->shape[dim] || len > a->shape[dim] - start)
    return dl_fail(ctx, "narrow: start %lld and length %lld out of range for dimension %d of size %lld",
                   (long long)start + 1, (long long)len, dim + 1, (long long)a->shape[dim]);
  int64_t sh[DL_MAXDIM];
  memcpy(sh, a->shape, sizeof sh);
  sh[dim] = len;
  dl_tensor *out = dl_view_new(ctx, a, a->ndim, sh, a->stride, a->offset + start * a->stride[dim]);
  dl_node *n = dl_tape_record(ctx, DL_OP_NARROW, &out, 1, &a);
  if (!n) return out;
  n->iv[0] = dim;
  n->iv[1] = start;
  n->iv[2] = len;
  return out;
}

dl_tensor *dl_select(dl_ctx *ctx, dl_tensor *a, int dim, int64_t index) {
  if (dim < 0 || dim >= a->ndim)
    return dl_fail(ctx, "select: dimension %d out of range for a %d-d tensor", dim + 1, a->ndim);
  if (index < 0 || index >= a->shape[dim])
    return dl_fail(ctx, "select: index %lld out of range for dimension %d of size %lld",
                   (long long)index + 1, dim + 1, (long long)a->shape[dim]);
  dl_tensor *nar = dl_narrow(ctx, a, dim, index, 1);
  if (!nar) return NULL;
  dl_tensor *out = dl_squeeze(ctx, nar, dim);
  dl_tensor_release(nar);
  return out;
}

int dl_bw_expand(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0];
  gin[0] = dl_sum_to(ctx, g, a->ndim, a->shape);
  return gin[0] ? 0 : -1;
}

dl_tensor *dl_expand(dl_ctx *ctx, dl_tensor *a, int ndim, const int64_t *shape) {
  return record1(ctx, dl_expand_raw(ctx, a, ndim, shape), a, DL_OP_EXPAND);
}

dl_tensor *dl_unsqueeze(dl_ctx *ctx, dl_tensor *a, int dim) {
  if (dim < 0 || dim > a->ndim || a->ndim >= DL_MAXDIM)
    return dl_fail(ctx, "unsqueeze: dimension %d out of range for a %d-d tensor", dim + 1, a->ndim);
  int64_t sh[DL_MAXDIM];
  int k = 0;
  for (int d = 0; d <= a->ndim; d++) {
    if (d == dim) sh[k++] = 1;
    if (d < a->ndim) sh[k++] = a->shape[d];
  }
  return dl_reshape(ctx, a, a->ndim + 1, sh);
}

dl_tensor *dl_squeeze(dl_ctx *ctx, dl_tensor *a, int dim) {
  if (dim >= a->ndim)
    return dl_fail(ctx, "squeeze: dimension %d out of range for a %d-d tensor", dim + 1, a->ndim);
  int64_t sh[DL_MAXDIM];
  int k = 0;
  for (int d = 0; d < a->ndim; d++) {
    if ((dim < 0 && a->shape[d] == 1) || (d == dim && a->shape[d] == 1)) continue;
    sh[k++] = a->shape[d];
  }
  return dl_reshape(ctx, a, k, sh);
}

int dl_bw_identity(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  (void)ctx;
  (void)n;
  gin[0] = dl_tensor_retain(g);
  return 0;
}

dl_tensor *dl_clone(dl_ctx *ctx, dl_tensor *a) {
  return record1(ctx, dl_tensor_new_contiguous(ctx, a, a->dtype), a, DL_OP_CLONE);
}

/* the recording twin of dl_contiguous_raw: a copy records a clone node (t:contiguous()) */
dl_tensor *dl_contiguous(dl_ctx *ctx, dl_tensor *a) {
  if (dl_is_contiguous(a)) return dl_tensor_retain(a);
  return dl_clone(ctx, a);
}
