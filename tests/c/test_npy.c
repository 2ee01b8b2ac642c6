/* test_npy.c -- the .npy/.npz readers from C (engine/io/npy.h, npz.h) and the core's
 * external storage (dl_tensor_new_external): values, the mapped path's accounting, and an
 * allocation-failure sweep over every read path (each failure clean, nothing leaked under
 * ASan). Files numpy writes are checked against numpy in tests/lua/npy_spec.lua. */
/* See LICENSE */
#include "dl_test.h"
#include "io/fileio.h"
#include "io/npy.h"
#include "io/npz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a version 1.0 .npy image of header dict h and n data bytes, into buf; returns its length */
static size_t npy(uint8_t *buf, const char *h, const void *data, size_t n) {
  size_t hl = strlen(h), pad = (64 - (10 + hl + 1) % 64) % 64;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (uint8_t)((hl + pad + 1) & 0xff);
  buf[9] = (uint8_t)((hl + pad + 1) >> 8);
  memcpy(buf + 10, h, hl);
  memset(buf + 10 + hl, ' ', pad);
  buf[10 + hl + pad] = '\n';
  memcpy(buf + 11 + hl + pad, data, n);
  return 11 + hl + pad + n;
}

static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, v & 0xffff); put16(p + 2, v >> 16); }

/* a zip of one stored member name holding data[0..n), into buf; returns its length */
static size_t zip1(uint8_t *buf, const char *name, const uint8_t *data, size_t n) {
  size_t nl = strlen(name);
  uint32_t crc = dl_crc32(0, data, n);
  uint8_t *p = buf;
  memset(p, 0, 30);
  put32(p, 0x04034b50); put16(p + 4, 20); put32(p + 14, crc); put32(p + 18, (uint32_t)n); put32(p + 22, (uint32_t)n);
  put16(p + 26, (unsigned)nl);
  memcpy(p + 30, name, nl);
  memcpy(p + 30 + nl, data, n);
  p += 30 + nl + n;
  uint8_t *cd = p;
  memset(p, 0, 46);
  put32(p, 0x02014b50); put16(p + 4, 20); put16(p + 6, 20); put32(p + 16, crc); put32(p + 20, (uint32_t)n);
  put32(p + 24, (uint32_t)n); put16(p + 28, (unsigned)nl);
  memcpy(p + 46, name, nl);
  p += 46 + nl;
  memset(p, 0, 22);
  put32(p, 0x06054b50); put16(p + 8, 1); put16(p + 10, 1); put32(p + 12, (uint32_t)(p - cd));
  put32(p + 16, (uint32_t)(cd - buf));
  return (size_t)(p + 22 - buf);
}

static void spit(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  DL_CHECK(f && fwrite(p, 1, n, f) == n);
  if (f) fclose(f);
}

static int released;
static void count_release(void *arg) { released++; free(arg); }

static void test_external(dl_ctx *ctx) {
  int64_t shape[2] = {2, 3};
  float *data = malloc(6 * sizeof *data);
  for (int i = 0; i < 6; i++) data[i] = (float)i;
  size_t in_use = ctx->mem.in_use;
  DL_CHECK(!dl_tensor_new_external(ctx, DL_F32, 2, shape, data, 5 * sizeof *data, count_release, data));
  DL_CHECK(strstr(ctx->err, "cannot hold 6 float32 elements") != NULL);
  DL_CHECK(!dl_tensor_new_external(ctx, DL_F32, 1, shape, (char *)data + 1, 6 * sizeof *data, count_release, data));
  DL_CHECK(released == 0 && ctx->mem.external == 0);       /* refused: not taken */
  dl_tensor *t = dl_tensor_new_external(ctx, DL_F32, 2, shape, data, 6 * sizeof *data, count_release, data);
  DL_CHECK(t && ctx->mem.external == 24);
  DL_CHECK(ctx->mem.in_use - in_use < 1024);                  /* headers only */
  int64_t s1 = 3, st1 = 1;
  dl_tensor *row = dl_view_new(ctx, t, 1, &s1, &st1, 3);      /* a view keeps it alive */
  dl_tensor_release(t);
  DL_CHECK(released == 0 && dl_get_flat(row, 2) == 5.0);
  dl_tensor_release(row);
  DL_CHECK(released == 1 && ctx->mem.external == 0 && ctx->mem.in_use == in_use);
}

