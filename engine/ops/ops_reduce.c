/* ops_reduce.c -- reductions (sum, mean, max, min, var, logsumexp), softmax, argmax,
 * and their backwards.
 *
 * dl_reduce records its node over dl_reduce_raw (reduce_kernels.c); softmax
 * normalises the rows that dl_rows_of lays out, in float32 or float64 with a
 * double sum. The backwards expand the output gradient back over the reduced
 * dims (a view) and combine it with elementwise kernels: nothing they call
 * records.
 */
/* See LICENSE */
#include "ops/kernels.h"

#include <math.h>

/* a op b with dl_binary's result dtype, no node */
static dl_tensor *bin(dl_ctx *ctx, int op, dl_tensor *a, dl_tensor *b) {
  return dl_binary_raw(ctx, op, a, b, dl_binary_dtype(op, a->dtype, b->dtype));
}

/* g [reduced shape] -> [a's shape]: reshaped with the reduced dims kept (size 1), expanded (a view) */
static dl_tensor *expand_back(dl_ctx *ctx, dl_tensor *g, const dl_tensor *a, unsigned mask) {
  int64_t sh[DL_MAXDIM];
  for (int d = 0; d < a->ndim; d++) sh[d] = mask >> d & 1 ? 1 : a->shape[d];
  dl_tensor *r = dl_view_new_reshape(ctx, g, a->ndim, sh);
  if (!r) return NULL;
  dl_tensor *e = dl_expand_raw(ctx, r, a->ndim, a->shape);
  dl_tensor_release(r);
  return e;
}

/* ge [a's shape] kept only at the positions idx [a's shape without dim, or size 1 there; 0-based
 * along dim] names: ge * (iota along dim == idx) */
static dl_tensor *to_index(dl_ctx *ctx, dl_tensor *ge, const dl_tensor *a, int dim, dl_tensor *idx) {
  int64_t sh[DL_MAXDIM], shk[DL_MAXDIM];
  for (int d = 0; d < a->ndim; d++) {
    sh[d] = d == dim ? a->shape[d] : 1;
    shk[d] = d == dim ? 1 : a->shape[d];
  }
  dl_tensor *iota = dl_tensor_new_empty(ctx, DL_I64, a->ndim, sh);
  if (!iota) return NULL;
  int64_t *p = iota->st->data;
  for (int64_t i = 0; i < a->shape[dim]; i++) p[i] = i;
  dl_tensor *ik = dl_view_new_reshape(ctx, idx, a->ndim, shk);
  dl_tensor *m = ik ? dl_binary_raw(ctx, DL_EQ, iota, ik, ge->dtype) : NULL;
  dl_tensor *r = m ? bin(ctx, DL_MUL, ge, m) : NULL;
  dl_tensor_release(iota); dl_tensor_release(ik); dl_tensor_release(m);
  return r;
}

/* logsumexp's backward where a row's max is +inf: e = exp(a - max) is already torch's
 * exp(a - out) there (0 off the infinite entries, NaN on them), so its sum (NaN) is set
 * to 1 and the division leaves e as it is. mx and se: fresh, of one shape. */
static void lse_inf_rows(dl_tensor *mx, dl_tensor *se) {
  int64_t n = dl_numel(se);
  for (int64_t i = 0; i < n; i++) {
    if (se->dtype == DL_F32) {
      float *m = dl_data(mx), *s = dl_data(se);
      if (isinf(m[i]) && m[i] > 0) s[i] = 1;
    } else {
      double *m = dl_data(mx), *s = dl_data(se);
      if (isinf(m[i]) && m[i] > 0) s[i] = 1;
    }
  }
}

