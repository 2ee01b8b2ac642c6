/* fuzz_checkpoint.c -- libFuzzer harness for the checkpoint reader
 * (dl_checkpoint_read_new, engine/io/checkpoint.h).
 *
 * Each input is a whole file, read in the three modes (header only, verify,
 * data). Besides the sanitizers, the harness checks the reader's documented
 * promises and traps when one breaks: a failure leaves a message in ctx->err;
 * a success has entries sorted by name whose offsets lie inside the data
 * section and span exactly shape x dtype bytes, and in data mode each entry
 * owns a tensor of that shape whose bytes are all readable. A file without
 * dlua's metadata is read unchecked, so the fuzzer reaches the data path
 * without forging CRCs. Seeds: tests/fuzz/corpus/checkpoint (gen_seeds.c),
 * dictionary: tests/fuzz/dict/checkpoint.dict.
 */
/* See LICENSE */
#include "fuzz_common.h"

#include "io/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_ok(const dl_checkpoint *ck, dl_checkpoint_mode mode) {
  CHECK(ck->ntensors >= 0 && ck->nmeta >= 0, "negative counts");
  for (int i = 0; i < ck->ntensors; i++) {
    const dl_checkpoint_entry *e = &ck->tensors[i];
    CHECK(e->name != NULL, "entry without a name");
    if (i > 0) {
      const dl_checkpoint_entry *p = &ck->tensors[i - 1];
      size_t m = p->name_len < e->name_len ? p->name_len : e->name_len;
      int c = memcmp(p->name, e->name, m);
      CHECK(c < 0 || (c == 0 && p->name_len < e->name_len), "entries not sorted or duplicated");
    }
    CHECK((int)e->dtype >= 0 && e->dtype < DL_NDTYPES, "dtype out of range");
    CHECK(e->ndim >= 0 && e->ndim <= DL_MAXDIM, "ndim out of range");
    CHECK(e->begin <= e->end && e->end <= ck->data_len, "offsets outside the data section");
    uint64_t bytes = dl_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) {
      CHECK(e->shape[d] >= 0, "negative size");
      if (e->shape[d] && bytes > UINT64_MAX / (uint64_t)e->shape[d]) CHECK(0, "shape bytes overflow");
      bytes *= (uint64_t)e->shape[d];
    }
    CHECK(bytes == e->end - e->begin, "offsets do not span shape x dtype bytes");
    if (mode == DL_CHECKPOINT_DATA) {
      const dl_tensor *t = e->t;
      CHECK(t != NULL, "data mode entry without a tensor");
      CHECK(t->dtype == e->dtype && t->ndim == e->ndim, "tensor dtype/ndim differ from the header");
      for (int d = 0; d < e->ndim; d++) CHECK(t->shape[d] == e->shape[d], "tensor shape differs from the header");
      CHECK((uint64_t)dl_numel(t) * dl_dtype_size(t->dtype) == bytes, "tensor size differs from the header");
      const volatile uint8_t *p = dl_data(t);
      uint8_t acc = 0;
      for (uint64_t b = 0; b < bytes; b++) acc ^= p[b];   /* every byte readable (ASan) */
      (void)acc;
    } else {
      CHECK(e->t == NULL, "tensor read outside data mode");
    }
  }
  for (int i = 0; i < ck->nmeta; i++) CHECK(ck->meta[i].key && ck->meta[i].value, "metadata entry without strings");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  static const dl_checkpoint_mode modes[3] = {DL_CHECKPOINT_HEADER, DL_CHECKPOINT_VERIFY, DL_CHECKPOINT_DATA};
  for (int m = 0; m < 3; m++) {
    dl_ctx *ctx = dl_ctx_new();
    if (!ctx) abort();
    ctx->err[0] = 0;
    dl_checkpoint *ck = dl_checkpoint_read_new(ctx, path, modes[m]);
    if (ck) {
      check_ok(ck, modes[m]);
      dl_checkpoint_release(ck);
    } else {
      CHECK(ctx->err[0] != 0, "failed without a message");
      CHECK(memchr(ctx->err, 0, sizeof ctx->err) != NULL, "unterminated message");
    }
    dl_ctx_free(ctx);
  }
  return 0;
}
