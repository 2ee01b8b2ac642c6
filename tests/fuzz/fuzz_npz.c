/* fuzz_npz.c -- libFuzzer harness for the .npz reader (engine/io/npz.h): the input is the
 * archive.
 *
 * Per input: dl_npz_open, then every member read with dl_npz_read_new (central directory,
 * ZIP64 records and extras, local headers, stored and deflated data, CRC-32, and the .npy
 * reader behind them). Promises checked: a failure leaves a terminated message starting
 * "npz: "; member names are unique and found again by dl_npz_find; a tensor is contiguous
 * with readable bytes. The reader refuses a member declaring more than deflate can produce
 * from its compressed bytes (1032:1), so no input asks for more than about 1032 x its size
 * (x 4 for widened dtypes). Seeds: tests/fuzz/corpus/npz (tests/fuzz/gen_npy_seeds.py,
 * numpy's savez and savez_compressed, and hand-made ZIP64 forms), dictionary
 * tests/fuzz/dict/npz.dict.
 */
/* See LICENSE */
#include "fuzz_common.h"

#include "io/npz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void failed(const dl_ctx *ctx) {
  CHECK(ctx->err[0] != 0, "failed without a message");
  CHECK(memchr(ctx->err, 0, sizeof ctx->err) != NULL, "unterminated message");
  CHECK(strstr(ctx->err, "npz: ") == ctx->err, "message does not start with 'npz: '");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  dl_ctx *ctx = dl_ctx_new();
  if (!ctx) abort();
  dl_npz *z = dl_npz_open(ctx, path);
  if (!z) {
    failed(ctx);
  } else {
    int n = dl_npz_count(z);
    CHECK(n >= 0 && n <= DL_NPZ_MAX_MEMBERS, "member count out of range");
    for (int i = 0; i < n; i++) {
      const char *name = dl_npz_name(z, i);
      CHECK(name && name[0], "empty member name");
      CHECK(dl_npz_find(z, name) == i, "a name is not found again (not unique)");
      ctx->err[0] = 0;
      dl_tensor *t = dl_npz_read_new(ctx, z, i);
      if (!t) {
        failed(ctx);
        continue;
      }
      CHECK(dl_is_contiguous(t), "not contiguous");
      const volatile uint8_t *p = dl_data(t);
      uint8_t acc = 0;
      for (size_t k = 0, b = (size_t)dl_numel(t) * dl_dtype_size(t->dtype); k < b; k++) acc ^= p[k];
      (void)acc;
      dl_tensor_release(t);
    }
    dl_npz_close(z);
  }
  dl_ctx_free(ctx);
  return 0;
}
