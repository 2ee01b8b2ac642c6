/* tensor.c -- the tensor struct: dtypes, creation, views over shared storage, copies.
 *
 * A tensor is (shape, strides, offset) over a reference-counted storage. Views
 * share the storage and take their own reference. No autograd here: the ops
 * build differentiable views on top of dl_view_new, and a tensor only holds a
 * reference to its (opaque) grad_fn. Shapes are checked by shape.c before any
 * allocation, so a failure leaves nothing allocated, and a view must lie inside
 * its storage, so no shape or stride can make an element access leave the block.
 */
/* See LICENSE */
#include "core/dl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[DL_NDTYPES] = {"float32", "float64", "int32", "int64", "uint8"};
static const size_t dtype_sizes[DL_NDTYPES] = {4, 8, 4, 8, 1};

size_t dl_dtype_size(dl_dtype d) { return dtype_sizes[d]; }
const char *dl_dtype_name(dl_dtype d) { return dtype_names[d]; }
int dl_dtype_is_float(dl_dtype d) { return d == DL_F32 || d == DL_F64; }

int dl_dtype_from_name(const char *name) {
  for (int i = 0; i < DL_NDTYPES; i++)
    if (strcmp(name, dtype_names[i]) == 0) return i;
  if (strcmp(name, "float") == 0) return DL_F32;
  if (strcmp(name, "double") == 0) return DL_F64;
  if (strcmp(name, "int") == 0) return DL_I32;
  if (strcmp(name, "long") == 0) return DL_I64;
  return -1;
}

int64_t dl_numel(const dl_tensor *t) { return dl_shape_numel(t->ndim, t->shape); }

int dl_is_contiguous(const dl_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != s) return 0;
    s *= t->shape[i];
  }
  return 1;
}

void *dl_data(const dl_tensor *t) {
  return (char *)t->st->data + t->offset * (int64_t)dl_dtype_size(t->dtype);
}

double dl_load(const void *base, dl_dtype d, int64_t i) {
  switch (d) {
    case DL_F32: return ((const float *)base)[i];
    case DL_F64: return ((const double *)base)[i];
    case DL_I32: return ((const int32_t *)base)[i];
    case DL_I64: return (double)((const int64_t *)base)[i];
    case DL_U8: return ((const uint8_t *)base)[i];
    default: return 0;
  }
}

static int64_t to_int(double v, int64_t lo, int64_t hi) {
  if (v != v) return 0;
  if (v < (double)lo) return lo;
  if (v > (double)hi) return hi;
  return (int64_t)v;
}

void dl_store(void *base, dl_dtype d, int64_t i, double v) {
  switch (d) {
    case DL_F32: ((float *)base)[i] = (float)v; break;
    case DL_F64: ((double *)base)[i] = v; break;
    case DL_I32: ((int32_t *)base)[i] = (int32_t)to_int(v, INT32_MIN, INT32_MAX); break;
    case DL_I64: ((int64_t *)base)[i] = to_int(v, INT64_MIN, INT64_MAX); break;
    case DL_U8: ((uint8_t *)base)[i] = (uint8_t)to_int(v, 0, 255); break;
    default: break;
  }
}

static int64_t flat_offset(const dl_tensor *t, int64_t i) {
  int64_t off = 0;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t n = t->shape[d];
    off += (i % n) * t->stride[d];
    i /= n;
  }
  return off;
}

int64_t dl_flat_offset(const dl_tensor *t, int64_t i) { return flat_offset(t, i); }

double dl_get_flat(const dl_tensor *t, int64_t i) {
  return dl_load(dl_data(t), t->dtype, flat_offset(t, i));
}

void dl_set_flat(dl_tensor *t, int64_t i, double v) {
  dl_store(dl_data(t), t->dtype, flat_offset(t, i), v);
}

dl_tensor *dl_tensor_retain(dl_tensor *t) {
  if (t) atomic_fetch_add(&t->refs, 1);
  return t;
}

static void storage_release(dl_storage *s) {
  if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
    if (s->release) {
      s->release(s->release_arg);
      pthread_mutex_lock(&s->ctx->mem.lock);
      s->ctx->mem.external -= s->nbytes;
      pthread_mutex_unlock(&s->ctx->mem.lock);
    } else {
      dl_free(s->ctx, s->data, s->nbytes);
    }
    dl_free(s->ctx, s, sizeof *s);
  }
}

