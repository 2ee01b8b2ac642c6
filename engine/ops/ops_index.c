/* ops_index.c -- indexing ops: gather, index_select, scatter_add, one_hot, cat, stack.
 *
 * Index tensors are int32/int64 with 0-based values; every value is checked
 * against its dimension before anything is allocated, so a bad index is an
 * error message, never a stray memory access (messages print indices and
 * dims 1-based, as the user wrote them). Kernels walk the index tensor in
 * row-major order with incrementally updated strided offsets, copying whole
 * elements by size, so int64 data keeps full precision.
 *
 * cat with any number of inputs: a node holds at most 4 inputs, so the graph
 * of a cat of n > 4 tensors is a tree of cat nodes (cat of cats). The output
 * is computed once into one buffer; each inner node's output is a view of
 * the final buffer over the range of its group (which is exactly the
 * concatenation of that group), so nothing is copied twice. Each node stores
 * the sizes of its slots along dim; its backward narrows the gradient into
 * those slices. Slots with nothing requiring grad are left NULL and get no
 * node at all.
 */
/* See LICENSE */
#include "ops/ops.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

/* advance a row-major coordinate over shape, updating nop strided offsets */
static void iter_next(int nd, const int64_t *shape, int64_t *coord, int nop,
                      int64_t st[][DL_MAXDIM], int64_t *off) {
  for (int d = nd - 1; d >= 0; d--) {
    if (++coord[d] < shape[d]) {
      for (int o = 0; o < nop; o++) off[o] += st[o][d];
      return;
    }
    for (int o = 0; o < nop; o++) off[o] -= st[o][d] * (shape[d] - 1);
    coord[d] = 0;
  }
}

static int is_index_dtype(dl_dtype d) { return d == DL_I32 || d == DL_I64; }

static int64_t ival(const void *base, dl_dtype d, int64_t off) {
  switch (d) {
    case DL_I32: return ((const int32_t *)base)[off];
    case DL_I64: return ((const int64_t *)base)[off];
    case DL_U8: return ((const uint8_t *)base)[off];
    default: return 0;
  }
}

/* copy one element of size es from src[soff] to dst[doff] */
static inline void copy_elem(void *dst, int64_t doff, const void *src, int64_t soff, size_t es) {
  switch (es) {
    case 1: ((uint8_t *)dst)[doff] = ((const uint8_t *)src)[soff]; break;
    case 4: ((uint32_t *)dst)[doff] = ((const uint32_t *)src)[soff]; break;
    case 8: ((uint64_t *)dst)[doff] = ((const uint64_t *)src)[soff]; break;
    default: memcpy((char *)dst + doff * (int64_t)es, (const char *)src + soff * (int64_t)es, es); break;
  }
}

/* dst[doff] += src[soff], both of dtype d (integers wrap) */
static inline void add_elem(void *dst, int64_t doff, const void *src, int64_t soff, dl_dtype d) {
  switch (d) {
    case DL_F32: ((float *)dst)[doff] += ((const float *)src)[soff]; break;
    case DL_F64: ((double *)dst)[doff] += ((const double *)src)[soff]; break;
    case DL_I32:
      ((int32_t *)dst)[doff] =
          (int32_t)((uint32_t)((int32_t *)dst)[doff] + (uint32_t)((const int32_t *)src)[soff]);
      break;
    case DL_I64:
      ((int64_t *)dst)[doff] =
          (int64_t)((uint64_t)((int64_t *)dst)[doff] + (uint64_t)((const int64_t *)src)[soff]);
      break;
    case DL_U8:
      ((uint8_t *)dst)[doff] = (uint8_t)(((uint8_t *)dst)[doff] + ((const uint8_t *)src)[soff]);
      break;
    default: break;
  }
}

static int check_dim(dl_ctx *ctx, const char *op, int dim, int ndim) {
  if (dim < 0 || dim >= ndim) {
    dl_fail(ctx, "%s: dimension %d out of range for a %d-d tensor", op, dim + 1, ndim);
    return -1;
  }
  return 0;
}

