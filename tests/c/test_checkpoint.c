/* test_checkpoint.c -- checkpoint files from C: bit-exact round trips (int64
 * extremes, NaN payloads, strided views, names with NUL bytes), argument
 * errors, hostile headers, write failures, and an allocation-failure sweep
 * over save and load that must leak nothing. */
/* See LICENSE */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "dl_test.h"

static char dir[64];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void spit(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(p, 1, n, f);
  fclose(f);
}

static int count_files(void) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static int has_temp(void) {
  DIR *d = opendir(dir);
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp-")) found = 1;
  closedir(d);
  return found;
}

static const dl_checkpoint_entry *find(const dl_checkpoint *ck, const char *name, size_t len) {
  for (int i = 0; i < ck->ntensors; i++)
    if (ck->tensors[i].name_len == len && memcmp(ck->tensors[i].name, name, len) == 0) return &ck->tensors[i];
  return NULL;
}

static void test_round_trip(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128];
  path_in(p, sizeof p, "rt.safetensors");
  int64_t s23[2] = {2, 3}, s4[1] = {4}, s0[2] = {0, 5};
  dl_tensor *big = dl_tensor_new_empty(ctx, DL_I64, 2, s23);
  int64_t *bv = big->st->data;
  const int64_t vals[6] = {INT64_MIN, INT64_MAX, ((int64_t)1 << 53) + 1, -1, 0, 123456789012345LL};
  memcpy(bv, vals, sizeof vals);
  /* transposed view [3, 2]: written contiguously, exactly, without a double round trip */
  int64_t ts[2] = {3, 2}, tst[2] = {1, 3};
  dl_tensor *bt = dl_view_new(ctx, big, 2, ts, tst, 0);
  dl_tensor *f = dl_tensor_new_empty(ctx, DL_F32, 1, s4);
  uint32_t fbits[4] = {0x7fc00001u, 0xff800000u, 0x00000001u, 0x3f800000u};  /* NaN payload, -inf, denormal, 1 */
  memcpy(f->st->data, fbits, sizeof fbits);
  dl_tensor *scalar = dl_tensor_new_scalar(ctx, DL_F64, -0.0);
  dl_tensor *empty = dl_tensor_new_zeros(ctx, DL_U8, 2, s0);
  dl_tensor *i32 = dl_tensor_new_arange(ctx, DL_I32, -2, 2, 1);
  dl_checkpoint_item items[6] = {
    {"big", 3, big}, {"big.T", 5, bt}, {"f\"\\\n", 4, f}, {"nul\0byte", 8, scalar},
    {"empty", 5, empty}, {"\xc3\xa9t\xc3\xa9", 6, i32},
  };
  dl_checkpoint_kv kv[2] = {{"step", 4, "100", 3}, {"note", 4, "a\0b \"q\"", 7}};
  DL_CHECK(dl_checkpoint_save(ctx, p, items, 6, kv, 2) == 0);
  DL_CHECK(!has_temp());

  dl_checkpoint *ck = dl_checkpoint_read_new(ctx, p, DL_CHECKPOINT_DATA);
  DL_CHECK(ck != NULL);
  if (!ck) {
    puts(ctx->err);
    goto out;
  }
  DL_CHECK(ck->checksummed == 1 && ck->ntensors == 6);
  DL_CHECK(ck->header_len % 8 == 0);
  const dl_checkpoint_entry *e = find(ck, "big", 3);
  DL_CHECK(e && e->dtype == DL_I64 && e->ndim == 2 && memcmp(e->t->st->data, vals, sizeof vals) == 0);
  e = find(ck, "big.T", 5);
  DL_CHECK(e && e->ndim == 2 && e->shape[0] == 3 && e->shape[1] == 2);
  if (e) {
    const int64_t *tv = e->t->st->data;
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 2; c++) DL_CHECK(tv[r * 2 + c] == vals[c * 3 + r]);
  }
  e = find(ck, "f\"\\\n", 4);
  DL_CHECK(e && memcmp(e->t->st->data, fbits, sizeof fbits) == 0);
  e = find(ck, "nul\0byte", 8);
  DL_CHECK(e && e->ndim == 0 && e->dtype == DL_F64 && memcmp(e->t->st->data, scalar->st->data, 8) == 0);
  e = find(ck, "empty", 5);
  DL_CHECK(e && e->ndim == 2 && e->shape[0] == 0 && e->shape[1] == 5 && dl_numel(e->t) == 0);
  e = find(ck, "\xc3\xa9t\xc3\xa9", 6);
  DL_CHECK(e && e->dtype == DL_I32 && ((int32_t *)e->t->st->data)[0] == -2 && ((int32_t *)e->t->st->data)[3] == 1);
  int found = 0;
  for (int i = 0; i < ck->nmeta; i++) {
    const dl_checkpoint_kv *m = &ck->meta[i];
    if (m->key_len == 4 && memcmp(m->key, "note", 4) == 0)
      found += m->value_len == 7 && memcmp(m->value, "a\0b \"q\"", 7) == 0;
    if (m->key_len == 4 && memcmp(m->key, "step", 4) == 0)
      found += m->value_len == 3 && memcmp(m->value, "100", 3) == 0;
  }
  DL_CHECK(found == 2);
  /* the tensors are in name order, and so is the data */
  for (int i = 1; i < ck->ntensors; i++) DL_CHECK(ck->tensors[i - 1].end <= ck->tensors[i].begin);
  dl_checkpoint_release(ck);