/* g [reduced shape] -> ga [a's shape] */
int dl_bw_reduce(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0];
  unsigned mask = (unsigned)n->iv[1];
  int op = (int)n->iv[0];
  dl_tensor *ge = expand_back(ctx, g, a, mask);
  if (!ge) return -1;
  dl_tensor *r = NULL;
  double R = n->sc[0];
  switch (op) {
    case DL_RSUM: r = dl_contiguous_raw(ctx, ge); break;
    case DL_RMEAN: r = dl_scale_shift_raw(ctx, ge, 1.0 / R, 0); break;
    case DL_RMAX: case DL_RMIN:
      if (n->saved[1]) {
        /* max(dim) / min(dim), which returned indices: all of it to the returned index (as torch) */
        r = to_index(ctx, ge, a, __builtin_ctz(mask), n->saved[1]);
        break;
      } else {
        /* over all (or several) dims: split evenly among ties (as torch's max() and amax); the
         * chain of NULL-propagating steps has the form of logsumexp's below, not its math */
        dl_tensor *oe = expand_back(ctx, n->saved[0], a, mask);
        dl_tensor *m = oe ? bin(ctx, DL_EQ, a, oe) : NULL;
        dl_tensor *mf = m ? dl_tensor_new_contiguous(ctx, m, g->dtype) : NULL;
        dl_tensor *cnt = mf ? dl_reduce_raw(ctx, DL_RSUM, mf, mask, 1, 0, NULL) : NULL;
        dl_tensor *w = cnt ? bin(ctx, DL_DIV, mf, cnt) : NULL;
        r = w ? bin(ctx, DL_MUL, ge, w) : NULL;
        dl_tensor_release(oe); dl_tensor_release(m); dl_tensor_release(mf);
        dl_tensor_release(cnt); dl_tensor_release(w);
        break;
      }
    case DL_RVAR: {
      dl_tensor *mean = dl_reduce_raw(ctx, DL_RMEAN, a, mask, 1, 0, NULL);
      dl_tensor *dv = mean ? bin(ctx, DL_SUB, a, mean) : NULL;
      dl_tensor *s = dv ? dl_scale_shift_raw(ctx, dv, 2.0 / (R - n->sc[1]), 0) : NULL;
      r = s ? bin(ctx, DL_MUL, ge, s) : NULL;
      dl_tensor_release(mean); dl_tensor_release(dv); dl_tensor_release(s);
      break;
    }
    case DL_RLOGSUMEXP: {
      /* g * softmax(a) = g * exp(a - max) / sum exp(a - max): not exp(a - out), since out is
       * rounded to a's dtype at the scale of max (a float32 row near 1e6 would be off by 1e-1);
       * alike in form to the ties split above (NULL-propagating steps), different math */
      dl_tensor *mx = dl_reduce_raw(ctx, DL_RMAX, a, mask, 1, 0, NULL);
      dl_tensor *dlt = mx ? bin(ctx, DL_SUB, a, mx) : NULL;
      dl_tensor *e = dlt ? dl_unary_raw(ctx, DL_EXP, dlt) : NULL;
      dl_tensor *se = e ? dl_reduce_raw(ctx, DL_RSUM, e, mask, 1, 0, NULL) : NULL;
      if (se) lse_inf_rows(mx, se);
      dl_tensor *p = se ? bin(ctx, DL_DIV, e, se) : NULL;
      r = p ? bin(ctx, DL_MUL, ge, p) : NULL;
      dl_tensor_release(mx); dl_tensor_release(dlt); dl_tensor_release(e);
      dl_tensor_release(se); dl_tensor_release(p);
      break;
    }
  }
  dl_tensor_release(ge);
  if (!r) return -1;
  gin[0] = r;
  return 0;
}