static int check_index_dtype(dl_ctx *ctx, const char *op, const dl_tensor *index) {
  if (!is_index_dtype(index->dtype)) {
    dl_fail(ctx, "%s: index must be an int32 or int64 tensor, got %s", op, dl_dtype_name(index->dtype));
    return -1;
  }
  return 0;
}

/* every value of index in [0, size); the message names dim (0-based in, 1-based out) */
static int check_index_values(dl_ctx *ctx, const char *op, const dl_tensor *index, int dim, int64_t size) {
  int64_t n = dl_numel(index);
  if (n == 0) return 0;
  int64_t coord[DL_MAXDIM] = {0}, st[1][DL_MAXDIM], off[1] = {0};
  for (int d = 0; d < index->ndim; d++) st[0][d] = index->stride[d];
  const void *base = dl_data(index);
  for (int64_t k = 0; k < n; k++) {
    int64_t v = ival(base, index->dtype, off[0]);
    if (v < 0 || v >= size) {
      dl_fail(ctx, "%s: index %lld out of range for dimension %d of size %lld", op, (long long)v + 1,
              dim + 1, (long long)size);
      return -1;
    }
    iter_next(index->ndim, index->shape, coord, 1, st, off);
  }
  return 0;
}

/* index.size(d) <= t.size(d) for every d (except skip, if >= 0); what names t */
static int check_fits(dl_ctx *ctx, const char *op, const dl_tensor *index, const dl_tensor *t,
                      const char *what, int skip) {
  for (int d = 0; d < t->ndim; d++) {
    if (d == skip || index->shape[d] <= t->shape[d]) continue;
    char x[128], y[128];
    dl_shape_str(index->shape, index->ndim, x, sizeof x);
    dl_shape_str(t->shape, t->ndim, y, sizeof y);
    dl_fail(ctx, "%s: index shape %s does not fit %s %s at dimension %d", op, x, what, y, d + 1);
    return -1;
  }
  return 0;
}

static int check_same_ndim(dl_ctx *ctx, const char *op, const dl_tensor *index, const dl_tensor *t,
                           const char *what) {
  if (index->ndim == t->ndim) return 0;
  char x[128], y[128];
  dl_shape_str(index->shape, index->ndim, x, sizeof x);
  dl_shape_str(t->shape, t->ndim, y, sizeof y);
  dl_fail(ctx, "%s: index shape %s must have as many dimensions as %s %s", op, x, what, y);
  return -1;
}

/* t itself (retained) if contiguous, else a contiguous copy; no autograd */
static dl_tensor *contig_raw(dl_ctx *ctx, dl_tensor *t) {
  if (dl_is_contiguous(t)) return dl_tensor_retain(t);
  return dl_tensor_new_contiguous(ctx, t, t->dtype);
}

/* out of op(in..., dim, index), with its node recorded when in[0] is floating point:
 * dim and the index saved for the backward (gather, index_select, scatter_add) */
static dl_tensor *record_indexed(dl_ctx *ctx, dl_op op, dl_tensor *out, int nin, dl_tensor **in, int dim,
                                 dl_tensor *index) {
  dl_node *n = dl_dtype_is_float(in[0]->dtype) ? dl_tape_record(ctx, op, &out, nin, in) : NULL;
  if (n) {
    n->iv[0] = dim;
    n->niv = 1;
    n->saved[0] = dl_tensor_retain(index);
  }
  return out;
}

/* ---------------------------------------------------------- raw kernels */

/* the strides of a walk over index's shape: st[0] index's, st[1] t1's, st[2] t2's, with
 * dim's stride 0 in st[at] (the side that index addresses along dim) */
static void walk_strides(int64_t st[3][DL_MAXDIM], const dl_tensor *index, const dl_tensor *t1,
                         const dl_tensor *t2, int dim, int at) {
  for (int d = 0; d < index->ndim; d++) {
    st[0][d] = index->stride[d];
    st[1][d] = at == 1 && d == dim ? 0 : t1->stride[d];
    st[2][d] = at == 2 && d == dim ? 0 : t2->stride[d];
  }
}