out:
  dl_tensor_release(bt);
  dl_tensor_release(big);
  dl_tensor_release(f);
  dl_tensor_release(scalar);
  dl_tensor_release(empty);
  dl_tensor_release(i32);
  unlink(p);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

static void test_bad_arguments(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128];
  path_in(p, sizeof p, "args.safetensors");
  int64_t s[1] = {2};
  dl_tensor *t = dl_tensor_new_zeros(ctx, DL_F32, 1, s);
  dl_checkpoint_item dup[2] = {{"a", 1, t}, {"a", 1, t}};
  DL_CHECK(dl_checkpoint_save(ctx, p, dup, 2, NULL, 0) == DL_CHECKPOINT_EARG);
  DL_CHECK(strstr(ctx->err, "duplicate tensor name 'a'") != NULL);
  dl_checkpoint_item md[1] = {{"__metadata__", 12, t}};
  DL_CHECK(dl_checkpoint_save(ctx, p, md, 1, NULL, 0) == DL_CHECKPOINT_EARG);
  DL_CHECK(strstr(ctx->err, "'__metadata__' is reserved") != NULL);
  dl_checkpoint_item bad[1] = {{"\xff", 1, t}};
  DL_CHECK(dl_checkpoint_save(ctx, p, bad, 1, NULL, 0) == DL_CHECKPOINT_EARG);
  DL_CHECK(strstr(ctx->err, "tensor name '\xff' is not valid UTF-8") != NULL);
  dl_checkpoint_item ok[1] = {{"a", 1, t}};
  dl_checkpoint_kv res[1] = {{"crc32", 5, "x", 1}};
  DL_CHECK(dl_checkpoint_save(ctx, p, ok, 1, res, 1) == DL_CHECKPOINT_EARG);
  DL_CHECK(strstr(ctx->err, "metadata key 'crc32' is reserved") != NULL);
  dl_checkpoint_kv surrogate[1] = {{"k", 1, "\xed\xa0\x80", 3}};
  DL_CHECK(dl_checkpoint_save(ctx, p, ok, 1, surrogate, 1) == DL_CHECKPOINT_EARG);
  DL_CHECK(strstr(ctx->err, "metadata value for 'k' is not valid UTF-8") != NULL);
  DL_CHECK(access(p, F_OK) != 0);             /* nothing was written */
  dl_tensor_release(t);
  dl_ctx_free(ctx);
}

/* a file from a header text and n data bytes */
static void hostile(const char *path, const char *header, size_t ndata) {
  size_t hn = strlen(header);
  unsigned char *buf = calloc(1, 8 + hn + ndata);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hn >> (8 * i));
  memcpy(buf + 8, header, hn);
  spit(path, buf, 8 + hn + ndata);
  free(buf);
}

