/* ops_reduce.c -- reductions (sum, mean, max, min, var, logsumexp), softmax, argmax.
 *
 * The reduced dims are permuted to the end and the input made contiguous,
 * so every reduction is a loop over rows of length R with a double
 * accumulator. Rows split over the pool; each row is summed by one task in
 * a fixed order, so results do not depend on the thread count.
 */
/* See LICENSE */
#include "ops/ops.h"

#include <math.h>
#include <string.h>

static const char *const red_names[] = {"sum", "mean", "max", "min", "var", "logsumexp"};

/* a with the masked dims moved last, contiguous (new ref); rows x R */
static dl_tensor *rows_of(dl_ctx *ctx, dl_tensor *a, unsigned mask, int64_t *rows, int64_t *R) {
  int perm[DL_MAXDIM], k = 0;
  int64_t kept[DL_MAXDIM], red[DL_MAXDIM];
  int nk = 0, nr = 0;
  for (int d = 0; d < a->ndim; d++)
    if (!(mask >> d & 1)) { perm[k++] = d; kept[nk++] = a->shape[d]; }
  for (int d = 0; d < a->ndim; d++)
    if (mask >> d & 1) { perm[k++] = d; red[nr++] = a->shape[d]; }
  *rows = dl_shape_numel(nk, kept);
  *R = dl_shape_numel(nr, red);
  int ident = 1;
  for (int d = 0; d < a->ndim; d++) ident &= perm[d] == d;
  if (ident && dl_is_contiguous(a)) return dl_tensor_retain(a);
  int64_t sh[DL_MAXDIM], st[DL_MAXDIM];
  for (int d = 0; d < a->ndim; d++) { sh[d] = a->shape[perm[d]]; st[d] = a->stride[perm[d]]; }
  dl_tensor *v = dl_view_new(ctx, a, a->ndim, sh, st, a->offset);
  if (!v) return NULL;
  dl_tensor *c = dl_tensor_new_contiguous(ctx, v, a->dtype);
  dl_tensor_release(v);
  return c;
}

typedef struct {
  int op, correction;
  const void *src;
  dl_dtype dt;
  int64_t rows, R;
  double *out;
  int64_t *idx;
  int ntask;
} red_job;

static void reduce_row(const red_job *j, int64_t r) {
  const int64_t R = j->R;
  double acc = 0;
  int64_t best = 0;
  if (j->dt == DL_F32) {
    const float *x = (const float *)j->src + r * R;
    switch (j->op) {
      case DL_RSUM: case DL_RMEAN: {
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t i = 0;
        for (; i + 4 <= R; i += 4) {
          s0 += (double)x[i]; s1 += (double)x[i + 1]; s2 += (double)x[i + 2]; s3 += (double)x[i + 3];
        }
        for (; i < R; i++) s0 += (double)x[i];
        acc = (s0 + s1) + (s2 + s3);
        if (j->op == DL_RMEAN) acc /= (double)R;
        break;
      }
      default: goto generic;
    }
    j->out[r] = acc;
    return;
  }
generic:
  switch (j->op) {
    case DL_RSUM: case DL_RMEAN:
      for (int64_t i = 0; i < R; i++) acc += dl_load(j->src, j->dt, r * R + i);
      if (j->op == DL_RMEAN) acc /= (double)R;
      break;
    case DL_RMAX: case DL_RMIN: {
      acc = dl_load(j->src, j->dt, r * R);
      for (int64_t i = 1; i < R; i++) {
        double v = dl_load(j->src, j->dt, r * R + i);
        if (acc != acc) break;                     /* NaN propagates */
        if (v != v || (j->op == DL_RMAX ? v > acc : v < acc)) { acc = v; best = i; }
      }
      break;
    }
    case DL_RVAR: {
      double m = 0;
      for (int64_t i = 0; i < R; i++) m += dl_load(j->src, j->dt, r * R + i);
      m /= (double)R;
      for (int64_t i = 0; i < R; i++) {
        double d = dl_load(j->src, j->dt, r * R + i) - m;
        acc += d * d;
      }
      acc = R - j->correction > 0 ? acc / (double)(R - j->correction) : (double)NAN;
      break;
    }
    case DL_RLOGSUMEXP: {
      double mx = -(double)INFINITY;
      for (int64_t i = 0; i < R; i++) {
        double v = dl_load(j->src, j->dt, r * R + i);
        if (v > mx) mx = v;
      }
      if (isinf(mx)) { acc = mx; break; }
      for (int64_t i = 0; i < R; i++) acc += exp(dl_load(j->src, j->dt, r * R + i) - mx);
      acc = mx + log(acc);
      break;
    }
  }
  j->out[r] = acc;
  if (j->idx) j->idx[r] = best;
}