/* out (contiguous, index shape) = a gathered at index along dim; validated */
static void gather_kernel(dl_tensor *out, dl_tensor *a, int dim, dl_tensor *index) {
  int nd = index->ndim;
  int64_t n = dl_numel(index);
  if (n == 0) return;
  int64_t coord[DL_MAXDIM] = {0}, st[3][DL_MAXDIM], off[3] = {0, 0, 0};
  walk_strides(st, index, a, out, dim, 1);
  const void *ib = dl_data(index);
  const void *ab = dl_data(a);
  void *ob = dl_data(out);
  int64_t sd = a->stride[dim];
  size_t es = dl_dtype_size(a->dtype);
  /* the same walk as scatter_add_kernel's with the element moved the other way (read at index,
   * not added there); the float32 loop stays inline so the hot case makes no call per element */
  if (a->dtype == DL_F32) {
    const float *af = ab;
    float *of = ob;
    for (int64_t k = 0; k < n; k++) {
      of[off[2]] = af[off[1] + ival(ib, index->dtype, off[0]) * sd];
      iter_next(nd, index->shape, coord, 3, st, off);
    }
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    copy_elem(ob, off[2], ab, off[1] + ival(ib, index->dtype, off[0]) * sd, es);
    iter_next(nd, index->shape, coord, 3, st, off);
  }
}

/* dst[... index ...] += src[...] along dim, in place (same dtype); validated */
static void scatter_add_kernel(dl_tensor *dst, int dim, dl_tensor *index, dl_tensor *src) {
  int nd = index->ndim;
  int64_t n = dl_numel(index);
  if (n == 0) return;
  int64_t coord[DL_MAXDIM] = {0}, st[3][DL_MAXDIM], off[3] = {0, 0, 0};
  walk_strides(st, index, src, dst, dim, 2);
  const void *ib = dl_data(index);
  const void *sb = dl_data(src);
  void *db = dl_data(dst);
  int64_t sd = dst->stride[dim];
  /* gather_kernel's walk with the element added at index; kept apart for the inline float32 loop */
  if (dst->dtype == DL_F32) {
    const float *sf = sb;
    float *df = db;
    for (int64_t k = 0; k < n; k++) {
      df[off[2] + ival(ib, index->dtype, off[0]) * sd] += sf[off[1]];
      iter_next(nd, index->shape, coord, 3, st, off);
    }
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    add_elem(db, off[2] + ival(ib, index->dtype, off[0]) * sd, sb, off[1], dst->dtype);
    iter_next(nd, index->shape, coord, 3, st, off);
  }
}

/* the element counts before and after dim: parts of t's own (checked) shape */
static void outer_inner(const dl_tensor *t, int dim, int64_t *outer, int64_t *inner) {
  *outer = dl_shape_numel(dim, t->shape);
  *inner = dl_shape_numel(t->ndim - dim - 1, t->shape + dim + 1);
}

/* index value j of a validated 0-d or 1-d index */
static int64_t index_1d(const dl_tensor *index, const void *base, int64_t j) {
  int64_t s = index->ndim ? index->stride[0] : 0;
  return ival(base, index->dtype, j * s);
}

/* ----------------------------------------------------------- gather */

/* g [index's shape] -> ga [a's shape]: g scattered (added) back along dim */
int dl_bw_gather(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *index = n->saved[0];
  int dim = (int)n->iv[0];
  if (!a->requires_grad) return 0;
  dl_tensor *z = dl_tensor_new_zeros(ctx, g->dtype, a->ndim, a->shape);
  if (!z) return -1;
  scatter_add_kernel(z, dim, index, g);
  gin[0] = z;
  return 0;
}

/* a [..., n, ...], index [..., k, ...] (dim = the n/k position) -> out [index's shape],
 * out[.., i, ..] = a[.., index[.., i, ..], ..] */
