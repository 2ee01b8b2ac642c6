/* test_shape.c -- the checked shape arithmetic (shape.c) and every place a
 * shape enters the core through it: creation, view, reshape, expand, narrow,
 * conv2d geometry, the IDX and cache headers (crafted files that used to
 * overflow int64), and the IDX reader's refusal of trailing bytes and of
 * several gzip members. Messages are asserted exactly where users see them. */
/* See LICENSE */
#include "ops/conv.h"
#include "dl_test.h"
#include "io/idx.h"
#include "data/pipeline.h"
#include "data/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static dl_ctx *ctx;
static char dir[256];

#define ERR_IS(s) (strcmp(ctx->err, (s)) == 0 || (fprintf(stderr, "  got: %s\n", ctx->err), 0))
#define ERR_HAS(s) (strstr(ctx->err, (s)) != NULL || (fprintf(stderr, "  got: %s\n", ctx->err), 0))

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

/* appends one gzip member holding data to path ("ab": several calls make several members) */
static void gz_member(const char *path, const char *mode, const void *data, unsigned n) {
  gzFile g = gzopen(path, mode);
  if (!g) return;
  gzwrite(g, data, n);
  gzclose(g);
}

static void test_resolve(void) {
  int64_t s[4], n = -7;
  s[0] = 2; s[1] = -1; s[2] = 3;
  DL_CHECK(dl_shape_resolve(ctx, "reshape", 3, s, 24, &n) == 0 && s[1] == 4 && n == 24);
  s[0] = 0; s[1] = -1;
  DL_CHECK(dl_shape_resolve(ctx, "reshape", 2, s, 0, &n) == -1 &&
           ERR_IS("reshape: shape [0, -1] is ambiguous: the size of -1 cannot be inferred with 0 elements"));
  s[0] = -1; s[1] = 3;                              /* 0 elements, but the other sizes are not 0: -1 is 0 */
  DL_CHECK(dl_shape_resolve(ctx, "reshape", 2, s, 0, &n) == 0 && s[0] == 0 && n == 0);
  s[0] = -1; s[1] = -1;
  DL_CHECK(dl_shape_resolve(ctx, "view", 2, s, 4, NULL) == -1 && ERR_IS("view: shape [-1, -1] has more than one -1"));
  s[0] = 3; s[1] = -1;
  DL_CHECK(dl_shape_resolve(ctx, "view", 2, s, 4, NULL) == -1 && ERR_IS("view: shape [3, -1] is invalid for 4 elements"));
  s[0] = 2; s[1] = 3;
  DL_CHECK(dl_shape_resolve(ctx, "view", 2, s, 4, NULL) == -1 && ERR_IS("view: shape [2, 3] is invalid for 4 elements"));
  s[0] = 2; s[1] = -1;                              /* no known count: -1 is just negative */
  DL_CHECK(dl_shape_resolve(ctx, "tensor", 2, s, -1, NULL) == -1 &&
           ERR_IS("tensor: size -1 of dimension 2 is negative in shape [2, -1]"));
  s[0] = ((int64_t)1 << 62) + 1; s[1] = 4;          /* wrapped to 4 before */
  DL_CHECK(dl_shape_resolve(ctx, "view", 2, s, 4, NULL) == -1 &&
           ERR_IS("view: shape [4611686018427387905, 4] overflows (more than 2^48 elements)"));
  s[0] = 0; s[1] = (int64_t)1 << 62; s[2] = (int64_t)1 << 62;   /* 0 elements, but its strides would overflow */
  DL_CHECK(dl_shape_check(ctx, "tensor", 3, s, &n) == -1 &&
           ERR_IS("tensor: shape [0, 4611686018427387904, 4611686018427387904] overflows (more than 2^48 elements)"));
  s[0] = DL_MAX_NUMEL;
  DL_CHECK(dl_shape_check(ctx, "t", 1, s, &n) == 0 && n == DL_MAX_NUMEL);
  s[0] = DL_MAX_NUMEL + 1;
  DL_CHECK(dl_shape_check(ctx, "t", 1, s, &n) == -1);
  s[0] = (int64_t)1 << 24; s[1] = (int64_t)1 << 24;
  DL_CHECK(dl_shape_check(ctx, "t", 2, s, &n) == 0 && n == DL_MAX_NUMEL);
  s[1] += 1;
  DL_CHECK(dl_shape_check(ctx, "t", 2, s, &n) == -1);
  DL_CHECK(dl_shape_check(ctx, "t", 9, s, &n) == -1 && ERR_IS("t: 9 dimensions, at most 8 supported"));
  DL_CHECK(dl_shape_check(NULL, "t", 2, s, &n) == -1);        /* no context: no message, still refused */
  DL_CHECK(dl_shape_check(ctx, "t", 0, s, &n) == 0 && n == 1);

  int64_t p = 0;
  DL_CHECK(dl_shape_mul(ctx, "idx", "records x bytes", 3, 5, &p) == 0 && p == 15);
  DL_CHECK(dl_shape_mul(ctx, "idx", "records x bytes", (int64_t)1 << 40, (int64_t)1 << 9, &p) == -1 &&
           ERR_IS("idx: records x bytes 1099511627776 x 512 overflows (more than 2^48)"));
  DL_CHECK(dl_shape_mul(ctx, "idx", "records x bytes", -1, 2, &p) == -1 && ERR_HAS("negative factor"));
  DL_CHECK(dl_shape_add(ctx, "p", "start batch", DL_MAX_NUMEL, 1, &p) == -1);
  DL_CHECK(dl_shape_add(ctx, "p", "start batch", 2, 3, &p) == 0 && p == 5);
  DL_CHECK(dl_shape_bytes(ctx, "t", DL_MAX_NUMEL, 8, &p) == 0 && p == DL_MAX_NUMEL * 8);
  DL_CHECK(dl_shape_bytes(ctx, "t", DL_MAX_NUMEL + 1, 1, &p) == -1);

  int64_t sh[2] = {3, 4}, st[2] = {4, 1};
  DL_CHECK(dl_shape_fits(2, sh, st, 0, 12) == 1);
  DL_CHECK(dl_shape_fits(2, sh, st, 1, 12) == 0);             /* last element at 12 */
  st[0] = INT64_MAX / 2;
  DL_CHECK(dl_shape_fits(2, sh, st, 0, 12) == 0);             /* stride product overflows: refused */
  sh[0] = 0;
  DL_CHECK(dl_shape_fits(2, sh, st, 99, 12) == 1);            /* no elements */
}

