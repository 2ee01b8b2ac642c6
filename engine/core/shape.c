/* shape.c -- checked shape arithmetic: the one place the core multiplies sizes.
 *
 * Every shape that enters the core -- tensor creation, views, reshape, expand,
 * the headers of IDX, CSV, cache and checkpoint files, a pipeline batch of N
 * examples -- is checked here before anything is allocated or indexed: sizes
 * are non-negative, at most one -1 is inferred (never from 0 elements, where
 * it is ambiguous), and the element count stays within DL_MAX_NUMEL (2^48).
 * A tensor's element count, its strides, its offsets and its byte size
 * (count * at most 8) then all fit in int64 with room to spare, so the rest
 * of the core may compute them unchecked from a tensor's own shape. Counts
 * that are not shapes (an element size, a dilated kernel extent, a header's
 * data bytes) go through dl_shape_mul and dl_shape_bytes. Errors name the op
 * and the shape as the caller gave it: "view: shape [4611686018427387905, 4]
 * overflows (more than 2^48 elements)".
 */
/* See LICENSE */
#include "core/dl.h"

#include <stdarg.h>
#include <stdio.h>

/* dl_fail when there is a context to tell (pipeline workers check shapes without one) */
static void say(dl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(dl_ctx *ctx, const char *fmt, ...) {
  if (!ctx) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
}

void dl_shape_str(const int64_t *shape, int ndim, char *buf, size_t n) {
  size_t k = 0;
  if (n == 0) return;
  buf[0] = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* a * b for 0 <= a, b <= limit, or -1 when the product passes limit */
static int64_t mul_within(int64_t a, int64_t b, int64_t limit) {
  if (a == 0 || b == 0) return 0;
  if (a > limit / b) return -1;
  return a * b;
}

static int fail_shape(dl_ctx *ctx, const char *op, int ndim, const int64_t *shape, const char *what) {
  char s[256];
  dl_shape_str(shape, ndim, s, sizeof s);
  say(ctx, "%s: shape %s %s", op, s, what);
  return -1;
}

int dl_shape_resolve(dl_ctx *ctx, const char *op, int ndim, int64_t *shape, int64_t known, int64_t *numel) {
  if (ndim < 0 || ndim > DL_MAXDIM) {
    say(ctx, "%s: %d dimensions, at most %d supported", op, ndim, DL_MAXDIM);
    return -1;
  }
  int infer = -1;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == -1 && known >= 0) {
      if (infer >= 0) return fail_shape(ctx, op, ndim, shape, "has more than one -1");
      infer = i;
      continue;
    }
    if (shape[i] < 0) {
      char s[256];
      dl_shape_str(shape, ndim, s, sizeof s);
      say(ctx, "%s: size %lld of dimension %d is negative in shape %s", op, (long long)shape[i], i + 1, s);
      return -1;
    }
  }
  /* the product of the known sizes; overflow is checked even when a later size is 0 */
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (i == infer) continue;
    if (shape[i] == 0) { zero = 1; continue; }
    n = mul_within(n, shape[i], DL_MAX_NUMEL);
    if (n < 0) return fail_shape(ctx, op, ndim, shape, "overflows (more than 2^48 elements)");
  }
  if (zero) n = 0;
  if (infer >= 0) {
    if (n == 0)
      return fail_shape(ctx, op, ndim, shape, "is ambiguous: the size of -1 cannot be inferred with 0 elements");
    if (known % n != 0) {
      char s[256];
      dl_shape_str(shape, ndim, s, sizeof s);
      say(ctx, "%s: shape %s is invalid for %lld elements", op, s, (long long)known);
      return -1;
    }
    shape[infer] = known / n;
    n = known;
  }
  if (known >= 0 && n != known) {
    char s[256];
    dl_shape_str(shape, ndim, s, sizeof s);
    say(ctx, "%s: shape %s is invalid for %lld elements", op, s, (long long)known);
    return -1;
  }
  if (numel) *numel = n;
  return 0;
}

int dl_shape_check(dl_ctx *ctx, const char *op, int ndim, const int64_t *shape, int64_t *numel) {
  int64_t s[DL_MAXDIM];
  if (ndim < 0 || ndim > DL_MAXDIM) {
    say(ctx, "%s: %d dimensions, at most %d supported", op, ndim, DL_MAXDIM);
    return -1;
  }
  for (int i = 0; i < ndim; i++) s[i] = shape[i];
  return dl_shape_resolve(ctx, op, ndim, s, -1, numel);
}

int dl_shape_mul(dl_ctx *ctx, const char *op, const char *what, int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) {
    say(ctx, "%s: %s %lld x %lld has a negative factor", op, what, (long long)a, (long long)b);
    return -1;
  }
  int64_t p = mul_within(a, b, DL_MAX_NUMEL);
  if (p < 0) {
    say(ctx, "%s: %s %lld x %lld overflows (more than 2^48)", op, what, (long long)a, (long long)b);
    return -1;
  }
  *out = p;
  return 0;
}

int dl_shape_add(dl_ctx *ctx, const char *op, const char *what, int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0 || a > DL_MAX_NUMEL - b) {
    say(ctx, "%s: %s %lld + %lld is negative or overflows (more than 2^48)", op, what, (long long)a,
            (long long)b);
    return -1;
  }
  *out = a + b;
  return 0;
}

int dl_shape_bytes(dl_ctx *ctx, const char *op, int64_t numel, size_t elsize, int64_t *bytes) {
  if (numel < 0 || numel > DL_MAX_NUMEL || elsize > 64) {
    say(ctx, "%s: %lld elements of %zu bytes is out of range", op, (long long)numel, elsize);
    return -1;
  }
  *bytes = numel * (int64_t)elsize;     /* <= 2^48 * 64 = 2^54 */
  return 0;
}

void dl_shape_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    stride[i] = s;
    s *= shape[i];                      /* a checked shape: s <= DL_MAX_NUMEL */
  }
}

int64_t dl_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];   /* a checked shape: n <= DL_MAX_NUMEL */
  return n;
}

int dl_shape_fits(int ndim, const int64_t *shape, const int64_t *stride, int64_t offset, int64_t limit) {
  int64_t lo = offset, hi = offset, t;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return 0;
    if (shape[i] == 0) return 1;                   /* no elements: nothing is read */
  }
  for (int i = 0; i < ndim; i++) {
    if (__builtin_mul_overflow(shape[i] - 1, stride[i], &t)) return 0;
    if (t < 0 ? __builtin_add_overflow(lo, t, &lo) : __builtin_add_overflow(hi, t, &hi)) return 0;
  }
  return lo >= 0 && hi < limit;
}