dl_tensor *dl_gather(dl_ctx *ctx, dl_tensor *a, int dim, dl_tensor *index) {
  const char *op = "gather";
  if (check_dim(ctx, op, dim, a->ndim) < 0 || check_index_dtype(ctx, op, index) < 0) return NULL;
  if (check_same_ndim(ctx, op, index, a, "input") < 0) return NULL;
  if (check_fits(ctx, op, index, a, "input", dim) < 0) return NULL;
  if (check_index_values(ctx, op, index, dim, a->shape[dim]) < 0) return NULL;
  dl_tensor *out = dl_tensor_new_empty(ctx, a->dtype, index->ndim, index->shape);
  if (!out) return NULL;
  gather_kernel(out, a, dim, index);
  return record_indexed(ctx, DL_OP_GATHER, out, 1, &a, dim, index);
}

/* ------------------------------------------------------ index_select */

/* g [a's shape with k along dim] -> ga [a's shape] */
int dl_bw_index_select(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *index = n->saved[0];
  int dim = (int)n->iv[0];
  if (!a->requires_grad) return 0;
  dl_tensor *gc = contig_raw(ctx, g);
  if (!gc) return -1;
  dl_tensor *z = dl_tensor_new_zeros(ctx, g->dtype, a->ndim, a->shape);
  if (!z) { dl_tensor_release(gc); return -1; }
  int64_t outer, inner, A = a->shape[dim], k = dl_numel(index);
  outer_inner(a, dim, &outer, &inner);
  const void *ib = dl_data(index);
  const void *gb = dl_data(gc);
  void *zb = dl_data(z);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < k; j++) {
      int64_t v = index_1d(index, ib, j);
      int64_t zo = (o * A + v) * inner, go = (o * k + j) * inner;
      if (z->dtype == DL_F32) {
        float *zf = (float *)zb + zo;
        const float *gf = (const float *)gb + go;
        for (int64_t t = 0; t < inner; t++) zf[t] += gf[t];
      } else {
        for (int64_t t = 0; t < inner; t++) add_elem(zb, zo + t, gb, go + t, z->dtype);
      }
    }
  dl_tensor_release(gc);
  gin[0] = z;
  return 0;
}

/* a [..., n, ...], index [k] -> out [..., k, ...] (rows of a along dim) */
dl_tensor *dl_index_select(dl_ctx *ctx, dl_tensor *a, int dim, dl_tensor *index) {
  const char *op = "index_select";
  if (check_dim(ctx, op, dim, a->ndim) < 0 || check_index_dtype(ctx, op, index) < 0) return NULL;
  if (index->ndim > 1) {
    char x[128];
    dl_shape_str(index->shape, index->ndim, x, sizeof x);
    return dl_fail(ctx, "%s: index must be 1-dimensional, got shape %s", op, x);
  }
  if (check_index_values(ctx, op, index, dim, a->shape[dim]) < 0) return NULL;
  int64_t k = dl_numel(index), sh[DL_MAXDIM];
  memcpy(sh, a->shape, sizeof sh);
  sh[dim] = k;
  dl_tensor *c = contig_raw(ctx, a);
  if (!c) return NULL;
  dl_tensor *out = dl_tensor_new_empty(ctx, a->dtype, a->ndim, sh);
  if (!out) { dl_tensor_release(c); return NULL; }
  int64_t outer, inner, A = a->shape[dim];
  outer_inner(a, dim, &outer, &inner);
  size_t es = dl_dtype_size(a->dtype);
  const void *ib = dl_data(index);
  const char *cb = dl_data(c);
  char *ob = dl_data(out);
  size_t row = (size_t)inner * es;
  if (row > 0)
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < k; j++) {
        int64_t v = index_1d(index, ib, j);
        memcpy(ob + (size_t)(o * k + j) * row, cb + (size_t)(o * A + v) * row, row);
      }
  dl_tensor_release(c);
  return record_indexed(ctx, DL_OP_INDEX_SELECT, out, 1, &a, dim, index);
}

