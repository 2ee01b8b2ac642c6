/* test_source.c -- datasets with a source (dataset.h): fields read row by row
 * by a callback, as the image files of data.images are. A fake source gives
 * row r the float32 [2] {r, 10 r}, skips the rows in `skip` and fails on
 * `fail`; checked: construction errors, reads, subsets and splits that keep
 * the source and the ids, checksums, batches that leave skipped rows out
 * (shorter, padded, passed over when empty) with exact skip counts at any
 * worker count, a failing row named at its batch, and the image decoder's
 * format sniffing and limits on in-memory bytes. Every allocation is
 * returned at the end. */
/* See LICENSE */
#include "dl_test.h"
#include "data/pipeline.h"
#include "io/fileio.h"
#include "io/images.h"

#include <stdlib.h>
#include <string.h>

static dl_ctx *ctx;

typedef struct {
  int64_t skip[4], fail;
  int nskip;
  int *destroyed;
} fake;

static int fake_read(const dl_source *src, int64_t row, dl_example *ex, const int *slot, char *err, size_t errlen) {
  const fake *f = src->state;
  for (int i = 0; i < f->nskip; i++)
    if (f->skip[i] == row) {
      snprintf(err, errlen, "fake: row %lld is unreadable", (long long)row);
      return 1;
    }
  if (row == f->fail) {
    snprintf(err, errlen, "fake: row %lld fails", (long long)row);
    return -1;
  }
  int64_t shape[1] = {2};
  float *v = dl_example_begin(ex, slot[0], DL_F32, 1, shape);
  if (!v) return -1;
  v[0] = (float)row;
  v[1] = (float)(10 * row);
  dl_example_commit(ex, slot[0]);
  return 0;
}

static uint32_t fake_checksum(const dl_source *src, int64_t row, uint32_t crc) {
  (void)src;
  return crc * 31u + (uint32_t)row + 1u;
}

static void fake_destroy(void *state) {
  fake *f = state;
  (*f->destroyed)++;
  free(f);
}

static dl_source *make_source(int64_t rows, int nskip, const int64_t *skip, int64_t fail, int *destroyed) {
  fake *f = calloc(1, sizeof *f);
  f->nskip = nskip;
  for (int i = 0; i < nskip; i++) f->skip[i] = skip[i];
  f->fail = fail;
  f->destroyed = destroyed;
  dl_source *s = dl_source_new(ctx, 1, rows, f, fake_read, fake_checksum, fake_destroy);
  snprintf(s->names[0], DL_NAMELEN, "x");
  s->dtype[0] = DL_F32;
  s->ndim[0] = 1;
  s->shape[0][0] = 2;
  return s;
}

/* a dataset of the fake source over n rows and a label tensor 1..n */
static dl_dataset *make_ds(int64_t n, int nskip, const int64_t *skip, int64_t fail, int *destroyed) {
  dl_source *src = make_source(n, nskip, skip, fail, destroyed);
  int64_t sl[1] = {n};
  dl_tensor *lab = dl_tensor_new_empty(ctx, DL_I32, 1, sl);
  for (int64_t i = 0; i < n; i++) ((int32_t *)lab->st->data)[i] = (int32_t)(i + 1);
  const char *names[1] = {"label"};
  dl_dataset *ds = dl_dataset_new_source(ctx, src, 1, names, &lab, NULL);
  dl_tensor_release(lab);
  dl_source_release(src);
  return ds;
}

static void test_construction(void) {
  int destroyed = 0;
  dl_source *src = make_source(4, 0, NULL, -1, &destroyed);
  int64_t s3[1] = {3};
  dl_tensor *t3 = dl_tensor_new_empty(ctx, DL_I32, 1, s3);
  const char *names[1] = {"label"};
  DL_CHECK(dl_dataset_new_source(ctx, src, 1, names, &t3, NULL) == NULL);
  DL_CHECK(strstr(ctx->err, "field 'label' has 3 examples but the source has 4") != NULL);
  const char *dup[1] = {"x"};
  int64_t s4[1] = {4};
  dl_tensor *t4 = dl_tensor_new_empty(ctx, DL_I32, 1, s4);
  DL_CHECK(dl_dataset_new_source(ctx, src, 1, dup, &t4, NULL) == NULL);
  DL_CHECK(strstr(ctx->err, "field 'x' given twice") != NULL);
  dl_dataset *ds = dl_dataset_new_source(ctx, src, 0, NULL, NULL, NULL);   /* the source alone */
  DL_CHECK(ds && ds->nfields == 1 && ds->len == 4 && ds->fields[0] == NULL && ds->src_field[0] == 0);
  dl_dataset_release(ds);
  dl_tensor_release(t3);
  dl_tensor_release(t4);
  DL_CHECK(destroyed == 0);
  dl_source_release(src);
  DL_CHECK(destroyed == 1);
  DL_CHECK(dl_source_new(ctx, 0, 1, NULL, fake_read, fake_checksum, NULL) == NULL);
}

