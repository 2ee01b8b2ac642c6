/* fuzz_cache.c -- libFuzzer harness for the pipeline cache reader
 * (dl_cache_read_new, engine/data/pipeline.h; format in docs/formats.md).
 *
 * Each input is read twice under the fingerprint "fuzz-fp" (the seeds are
 * written with it): as it is, and with its last 4 bytes replaced by the
 * CRC-32 of the bytes before them, so mutations get past the checksum and
 * reach the id check and the dataset construction. Promises checked: a
 * failure has a status (corrupt, stale) and a message; a success has status
 * OK and a dataset whose fields have `len` rows of readable bytes and
 * non-negative ids. Seeds: tests/fuzz/corpus/cache (gen_seeds.c),
 * dictionary tests/fuzz/dict/cache.dict.
 */
/* See LICENSE */
#include "fuzz_common.h"

#include "data/pipeline.h"
#include "data/cache.h"
#include "io/fileio.h"   /* dl_crc32 */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_one(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  dl_ctx *ctx = dl_ctx_new();
  if (!ctx) abort();
  dl_cache_status st = (dl_cache_status)-1;
  dl_dataset *ds = dl_cache_read_new(ctx, path, "fuzz-fp", &st);
  if (!ds) {
    CHECK(st == DL_CACHE_CORRUPT || st == DL_CACHE_STALE, "failure without a corrupt/stale status");
    CHECK(ctx->err[0] != 0, "failed without a message");
    CHECK(memchr(ctx->err, 0, sizeof ctx->err) != NULL, "unterminated message");
  } else {
    CHECK(st == DL_CACHE_OK, "dataset returned without status OK");
    CHECK(ds->nfields >= 1 && ds->nfields <= DL_MAXFIELDS, "field count out of range");
    CHECK(ds->len >= 0, "negative length");
    for (int f = 0; f < ds->nfields; f++) {
      const dl_tensor *t = ds->fields[f];
      CHECK(t && t->ndim >= 1 && t->shape[0] == ds->rows, "field rows differ from the dataset's");
      const volatile uint8_t *p = dl_data(t);
      size_t bytes = (size_t)dl_numel(t) * dl_dtype_size(t->dtype);
      uint8_t acc = 0;
      for (size_t i = 0; i < bytes; i++) acc ^= p[i];
      (void)acc;
    }
    for (int64_t i = 0; i < ds->len; i++) CHECK(dl_dataset_id(ds, i) >= 0, "negative id");
    (void)dl_dataset_checksum(ds);
    dl_dataset_release(ds);
  }
  dl_ctx_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  read_one(data, size);
  if (size >= 20) {
    uint8_t *fixed = malloc(size);
    if (!fixed) abort();
    memcpy(fixed, data, size);
    uint32_t crc = dl_crc32(0, fixed, size - 4);
    memcpy(fixed + size - 4, &crc, 4);   /* little-endian hosts only, as the format */
    read_one(fixed, size);
    free(fixed);
  }
  return 0;
}