/* ------------------------------------------------------- scatter_add */

/* g [a's shape] -> ga = g [a's shape], gsrc [src's shape] = g gathered at index */
int dl_bw_scatter_add(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  dl_tensor *a = n->in[0], *src = n->in[1], *index = n->saved[0];
  int dim = (int)n->iv[0];
  if (a->requires_grad) gin[0] = dl_tensor_retain(g);
  if (!src->requires_grad) return 0;
  /* gather(g, dim, index) has index's shape; src may be larger: zero the rest */
  dl_tensor *gs = dl_tensor_new_empty(ctx, g->dtype, index->ndim, index->shape);
  if (!gs) return -1;
  gather_kernel(gs, g, dim, index);
  int same = 1;
  for (int d = 0; d < src->ndim; d++) same &= src->shape[d] == index->shape[d];
  if (same) {
    gin[1] = gs;
    return 0;
  }
  dl_tensor *z = dl_tensor_new_zeros(ctx, g->dtype, src->ndim, src->shape);
  if (!z) { dl_tensor_release(gs); return -1; }
  dl_tensor *v = dl_view_new(ctx, z, z->ndim, index->shape, z->stride, 0);
  int rc = v ? dl_copy_into(ctx, v, gs) : -1;
  dl_tensor_release(v);
  dl_tensor_release(gs);
  if (rc < 0) { dl_tensor_release(z); return -1; }
  gin[1] = z;
  return 0;
}

/* a [..], index [..], src [at least index's shape] -> out [a's shape] = a with src added at index along dim */
dl_tensor *dl_scatter_add(dl_ctx *ctx, dl_tensor *a, int dim, dl_tensor *index, dl_tensor *src) {
  const char *op = "scatter_add";
  if (check_dim(ctx, op, dim, a->ndim) < 0 || check_index_dtype(ctx, op, index) < 0) return NULL;
  if (src->dtype != a->dtype)
    return dl_fail(ctx, "%s: src has dtype %s, expected %s (the input's dtype)", op,
                   dl_dtype_name(src->dtype), dl_dtype_name(a->dtype));
  if (check_same_ndim(ctx, op, index, a, "input") < 0) return NULL;
  if (check_same_ndim(ctx, op, index, src, "src") < 0) return NULL;
  if (check_fits(ctx, op, index, a, "input", dim) < 0) return NULL;
  if (check_fits(ctx, op, index, src, "src", -1) < 0) return NULL;
  if (check_index_values(ctx, op, index, dim, a->shape[dim]) < 0) return NULL;
  dl_tensor *out = dl_tensor_new_contiguous(ctx, a, a->dtype);
  if (!out) return NULL;
  scatter_add_kernel(out, dim, index, src);
  dl_tensor *in[2] = {a, src};
  return record_indexed(ctx, DL_OP_SCATTER_ADD, out, 2, in, dim, index);
}

/* ----------------------------------------------------------- one_hot */