static void test_read_subset_checksum(void) {
  int destroyed = 0;
  int64_t skip[1] = {2};
  dl_dataset *ds = make_ds(6, 1, skip, 4, &destroyed);
  dl_example ex;
  memset(&ex, 0, sizeof ex);
  char err[256];
  DL_CHECK(dl_dataset_read(ds, 3, &ex, err, sizeof err) == 0);
  int x = dl_example_find(&ex, "x"), l = dl_example_find(&ex, "label");
  DL_CHECK(x == 0 && l == 1);
  DL_CHECK(((const float *)ex.f[x].data)[1] == 30.0f && ((const int32_t *)ex.f[l].data)[0] == 4);
  DL_CHECK(dl_dataset_read(ds, 2, &ex, err, sizeof err) == 1 && ex.skipped && strstr(err, "row 2 is unreadable"));
  DL_CHECK(dl_dataset_read(ds, 4, &ex, err, sizeof err) == -1 && strstr(err, "row 4 fails"));
  int64_t idx[2] = {5, 3};
  dl_dataset *sub = dl_dataset_new_subset(ctx, ds, 2, idx);
  DL_CHECK(sub && sub->src == ds->src && dl_dataset_id(sub, 0) == 5);
  DL_CHECK(dl_dataset_read(sub, 0, &ex, err, sizeof err) == 0 && ((const float *)ex.f[0].data)[0] == 5.0f);
  DL_CHECK(dl_dataset_checksum(sub) != dl_dataset_checksum(ds));
  dl_dataset *parts[2];
  int64_t counts[2] = {3, 3};
  DL_CHECK(dl_dataset_split(ctx, ds, 2, counts, 1, 7, parts) == 0);
  DL_CHECK(parts[0]->src == ds->src && parts[1]->len == 3);
  dl_dataset_release(parts[0]);
  dl_dataset_release(parts[1]);
  dl_example_free(&ex);
  dl_dataset_release(sub);
  dl_dataset_release(ds);
  DL_CHECK(destroyed == 1);
}

/* the x[0] values of every batch, concatenated, with the real rows per batch and the weights' sum */
static int run(dl_dataset *ds, int workers, int64_t batch, int pad, float *vals, int64_t *rows, double *wsum,
               int64_t *skipped) {
  dl_pipe_opts o = dl_pipe_defaults();
  o.ds = ds;
  o.batch = batch;
  o.pad = pad;
  o.workers = workers;
  dl_pipe *p = dl_pipe_new(ctx, &o);
  if (!p) return -1;
  dl_batch b;
  int nb = 0, nv = 0, rc;
  *wsum = 0;
  while ((rc = dl_pipe_next(ctx, p, &b)) == 1) {
    rows[nb++] = b.t[0]->shape[0];
    for (int64_t k = 0; k < b.t[0]->shape[0]; k++) vals[nv++] = ((const float *)dl_data(b.t[0]))[2 * k];
    for (int64_t k = 0; k < b.t[2]->shape[0]; k++) *wsum += (double)((const float *)dl_data(b.t[2]))[k];
    dl_batch_release(&b);
  }
  dl_pipe_stats st;
  dl_pipe_get_stats(p, &st);
  *skipped = st.skipped;
  dl_pipe_free(p);
  return rc < 0 ? -1 : nb;
}

