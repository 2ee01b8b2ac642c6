/* ops_matmul.c -- matrix products on OpenBLAS: 2-D, batched with broadcasting, vectors.
 *
 * Operands are passed to dl_gemm (gemm.c) as they lie in memory
 * whenever one of their last two strides is 1 (a transposed view becomes
 * CblasTrans, with no copy); anything else is made contiguous first. The
 * backward is two more products on transposed views, so Linear layers
 * never copy their weights.
 */
/* See LICENSE */
#include "ops/kernels.h"

#include <string.h>

/* how a [rows, cols] matrix view with strides (s0, s1) can be handed to BLAS */
static int blas_layout(int64_t rows, int64_t cols, int64_t s0, int64_t s1, int *trans, int64_t *ld) {
  if (s1 == 1 && (s0 >= cols || rows == 1) && s0 >= 1) { *trans = 0; *ld = rows == 1 ? (cols > 0 ? cols : 1) : s0; return 1; }
  if (s0 == 1 && (s1 >= rows || cols == 1) && s1 >= 1) { *trans = 1; *ld = cols == 1 ? (rows > 0 ? rows : 1) : s1; return 1; }
  return 0;
}

/* t, of which the last two dims are a [rows, cols] matrix, in a layout BLAS takes (setting
 * *trans and *ld): t itself, or else a contiguous copy that replaces it (t released); NULL
 * when the copy fails */
static dl_tensor *blas_operand(dl_ctx *ctx, dl_tensor *t, int64_t rows, int64_t cols, int *trans, int64_t *ld) {
  int n = t->ndim;
  if (blas_layout(rows, cols, t->stride[n - 2], t->stride[n - 1], trans, ld)) return t;
  dl_tensor *c = dl_tensor_new_contiguous(ctx, t, t->dtype);
  dl_tensor_release(t);
  if (c) blas_layout(rows, cols, c->stride[n - 2], c->stride[n - 1], trans, ld);
  return c;
}

/* a with dims d0 and d1 swapped: a view, no node (for the backward) */
static dl_tensor *swapped(dl_ctx *ctx, dl_tensor *a, int d0, int d1) {
  int64_t sh[DL_MAXDIM], st[DL_MAXDIM];
  memcpy(sh, a->shape, sizeof sh);
  memcpy(st, a->stride, sizeof st);
  sh[d0] = a->shape[d1]; sh[d1] = a->shape[d0];
  st[d0] = a->stride[d1]; st[d1] = a->stride[d0];
  return dl_view_new(ctx, a, a->ndim, sh, st, a->offset);
}

/* the product of a [..., M, K] and b [..., K, N] -> out [..., M, N] with no autograd (both >= 2-D,
 * batch dims broadcast) */