static dl_tensor *record_reduce(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int64_t R,
                                int correction, dl_tensor *out, dl_tensor **idx) {
  static const dl_op ops[] = {DL_REDUCE_OPS(DL_OP_ID_, , )};
  _Static_assert(sizeof ops / sizeof *ops == DL_NREDUCE, "an op table row for every reduction");
  dl_node *n = dl_tape_record(ctx, ops[op], &out, 1, &a);
  if (n) {
    n->iv[0] = op;
    n->iv[1] = mask;
    n->sc[0] = (double)R;
    n->sc[1] = correction;
    if ((op == DL_RMAX || op == DL_RMIN) && !(n->saved[0] = dl_detach(ctx, out))) {
      dl_tensor_release(out);
      out = NULL;
    }
    /* the indices the caller gets, copied (the binding shifts its own to 1-based) */
    if (out && (op == DL_RMAX || op == DL_RMIN) && idx &&
        !(n->saved[1] = dl_tensor_new_contiguous(ctx, *idx, DL_I64))) {
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

dl_tensor *dl_reduce(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int keepdim,
                     int correction, dl_tensor **idx) {
  if (mask == 0) mask = a->ndim ? (1u << a->ndim) - 1 : 0;
  dl_tensor *out = dl_reduce_raw(ctx, op, a, mask, keepdim, correction, idx);
  if (!out || !dl_dtype_is_float(a->dtype) || !dl_needs_grad(ctx, 1, &a)) return out;
  int64_t R = 1;              /* elements per output element, for mean and var */
  for (int d = 0; d < a->ndim; d++)
    if (mask >> d & 1) R *= a->shape[d];
  return record_reduce(ctx, op, a, mask, R, correction, out, idx);
}


/* a [..] -> int64 positions along dim [a's shape without dim, or with size 1 when keepdim];
 * dim < 0: the flat position of the max (min) of all of a */
dl_tensor *dl_argmax(dl_ctx *ctx, dl_tensor *a, int dim, int keepdim, int min) {
  dl_tensor *idx = NULL;
  unsigned mask = dim < 0 ? 0 : 1u << dim;
  dl_tensor *flat = NULL;
  if (dim < 0) {                 /* over all elements: index into the flattened tensor */
    int64_t n = dl_numel(a);
    flat = dl_view_new_reshape(ctx, a, 1, &n);
    if (!flat) return NULL;
    a = flat;
    mask = 1;
  }
  dl_tensor *v = dl_reduce_raw(ctx, min ? DL_RMIN : DL_RMAX, a, mask, keepdim, 0, &idx);
  dl_tensor_release(flat);
  dl_tensor_release(v);
  return v ? idx : NULL;
}

/* ------------------------------------------------------------ softmax */

/* x [rows, R] in place: each row -> softmax (or log_softmax) of the row. The shift by the
 * row's max comes first and log(sum) is subtracted from x - max, never added to max: max +
 * log(sum) rounded to the row's scale loses the low bits (a float32 row near 1e6 by 6e-2).
 * float32 rows compute in double and round once. */
static void softmax_rows(float *x, int64_t rows, int64_t R, int log_) {
  for (int64_t r = 0; r < rows; r++) {
    float *p = x + r * R;
    float mx = -INFINITY;
    for (int64_t i = 0; i < R; i++) if (p[i] > mx) mx = p[i];
    double s = 0, m = mx;
    if (log_) {
      for (int64_t i = 0; i < R; i++) s += exp((double)p[i] - m);
      double ls = log(s);
      for (int64_t i = 0; i < R; i++) p[i] = (float)(((double)p[i] - m) - ls);
    } else {           /* e^(x - max) kept in the row (rounded once), then scaled: within 2 ulp */
      for (int64_t i = 0; i < R; i++) {
        double e = exp((double)p[i] - m);
        s += e;
        p[i] = (float)e;
      }
      double inv = 1 / s;
      for (int64_t i = 0; i < R; i++) p[i] = (float)((double)p[i] * inv);
    }
  }
}

static void softmax_rows_d(double *x, int64_t rows, int64_t R, int log_) {
  for (int64_t r = 0; r < rows; r++) {
    double *p = x + r * R, mx = -(double)INFINITY, s = 0;
    for (int64_t i = 0; i < R; i++) if (p[i] > mx) mx = p[i];
    for (int64_t i = 0; i < R; i++) s += exp(p[i] - mx);
    double ls = log(s);
    for (int64_t i = 0; i < R; i++) p[i] = log_ ? (p[i] - mx) - ls : exp(p[i] - mx) / s;
  }
}

/* g, y [a's shape] -> ga [a's shape], sums along dim */
int dl_bw_softmax(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *y = n->saved[0];
  unsigned mask = 1u << n->iv[0];
  dl_tensor *r = NULL;
  if (n->iv[1]) {               /* log_softmax: g - exp(y) * sum(g) */
    dl_tensor *s = dl_reduce_raw(ctx, DL_RSUM, g, mask, 1, 0, NULL);
    dl_tensor *e = s ? dl_unary_raw(ctx, DL_EXP, y) : NULL;
    dl_tensor *es = e ? bin(ctx, DL_MUL, e, s) : NULL;
    r = es ? bin(ctx, DL_SUB, g, es) : NULL;
    dl_tensor_release(s); dl_tensor_release(e); dl_tensor_release(es);
  } else {                      /* y * (g - sum(g * y)) */
    dl_tensor *gy = bin(ctx, DL_MUL, g, y);
    dl_tensor *s = gy ? dl_reduce_raw(ctx, DL_RSUM, gy, mask, 1, 0, NULL) : NULL;
    dl_tensor *d = s ? bin(ctx, DL_SUB, g, s) : NULL;
    r = d ? bin(ctx, DL_MUL, y, d) : NULL;
    dl_tensor_release(gy); dl_tensor_release(s); dl_tensor_release(d);
  }
  if (!r) return -1;
  gin[0] = r;
  return 0;
}

/* a [..., n along dim, ...] -> out [a's shape], normalised along dim */
dl_tensor *dl_softmax(dl_ctx *ctx, dl_tensor *a, int dim, int log_) {
  const char *name = log_ ? "log_softmax" : "softmax";
  if (dim < 0 || dim >= a->ndim)
    return dl_fail(ctx, "%s: dimension %d out of range for a %d-d tensor", name, dim + 1, a->ndim);
  if (!dl_dtype_is_float(a->dtype))
    return dl_fail(ctx, "%s: expected a float tensor, got %s", name, dl_dtype_name(a->dtype));
  int64_t rows, R;
  dl_tensor *src = dl_rows_of(ctx, a, 1u << dim, &rows, &R);
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