static void test_pipeline(void) {
  int destroyed = 0;
  int64_t skip[3] = {1, 4, 5};
  dl_dataset *ds = make_ds(8, 3, skip, -1, &destroyed);
  for (int w = 0; w <= 3; w++) {
    float vals[16];
    int64_t rows[8], sk;
    double ws;
    /* batches of 2: {0,1x} {2,3} {4x,5x} {6,7} -> the empty third is passed over */
    DL_CHECK(run(ds, w, 2, 0, vals, rows, &ws, &sk) == 3);
    DL_CHECK(rows[0] == 1 && rows[1] == 2 && rows[2] == 2);
    DL_CHECK(vals[0] == 0 && vals[1] == 2 && vals[2] == 3 && vals[3] == 6 && vals[4] == 7);
    DL_CHECK(ws == 5.0 && sk == 3);
    /* padded: every batch has 2 rows, the weights still count 5 */
    DL_CHECK(run(ds, w, 2, 1, vals, rows, &ws, &sk) == 3);
    DL_CHECK(rows[0] == 2 && vals[1] == 0 && ws == 5.0);
  }
  dl_dataset_release(ds);
  int64_t none[1] = {0};
  ds = make_ds(6, 0, none, 3, &destroyed);
  dl_pipe_opts o = dl_pipe_defaults();
  o.ds = ds;
  o.batch = 2;
  o.workers = 2;
  dl_pipe *p = dl_pipe_new(ctx, &o);
  dl_batch b;
  DL_CHECK(dl_pipe_next(ctx, p, &b) == 1);
  dl_batch_release(&b);
  DL_CHECK(dl_pipe_next(ctx, p, &b) == -1);
  DL_CHECK(strstr(ctx->err, "pipeline: reading example 4 (epoch 1) failed: fake: row 3 fails") != NULL);
  dl_pipe_free(p);
  dl_dataset_release(ds);
  int64_t all[3] = {0, 1, 2};
  ds = make_ds(3, 3, all, -1, &destroyed);
  o.ds = ds;
  DL_CHECK(dl_pipe_new(ctx, &o) == NULL);
  DL_CHECK(strstr(ctx->err, "every one of the 3 examples was skipped") != NULL);
  dl_dataset_release(ds);
  DL_CHECK(destroyed == 3);
}

static void *keep(void *user, int c, int64_t h, int64_t w) {
  (void)user;
  (void)c;
  (void)h;
  (void)w;
  return NULL;
}

static void test_decoder_bytes(void) {
  static const unsigned char png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  DL_CHECK(dl_image_sniff(png_sig, 8) == DL_IMAGE_PNG);
  DL_CHECK(dl_image_sniff("\xff\xd8\xff\xe0", 4) == DL_IMAGE_JPEG);
  DL_CHECK(dl_image_sniff("GIF89a", 6) == DL_IMAGE_UNKNOWN);
  char err[256];
  DL_CHECK(dl_image_decode("GIF89a", 6, "x.gif", 3, 0, keep, NULL, err, sizeof err) < 0);
  DL_CHECK(strstr(err, "'x.gif': not a PNG or JPEG file") == err);
  DL_CHECK(dl_image_decode("", 0, "e.png", 3, 0, keep, NULL, err, sizeof err) < 0 && strstr(err, "empty file"));
  DL_CHECK(dl_image_decode(png_sig, 8, "s.png", 2, 0, keep, NULL, err, sizeof err) < 0 && strstr(err, "channels must be 1 or 3"));
  /* an IHDR of 3000 x 2000 pixels over a limit of 1,000,000: refused from the header */
  unsigned char hdr[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                           0, 0, 0x0b, 0xb8, 0, 0, 0x07, 0xd0, 8, 2, 0, 0, 0};
  uint32_t crc = dl_crc32(0, hdr + 12, 17);
  hdr[29] = (unsigned char)(crc >> 24);
  hdr[30] = (unsigned char)(crc >> 16);
  hdr[31] = (unsigned char)(crc >> 8);
  hdr[32] = (unsigned char)crc;
  DL_CHECK(dl_image_decode(hdr, sizeof hdr, "big.png", 3, 1000000, keep, NULL, err, sizeof err) < 0);
  DL_CHECK(strstr(err, "PNG image of 2000 x 3000 pixels is larger than the limit of 1000000 pixels") != NULL);
  void *buf;
  size_t n;
  DL_CHECK(dl_image_read_file("/tmp", 0, &buf, &n, err, sizeof err) < 0 && strstr(err, "'/tmp': is a directory"));
  DL_CHECK(dl_image_read_file("/nonexistent/x.png", 0, &buf, &n, err, sizeof err) < 0 && strstr(err, "cannot read"));
}

int main(void) {
  ctx = dl_ctx_new();
  test_construction();
  test_read_subset_checksum();
  test_pipeline();
  test_decoder_bytes();
  DL_CHECK(ctx->mem.in_use == 0);
  dl_ctx_free(ctx);
  DL_TEST_END();
}
