/* fuzz_npy.c -- libFuzzer harness for the .npy reader (engine/io/npy.h).
 *
 * Each input is the file, read three ways: by path with map = 0 (read(2) through the stream
 * reader), by path with map = 1 (mmap: the tensor views the mapping or is converted from it),
 * and from memory (dl_npy_read_mem_new). Promises checked: a failure leaves a terminated
 * message naming the file; the three ways agree (all fail, or all give the same dtype, shape
 * and bytes); a tensor is contiguous, its element count is the product of its shape, every
 * byte is readable, and a mapped tensor is counted in mem.external until it is released.
 * The reader allocates what the header declares only when the input holds those bytes, so
 * no input can ask for more than a few times its own size. Seeds: tests/fuzz/corpus/npy
 * (tests/fuzz/gen_npy_seeds.py, numpy), dictionary tests/fuzz/dict/npy.dict.
 */
/* See LICENSE */
#include "fuzz_common.h"

#include "io/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void failed(const dl_ctx *ctx) {
  CHECK(ctx->err[0] != 0, "failed without a message");
  CHECK(memchr(ctx->err, 0, sizeof ctx->err) != NULL, "unterminated message");
  CHECK(strstr(ctx->err, "npy: ") == ctx->err, "message does not start with 'npy: '");
}

static void valid(const dl_tensor *t) {
  CHECK(dl_is_contiguous(t), "not contiguous");
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  CHECK(n == dl_numel(t), "element count differs from the shape");
  size_t bytes = (size_t)n * dl_dtype_size(t->dtype);
  CHECK(bytes <= t->st->nbytes, "storage shorter than the shape");
  const volatile uint8_t *p = dl_data(t);
  uint8_t acc = 0;
  for (size_t i = 0; i < bytes; i++) acc ^= p[i];
  (void)acc;
}

static int same(const dl_tensor *a, const dl_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return memcmp(dl_data(a), dl_data(b), (size_t)dl_numel(a) * dl_dtype_size(a->dtype)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  dl_ctx *ctx = dl_ctx_new();
  if (!ctx) abort();
  dl_tensor *t[3];
  t[0] = dl_npy_read_new(ctx, path, 0);
  if (!t[0]) failed(ctx);
  ctx->err[0] = 0;
  t[1] = dl_npy_read_new(ctx, path, 1);
  if (!t[1]) failed(ctx);
  ctx->err[0] = 0;
  t[2] = dl_npy_read_mem_new(ctx, "fuzz", data, size);
  if (!t[2]) failed(ctx);
  CHECK(!t[0] == !t[1] && !t[1] == !t[2], "the three ways disagree on success");
  if (t[0]) {
    for (int k = 0; k < 3; k++) valid(t[k]);
    CHECK(same(t[0], t[1]) && same(t[0], t[2]), "the three ways give different arrays");
    CHECK(!dl_npy_is_mapped(t[0]) && !dl_npy_is_mapped(t[2]), "a read tensor claims to be mapped");
    CHECK(ctx->mem.external == (dl_npy_is_mapped(t[1]) ? t[1]->st->nbytes : 0), "mapped bytes not counted");
  }
  for (int k = 0; k < 3; k++) dl_tensor_release(t[k]);
  CHECK(ctx->mem.external == 0, "mapped bytes still counted after the release");
  dl_ctx_free(ctx);
  return 0;
}