static void red_task(void *arg, int t) {
  const red_job *j = arg;
  int64_t r0 = j->rows * t / j->ntask, r1 = j->rows * (t + 1) / j->ntask;
  for (int64_t r = r0; r < r1; r++) reduce_row(j, r);
}

/* reduces rows into a double buffer owned by a new f64 tensor [rows] */
static int run_reduce(dl_ctx *ctx, red_job *j) {
  int th = dl_pool_threads(ctx->pool);
  if (th > 1 && j->rows >= th && j->rows * j->R >= 32768) {
    j->ntask = th;
    dl_pool_run(ctx->pool, th, red_task, j);
  } else {
    for (int64_t r = 0; r < j->rows; r++) reduce_row(j, r);
  }
  return 0;
}

/* column sums of a contiguous [nrow, cols] float32 block, each column in row order (so the
 * split into column blocks, one per task, does not change a bit) */
typedef struct {
  const float *x;
  double *s;
  float *out;
  int64_t nrow, cols;
  double scale;
  int64_t chunk;        /* columns per task */
} col_job;

DL_SIMD_CLONES static void add_row(double *restrict s, const float *restrict x, int64_t n) {
  for (int64_t c = 0; c < n; c++) s[c] += (double)x[c];
}

static void col_task(void *arg, int t) {
  const col_job *j = arg;
  int64_t c0 = (int64_t)t * j->chunk, c1 = c0 + j->chunk < j->cols ? c0 + j->chunk : j->cols;
  for (int64_t i = 0; i < j->nrow; i++) add_row(j->s + c0, j->x + i * j->cols + c0, c1 - c0);
  for (int64_t c = c0; c < c1; c++) j->out[c] = (float)(j->s[c] * j->scale);
}

static void out_shape(const dl_tensor *a, unsigned mask, int keepdim, int *nd, int64_t *sh) {
  int k = 0;
  for (int d = 0; d < a->ndim; d++) {
    if (mask >> d & 1) { if (keepdim) sh[k++] = 1; }
    else sh[k++] = a->shape[d];
  }
  *nd = k;
}

/* g of the reduced shape, reshaped with kept dims and expanded to a's shape */
static dl_tensor *expand_back(dl_ctx *ctx, dl_tensor *g, const dl_tensor *a, unsigned mask) {
  int nd;
  int64_t sh[DL_MAXDIM];
  out_shape(a, mask, 1, &nd, sh);
  dl_tensor *r = dl_view_new_reshape(ctx, g, nd, sh);
  if (!r) return NULL;
  dl_tensor *e = dl_expand(ctx, r, a->ndim, a->shape);
  dl_tensor_release(r);
  return e;
}

int dl_bw_reduce(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0];
  unsigned mask = (unsigned)n->iv[1];
  int op = (int)n->iv[0];
  dl_tensor *ge = expand_back(ctx, g, a, mask);
  if (!ge) return -1;
  dl_tensor *r = NULL;
  double R = n->sc[0];
  switch (op) {
    case DL_RSUM: r = dl_contiguous(ctx, ge); break;
    case DL_RMEAN: r = dl_scale_shift(ctx, ge, 1.0 / R, 0); break;
    case DL_RMAX: case DL_RMIN: {
      /* split evenly among ties */
      dl_tensor *oe = expand_back(ctx, n->saved[0], a, mask);
      dl_tensor *m = oe ? dl_binary(ctx, DL_EQ, a, oe) : NULL;
      dl_tensor *mf = m ? dl_cast(ctx, m, g->dtype) : NULL;
      dl_tensor *cnt = mf ? dl_reduce(ctx, DL_RSUM, mf, mask, 1, 0, NULL) : NULL;
      dl_tensor *w = cnt ? dl_binary(ctx, DL_DIV, mf, cnt) : NULL;
      r = w ? dl_binary(ctx, DL_MUL, ge, w) : NULL;
      dl_tensor_release(oe); dl_tensor_release(m); dl_tensor_release(mf);
      dl_tensor_release(cnt); dl_tensor_release(w);
      break;
    }
    case DL_RVAR: {
      dl_tensor *mean = dl_reduce(ctx, DL_RMEAN, a, mask, 1, 0, NULL);
      dl_tensor *dv = mean ? dl_binary(ctx, DL_SUB, a, mean) : NULL;
      dl_tensor *s = dv ? dl_scale_shift(ctx, dv, 2.0 / (R - n->sc[1]), 0) : NULL;
      r = s ? dl_binary(ctx, DL_MUL, ge, s) : NULL;
      dl_tensor_release(mean); dl_tensor_release(dv); dl_tensor_release(s);
      break;
    }
    case DL_RLOGSUMEXP: {
      dl_tensor *oe = expand_back(ctx, n->saved[0], a, mask);
      dl_tensor *dlt = oe ? dl_binary(ctx, DL_SUB, a, oe) : NULL;
      dl_tensor *e = dlt ? dl_unary(ctx, DL_EXP, dlt) : NULL;
      r = e ? dl_binary(ctx, DL_MUL, ge, e) : NULL;
      dl_tensor_release(oe); dl_tensor_release(dlt); dl_tensor_release(e);
      break;
    }
  }
  dl_tensor_release(ge);
  if (!r) return -1;
  gin[0] = r;
  return 0;
}