/* Freeing a node releases its inputs, whose own nodes may then go: a chain of a
 * million recorded ops, dropped without a backward, would recurse a million
 * frames deep. Nodes whose last reference went are queued instead, and the
 * outermost release on this thread frees them in a loop. */
static _Thread_local dl_node *pending;
static _Thread_local int draining;

void dl_node_release(dl_node *n) {
  dl_node_ref *r = (dl_node_ref *)n;   /* the first member of every node */
  if (!r || atomic_fetch_sub(&r->refs, 1) != 1) return;
  r->next_free = pending;
  pending = n;
  if (draining) return;
  draining = 1;
  while (pending) {
    dl_node *m = pending;
    dl_node_ref *mr = (dl_node_ref *)m;
    pending = mr->next_free;
    mr->destroy(m);
  }
  draining = 0;
}

void dl_tensor_release(dl_tensor *t) {
  if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
  dl_ctx *ctx = t->st->ctx;
  storage_release(t->st);
  dl_tensor_release(t->grad);
  dl_node_release(t->grad_fn);
  dl_free(ctx, t, sizeof *t);
}

static dl_tensor *header_new(dl_ctx *ctx, dl_storage *st, dl_dtype d, int ndim,
                             const int64_t *shape, const int64_t *stride, int64_t offset) {
  dl_tensor *t = dl_alloc(ctx, sizeof *t);
  if (!t) return NULL;
  memset(t, 0, sizeof *t);
  atomic_init(&t->refs, 1);
  atomic_fetch_add(&st->refs, 1);
  t->st = st;
  t->dtype = d;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    t->stride[i] = stride[i];
  }
  t->offset = offset;
  return t;
}

#define MAX_TENSOR_BYTES ((int64_t)1 << 40)   /* past this a request is "out of memory" up front */

dl_tensor *dl_tensor_new_empty(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape) {
  int64_t n, bytes;
  if (dl_shape_check(ctx, "tensor", ndim, shape, &n) < 0) return NULL;
  if (dl_shape_bytes(ctx, "tensor", n, dl_dtype_size(d), &bytes) < 0) return NULL;
  if (bytes > MAX_TENSOR_BYTES) {
    char s[256];
    dl_shape_str(shape, ndim, s, sizeof s);
    ctx->oom = 1;
    return dl_fail(ctx, "out of memory: tensor of shape %s is too large", s);
  }
  dl_storage *st = dl_alloc(ctx, sizeof *st);
  if (!st) return NULL;
  memset(st, 0, sizeof *st);
  st->nbytes = (size_t)bytes;
  st->data = dl_alloc(ctx, st->nbytes);
  if (!st->data) {
    dl_free(ctx, st, sizeof *st);
    return NULL;
  }
  st->ctx = ctx;
  atomic_init(&st->refs, 0);
  int64_t stride[DL_MAXDIM];
  dl_shape_strides(ndim, shape, stride);
  atomic_fetch_add(&st->refs, 1);            /* keep alive across header_new failure */
  dl_tensor *t = header_new(ctx, st, d, ndim, shape, stride, 0);
  storage_release(st);
  return t;
}

dl_tensor *dl_tensor_new_external(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape, void *data,
                                  size_t nbytes, void (*release)(void *arg), void *arg) {
  int64_t n, bytes;
  if (dl_shape_check(ctx, "tensor", ndim, shape, &n) < 0) return NULL;
  if (dl_shape_bytes(ctx, "tensor", n, dl_dtype_size(d), &bytes) < 0) return NULL;
  if ((uint64_t)bytes > (uint64_t)nbytes || (uintptr_t)data % dl_dtype_size(d) != 0 || !release)
    return dl_fail(ctx, "tensor: external memory of %zu bytes at %p cannot hold %lld %s elements", nbytes, data,
                   (long long)n, dl_dtype_name(d));
  dl_storage *st = dl_alloc(ctx, sizeof *st);
  if (!st) return NULL;
  memset(st, 0, sizeof *st);
  st->ctx = ctx;
  st->data = data;
  st->nbytes = nbytes;
  atomic_init(&st->refs, 1);                 /* keep alive across header_new failure */
  int64_t stride[DL_MAXDIM];
  dl_shape_strides(ndim, shape, stride);
  dl_tensor *t = header_new(ctx, st, d, ndim, shape, stride, 0);
  if (!t) {
    dl_free(ctx, st, sizeof *st);            /* data stays the caller's */
    return NULL;
  }
  atomic_fetch_sub(&st->refs, 1);
  pthread_mutex_lock(&ctx->mem.lock);
  ctx->mem.external += nbytes;
  pthread_mutex_unlock(&ctx->mem.lock);
  st->release = release;
  st->release_arg = arg;
  return t;
}