static void test_views(void) {
  int64_t four = 4, two = 2, zero = 0;
  dl_tensor *a = dl_tensor_new_zeros(ctx, DL_F32, 1, &four);
  int64_t big[2] = {((int64_t)1 << 62) + 1, 4};
  DL_CHECK(dl_view(ctx, a, 2, big) == NULL &&
           ERR_IS("view: shape [4611686018427387905, 4] overflows (more than 2^48 elements)"));
  DL_CHECK(dl_reshape(ctx, a, 2, big) == NULL && ERR_HAS("reshape: shape [4611686018427387905, 4] overflows"));
  /* a view must stay inside its storage whatever shape, strides and offset it is given */
  int64_t sh1 = 4, st1 = 1, sh2 = 2, st2 = 3;
  DL_CHECK(dl_view_new(ctx, a, 1, &sh1, &st1, 1) == NULL &&
           ERR_IS("view: shape [4] at offset 1 leaves the storage of 4 elements"));
  DL_CHECK(dl_view_new(ctx, a, 1, &sh2, &st2, 1) == NULL);
  dl_tensor *ok = dl_view_new(ctx, a, 1, &sh2, &st2, 0);
  DL_CHECK(ok != NULL);
  dl_tensor_release(ok);
  int64_t nar = 0;
  DL_CHECK(dl_narrow(ctx, a, 0, 2, INT64_MAX) == NULL &&
           ERR_IS("narrow: start 3 and length 9223372036854775807 out of range for dimension 1 of size 4"));
  (void)nar;
  dl_tensor_release(a);

  dl_tensor *b = dl_tensor_new_zeros(ctx, DL_F32, 1, &two);
  int64_t ex[2] = {(int64_t)1 << 62, 2};
  DL_CHECK(dl_expand(ctx, b, 2, ex) == NULL &&
           ERR_IS("expand: shape [4611686018427387904, 2] overflows (more than 2^48 elements)"));
  int64_t ok_ex[2] = {3, -1};
  dl_tensor *e = dl_expand(ctx, b, 2, ok_ex);
  DL_CHECK(e && e->shape[0] == 3 && e->shape[1] == 2 && dl_numel(e) == 6 && e->stride[0] == 0);
  dl_tensor_release(e);
  dl_tensor_release(b);

  dl_tensor *z = dl_tensor_new_zeros(ctx, DL_F32, 1, &zero);
  int64_t amb[2] = {0, -1};
  DL_CHECK(dl_reshape(ctx, z, 2, amb) == NULL &&
           ERR_IS("reshape: shape [0, -1] is ambiguous: the size of -1 cannot be inferred with 0 elements"));
  DL_CHECK(dl_view(ctx, z, 2, amb) == NULL && ERR_HAS("view: shape [0, -1] is ambiguous"));
  int64_t z5[2] = {0, 5};
  dl_tensor *v = dl_view(ctx, z, 2, z5);
  DL_CHECK(v && v->shape[0] == 0 && v->shape[1] == 5);
  dl_tensor_release(v);
  dl_tensor_release(z);

  /* a [2, 0] tensor viewed as [0, 5]: the chunk walk of the strides used to run past the shape */
  int64_t s20[2] = {2, 0};
  dl_tensor *t20 = dl_tensor_new_zeros(ctx, DL_F32, 2, s20);
  dl_tensor *tt = t20 ? dl_transpose(ctx, t20, 0, 1) : NULL;
  v = tt ? dl_view(ctx, tt, 2, z5) : NULL;
  DL_CHECK(v && v->shape[0] == 0 && v->shape[1] == 5);
  dl_tensor_release(v);
  dl_tensor_release(tt);
  dl_tensor_release(t20);
}