static void test_values(dl_ctx *ctx) {
  uint8_t buf[512];
  int16_t be[6];
  for (int i = 0; i < 6; i++) be[i] = (int16_t)(((i - 2) & 0xff) << 8 | ((unsigned)(i - 2) >> 8 & 0xff));  /* >i2 */
  size_t n = npy(buf, "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }", be, sizeof be);
  dl_tensor *t = dl_npy_read_mem_new(ctx, "mem", buf, n);
  DL_CHECK(t && t->dtype == DL_I32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3);
  /* column-major [-2, -1, 0, 1, 2, 3] is [[-2, 0, 2], [-1, 1, 3]] */
  static const double want[6] = {-2, 0, 2, -1, 1, 3};
  for (int i = 0; t && i < 6; i++) DL_CHECK(dl_get_flat(t, i) == want[i]);
  dl_tensor_release(t);
  n = npy(buf, "{'shape': (), 'fortran_order': False, 'descr': '<f8', }", "\0\0\0\0\0\0\x04\x40", 8);
  t = dl_npy_read_mem_new(ctx, "mem", buf, n);
  DL_CHECK(t && t->ndim == 0 && dl_get_flat(t, 0) == 2.5);
  dl_tensor_release(t);
  DL_CHECK(!dl_npy_read_mem_new(ctx, "mem", buf, n - 1));
  DL_CHECK(strcmp(ctx->err, "npy: 'mem' is truncated: the header declares 8 data bytes at offset 128, the stream has 7") == 0);
}

/* every allocation of a read failed in turn: each fails with a message and leaks nothing */
static void sweep(dl_ctx *ctx, const char *what, dl_tensor *(*read)(dl_ctx *, const char *), const char *path) {
  int ok = 0;
  for (uint64_t k = 1; k < 64 && !ok; k++) {
    ctx->mem.fail_at = ctx->mem.allocs + k;
    ctx->err[0] = 0;
    dl_tensor *t = read(ctx, path);
    ctx->mem.fail_at = 0;
    if (t) ok = 1;
    else if (!ctx->err[0]) fprintf(stderr, "%s: allocation %llu failed without a message\n", what, (unsigned long long)k);
    DL_CHECK(t || ctx->err[0]);
    dl_tensor_release(t);
  }
  DL_CHECK(ok);
  DL_CHECK(ctx->mem.external == 0);
}

static dl_tensor *read_mapped(dl_ctx *ctx, const char *p) { return dl_npy_read_new(ctx, p, 1); }
static dl_tensor *read_plain(dl_ctx *ctx, const char *p) { return dl_npy_read_new(ctx, p, 0); }
static dl_tensor *read_member(dl_ctx *ctx, const char *p) {
  dl_npz *z = dl_npz_open(ctx, p);
  dl_tensor *t = z ? dl_npz_read_new(ctx, z, dl_npz_find(z, "a")) : NULL;
  dl_npz_close(z);
  return t;
}

static void test_files(dl_ctx *ctx) {
  char dir[] = "/tmp/dlua-test-npy-XXXXXX";
  if (!mkdtemp(dir)) return;
  char fp[64], bp[64], zp[64];
  snprintf(fp, sizeof fp, "%s/f.npy", dir);
  snprintf(bp, sizeof bp, "%s/b.npy", dir);
  snprintf(zp, sizeof zp, "%s/a.npz", dir);
  uint8_t buf[512], zbuf[1024];
  float f[4] = {1, 2, 3, 4};
  size_t n = npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f, sizeof f);
  spit(fp, buf, n);
  dl_tensor *t = dl_npy_read_new(ctx, fp, 1);
  DL_CHECK(t && dl_npy_is_mapped(t) && ctx->mem.external == sizeof f && dl_get_flat(t, 3) == 4.0);
  dl_tensor_release(t);
  DL_CHECK(ctx->mem.external == 0);
  t = dl_npy_read_new(ctx, fp, 0);
  DL_CHECK(t && !dl_npy_is_mapped(t) && dl_get_flat(t, 3) == 4.0);
  dl_tensor_release(t);
  sweep(ctx, "mapped", read_mapped, fp);
  sweep(ctx, "read", read_plain, fp);
  uint8_t bools[3] = {0, 7, 1};
  spit(bp, buf, npy(buf, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3));
  sweep(ctx, "converted from a mapping", read_mapped, bp);
  size_t zn = zip1(zbuf, "a.npy", buf, npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f, sizeof f));
  spit(zp, zbuf, zn);
  t = read_member(ctx, zp);
  DL_CHECK(t && dl_get_flat(t, 2) == 3.0);
  dl_tensor_release(t);
  sweep(ctx, "npz member", read_member, zp);
  zbuf[zn - 22 - 46 - 5 - 10] ^= 1;                          /* a data byte: the CRC must catch it */
  spit(zp, zbuf, zn);
  DL_CHECK(!read_member(ctx, zp) && strstr(ctx->err, "CRC-32 mismatch") != NULL);
  unlink(fp);
  unlink(bp);
  unlink(zp);
  rmdir(dir);
}

int main(void) {
  dl_ctx *ctx = dl_ctx_new();
  test_external(ctx);
  test_values(ctx);
  test_files(ctx);
  dl_ctx_free(ctx);
  DL_TEST_END();
}