static dl_tensor *matmul_raw(dl_ctx *ctx, dl_tensor *a, dl_tensor *b) {
  int na = a->ndim, nb = b->ndim;
  int64_t M = a->shape[na - 2], K = a->shape[na - 1], N = b->shape[nb - 1];
  dl_tensor *ta = dl_tensor_retain(a), *tb = dl_tensor_retain(b);
  dl_tensor *out = NULL;
  /* [..., M, K] x [K, N]: fold the batch into M when a's rows are one block */
  if (nb == 2 && na > 2) {
    int trans = 0;
    int64_t ld = 1;
    if (!dl_is_contiguous(ta)) {
      dl_tensor *c = dl_tensor_new_contiguous(ctx, ta, ta->dtype);
      dl_tensor_release(ta);
      ta = c;
      if (!ta) goto fail;
    }
    int64_t sh[DL_MAXDIM];
    memcpy(sh, a->shape, sizeof sh);
    sh[na - 1] = N;
    out = dl_tensor_new_empty(ctx, a->dtype, na, sh);
    if (!out) goto fail;
    if (!(tb = blas_operand(ctx, tb, K, N, &trans, &ld))) goto fail;
    int64_t rows = dl_shape_numel(na - 1, a->shape);
    dl_gemm(ctx, a->dtype, 0, trans, rows, N, K, 1.0, dl_data(ta), K ? K : 1, dl_data(tb), ld, 0.0, out->st->data,
            N ? N : 1);
    dl_tensor_release(ta);
    dl_tensor_release(tb);
    return out;
  }
  /* broadcast batch dims */
  int nd = na > nb ? na : nb;
  int64_t bsh[DL_MAXDIM], sh[DL_MAXDIM];
  int64_t nbatch = 1;
  for (int d = 0; d < nd - 2; d++) {
    int ia = d - (nd - na), ib = d - (nd - nb);
    int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char x[128], y[128];
      dl_shape_str(a->shape, na, x, sizeof x);
      dl_shape_str(b->shape, nb, y, sizeof y);
      dl_fail(ctx, "matmul: batch dimensions of %s and %s cannot be broadcast", x, y);
      goto fail;
    }
    bsh[d] = sa == 1 ? sb : sa;
    sh[d] = bsh[d];
    nbatch *= bsh[d];
  }
  sh[nd - 2] = M;
  sh[nd - 1] = N;
  out = dl_tensor_new_empty(ctx, a->dtype, nd, sh);
  if (!out) goto fail;
  int tA = 0, tB = 0;
  int64_t ldA = 1, ldB = 1;
  if (!(ta = blas_operand(ctx, ta, M, K, &tA, &ldA))) goto fail;
  if (!(tb = blas_operand(ctx, tb, K, N, &tB, &ldB))) goto fail;
  size_t es = dl_dtype_size(a->dtype);
  for (int64_t bi = 0; bi < nbatch; bi++) {
    int64_t rem = bi, oa = 0, ob = 0;
    for (int d = nd - 3; d >= 0; d--) {
      int64_t i = rem % bsh[d];
      rem /= bsh[d];
      int ia = d - (nd - na), ib = d - (nd - nb);
      if (ia >= 0 && ta->shape[ia] != 1) oa += i * ta->stride[ia];
      if (ib >= 0 && tb->shape[ib] != 1) ob += i * tb->stride[ib];
    }
    dl_gemm(ctx, a->dtype, tA, tB, M, N, K, 1.0, (const char *)dl_data(ta) + (size_t)oa * es, ldA,
            (const char *)dl_data(tb) + (size_t)ob * es, ldB, 0.0, (char *)out->st->data + (size_t)(bi * M * N) * es,
            N ? N : 1);
  }
  dl_tensor_release(ta);
  dl_tensor_release(tb);
  return out;
fail:
  dl_tensor_release(ta);
  dl_tensor_release(tb);
  dl_tensor_release(out);
  return NULL;
}

/* a [..., M, K], b [..., K, N] -> [broadcast ..., M, N]; a [K] or b [K] as a row or column, dropped
 * from the result */
dl_tensor *dl_matmul(dl_ctx *ctx, dl_tensor *a, dl_tensor *b) {
  char x[128], y[128];
  if (!dl_dtype_is_float(a->dtype) || a->dtype != b->dtype)
    return dl_fail(ctx, "matmul: expected two float tensors of one dtype, got %s and %s",
                   dl_dtype_name(a->dtype), dl_dtype_name(b->dtype));
  if (a->ndim == 0 || b->ndim == 0)
    return dl_fail(ctx, "matmul: both arguments need at least 1 dimension, got %d and %d", a->ndim, b->ndim);
  int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim > 1 ? b->ndim - 2 : 0];
  if (ka != kb) {
    dl_shape_str(a->shape, a->ndim, x, sizeof x);
    dl_shape_str(b->shape, b->ndim, y, sizeof y);
    return dl_fail(ctx, "matmul: shapes %s and %s do not match (%lld != %lld)", x, y, (long long)ka,
                   (long long)kb);
  }
  if (a->ndim == 1 || b->ndim == 1) {
    /* vectors: promote to matrices, multiply, drop the added dims (differentiably) */
    dl_tensor *a2 = a->ndim == 1 ? dl_unsqueeze(ctx, a, 0) : dl_tensor_retain(a);
    dl_tensor *b2 = b->ndim == 1 ? dl_unsqueeze(ctx, b, 1) : dl_tensor_retain(b);
    dl_tensor *p = (a2 && b2) ? dl_matmul(ctx, a2, b2) : NULL;
    dl_tensor *r = p;
    if (p && b->ndim == 1) {
      r = dl_squeeze(ctx, p, p->ndim - 1);
      dl_tensor_release(p);
      p = r;
    }
    if (p && a->ndim == 1) {
      r = dl_squeeze(ctx, p, b->ndim == 1 ? p->ndim - 1 : p->ndim - 2);
      dl_tensor_release(p);
    }
    dl_tensor_release(a2);
    dl_tensor_release(b2);
    return r;
  }
  dl_tensor *out = matmul_raw(ctx, a, b);
  if (!out) return NULL;
  dl_tensor *in[2] = {a, b};
  dl_tape_record(ctx, DL_OP_MATMUL, &out, 2, in);
  return out;
}