static void test_conv_geometry(void) {
  int64_t xs[4] = {1, 1, 5, 5}, ws[4] = {1, 1, 3, 3};
  dl_tensor *x = dl_tensor_new_zeros(ctx, DL_F32, 4, xs), *w = dl_tensor_new_zeros(ctx, DL_F32, 4, ws);
  dl_conv_opts o = {{1, 1}, {0, 0}, {1, 1}, 1};
  o.pad[0] = o.pad[1] = 2147483647;                            /* 2 * pad overflowed int */
  DL_CHECK(dl_conv2d(ctx, x, w, NULL, &o) == NULL && ERR_HAS("conv2d: shape [1, 1, 4294967297, 4294967297] overflows"));
  o.pad[0] = o.pad[1] = 0;
  o.dil[0] = 2147483647;
  DL_CHECK(dl_conv2d(ctx, x, w, NULL, &o) == NULL && ERR_HAS("smaller than the (dilated) kernel 4294967295x3"));
  int k[2] = {2147483647, 2147483647}, s[2] = {1, 1}, p[2] = {1073741824, 0};
  DL_CHECK(dl_pool2d(ctx, x, k, s, p, 1) == NULL && ERR_HAS("padding 1073741824 must be at most half the kernel"));
  dl_tensor_release(x);
  dl_tensor_release(w);
}

/* an IDX file of unsigned bytes with the given dims and data */
static size_t idx_bytes(unsigned char *buf, int nd, const uint32_t *dims, const void *data, size_t n) {
  size_t k = 0;
  buf[k++] = 0; buf[k++] = 0; buf[k++] = 8; buf[k++] = (unsigned char)nd;
  for (int i = 0; i < nd; i++) {
    buf[k++] = (unsigned char)(dims[i] >> 24); buf[k++] = (unsigned char)(dims[i] >> 16);
    buf[k++] = (unsigned char)(dims[i] >> 8); buf[k++] = (unsigned char)dims[i];
  }
  if (n) memcpy(buf + k, data, n);
  return k + n;
}

