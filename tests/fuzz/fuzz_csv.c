/* fuzz_csv.c -- libFuzzer harness for the CSV tokenizer (dl_csv_read and
 * dl_csv_split_text, engine/io/csv.h).
 *
 * The first input byte picks the options, the rest is the file:
 *   bit 0 header, bit 1 has_missing, bits 2-3 the delimiter (, ; tab space),
 *   bit 4 gzip-compress the file first, bit 5 the missing value (NaN or -1),
 *   bit 6 column 1 holds class names (a text column).
 * Promises checked: a failure leaves a message and out untouched; a success
 * has ncols names, a float64 [rows, ncols] tensor whose values are all
 * readable, integral flags that are 0 or 1, and a text column's values are
 * 1-based positions in its sorted, duplicate-free vocabulary. The rest of the
 * input split as text (dl_csv_split_text) gives records whose fields all lie
 * in its buffer. Seeds:
 * tests/fuzz/corpus/csv (gen_seeds.c), dictionary tests/fuzz/dict/csv.dict.
 */
/* See LICENSE */
#include "fuzz_common.h"

#include <math.h>

#include "io/csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const char delims[4] = {',', ';', '\t', ' '};
  uint8_t flags = data[0];
  dl_csv_opts o = dl_csv_defaults();
  o.header = flags & 1;
  o.has_missing = (flags >> 1) & 1;
  o.delimiter = delims[(flags >> 2) & 3];
  o.missing = (flags & 32) ? -1.0 : (double)NAN;
  dl_csv_text text = {"label", NULL, 1};
  if (flags & 64) {
    o.ntext = 1;
    o.text = &text;
  }
  const char *path;
  if (flags & 16) {
    size_t zn;
    uint8_t *z = fuzz_gzip(data + 1, size - 1, &zn);
    path = fuzz_file(z, zn);
    free(z);
  } else {
    path = fuzz_file(data + 1, size - 1);
  }
  dl_ctx *ctx = dl_ctx_new();
  if (!ctx) abort();
  dl_csv c;
  memset(&c, 0xA5, sizeof c);
  dl_csv before = c;
  if (dl_csv_read(ctx, path, &o, &c) < 0) {
    CHECK(ctx->err[0] != 0, "failed without a message");
    CHECK(memchr(ctx->err, 0, sizeof ctx->err) != NULL, "unterminated message");
    CHECK(memcmp(&c, &before, sizeof c) == 0, "out changed on failure");
  } else {
    CHECK(c.ncols >= 1, "no columns");
    const dl_tensor *t = c.values;
    CHECK(t && t->dtype == DL_F64 && t->ndim == 2 && t->shape[1] == c.ncols, "values are not float64 [rows, ncols]");
    for (int i = 0; i < c.ncols; i++) {
      CHECK(c.names[i] != NULL, "missing column name");
      (void)strlen(c.names[i]);
      CHECK(c.integral[i] == 0 || c.integral[i] == 1, "integral flag not 0/1");
    }
    const volatile double *v = dl_data(t);
    int64_t n = dl_numel(t);
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += v[i];
    (void)acc;
    if (flags & 64) {
      CHECK(c.ntext == 1 && c.text_col[0] == 0, "text column not resolved to column 1");
      int64_t nv = 0;
      for (char **w = c.vocab[0]; *w; w++, nv++)
        CHECK(nv == 0 || strcmp(w[-1], w[0]) < 0, "vocabulary not sorted and unique");
      for (int64_t r = 0; r < t->shape[0]; r++) {
        double k = v[r * c.ncols];
        CHECK(k >= 1 && k <= (double)nv && k == floor(k), "a class outside the vocabulary");
      }
    }
    dl_csv_free(&c);
    dl_csv_free(&c);   /* idempotent */
  }
  char *buf, **fields;
  int64_t *starts;
  int *counts;
  int64_t rows = dl_csv_split_text(ctx, (const char *)data + 1, size - 1, o.delimiter, &buf, &fields, &starts, &counts);
  if (rows >= 0) {
    int64_t total = 0;
    for (int64_t r = 0; r < rows; r++) {
      CHECK(counts[r] >= 1 && starts[r] == total, "records not laid end to end");
      for (int k = 0; k < counts[r]; k++) {
        const char *f = fields[starts[r] + k];
        CHECK(f >= buf && f + strlen(f) <= buf + size - 1, "a field outside the buffer");
      }
      total += counts[r];
    }
    free(buf);
    free(fields);
    free(starts);
    free(counts);
  }
  dl_ctx_free(ctx);
  return 0;
}