/* labels [...] (integers in [0, classes)) -> out float32 [..., classes] */
dl_tensor *dl_one_hot(dl_ctx *ctx, dl_tensor *labels, int64_t classes) {
  if (dl_dtype_is_float(labels->dtype))
    return dl_fail(ctx, "one_hot: labels must be an integer tensor, got %s", dl_dtype_name(labels->dtype));
  if (classes < 1) return dl_fail(ctx, "one_hot: classes must be positive, got %lld", (long long)classes);
  if (labels->ndim + 1 > DL_MAXDIM)
    return dl_fail(ctx, "one_hot: labels have %d dimensions, at most %d supported", labels->ndim,
                   DL_MAXDIM - 1);
  int64_t n = dl_numel(labels);
  int64_t coord[DL_MAXDIM] = {0}, st[1][DL_MAXDIM], off[1] = {0};
  for (int d = 0; d < labels->ndim; d++) st[0][d] = labels->stride[d];
  const void *lb = dl_data(labels);
  for (int64_t k = 0; k < n; k++) {
    int64_t v = ival(lb, labels->dtype, off[0]);
    if (v < 0 || v >= classes)
      return dl_fail(ctx, "one_hot: label %lld out of range for %lld classes", (long long)v + 1,
                     (long long)classes);
    iter_next(labels->ndim, labels->shape, coord, 1, st, off);
  }
  int64_t sh[DL_MAXDIM];
  memcpy(sh, labels->shape, sizeof(int64_t) * (size_t)labels->ndim);
  sh[labels->ndim] = classes;
  dl_tensor *out = dl_tensor_new_zeros(ctx, DL_F32, labels->ndim + 1, sh);
  if (!out) return NULL;
  float *o = dl_data(out);
  memset(coord, 0, sizeof coord);
  off[0] = 0;
  for (int64_t k = 0; k < n; k++) {
    o[k * classes + ival(lb, labels->dtype, off[0])] = 1.0f;
    iter_next(labels->ndim, labels->shape, coord, 1, st, off);
  }
  return out;
}

/* --------------------------------------------------------- cat / stack */

/* One cat node: iv[0] = dim, iv[1 + i] = size of slot i along dim. Slots
 * that need no gradient are NULL. A slot whose tensor has one dimension less
 * than the gradient is a stacked input: its slice is reshaped to its shape. */
int dl_bw_cat(dl_ctx *ctx, dl_node *n, dl_tensor *g, dl_tensor **gin) {
  int dim = (int)n->iv[0];
  int64_t start = 0;
  for (int i = 0; i < n->nin; i++) {
    int64_t len = n->iv[1 + i];
    dl_tensor *x = n->in[i];
    if (x && x->requires_grad) {
      int64_t sh[DL_MAXDIM];                  /* g narrowed to the slot: a view, no node */
      memcpy(sh, g->shape, sizeof sh);
      sh[dim] = len;
      dl_tensor *v = dl_view_new(ctx, g, g->ndim, sh, g->stride, g->offset + start * g->stride[dim]);
      if (!v) return -1;
      if (x->ndim != g->ndim) {
        dl_tensor *r = dl_view_new_reshape(ctx, v, x->ndim, x->shape);
        dl_tensor_release(v);
        if (!r) return -1;
        v = r;
      }
      gin[i] = v;
    }
    start += len;
  }
  return 0;
}

typedef struct {
  dl_tensor *t;      /* tensor of this slot (NULL: no grad needed) */
  int owned;         /* t is an inner node's view we hold a reference to */
  int64_t start, len;
} cat_item;

static void release_items(cat_item *it, int n) {
  for (int i = 0; i < n; i++)
    if (it[i].owned) dl_tensor_release(it[i].t);
}

/* node over items[0..k) whose output is t; takes over owned items */
static int cat_node(dl_ctx *ctx, dl_tensor *t, int dim, cat_item *items, int k) {
  dl_tensor *in[4];
  for (int i = 0; i < k; i++) in[i] = items[i].t;
  dl_tensor *ref = dl_tensor_retain(t);      /* the tape helper releases it (not t) on failure */
  dl_node *n = dl_tape_record(ctx, DL_OP_CAT, &ref, k, in);
  dl_tensor_release(ref);
  if (!n) return -1;                         /* (some item needs grad: NULL is a failure) */
  n->iv[0] = dim;
  for (int i = 0; i < k; i++) n->iv[1 + i] = items[i].len;
  n->niv = 1 + k;
  release_items(items, k);          /* the node holds its own references now */
  return 0;
}

