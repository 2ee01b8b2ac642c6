/* test_pipeline.c -- the input pipeline's core without Lua: datasets and
 * splits, the batch producer (order, padding, shards, determinism across
 * worker counts, errors at the right batch), the offline cache (round trip,
 * stale, corrupt, missing), the CSV and streaming IDX readers, and the trace
 * writer; every allocation is returned at the end. */
/* See LICENSE */
#include "io/csv.h"
#include "dl_test.h"
#include "io/idx.h"
#include "data/pipeline.h"
#include "data/cache.h"
#include "io/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static dl_ctx *ctx;
static char dir[256];

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

/* n examples: image uint8 [1, 5, 5] with values (i * 31 + k) % 251, label int32 1..10, id int32 i */
static dl_dataset *make_ds(int64_t n) {
  int64_t si[4] = {n, 1, 5, 5}, sl[1] = {n};
  dl_tensor *img = dl_tensor_new_empty(ctx, DL_U8, 4, si);
  dl_tensor *lab = dl_tensor_new_empty(ctx, DL_I32, 1, sl);
  dl_tensor *id = dl_tensor_new_empty(ctx, DL_I32, 1, sl);
  for (int64_t i = 0; i < n; i++) {
    for (int k = 0; k < 25; k++) ((uint8_t *)img->st->data)[i * 25 + k] = (uint8_t)((i * 31 + k) % 251);
    ((int32_t *)lab->st->data)[i] = (int32_t)(i % 10 + 1);
    ((int32_t *)id->st->data)[i] = (int32_t)i;
  }
  const char *names[3] = {"image", "label", "id"};
  dl_tensor *fields[3] = {img, lab, id};
  dl_dataset *ds = dl_dataset_new(ctx, 3, names, fields, NULL);
  dl_tensor_release(img);
  dl_tensor_release(lab);
  dl_tensor_release(id);
  return ds;
}

/* all batches of a pipe, concatenated raw bytes (field by field); -1 on error */
static long run_bytes(dl_pipe_opts *o, unsigned char **out) {
  dl_pipe *p = dl_pipe_new(ctx, o);
  if (!p) return -1;
  size_t n = 0, cap = 1 << 16;
  unsigned char *buf = malloc(cap);
  dl_batch b;
  int rc;
  while ((rc = dl_pipe_next(ctx, p, &b)) == 1) {
    for (int j = 0; j < b.n; j++) {
      size_t nb = (size_t)dl_numel(b.t[j]) * dl_dtype_size(b.t[j]->dtype);
      while (n + nb > cap) buf = realloc(buf, cap *= 2);
      memcpy(buf + n, dl_data(b.t[j]), nb);
      n += nb;
    }
    dl_batch_release(&b);
  }
  dl_pipe_free(p);
  *out = buf;
  return rc < 0 ? -1 : (long)n;
}

static void test_dataset(void) {
  dl_dataset *ds = make_ds(20);
  DL_CHECK(ds && ds->len == 20);
  int64_t s3[1] = {3}, s4[1] = {4};
  dl_tensor *a = dl_tensor_new_zeros(ctx, DL_F32, 1, s3), *b = dl_tensor_new_zeros(ctx, DL_F32, 1, s4);
  const char *names[2] = {"a", "b"};
  dl_tensor *f[2] = {a, b};
  DL_CHECK(dl_dataset_new(ctx, 2, names, f, NULL) == NULL);
  DL_CHECK(strstr(ctx->err, "field 'b' has 4 examples but field 'a' has 3") != NULL);
  const char *dup[2] = {"a", "a"};
  f[1] = a;
  DL_CHECK(dl_dataset_new(ctx, 2, dup, f, NULL) == NULL && strstr(ctx->err, "given twice"));
  dl_tensor_release(a);
  dl_tensor_release(b);
  int64_t bad[1] = {20};
  DL_CHECK(dl_dataset_new_subset(ctx, ds, 1, bad) == NULL && strstr(ctx->err, "index 21"));
  /* a seeded split: disjoint, covering, reproducible; ids survive */
  int64_t counts[3] = {8, 7, 5};
  dl_dataset *parts[3], *again[3];
  DL_CHECK(dl_dataset_split(ctx, ds, 3, counts, 1, 9, parts) == 0);
  DL_CHECK(dl_dataset_split(ctx, ds, 3, counts, 1, 9, again) == 0);
  int seen[20] = {0};
  for (int k = 0; k < 3; k++) {
    DL_CHECK(parts[k]->len == counts[k]);
    for (int64_t i = 0; i < parts[k]->len; i++) {
      int64_t id = dl_dataset_id(parts[k], i);
      DL_CHECK(id == dl_dataset_id(again[k], i));
      DL_CHECK(id >= 0 && id < 20 && seen[id] == 0);
      if (id >= 0 && id < 20) seen[id]++;
    }
  }
  for (int i = 0; i < 20; i++) DL_CHECK(seen[i] == 1);
  for (int k = 0; k < 3; k++) {
    dl_dataset_release(parts[k]);
    dl_dataset_release(again[k]);
  }
  int64_t over[2] = {15, 6};
  DL_CHECK(dl_dataset_split(ctx, ds, 2, over, 0, 0, parts) == -1 && strstr(ctx->err, "add up to 21 examples"));
  dl_dataset_release(ds);
}

