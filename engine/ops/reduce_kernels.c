/* reduce_kernels.c -- reductions (sum, mean, max, min, var, logsumexp) and sum_to, with no
 * tape (kernels.h).
 *
 * The reduced dims are permuted to the end and the input made contiguous,
 * so every reduction is a loop over rows of length R with a double
 * accumulator. Rows split over the pool; each row is summed by one task in
 * a fixed order, so results do not depend on the thread count. ops_reduce.c
 * records dl_reduce's node on top of dl_reduce_raw; sum_to (the backward of
 * broadcasting) serves every backward and the backward walk.
 */
/* See LICENSE */
#include "ops/kernels.h"

#include <math.h>

#define NAME_(id, name, fw, bw, lua) name,
static const char *const red_names[] = {DL_REDUCE_OPS(NAME_, , )};
#undef NAME_
_Static_assert(sizeof red_names / sizeof *red_names == DL_NREDUCE, "a name for every reduction");

/* a [..] -> [rows, R]: the masked dims moved last, contiguous (new ref) */
dl_tensor *dl_rows_of(dl_ctx *ctx, dl_tensor *a, unsigned mask, int64_t *rows, int64_t *R) {
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

/* row r of src [rows, R] -> out[r] (and idx[r], the position of the max or min) */
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


/* a [..] -> out [a's shape without (keepdim: with size 1) the masked dims] */
dl_tensor *dl_reduce_raw(dl_ctx *ctx, dl_redop op, dl_tensor *a, unsigned mask, int keepdim,
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
    return out;
  }
  dl_tensor *src = dl_rows_of(ctx, a, mask, &rows, &R);
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
  return out;
}

/* ------------------------------------------------------- sum to a shape */

/* g [..] -> [shape]: summed over the dims that shape broadcast (leading ones and size-1 ones) */
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
  else s = dl_reduce_raw(ctx, DL_RSUM, g, mask, 1, 0, NULL);
  if (!s) return NULL;
  dl_tensor *r = dl_view_new_reshape(ctx, s, ndim, shape);
  dl_tensor_release(s);
  return r;
}