/* the recorded tree of cat nodes over out; the inputs need grad */
static int cat_graph(dl_ctx *ctx, dl_tensor *out, int n, dl_tensor **ts, int dim, int stacked) {
  cat_item *it = dl_alloc(ctx, sizeof *it * (size_t)n);
  if (!it) return -1;
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    int64_t len = stacked ? 1 : ts[i]->shape[dim];
    it[i].t = ts[i]->requires_grad ? ts[i] : NULL;
    it[i].owned = 0;
    it[i].start = start;
    it[i].len = len;
    start += len;
  }
  int cnt = n;
  while (cnt > 4) {
    int m = 0;
    for (int g0 = 0; g0 < cnt; g0 += 4) {
      int k = cnt - g0 < 4 ? cnt - g0 : 4;
      cat_item grp[4];
      memcpy(grp, it + g0, sizeof grp[0] * (size_t)k);
      cat_item r = {NULL, 0, grp[0].start, 0};
      int any = 0;
      for (int i = 0; i < k; i++) {
        r.len += grp[i].len;
        any |= grp[i].t != NULL;
      }
      if (k == 1) {
        r = grp[0];
      } else if (any) {
        /* the group's concatenation is this slice of the final output */
        int64_t sh[DL_MAXDIM];
        memcpy(sh, out->shape, sizeof sh);
        sh[dim] = r.len;
        dl_tensor *v = dl_view_new(ctx, out, out->ndim, sh, out->stride,
                                   out->offset + r.start * out->stride[dim]);
        if (!v || cat_node(ctx, v, dim, grp, k) < 0) {
          dl_tensor_release(v);
          release_items(grp, k);
          release_items(it + g0 + k, cnt - g0 - k);
          release_items(it, m);
          dl_free(ctx, it, sizeof *it * (size_t)n);
          return -1;
        }
        r.t = v;
        r.owned = 1;
      }
      it[m++] = r;                  /* m <= g0: the slot was already read */
    }
    cnt = m;
  }
  int rc = cat_node(ctx, out, dim, it, cnt);
  if (rc < 0) release_items(it, cnt);
  dl_free(ctx, it, sizeof *it * (size_t)n);
  return rc;
}

/* Concatenation of validated inputs along dim of the output shape sh; when
 * stacked, every input has shape sh without dim (size 1 there in the output). */
static dl_tensor *cat_impl(dl_ctx *ctx, int n, dl_tensor **ts, int dim, int stacked, int ndim,
                           const int64_t *sh) {
  dl_dtype dt = ts[0]->dtype;
  dl_tensor *out = dl_tensor_new_empty(ctx, dt, ndim, sh);
  if (!out) return NULL;
  int64_t outer, inner;
  outer_inner(out, dim, &outer, &inner);
  size_t es = dl_dtype_size(dt);
  int64_t total = sh[dim], start = 0;
  char *ob = dl_data(out);
  for (int i = 0; i < n; i++) {
    int64_t len = stacked ? 1 : ts[i]->shape[dim];
    size_t chunk = (size_t)(len * inner) * es;
    if (chunk > 0 && outer > 0) {
      dl_tensor *c = contig_raw(ctx, ts[i]);
      if (!c) { dl_tensor_release(out); return NULL; }
      const char *cb = dl_data(c);
      for (int64_t o = 0; o < outer; o++)
        memcpy(ob + (size_t)((o * total + start) * inner) * es, cb + (size_t)o * chunk, chunk);
      dl_tensor_release(c);
    }
    start += len;
  }
  int grad = 0;
  if (dl_dtype_is_float(dt) && dl_needs_grad(ctx, n, ts)) grad = 1;
  if (grad && cat_graph(ctx, out, n, ts, dim, stacked) < 0) {
    dl_tensor_release(out);
    return NULL;
  }
  return out;
}

/* "[2, *, 4]": t's shape with dim shown as * */
static void shape_star(const dl_tensor *t, int dim, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < t->ndim && k < n; d++) {
    const char *sep = d ? ", " : "";
    if (d == dim) k += (size_t)snprintf(buf + k, n - k, "%s*", sep);
    else k += (size_t)snprintf(buf + k, n - k, "%s%lld", sep, (long long)t->shape[d]);
  }
  if (k < n) snprintf(buf + k, n - k, "]");
}