static void test_idx(void) {
  char path[300];
  unsigned char buf[128];
  uint32_t huge[3] = {0, 0xffffffffu, 0xffffffffu};        /* UBSan: signed overflow in the size product */
  path_of(path, sizeof path, "huge.idx");
  write_file(path, buf, idx_bytes(buf, 3, huge, NULL, 0));
  char want[800];
  snprintf(want, sizeof want, "idx: '%s': shape [0, 4294967295, 4294967295] overflows (more than 2^48 elements)", path);
  DL_CHECK(dl_idx_read_new(ctx, path) == NULL && ERR_IS(want));

  uint32_t d2[2] = {2, 3};
  const char data[8] = "abcdefXY";
  size_t n = idx_bytes(buf, 2, d2, data, 6);
  path_of(path, sizeof path, "ok.idx.gz");
  gz_member(path, "wb", buf, (unsigned)n);
  dl_tensor *t = dl_idx_read_new(ctx, path);
  DL_CHECK(t && t->shape[0] == 2 && t->shape[1] == 3 && ((uint8_t *)t->st->data)[5] == 'f');
  dl_tensor_release(t);

  path_of(path, sizeof path, "trail.idx");
  write_file(path, buf, n + 2);                               /* "XY" after the declared data */
  snprintf(want, sizeof want, "idx: '%s' has 2 trailing bytes after the 12-byte header and the 6 data bytes it declares",
           path);
  DL_CHECK(dl_idx_read_new(ctx, path) == NULL && ERR_IS(want));
  DL_CHECK(dl_idx_open(ctx, path) == NULL);                   /* refused before any data is read */

  path_of(path, sizeof path, "trail.idx.gz");
  gz_member(path, "wb", buf, (unsigned)n + 2);
  DL_CHECK(dl_idx_read_new(ctx, path) == NULL && ERR_HAS("trail.idx.gz' has trailing bytes after the 12-byte header"));

  path_of(path, sizeof path, "two.idx.gz");                   /* the same bytes, split over two members */
  gz_member(path, "wb", buf, 14);
  gz_member(path, "ab", buf + 14, (unsigned)n - 14);
  snprintf(want, sizeof want,
           "idx: '%s' holds several gzip members (its last one inflates to 4 bytes, the IDX file is 18); one member is "
           "supported", path);
  DL_CHECK(dl_idx_read_new(ctx, path) == NULL && ERR_IS(want));

  path_of(path, sizeof path, "extra.idx.gz");                 /* a whole second member after the file */
  gz_member(path, "wb", buf, (unsigned)n);
  gz_member(path, "ab", "more", 4);
  DL_CHECK(dl_idx_read_new(ctx, path) == NULL && ERR_HAS("extra.idx.gz' has trailing bytes"));
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, int64_t v) { memcpy(p, &v, 8); }

static void test_cache_header(void) {
  /* a 145-byte cache whose header declares 2^62 examples of a [2^30] field: the data size
   * n * per * elsize overflowed int64 (UBSan) before the file size was compared */
  unsigned char f[145];
  memset(f, 0, sizeof f);
  memcpy(f, "DLUACACH", 8);
  put32(f + 8, 1);
  put32(f + 12, 129);                                         /* header length: 145 - 16 */
  unsigned char *h = f + 16;
  put32(h, 84);
  memset(h + 4, 'f', 84);                                     /* fingerprint */
  put64(h + 88, (int64_t)1 << 62);                            /* examples */
  put32(h + 96, 1);                                           /* fields */
  put32(h + 100, 5);
  memcpy(h + 104, "image", 5);
  put32(h + 109, DL_U8);
  put32(h + 113, 1);
  put64(h + 117, (int64_t)1 << 30);
  char path[300];
  path_of(path, sizeof path, "c145.bin");
  write_file(path, f, sizeof f);
  dl_cache_status st;
  char want[500];
  snprintf(want, sizeof want,
           "cache: '%s' is corrupt at offset 141: field image: shape [4611686018427387904, 1073741824] overflows "
           "(more than 2^48 elements)", path);
  DL_CHECK(dl_cache_read_new(ctx, path, "x", &st) == NULL && st == DL_CACHE_CORRUPT && ERR_IS(want));
  put64(h + 88, -1);
  write_file(path, f, sizeof f);
  DL_CHECK(dl_cache_read_new(ctx, path, "x", &st) == NULL && st == DL_CACHE_CORRUPT &&
           ERR_HAS("bad example or field count"));
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/dl_test_shape_%ld", (long)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd) != 0) return 1;
  ctx = dl_ctx_new();
  test_resolve();
  test_views();
  test_conv_geometry();
  test_idx();
  test_cache_header();
  DL_CHECK(ctx->mem.in_use == 0);                             /* every tensor released */
  dl_ctx_free(ctx);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  DL_TEST_END();
}