static void test_batches(void) {
  dl_dataset *ds = make_ds(23);
  dl_pipe_opts o = dl_pipe_defaults();
  o.ds = ds;
  o.batch = 5;
  o.pad = 1;
  o.workers = 2;
  o.index[o.nindex++] = (dl_index_stage){DL_IX_SHUFFLE, 3, 0, 0, 1, 0};
  DL_CHECK(dl_pipe_epoch_batches(&o) == 5);
  dl_pipe *p = dl_pipe_new(ctx, &o);
  DL_CHECK(p != NULL);
  int seen[23] = {0}, nb = 0;
  dl_batch b;
  while (p && dl_pipe_next(ctx, p, &b) == 1) {
    DL_CHECK(b.n == 4 && strcmp(b.names[3], "weight") == 0);
    DL_CHECK(b.t[0]->ndim == 4 && b.t[0]->shape[0] == 5 && b.t[0]->shape[3] == 5);
    const int32_t *id = dl_data(b.t[2]);
    const float *w = dl_data(b.t[3]);
    for (int k = 0; k < 5; k++) {
      if (w[k] == 1.0f) seen[id[k]]++;
      else DL_CHECK(nb == 4 && k >= 3 && w[k] == 0.0f);     /* only the last batch pads */
      /* the image row is the dataset's row of that id */
      DL_CHECK(((const uint8_t *)dl_data(b.t[0]))[k * 25 + 7] == (uint8_t)((id[k] * 31 + 7) % 251));
    }
    nb++;
    dl_batch_release(&b);
  }
  DL_CHECK(nb == 5);
  for (int i = 0; i < 23; i++) DL_CHECK(seen[i] == 1);
  dl_pipe_free(p);
  /* shards: disjoint and covering, without padding the last batch is short */
  int cover[23] = {0};
  for (int r = 0; r < 4; r++) {
    dl_pipe_opts s = dl_pipe_defaults();
    s.ds = ds;
    s.batch = 4;
    s.index[s.nindex++] = (dl_index_stage){DL_IX_SHARD, 0, 0, r, 4, 0};
    DL_CHECK(dl_pipe_epoch_examples(&s) == (r < 3 ? 6 : 5));
    dl_pipe *q = dl_pipe_new(ctx, &s);
    while (q && dl_pipe_next(ctx, q, &b) == 1) {
      for (int64_t k = 0; k < b.t[2]->shape[0]; k++) cover[((const int32_t *)dl_data(b.t[2]))[k]]++;
      dl_batch_release(&b);
    }
    dl_pipe_free(q);
  }
  for (int i = 0; i < 23; i++) DL_CHECK(cover[i] == 1);
  dl_dataset_release(ds);
}