static int check_list(dl_ctx *ctx, const char *op, int n, dl_tensor **ts) {
  if (n < 1 || !ts) {
    dl_fail(ctx, "%s: expected a non-empty list of tensors", op);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (!ts[i]) {
      dl_fail(ctx, "%s: tensor %d is missing", op, i + 1);
      return -1;
    }
  for (int i = 1; i < n; i++)
    if (ts[i]->dtype != ts[0]->dtype) {
      dl_fail(ctx, "%s: tensor %d has dtype %s, expected %s (all tensors must have the same dtype)", op,
              i + 1, dl_dtype_name(ts[i]->dtype), dl_dtype_name(ts[0]->dtype));
      return -1;
    }
  return 0;
}

/* ts[i] [..., n_i, ...] -> out [..., sum n_i, ...] along dim */
dl_tensor *dl_cat(dl_ctx *ctx, int n, dl_tensor **ts, int dim) {
  const char *op = "cat";
  if (check_list(ctx, op, n, ts) < 0) return NULL;
  dl_tensor *t0 = ts[0];
  if (t0->ndim == 0) return dl_fail(ctx, "cat: cannot concatenate 0-d tensors (use stack)");
  if (check_dim(ctx, op, dim, t0->ndim) < 0) return NULL;
  int64_t sh[DL_MAXDIM];
  memcpy(sh, t0->shape, sizeof sh);
  sh[dim] = 0;
  for (int i = 0; i < n; i++) {
    dl_tensor *t = ts[i];
    int ok = t->ndim == t0->ndim;
    for (int d = 0; ok && d < t0->ndim; d++) ok = d == dim || t->shape[d] == t0->shape[d];
    if (!ok) {
      char x[128], y[128];
      dl_shape_str(t->shape, t->ndim, x, sizeof x);
      shape_star(t0, dim, y, sizeof y);
      return dl_fail(ctx, "cat: tensor %d has shape %s, expected %s (sizes must match except in dimension %d)",
                     i + 1, x, y, dim + 1);
    }
    if (dl_shape_add(ctx, op, "sizes along the dimension", sh[dim], t->shape[dim], &sh[dim]) < 0) return NULL;
  }
  return cat_impl(ctx, n, ts, dim, 0, t0->ndim, sh);
}

/* ts[i] [...] (one shape) -> out [..., n, ...] with the new dim at dim */
dl_tensor *dl_stack(dl_ctx *ctx, int n, dl_tensor **ts, int dim) {
  const char *op = "stack";
  if (check_list(ctx, op, n, ts) < 0) return NULL;
  dl_tensor *t0 = ts[0];
  if (dim < 0 || dim > t0->ndim)
    return dl_fail(ctx, "stack: dimension %d out of range for stacking %d-d tensors", dim + 1, t0->ndim);
  if (t0->ndim + 1 > DL_MAXDIM)
    return dl_fail(ctx, "stack: tensors have %d dimensions, at most %d supported", t0->ndim, DL_MAXDIM - 1);
  for (int i = 1; i < n; i++) {
    dl_tensor *t = ts[i];
    int ok = t->ndim == t0->ndim;
    for (int d = 0; ok && d < t0->ndim; d++) ok = t->shape[d] == t0->shape[d];
    if (!ok) {
      char x[128], y[128];
      dl_shape_str(t->shape, t->ndim, x, sizeof x);
      dl_shape_str(t0->shape, t0->ndim, y, sizeof y);
      return dl_fail(ctx, "stack: tensor %d has shape %s, expected %s (all tensors must have the same shape)",
                     i + 1, x, y);
    }
  }
  /* stacking = cat of the inputs unsqueezed at dim; the cat kernel and its
   * nodes treat each input as a size-1 slice directly, without unsqueeze views */
  int64_t sh[DL_MAXDIM];
  int k = 0;
  for (int d = 0; d <= t0->ndim; d++) {
    if (d == dim) sh[k++] = n;
    if (d < t0->ndim) sh[k++] = t0->shape[d];
  }
  return cat_impl(ctx, n, ts, dim, 1, t0->ndim + 1, sh);
}