static void expect_refused(dl_ctx *ctx, const char *path, const char *reason) {
  dl_checkpoint *ck = dl_checkpoint_read_new(ctx, path, DL_CHECKPOINT_DATA);
  DL_CHECK(ck == NULL);
  dl_checkpoint_release(ck);
  if (!strstr(ctx->err, reason)) {
    dl_test_failed++;
    fprintf(stderr, "expected '%s' in: %s\n", reason, ctx->err);
  }
  DL_CHECK(strstr(ctx->err, path) != NULL);
}

static void test_hostile(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128];
  path_in(p, sizeof p, "hostile.safetensors");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  dl_checkpoint *ck = dl_checkpoint_read_new(ctx, p, DL_CHECKPOINT_DATA);
  DL_CHECK(ck && ck->ntensors == 1 && ck->checksummed == 0);     /* the well-formed control */
  dl_checkpoint_release(ck);

  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8);
  expect_refused(ctx, p, "header is not valid JSON: expected ',' or '}', but the header ends at byte 53");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8);
  expect_refused(ctx, p, "tensor 'a' has an unknown field 'x'");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2, 18446744073709551616],\"data_offsets\":[0,8]}}", 8);
  expect_refused(ctx, p, "tensor 'a' has a number larger than 2^62 in its shape");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4611686018427387904],"
             "\"data_offsets\":[0,0]}}", 0);
  expect_refused(ctx, p, "tensor 'a' has an absurd shape");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4);
  expect_refused(ctx, p, "tensor 'a' has more than 8 entries in its shape");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
  expect_refused(ctx, p, "tensor 'a' has a negative number in its shape");
  hostile(p, "{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_refused(ctx, p, "high surrogate not followed by a low surrogate");
  hostile(p, "{\"\xc0\x80\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_refused(ctx, p, "invalid UTF-8 in a string at byte 2");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8);
  expect_refused(ctx, p, "tensor 'a' has data_offsets [8, 0] that end before they begin");
  hostile(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16);
  expect_refused(ctx, p, "duplicate tensor name 'a'");
  hostile(p, "{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_refused(ctx, p, "__metadata__ value for 'k' is not a string");
  hostile(p, "{\"__metadata__\":{\"format\":\"dlua-checkpoint\",\"format_version\":\"2\"}}", 0);
  expect_refused(ctx, p, "format_version '2' is not supported (this dlua reads version 1)");
  hostile(p, "{\"\\u001b[31m\":{\"dtype\":\"F3\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  expect_refused(ctx, p, "tensor '\\x1b[31m' has unsupported dtype 'F3'");   /* escapes shown, not sent */
  spit(p, "\x08\0\0\0\0\0\0\0{}      ", 15);
  expect_refused(ctx, p, "header length 8 is larger than the rest of the file (7 bytes)");
  spit(p, "abc", 3);
  expect_refused(ctx, p, "the file is truncated: 3 bytes, less than the 8-byte header length");
  path_in(p, sizeof p, "missing.safetensors");
  expect_refused(ctx, p, "cannot open");
  unlink(p);
  path_in(p, sizeof p, "hostile.safetensors");
  unlink(p);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

static void test_modes_and_write_failures(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128], q[160];
  path_in(p, sizeof p, "modes.safetensors");
  int64_t s[1] = {1000};
  dl_tensor *t = dl_tensor_new_arange(ctx, DL_F32, 0, 1000, 1);
  dl_checkpoint_item it[1] = {{"x", 1, t}};
  DL_CHECK(dl_checkpoint_save(ctx, p, it, 1, NULL, 0) == 0);
  /* flip the last data byte: the header alone still reads, verify and load refuse */
  FILE *f = fopen(p, "r+b");
  fseek(f, -1, SEEK_END);
  int c = fgetc(f);
  fseek(f, -1, SEEK_END);
  fputc(c ^ 0x10, f);
  fclose(f);
  dl_checkpoint *ck = dl_checkpoint_read_new(ctx, p, DL_CHECKPOINT_HEADER);
  DL_CHECK(ck && ck->ntensors == 1 && ck->tensors[0].t == NULL && ck->data_len == 4000);
  dl_checkpoint_release(ck);
  DL_CHECK(dl_checkpoint_read_new(ctx, p, DL_CHECKPOINT_VERIFY) == NULL);
  DL_CHECK(strstr(ctx->err, "checksum mismatch for tensor 'x'") != NULL);
  DL_CHECK(dl_checkpoint_read_new(ctx, p, DL_CHECKPOINT_DATA) == NULL);
  DL_CHECK(strstr(ctx->err, "checksum mismatch for tensor 'x'") != NULL);

  /* a missing directory: the error names the path and errno text */
  snprintf(q, sizeof q, "%s/no/such/dir/ck.safetensors", dir);
  DL_CHECK(dl_checkpoint_save(ctx, q, it, 1, NULL, 0) == DL_CHECKPOINT_EIO);
  DL_CHECK(strstr(ctx->err, q) && strstr(ctx->err, "No such file or directory"));
  /* the target is a directory: refused (only regular files are replaced), nothing left behind */
  path_in(q, sizeof q, "adir");
  DL_CHECK(mkdir(q, 0777) == 0);
  int before = count_files();
  DL_CHECK(dl_checkpoint_save(ctx, q, it, 1, NULL, 0) == DL_CHECKPOINT_EIO);
  DL_CHECK(strstr(ctx->err, "not a regular file") != NULL);
  DL_CHECK(count_files() == before && !has_temp());
  rmdir(q);
  (void)s;
  dl_tensor_release(t);
  unlink(p);
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
}

/* every allocation of save and load fails once in turn: each call fails
 * cleanly (nothing leaked, no temporary file, no partial result) */
static void test_alloc_failures(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128];
  path_in(p, sizeof p, "oom.safetensors");
  int64_t s[2] = {3, 4}, ts[2] = {4, 3}, tst[2] = {1, 4};
  dl_tensor *a = dl_tensor_new_arange(ctx, DL_F64, 0, 12, 1);
  dl_tensor *b = dl_tensor_new_empty(ctx, DL_I32, 2, s);
  dl_tensor *bt = dl_view_new(ctx, b, 2, ts, tst, 0);
  dl_checkpoint_item it[3] = {{"a", 1, a}, {"b", 1, b}, {"bt", 2, bt}};
  dl_checkpoint_kv kv[1] = {{"step", 4, "7", 1}};
  size_t base = ctx->mem.in_use;
  int saves = 0, loads = 0;
  for (uint64_t k = 1; k < 200; k++) {
    ctx->mem.fail_at = ctx->mem.allocs + k;
    int rc = dl_checkpoint_save(ctx, p, it, 3, kv, 1);
    ctx->mem.fail_at = 0;
    DL_CHECK(ctx->mem.in_use == base && !has_temp());
    if (rc == 0) break;
    DL_CHECK(rc == DL_CHECKPOINT_EIO && strstr(ctx->err, "out of memory") != NULL);
    saves++;
  }
  for (uint64_t k = 1; k < 200; k++) {
    ctx->mem.fail_at = ctx->mem.allocs + k;
    dl_checkpoint *ck = dl_checkpoint_read_new(ctx, p, DL_CHECKPOINT_DATA);
    ctx->mem.fail_at = 0;
    if (ck) {
      DL_CHECK(ck->ntensors == 3);
      dl_checkpoint_release(ck);
      DL_CHECK(ctx->mem.in_use == base);
      break;
    }
    DL_CHECK(ctx->mem.in_use == base);
    DL_CHECK(strstr(ctx->err, "out of memory") && strstr(ctx->err, p));
    loads++;
  }
  DL_CHECK(saves >= 4 && loads >= 5);          /* the sweep really went through the paths */
  dl_tensor_release(bt);
  dl_tensor_release(b);
  dl_tensor_release(a);
  unlink(p);
  dl_ctx_free(ctx);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/dl_ckpt_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_round_trip();
  test_bad_arguments();
  test_hostile();
  test_modes_and_write_failures();
  test_alloc_failures();
  DL_CHECK(count_files() == 0);
  rmdir(dir);
  DL_TEST_END();
}