static dl_tensor *record_reduce(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int64_t R,
                                int correction, dl_tensor *out, dl_tensor **idx);

dl_tensor *dl_reduce(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int keepdim,
                     int correction, dl_tensor **idx) {
  if (mask == 0) mask = a->ndim ? (1u << a->ndim) - 1 : 0;
  int64_t rows, R;
  int nd;
  int64_t sh[DL_MAXDIM];
  out_shape(a, mask, keepdim, &nd, sh);
  if ((op == DL_RMAX || op == DL_RMIN) && dl_numel(a) == 0)
    return dl_fail(ctx, "%s: cannot reduce an empty tensor", red_names[op]);
  /* sum/mean over leading dims of a contiguous float32 tensor (bias gradients):
   * accumulate columns directly instead of transposing first */
  unsigned lead = 0;
  int nlead = 0;
  while (nlead < a->ndim && (mask >> nlead & 1)) lead |= 1u << nlead++;
  if ((op == DL_RSUM || op == DL_RMEAN) && a->dtype == DL_F32 && mask == lead && nlead < a->ndim &&
      dl_is_contiguous(a) && dl_numel(a) > 0) {
    int64_t cols = dl_shape_numel(a->ndim - nlead, a->shape + nlead), nrow = dl_shape_numel(nlead, a->shape);
    dl_tensor *acc = dl_tensor_new_zeros(ctx, DL_F64, 1, &cols);
    dl_tensor *out = acc ? dl_tensor_new_empty(ctx, DL_F32, nd, sh) : NULL;
    if (!out) { dl_tensor_release(acc); return NULL; }
    col_job cj = {dl_data(a), acc->st->data, out->st->data, nrow, cols, op == DL_RMEAN ? 1.0 / (double)nrow : 1.0,
                  cols};
    int th = dl_pool_threads(ctx->pool);
    if (th > 1 && cols >= 32 * th && nrow * cols >= 32768) {
      cj.chunk = ((cols + th - 1) / th + 15) / 16 * 16;
      dl_pool_run(ctx->pool, (int)((cols + cj.chunk - 1) / cj.chunk), col_task, &cj);
    } else {
      col_task(&cj, 0);
    }
    dl_tensor_release(acc);
    if (!dl_needs_grad(ctx, 1, &a)) return out;
    return record_reduce(ctx, op, a, mask, nrow, correction, out, NULL);
  }
  dl_tensor *src = rows_of(ctx, a, mask, &rows, &R);
  if (!src) return NULL;
  if ((op == DL_RMAX || op == DL_RMIN) && R == 0) {
    dl_tensor_release(src);
    return dl_fail(ctx, "%s: cannot reduce over a dimension of size 0", red_names[op]);
  }
  dl_dtype od = dl_dtype_is_float(a->dtype) ? a->dtype
              : (op == DL_RSUM || op == DL_RMAX || op == DL_RMIN) ? (a->dtype == DL_U8 ? DL_I64 : a->dtype)
              : DL_F32;
  if ((op == DL_RMAX || op == DL_RMIN) && !dl_dtype_is_float(a->dtype)) od = a->dtype;
  dl_tensor *acc = dl_tensor_new_empty(ctx, DL_F64, 1, &rows);
  dl_tensor *ix = NULL;
  if (acc && idx) ix = dl_tensor_new_empty(ctx, DL_I64, 1, &rows);
  if (!acc || (idx && !ix)) {
    dl_tensor_release(src); dl_tensor_release(acc);
    return NULL;
  }
  red_job j = {op, correction, dl_data(src), src->dtype, rows, R, acc->st->data,
               ix ? ix->st->data : NULL, 1};
  run_reduce(ctx, &j);
  dl_tensor_release(src);
  dl_tensor *out = dl_tensor_new_empty(ctx, od, nd, sh);
  if (!out) { dl_tensor_release(acc); dl_tensor_release(ix); return NULL; }
  for (int64_t r = 0; r < rows; r++) dl_store(out->st->data, od, r, ((double *)acc->st->data)[r]);
  dl_tensor_release(acc);
  if (idx) {
    dl_tensor *ir = dl_view_new_reshape(ctx, ix, nd, sh);
    dl_tensor_release(ix);
    if (!ir) { dl_tensor_release(out); return NULL; }
    *idx = ir;
  }
  if (!dl_dtype_is_float(a->dtype) || !dl_needs_grad(ctx, 1, &a)) return out;
  return record_reduce(ctx, op, a, mask, R, correction, out, idx);
}

