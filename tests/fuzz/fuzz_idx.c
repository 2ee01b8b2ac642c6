/* fuzz_idx.c -- libFuzzer harness for the IDX reader (engine/io/idx.h), built
 * twice: fuzz_idx feeds the input as the file (plain IDX; inputs that start
 * with the gzip magic exercise corrupt gzip streams), fuzz_idx_gz
 * (FUZZ_IDX_GZIP) gzip-compresses the input first, so the fuzzer mutates
 * the IDX structure while the file goes through zlib's inflate path.
 *
 * Per input: the streaming reader (dl_idx_open, then records in chunks of
 * 1, 2, 3, ... into a bounded buffer until the declared count or an error),
 * and the whole-file reader dl_idx_read_new when the header declares at most
 * FUZZ_IDX_MAX_BYTES (the reader allocates what the header declares before
 * reading, up to 2^36 bytes; the harness keeps that out of its memory budget
 * and fuzzes the streaming path for bigger declarations). Promises checked:
 * failures leave a message; a tensor has the header's shape and readable bytes.
 * Seeds: tests/fuzz/corpus/idx and corpus/idx_gz (gen_seeds.c).
 */
/* See LICENSE */
#include "fuzz_common.h"

#include "io/idx.h"

#define FUZZ_IDX_MAX_BYTES ((uint64_t)1 << 24)
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t mul_sat(uint64_t a, uint64_t b) { return b && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

static void failed(const dl_ctx *ctx) {
  CHECK(ctx->err[0] != 0, "failed without a message");
  CHECK(memchr(ctx->err, 0, sizeof ctx->err) != NULL, "unterminated message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifdef FUZZ_IDX_GZIP
  size_t zn;
  uint8_t *z = fuzz_gzip(data, size, &zn);
  const char *path = fuzz_file(z, zn);
  free(z);
#else
  const char *path = fuzz_file(data, size);
#endif
  dl_ctx *ctx = dl_ctx_new();
  if (!ctx) abort();
  uint64_t declared = 0;
  dl_idx_reader *r = dl_idx_open(ctx, path);
  if (!r) {
    failed(ctx);
  } else {
    int nd = dl_idx_ndim(r);
    const int64_t *shape = dl_idx_shape(r);
    CHECK(nd >= 1 && nd <= DL_MAXDIM, "ndim out of range");
    uint64_t rec = 1;
    declared = 1;
    for (int d = 0; d < nd; d++) {          /* saturating: the harness must not wrap either */
      CHECK(shape[d] >= 0, "negative size");
      declared = mul_sat(declared, (uint64_t)shape[d]);
      if (d > 0) rec = mul_sat(rec, (uint64_t)shape[d]);
    }
    if (rec <= FUZZ_IDX_MAX_BYTES) {
      int64_t per = rec ? (int64_t)(FUZZ_IDX_MAX_BYTES / rec) : shape[0];
      if (per > 3) per = 3;
      uint8_t *buf = malloc(rec * (uint64_t)(per > 0 ? per : 1) + 1);
      if (!buf) abort();
      int64_t left = shape[0], chunk = 1;
      while (left > 0) {
        int64_t n = chunk < left ? chunk : left;
        if (n > per) n = per;
        if (rec == 0) n = left;             /* zero-byte records: all at once */
        if (dl_idx_read(ctx, r, buf, n) < 0) {
          failed(ctx);
          break;
        }
        left -= n;
        chunk = chunk % 3 + 1;
      }
      /* past the end must fail, not read. Not checked for files declaring 0 records:
       * the reader's record size is 0 then and it accepts any n (reported in
       * docs/reliability.md, "Findings"; harmless: nothing is written to buf) */
      if (left == 0 && rec > 0 && shape[0] > 0) {
        CHECK(dl_idx_read(ctx, r, buf, 1) < 0, "read past the declared count");
        failed(ctx);
      }
      free(buf);
    }
    CHECK(dl_idx_read(ctx, r, NULL, -1) < 0, "negative record count accepted");
    dl_idx_close(r);
  }
  if (r && declared <= FUZZ_IDX_MAX_BYTES) {
    ctx->err[0] = 0;
    dl_tensor *t = dl_idx_read_new(ctx, path);
    if (!t) {
      failed(ctx);
    } else {
      CHECK(t->dtype == DL_U8, "not uint8");
      CHECK((uint64_t)dl_numel(t) == declared, "numel differs from the header");
      const volatile uint8_t *p = dl_data(t);
      uint8_t acc = 0;
      for (uint64_t i = 0; i < declared; i++) acc ^= p[i];
      (void)acc;
      dl_tensor_release(t);
    }
  }
  dl_ctx_free(ctx);
  return 0;
}