dl_tensor *dl_tensor_new_zeros(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape) {
  dl_tensor *t = dl_tensor_new_empty(ctx, d, ndim, shape);
  if (t) memset(t->st->data, 0, t->st->nbytes);
  return t;
}

dl_tensor *dl_tensor_new_full(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape, double v) {
  dl_tensor *t = dl_tensor_new_empty(ctx, d, ndim, shape);
  if (!t) return NULL;
  int64_t n = dl_numel(t);
  if (d == DL_F32) {
    float *p = t->st->data, f = (float)v;
    for (int64_t i = 0; i < n; i++) p[i] = f;
  } else {
    for (int64_t i = 0; i < n; i++) dl_store(t->st->data, d, i, v);
  }
  return t;
}

dl_tensor *dl_tensor_new_scalar(dl_ctx *ctx, dl_dtype d, double v) {
  return dl_tensor_new_full(ctx, d, 0, NULL, v);
}

dl_tensor *dl_tensor_new_arange(dl_ctx *ctx, dl_dtype d, double start, double stop, double step) {
  if (step == 0 || step != step || start != start || stop != stop)
    return dl_fail(ctx, "arange: step must be a non-zero number");
  double cnt = ceil((stop - start) / step);
  if (cnt < 0) cnt = 0;
  if (cnt > 1e12) return dl_fail(ctx, "arange: %.0f elements is too many", cnt);
  int64_t n = (int64_t)cnt;
  dl_tensor *t = dl_tensor_new_empty(ctx, d, 1, &n);
  if (!t) return NULL;
  for (int64_t i = 0; i < n; i++) dl_store(t->st->data, d, i, start + (double)i * step);
  return t;
}

dl_tensor *dl_tensor_new_rand(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape, int normal) {
  if (!dl_dtype_is_float(d))
    return dl_fail(ctx, "%s: dtype %s is not a float type", normal ? "randn" : "rand", dl_dtype_name(d));
  dl_tensor *t = dl_tensor_new_empty(ctx, DL_F32, ndim, shape);
  if (!t) return NULL;
  size_t n = (size_t)dl_numel(t);
  ctx->counter = normal ? dl_rng_normal(ctx->seed, ctx->counter, t->st->data, n)
                        : dl_rng_uniform(ctx->seed, ctx->counter, t->st->data, n);
  if (d == DL_F32) return t;
  dl_tensor *c = dl_tensor_new_contiguous(ctx, t, d);
  dl_tensor_release(t);
  return c;
}

dl_tensor *dl_view_new(dl_ctx *ctx, dl_tensor *t, int ndim, const int64_t *shape,
                       const int64_t *stride, int64_t offset) {
  if (dl_shape_check(ctx, "view", ndim, shape, NULL) < 0) return NULL;
  int64_t cap = (int64_t)(t->st->nbytes / dl_dtype_size(t->dtype));
  if (!dl_shape_fits(ndim, shape, stride, offset, cap)) {
    char s[256];
    dl_shape_str(shape, ndim, s, sizeof s);
    return dl_fail(ctx, "view: shape %s at offset %lld leaves the storage of %lld elements", s,
                   (long long)offset, (long long)cap);
  }
  return header_new(ctx, t->st, t->dtype, ndim, shape, stride, offset);
}

/* Strides for viewing t as shape without a copy, or -1 if impossible. */
static int view_strides(const dl_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
  if (dl_is_contiguous(t) || dl_numel(t) == 0) {    /* (the chunk walk below needs elements) */
    dl_shape_strides(ndim, shape, stride);
    return 0;
  }
  /* general case (as numpy's attempt_nocopy_reshape): chunks of old dims that
   * are contiguous among themselves map onto chunks of new dims */
  int oi = 0, ni = 0;
  int on = t->ndim;
  while (oi < on && ni < ndim) {
    int64_t np = shape[ni], op = t->shape[oi];
    int oj = oi + 1, nj = ni + 1;
    while (np != op) {
      if (np < op) np *= shape[nj++];
      else op *= t->shape[oj++];
    }
    for (int k = oi; k < oj - 1; k++)
      if (t->shape[k + 1] != 1 && t->stride[k] != t->stride[k + 1] * t->shape[k + 1]) return -1;
    stride[nj - 1] = t->stride[oj - 1];
    for (int k = nj - 1; k > ni; k--) stride[k - 1] = stride[k] * shape[k];
    ni = nj;
    oi = oj;
  }
  for (; ni < ndim; ni++) stride[ni] = 1;
  return 0;
}