static dl_tensor *record_reduce(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int64_t R,
                                int correction, dl_tensor *out, dl_tensor **idx) {
  static const dl_op ops[] = {DL_OP_SUM, DL_OP_MEAN, DL_OP_MAX, DL_OP_MIN, DL_OP_VAR, DL_OP_LOGSUMEXP};
  dl_node *n = dl_tape_record(ctx, ops[op], &out, 1, &a);
  if (n) {
    n->iv[0] = op;
    n->iv[1] = mask;
    n->sc[0] = (double)R;
    n->sc[1] = correction;
    if ((op == DL_RMAX || op == DL_RMIN || op == DL_RLOGSUMEXP) && !(n->saved[0] = dl_detach(ctx, out))) {
      dl_tensor_release(out);
      out = NULL;
    }
  }
  if (!out && idx) {
    dl_tensor_release(*idx);
    *idx = NULL;
  }
  return out;
}

/* ------------------------------------------------------- sum to a shape */

/* the backward of broadcasting: g summed over the dims that shape broadcast (leading ones and
 * size-1 ones), reshaped to shape */
dl_tensor *dl_sum_to(dl_ctx *ctx, dl_tensor *g, int ndim, const int64_t *shape) {
  int same = g->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = g->shape[d] == shape[d];
  if (same) return dl_tensor_retain(g);
  unsigned mask = 0;
  int lead = g->ndim - ndim;
  for (int d = 0; d < g->ndim; d++) {
    if (d < lead) mask |= 1u << d;
    else if (shape[d - lead] == 1 && g->shape[d] != 1) mask |= 1u << d;
  }
  dl_tensor *s;
  if (mask == 0) s = dl_tensor_retain(g);
  else s = dl_reduce(ctx, DL_RSUM, g, mask, 1, 0, NULL);
  if (!s) return NULL;
  dl_tensor *r = dl_reshape(ctx, s, ndim, shape);
  dl_tensor_release(s);
  return r;
}

dl_tensor *dl_argmax(dl_ctx *ctx, dl_tensor *a, int dim, int keepdim, int min) {
  dl_tensor *idx = NULL;
  int saved = ctx->grad_enabled;
  ctx->grad_enabled = 0;
  unsigned mask = dim < 0 ? 0 : 1u << dim;
  dl_tensor *flat = NULL;
  if (dim < 0) {                 /* over all elements: index into the flattened tensor */
    int64_t n = dl_numel(a);
    flat = dl_view_new_reshape(ctx, a, 1, &n);
    if (!flat) { ctx->grad_enabled = saved; return NULL; }
    a = flat;
    mask = 1;
  }
  dl_tensor *v = dl_reduce(ctx, min ? DL_RMIN : DL_RMAX, a, mask, keepdim, 0, &idx);
  ctx->grad_enabled = saved;
  dl_tensor_release(flat);
  dl_tensor_release(v);
  return v ? idx : NULL;
}

/* ------------------------------------------------------------ softmax */

static void softmax_rows(float *x, int64_t rows, int64_t R, int log_) {
  for (int64_t r = 0; r < rows; r++) {
    float *p = x + r * R;
    float mx = -INFINITY;
    for (int64_t i = 0; i < R; i++) if (p[i] > mx) mx = p[i];
    double s = 0;
    for (int64_t i = 0; i < R; i++) s += exp((double)(p[i] - mx));
    if (log_) {
      float ls = (float)log(s) + mx;
      for (int64_t i = 0; i < R; i++) p[i] -= ls;
    } else {
      float inv = (float)(1.0 / s);
      for (int64_t i = 0; i < R; i++) p[i] = expf(p[i] - mx) * inv;
    }
  }
}