static void test_determinism(void) {
  dl_dataset *ds = make_ds(41);
  dl_transform tf[4];
  tf[0] = dl_transform_defaults(DL_TF_CROP, "image");
  tf[0].size[0] = tf[0].size[1] = 5;
  tf[0].padding = 2;
  tf[1] = dl_transform_defaults(DL_TF_FLIP, "image");
  tf[1].p_v = 0.5f;
  tf[2] = dl_transform_defaults(DL_TF_AFFINE, "image");
  tf[2].degrees = 30.0f;
  tf[2].scale_lo = 0.8f;
  tf[2].scale_hi = 1.2f;
  tf[3] = dl_transform_defaults(DL_TF_SCALE, "image");
  tf[3].scale = 1.0f / 255;
  unsigned char *ref = NULL;
  long nref = -1;
  int counts[4] = {0, 1, 2, 4};
  for (int c = 0; c < 4; c++) {
    dl_pipe_opts o = dl_pipe_defaults();
    o.ds = ds;
    o.batch = 6;
    o.workers = counts[c];
    o.prefetch = 1 + c;
    o.seed = 17;
    o.epochs = 2;
    o.tf = tf;
    o.ntf = 4;
    o.index[o.nindex++] = (dl_index_stage){DL_IX_SHUFFLE, 17, 0, 0, 1, 0};
    unsigned char *got = NULL;
    long n = run_bytes(&o, &got);
    DL_CHECK(n > 0);
    if (c == 0) {
      ref = got;
      nref = n;
    } else {
      DL_CHECK(n == nref && memcmp(got, ref, (size_t)n) == 0);
      free(got);
    }
  }
  free(ref);
  dl_dataset_release(ds);
}

static void test_errors(void) {
  dl_dataset *ds = make_ds(12);
  dl_transform tf = dl_transform_defaults(DL_TF_ONE_HOT, "label");
  tf.classes = 6;                                       /* labels 7..10 are out of range */
  dl_pipe_opts o = dl_pipe_defaults();
  o.ds = ds;
  o.batch = 2;
  o.workers = 3;
  o.tf = &tf;
  o.ntf = 1;
  dl_pipe *p = dl_pipe_new(ctx, &o);
  DL_CHECK(p != NULL);
  dl_batch b;
  int good = 0, rc;
  while (p && (rc = dl_pipe_next(ctx, p, &b)) == 1) {
    good++;
    dl_batch_release(&b);
  }
  DL_CHECK(good == 3);                                  /* examples 1..6 are fine */
  DL_CHECK(strstr(ctx->err, "pipeline: stage 1 'one_hot' failed on example 7 (epoch 1): one_hot: label 7") != NULL);
  DL_CHECK(p && dl_pipe_next(ctx, p, &b) == -1 && strstr(ctx->err, "stopped after an earlier error"));
  dl_pipe_free(p);
  /* a failure on the first example is reported by dl_pipe_new */
  tf.classes = 0;
  DL_CHECK(dl_pipe_new(ctx, &o) == NULL && strstr(ctx->err, "failed on example 1"));
  dl_transform miss = dl_transform_defaults(DL_TF_SCALE, "pixels");
  o.tf = &miss;
  DL_CHECK(dl_pipe_new(ctx, &o) == NULL && strstr(ctx->err, "no field 'pixels' (the example has: image, label, id)"));
  dl_dataset_release(ds);
}

static void test_cache(void) {
  dl_dataset *ds = make_ds(30);
  int64_t ix[3] = {29, 4, 11};
  dl_dataset *sub = dl_dataset_new_subset(ctx, ds, 3, ix);
  char path[300];
  path_of(path, sizeof path, "cache.bin");
  dl_cache_status st;
  DL_CHECK(dl_cache_read_new(ctx, path, "fp", &st) == NULL && st == DL_CACHE_MISSING);
  DL_CHECK(dl_cache_write(ctx, path, sub, "fp-1") == 0);
  dl_dataset *back = dl_cache_read_new(ctx, path, "fp-1", &st);
  DL_CHECK(back && st == DL_CACHE_OK);
  if (back) {
    DL_CHECK(back->len == 3 && back->nfields == 3 && dl_dataset_checksum(back) == dl_dataset_checksum(sub));
    DL_CHECK(dl_dataset_id(back, 0) == 29 && dl_dataset_id(back, 2) == 11);
  }
  dl_dataset_release(back);
  DL_CHECK(dl_cache_read_new(ctx, path, "fp-2", &st) == NULL && st == DL_CACHE_STALE && strstr(ctx->err, "stale"));
  /* flip the last data byte: corrupt */
  FILE *f = fopen(path, "r+b");
  if (f) {
    fseek(f, -5, SEEK_END);
    int c = fgetc(f);
    fseek(f, -5, SEEK_END);
    fputc(c ^ 0x40, f);
    fclose(f);
  }
  DL_CHECK(dl_cache_read_new(ctx, path, "fp-1", &st) == NULL && st == DL_CACHE_CORRUPT &&
           strstr(ctx->err, "CRC-32 mismatch"));
  write_file(path, "DLUACACX", 8);
  DL_CHECK(dl_cache_read_new(ctx, path, "fp-1", &st) == NULL && st == DL_CACHE_CORRUPT);
  write_file(path, "DLUACACHxxxxxxxx", 16);
  DL_CHECK(dl_cache_read_new(ctx, path, "fp-1", &st) == NULL && strstr(ctx->err, "format version"));
  remove(path);
  dl_dataset_release(sub);
  dl_dataset_release(ds);
}