dl_tensor *dl_view_new_reshape(dl_ctx *ctx, dl_tensor *t, int ndim, const int64_t *shape) {
  int64_t sh[DL_MAXDIM], st[DL_MAXDIM];
  if (ndim < 0 || ndim > DL_MAXDIM)
    return dl_fail(ctx, "reshape: %d dimensions, at most %d supported", ndim, DL_MAXDIM);
  for (int i = 0; i < ndim; i++) sh[i] = shape[i];
  if (dl_shape_resolve(ctx, "reshape", ndim, sh, dl_numel(t), NULL) < 0) return NULL;
  if (dl_numel(t) == 0 || view_strides(t, ndim, sh, st) < 0) {
    dl_tensor *c = dl_tensor_new_contiguous(ctx, t, t->dtype);
    if (!c) return NULL;
    dl_shape_strides(ndim, sh, st);
    dl_tensor *v = dl_view_new(ctx, c, ndim, sh, st, 0);
    dl_tensor_release(c);
    return v;
  }
  return dl_view_new(ctx, t, ndim, sh, st, t->offset);
}

int dl_view_possible(const dl_tensor *t, int ndim, const int64_t *shape) {
  int64_t st[DL_MAXDIM];
  return view_strides(t, ndim, shape, st) == 0;
}

/* Element-by-element copy with dtype conversion; fast paths for the common cases. */
int dl_copy_into(dl_ctx *ctx, dl_tensor *dst, const dl_tensor *src) {
  int64_t n = dl_numel(src);
  if (n != dl_numel(dst)) {
    char a[128], b[128];
    dl_shape_str(dst->shape, dst->ndim, a, sizeof a);
    dl_shape_str(src->shape, src->ndim, b, sizeof b);
    dl_fail(ctx, "copy: shapes %s and %s differ in size", a, b);
    return -1;
  }
  if (dst->dtype == src->dtype && dl_is_contiguous(dst) && dl_is_contiguous(src)) {
    memmove(dl_data(dst), dl_data(src), (size_t)n * dl_dtype_size(src->dtype));
    return 0;
  }
  /* iterate src in row-major order with an index counter */
  int64_t idx[DL_MAXDIM] = {0};
  int nd = src->ndim;
  const char *sb = dl_data(src);
  size_t es = dl_dtype_size(src->dtype);
  int dcont = dl_is_contiguous(dst);
  char *db = dl_data(dst);
  int64_t soff = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = dl_load(sb + soff * (int64_t)es, src->dtype, 0);
    if (dcont) dl_store(db, dst->dtype, i, v);
    else dl_set_flat(dst, i, v);
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < src->shape[d]) { soff += src->stride[d]; break; }
      soff -= src->stride[d] * (src->shape[d] - 1);
      idx[d] = 0;
    }
  }
  return 0;
}

dl_tensor *dl_tensor_new_contiguous(dl_ctx *ctx, dl_tensor *t, dl_dtype d) {
  dl_tensor *c = dl_tensor_new_empty(ctx, d, t->ndim, t->shape);
  if (!c) return NULL;
  if (t->dtype == DL_F32 && d == DL_F32 && t->ndim == 2 && t->stride[0] == 1) {
    /* transposed matrix: blocked copy */
    int64_t R = t->shape[0], C = t->shape[1], ld = t->stride[1];
    const float *s = dl_data(t);
    float *o = c->st->data;
    for (int64_t i0 = 0; i0 < R; i0 += 32)
      for (int64_t j0 = 0; j0 < C; j0 += 32)
        for (int64_t i = i0; i < R && i < i0 + 32; i++)
          for (int64_t j = j0; j < C && j < j0 + 32; j++) o[i * C + j] = s[i + j * ld];
    return c;
  }
  dl_copy_into(ctx, c, t);
  return c;
}