/* g [..., M, N] -> ga = g b^T [a's shape], gb = a^T g [b's shape] (broadcast dims summed) */
int dl_bw_matmul(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *b = n->in[1];
  int na = a->ndim, nb = b->ndim;
  if (a->requires_grad) {               /* ga = g b^T */
    dl_tensor *bt = swapped(ctx, b, nb - 2, nb - 1);
    dl_tensor *p = bt ? matmul_raw(ctx, g, bt) : NULL;
    dl_tensor_release(bt);
    if (!p) return -1;
    gin[0] = dl_sum_to(ctx, p, na, a->shape);
    dl_tensor_release(p);
    if (!gin[0]) return -1;
  }
  if (b->requires_grad) {               /* gb = a^T g */
    dl_tensor *p;
    if (nb == 2 && na > 2) {            /* fold the batch: [K, B*M] x [B*M, N] */
      int64_t K = a->shape[na - 1], N = g->shape[g->ndim - 1];
      int64_t s2a[2] = {-1, K}, s2g[2] = {-1, N};
      dl_tensor *a2 = dl_view_new_reshape(ctx, a, 2, s2a);
      dl_tensor *g2 = a2 ? dl_view_new_reshape(ctx, g, 2, s2g) : NULL;
      dl_tensor *at = g2 ? swapped(ctx, a2, 0, 1) : NULL;
      p = at ? matmul_raw(ctx, at, g2) : NULL;
      dl_tensor_release(a2); dl_tensor_release(g2); dl_tensor_release(at);
    } else {
      dl_tensor *at = swapped(ctx, a, na - 2, na - 1);
      p = at ? matmul_raw(ctx, at, g) : NULL;
      dl_tensor_release(at);
    }
    if (!p) return -1;
    gin[1] = dl_sum_to(ctx, p, nb, b->shape);
    dl_tensor_release(p);
    if (!gin[1]) return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ linear
 * y[R, out] = x[R, in] w[out, in]^T + b[out] (R = all leading dims of x):
 * each task of the product writes the bias into its block of y and adds onto it, and
 * the backward writes gw directly as [out, in] = g^T x, so a Linear layer
 * makes no transposed copies and no separate bias pass. */

static int64_t rows_of(const dl_tensor *x) {
  return dl_shape_numel(x->ndim - 1, x->shape);
}

/* x [..., in], w [out, in], b [out] or NULL -> y [..., out] */
dl_tensor *dl_linear(dl_ctx *ctx, dl_tensor *x, dl_tensor *w, dl_tensor *b) {
  char xs[128], ws[128];
  if (!dl_dtype_is_float(x->dtype) || x->dtype != w->dtype || (b && b->dtype != x->dtype))
    return dl_fail(ctx, "linear: expected float tensors of one dtype, got input %s and weight %s",
                   dl_dtype_name(x->dtype), dl_dtype_name(w->dtype));
  if (w->ndim != 2 || x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1] ||
      (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
    dl_shape_str(x->shape, x->ndim, xs, sizeof xs);
    dl_shape_str(w->shape, w->ndim, ws, sizeof ws);
    return dl_fail(ctx, "linear: input %s does not match weight %s%s", xs, ws,
                   b && (b->ndim != 1 || w->ndim != 2 || b->shape[0] != w->shape[0]) ? " and its bias" : "");
  }
  int64_t R = rows_of(x), I = w->shape[1], O = w->shape[0];
  int64_t sh[DL_MAXDIM];
  memcpy(sh, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  sh[x->ndim - 1] = O;
  dl_tensor *xc = dl_contiguous_raw(ctx, x);
  dl_tensor *wc = xc ? dl_contiguous_raw(ctx, w) : NULL;
  dl_tensor *out = wc ? dl_tensor_new_empty(ctx, x->dtype, x->ndim, sh) : NULL;
  if (!out) { dl_tensor_release(xc); dl_tensor_release(wc); return NULL; }
  dl_tensor *bc = b ? dl_contiguous_raw(ctx, b) : NULL;
  if (b && !bc) { dl_tensor_release(xc); dl_tensor_release(wc); dl_tensor_release(out); return NULL; }
  if (bc)
    dl_gemm_bias(ctx, x->dtype, 0, 1, R, O, I, dl_data(xc), I ? I : 1, dl_data(wc), I ? I : 1, dl_data(bc),
                 out->st->data, O ? O : 1);
  else
    dl_gemm(ctx, x->dtype, 0, 1, R, O, I, 1.0, dl_data(xc), I ? I : 1, dl_data(wc), I ? I : 1, 0.0, out->st->data,
            O ? O : 1);
  dl_tensor_release(bc);
  dl_tensor_release(xc);
  dl_tensor_release(wc);
  dl_tensor *in[3] = {x, w, b};
  dl_tape_record(ctx, DL_OP_LINEAR, &out, b ? 3 : 2, in);
  return out;
}

/* g [..., out] -> gx [..., in], gw [out, in], gb [out] */
int dl_bw_linear(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *x = n->in[0], *w = n->in[1], *b = n->nin > 2 ? n->in[2] : NULL;
  int64_t R = rows_of(x), I = w->shape[1], O = w->shape[0];
  dl_tensor *gc = dl_contiguous_raw(ctx, g);
  if (!gc) return -1;
  int rc = 0;
  if (x->requires_grad) {                       /* gx[R, in] = g[R, out] w[out, in] */
    dl_tensor *wc = dl_contiguous_raw(ctx, w);
    gin[0] = wc ? dl_tensor_new_empty(ctx, x->dtype, x->ndim, x->shape) : NULL;
    if (gin[0])
      dl_gemm(ctx, x->dtype, 0, 0, R, I, O, 1.0, dl_data(gc), O ? O : 1, dl_data(wc), I ? I : 1, 0.0,
              gin[0]->st->data, I ? I : 1);
    dl_tensor_release(wc);
    if (!gin[0]) rc = -1;
  }
  if (!rc && w->requires_grad) {                /* gw[out, in] = g^T x */
    dl_tensor *xc = dl_contiguous_raw(ctx, x);
    gin[1] = xc ? dl_tensor_new_empty(ctx, w->dtype, 2, w->shape) : NULL;
    if (gin[1])
      dl_gemm(ctx, w->dtype, 1, 0, O, I, R, 1.0, dl_data(gc), O ? O : 1, dl_data(xc), I ? I : 1, 0.0,
              gin[1]->st->data, I ? I : 1);
    dl_tensor_release(xc);
    if (!gin[1]) rc = -1;
  }
  if (!rc && b && b->requires_grad) {           /* gb[out] = sum of g's rows */
    gin[2] = dl_sum_to(ctx, gc, 1, b->shape);
    if (!gin[2]) rc = -1;
  }
  dl_tensor_release(gc);
  return rc;
}