static void test_csv(void) {
  char path[300];
  path_of(path, sizeof path, "t.csv");
  const char *text = "x,y,\"z\"\n1,2.5,-3\n\n4,\"5\",6e2\r\n";
  write_file(path, text, strlen(text));
  dl_csv_opts o = dl_csv_defaults();
  dl_csv c;
  DL_CHECK(dl_csv_read(ctx, path, &o, &c) == 0);
  if (c.values) {
    DL_CHECK(c.ncols == 3 && strcmp(c.names[2], "z") == 0);
    DL_CHECK(c.values->shape[0] == 2 && c.values->shape[1] == 3);
    const double *v = c.values->st->data;
    DL_CHECK(v[0] == 1 && v[1] == 2.5 && v[2] == -3 && v[3] == 4 && v[4] == 5 && v[5] == 600);
    DL_CHECK(c.integral[0] == 1 && c.integral[1] == 0 && c.integral[2] == 0);
  }
  dl_csv_free(&c);
  const char *bad = "a,b\n1,2\n3,4,5\n";
  write_file(path, bad, strlen(bad));
  DL_CHECK(dl_csv_read(ctx, path, &o, &c) == -1 && strstr(ctx->err, "line 3 has 3 fields, expected 2"));
  const char *gap = "a,b\n1,\n";
  write_file(path, gap, strlen(gap));
  DL_CHECK(dl_csv_read(ctx, path, &o, &c) == -1 && strstr(ctx->err, "line 2, column 'b' (2): missing value"));
  o.has_missing = 1;
  o.missing = 7;
  DL_CHECK(dl_csv_read(ctx, path, &o, &c) == 0 && ((double *)c.values->st->data)[1] == 7);
  dl_csv_free(&c);

  /* a column of class names: 1-based positions in the sorted vocabulary */
  const char *named = "w,kind\n1,dog\n2,\"ant\"\n3,dog\n4,cat\n";
  write_file(path, named, strlen(named));
  dl_csv_text kind = {"label", "kind", 0};
  o = dl_csv_defaults();
  o.ntext = 1;
  o.text = &kind;
  DL_CHECK(dl_csv_read(ctx, path, &o, &c) == 0);
  if (c.values) {
    const double *v = c.values->st->data;
    DL_CHECK(c.ntext == 1 && c.text_col[0] == 1);
    DL_CHECK(strcmp(c.vocab[0][0], "ant") == 0 && strcmp(c.vocab[0][1], "cat") == 0 &&
             strcmp(c.vocab[0][2], "dog") == 0 && c.vocab[0][3] == NULL);
    DL_CHECK(v[1] == 3 && v[3] == 1 && v[5] == 3 && v[7] == 2 && v[6] == 4);
  }
  dl_csv_free(&c);
  dl_csv_text nope = {"label", NULL, 3};
  o.text = &nope;
  DL_CHECK(dl_csv_read(ctx, path, &o, &c) == -1 &&
           strstr(ctx->err, "field 'label' names column '3', which") && strstr(ctx->err, "(columns: w, kind)"));
  const char *empty = "w,kind\n1,\n";
  write_file(path, empty, strlen(empty));
  o.text = &kind;
  DL_CHECK(dl_csv_read(ctx, path, &o, &c) == -1 && strstr(ctx->err, "line 2, column 'kind' (2): missing class name"));

  /* text: quoted delimiters, newlines and quotes; CRLF; an empty line; no final newline */
  const char *t = "a,\"b,\"\"c\"\"\nd\"\r\n\n,x";
  char *buf, **f;
  int64_t *st;
  int *cn;
  int64_t rows = dl_csv_split_text(ctx, t, strlen(t), ',', &buf, &f, &st, &cn);
  DL_CHECK(rows == 3);
  if (rows == 3) {
    DL_CHECK(cn[0] == 2 && strcmp(f[st[0]], "a") == 0 && strcmp(f[st[0] + 1], "b,\"c\"\nd") == 0);
    DL_CHECK(cn[1] == 1 && strcmp(f[st[1]], "") == 0);
    DL_CHECK(cn[2] == 2 && strcmp(f[st[2]], "") == 0 && strcmp(f[st[2] + 1], "x") == 0);
    free(buf);
    free(f);
    free(st);
    free(cn);
  }
}