static void softmax_rows_d(double *x, int64_t rows, int64_t R, int log_) {
  for (int64_t r = 0; r < rows; r++) {
    double *p = x + r * R, mx = -(double)INFINITY, s = 0;
    for (int64_t i = 0; i < R; i++) if (p[i] > mx) mx = p[i];
    for (int64_t i = 0; i < R; i++) s += exp(p[i] - mx);
    double ls = log(s) + mx;
    for (int64_t i = 0; i < R; i++) p[i] = log_ ? p[i] - ls : exp(p[i] - ls);
  }
}

int dl_bw_softmax(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *y = n->saved[0];
  unsigned mask = 1u << n->iv[0];
  dl_tensor *r = NULL;
  if (n->iv[1]) {               /* log_softmax: g - exp(y) * sum(g) */
    dl_tensor *s = dl_reduce(ctx, DL_RSUM, g, mask, 1, 0, NULL);
    dl_tensor *e = s ? dl_unary(ctx, DL_EXP, y) : NULL;
    dl_tensor *es = e ? dl_binary(ctx, DL_MUL, e, s) : NULL;
    r = es ? dl_binary(ctx, DL_SUB, g, es) : NULL;
    dl_tensor_release(s); dl_tensor_release(e); dl_tensor_release(es);
  } else {                      /* y * (g - sum(g * y)) */
    dl_tensor *gy = dl_binary(ctx, DL_MUL, g, y);
    dl_tensor *s = gy ? dl_reduce(ctx, DL_RSUM, gy, mask, 1, 0, NULL) : NULL;
    dl_tensor *d = s ? dl_binary(ctx, DL_SUB, g, s) : NULL;
    r = d ? dl_binary(ctx, DL_MUL, y, d) : NULL;
    dl_tensor_release(gy); dl_tensor_release(s); dl_tensor_release(d);
  }
  if (!r) return -1;
  gin[0] = r;
  return 0;
}

dl_tensor *dl_softmax(dl_ctx *ctx, dl_tensor *a, int dim, int log_) {
  const char *name = log_ ? "log_softmax" : "softmax";
  if (dim < 0 || dim >= a->ndim)
    return dl_fail(ctx, "%s: dimension %d out of range for a %d-d tensor", name, dim + 1, a->ndim);
  if (!dl_dtype_is_float(a->dtype))
    return dl_fail(ctx, "%s: expected a float tensor, got %s", name, dl_dtype_name(a->dtype));
  int64_t rows, R;
  dl_tensor *src = rows_of(ctx, a, 1u << dim, &rows, &R);
  if (!src) return NULL;
  dl_tensor *w = src == a ? dl_tensor_new_contiguous(ctx, a, a->dtype) : src;
  if (!w) { dl_tensor_release(src); return NULL; }
  if (w != src) dl_tensor_release(src);
  if (w->dtype == DL_F32) softmax_rows(w->st->data, rows, R, log_);
  else softmax_rows_d(w->st->data, rows, R, log_);
  /* w holds the permuted layout [others..., dim]; move dim back */
  dl_tensor *out = w;
  if (dim != a->ndim - 1) {
    int perm[DL_MAXDIM], k = 0;
    for (int d = 0; d < a->ndim; d++) {
      if (d == dim) perm[d] = a->ndim - 1;
      else perm[d] = k++;
    }
    int64_t sh[DL_MAXDIM], st[DL_MAXDIM];
    for (int d = 0; d < a->ndim; d++) { sh[d] = w->shape[perm[d]]; st[d] = w->stride[perm[d]]; }
    dl_tensor *v = dl_view_new(ctx, w, a->ndim, sh, st, 0);
    dl_tensor_release(w);
    if (!v) return NULL;
    out = dl_tensor_new_contiguous(ctx, v, v->dtype);
    dl_tensor_release(v);
    if (!out) return NULL;
  }
  dl_node *n = dl_tape_record(ctx, log_ ? DL_OP_LOG_SOFTMAX : DL_OP_SOFTMAX, &out, 1, &a);
  if (!n) return out;
  n->iv[0] = dim;
  n->iv[1] = log_;
  if (!(n->saved[0] = dl_detach(ctx, out))) {
    dl_tensor_release(out);
    return NULL;
  }
  return out;
}