static void test_idx_stream(void) {
  char path[300];
  path_of(path, sizeof path, "s.idx");
  unsigned char file[8 + 12] = {0, 0, 8, 2, 0, 0, 0, 4, 0, 0, 0, 3};
  unsigned char fix[8 + 4 + 12];
  memcpy(fix, file, 12);
  for (int i = 0; i < 12; i++) fix[12 + i] = (unsigned char)(i * 9);
  write_file(path, fix, sizeof fix);
  dl_idx_reader *r = dl_idx_open(ctx, path);
  DL_CHECK(r && dl_idx_ndim(r) == 2 && dl_idx_shape(r)[0] == 4 && dl_idx_shape(r)[1] == 3);
  unsigned char buf[12];
  DL_CHECK(r && dl_idx_read(ctx, r, buf, 1) == 0 && buf[0] == 0 && buf[2] == 18);
  DL_CHECK(r && dl_idx_read(ctx, r, buf, 3) == 0 && buf[8] == 99);
  DL_CHECK(r && dl_idx_read(ctx, r, buf, 1) == -1 && strstr(ctx->err, "cannot read 1 records at record 4"));
  dl_idx_close(r);
  write_file(path, fix, sizeof fix - 5);                /* truncated data */
  r = dl_idx_open(ctx, path);
  DL_CHECK(r && dl_idx_read(ctx, r, buf, 4) == -1 &&
           strstr(ctx->err, "is truncated: expected 12 data bytes after the 12-byte header, got 7"));
  dl_idx_close(r);
}

static void *tracer(void *arg) {
  dl_trace *tr = arg;
  for (int i = 0; i < 50; i++) {
    int64_t t0 = dl_trace_now();
    dl_trace_span(tr, "inner", "test", 7, t0, dl_trace_now());
    dl_trace_span(tr, "outer", "test", 7, t0, dl_trace_now());
  }
  return NULL;
}

static void test_trace(void) {
  dl_trace *tr = dl_trace_new();
  dl_trace_span(tr, "dropped", "test", 1, 0, 1);       /* not recording yet */
  dl_trace_start(tr);
  dl_trace_thread_name(tr, 7, "helper \"7\"");
  pthread_t t;
  pthread_create(&t, NULL, tracer, tr);
  tracer(tr);
  pthread_join(t, NULL);
  char path[300], err[256];
  path_of(path, sizeof path, "trace.json");
  DL_CHECK(dl_trace_write_stop(tr, path, err, sizeof err) == 200);
  DL_CHECK(!dl_trace_active(tr));
  FILE *f = fopen(path, "rb");
  char *s = calloc(1, 1 << 20);
  size_t n = f ? fread(s, 1, (1 << 20) - 1, f) : 0;
  if (f) fclose(f);
  int b = 0, e = 0;
  for (char *q = s; (q = strstr(q, "\"ph\":\"B\"")); q++) b++;
  for (char *q = s; (q = strstr(q, "\"ph\":\"E\"")); q++) e++;
  DL_CHECK(n > 0 && b == 200 && e == 200);
  DL_CHECK(strstr(s, "\"name\":\"helper \\\"7\\\"\"") != NULL);
  DL_CHECK(strstr(s, "\"name\":\"dropped\"") == NULL && strstr(s, "\"dropped_spans\":0") != NULL);
  free(s);
  DL_CHECK(dl_trace_write_stop(tr, "/nonexistent-dir/t.json", err, sizeof err) == -1 && strstr(err, "cannot write"));
  dl_trace_free(tr);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/dl_test_pipeline_%ld", (long)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd) != 0) return 1;
  ctx = dl_ctx_new();
  test_dataset();
  test_batches();
  test_determinism();
  test_errors();
  test_cache();
  test_csv();
  test_idx_stream();
  test_trace();
  DL_CHECK(ctx->mem.in_use == 0);                      /* every tensor released */
  dl_ctx_free(ctx);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  DL_TEST_END();
}
