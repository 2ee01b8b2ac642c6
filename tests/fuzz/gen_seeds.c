/* gen_seeds.c -- writes the seed corpora of the libFuzzer harnesses.
 *
 *   gen_seeds <dir>    writes <dir>/{checkpoint,idx,idx_gz,csv,cache,tar}/<name>
 *
 * Small valid files made with the engine's own writers (dl_checkpoint_save,
 * dl_cache_write) or byte by byte from the format specs (IDX, CSV, a plain
 * safetensors file), plus edge cases: every dtype, zero-size and 0-d tensors,
 * escapes and non-ASCII names, truncated files, empty files, gzip versions.
 * Deterministic: the same bytes every run (tensor values are fixed). The
 * committed corpora under tests/fuzz/corpus are its output
 * (scripts/fuzz.sh --seeds regenerates them).
 */
/* See LICENSE */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "io/checkpoint.h"
#include "data/pipeline.h"
#include "data/cache.h"
#include "io/tar.h"

static const char *root;

static void die(const char *what) {
  fprintf(stderr, "gen_seeds: %s\n", what);
  exit(1);
}

static void path_of(char *buf, size_t n, const char *sub, const char *name) {
  snprintf(buf, n, "%s/%s/%s", root, sub, name);
}

static void spit(const char *sub, const char *name, const void *p, size_t n) {
  char path[1024];
  path_of(path, sizeof path, sub, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) die(path);
}

static void spit_gz(const char *sub, const char *name, const void *p, size_t n) {
  uLongf cap = compressBound((uLong)n) + 64;
  unsigned char *out = malloc(cap);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (!out || deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) die("deflate");
  z.next_in = (Bytef *)(uintptr_t)p;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) die("deflate");
  /* fixed mtime/OS bytes: gzip headers are deterministic with deflateInit2 (mtime 0) */
  spit(sub, name, out, z.total_out);
  deflateEnd(&z);
  free(out);
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) die(path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)len + 1);
  if (!p || fread(p, 1, (size_t)len, f) != (size_t)len) die(path);
  fclose(f);
  *n = (size_t)len;
  return p;
}

static dl_tensor *filled(dl_ctx *ctx, dl_dtype d, int ndim, const int64_t *shape) {
  dl_tensor *t = dl_tensor_new_zeros(ctx, d, ndim, shape);
  if (!t) die(ctx->err);
  int64_t n = dl_numel(t);
  for (int64_t i = 0; i < n; i++) dl_set_flat(t, i, (double)((i * 7) % 11) - 3.0);
  return t;
}

/* ------------------------------------------------------------ checkpoint */

static void ckpt(dl_ctx *ctx, const char *name, const dl_checkpoint_item *it, int n, const dl_checkpoint_kv *kv,
                 int nkv) {
  char path[1024];
  path_of(path, sizeof path, "checkpoint", name);
  if (dl_checkpoint_save(ctx, path, it, n, kv, nkv) != 0) die(ctx->err);
}

static void gen_checkpoint(dl_ctx *ctx) {
  int64_t s23[2] = {2, 3}, s4[1] = {4}, s0[2] = {0, 3}, s222[3] = {2, 2, 2};
  dl_tensor *f32 = filled(ctx, DL_F32, 2, s23), *f64 = filled(ctx, DL_F64, 1, s4);
  dl_tensor *i32 = filled(ctx, DL_I32, 3, s222), *i64 = filled(ctx, DL_I64, 1, s4);
  dl_tensor *u8 = filled(ctx, DL_U8, 2, s23), *empty = filled(ctx, DL_F32, 2, s0);
  dl_tensor *scalar = dl_tensor_new_scalar(ctx, DL_F64, 2.5);
  dl_checkpoint_item one[1] = {{"w", 1, f32}};
  ckpt(ctx, "one_f32", one, 1, NULL, 0);
  ckpt(ctx, "empty_file", NULL, 0, NULL, 0);
  dl_checkpoint_item all[7] = {{"f32", 3, f32}, {"f64", 3, f64}, {"i32", 3, i32}, {"i64", 3, i64},
                               {"u8", 2, u8},   {"zero", 4, empty}, {"scalar", 6, scalar}};
  const char *note = "a \"quoted\"\n\\ value", *euro = "\xc3\xa9\xe2\x82\xac";
  dl_checkpoint_kv kv[3] = {{"step", 4, "100", 3}, {"note", 4, note, strlen(note)}, {"unicode", 7, euro, strlen(euro)}};
  ckpt(ctx, "all_dtypes_meta", all, 7, kv, 3);
  const char *odd_name = "\xe2\x82\xac/\t\"x";
  dl_checkpoint_item odd[2] = {{"a\0b", 3, u8}, {odd_name, strlen(odd_name), f64}};
  ckpt(ctx, "odd_names", odd, 2, NULL, 0);
  /* a plain safetensors file (no dlua metadata): read unchecked */
  const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[8,9]}}";
  size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
  unsigned char buf[512] = {0};
  uint64_t n = padded;
  memcpy(buf, &n, 8);
  memset(buf + 8, ' ', padded);
  memcpy(buf + 8, hdr, hl);
  float a[2] = {1.5f, -2.0f};
  memcpy(buf + 8 + padded, a, 8);
  buf[8 + padded + 8] = 7;
  spit("checkpoint", "plain_safetensors", buf, 8 + padded + 9);
  /* edge cases: truncated dlua checkpoint, a bare length, nothing */
  char path[1024];
  size_t len;
  path_of(path, sizeof path, "checkpoint", "one_f32");
  unsigned char *whole = slurp(path, &len);
  spit("checkpoint", "truncated", whole, len - 5);
  free(whole);
  spit("checkpoint", "length_only", "\x02\0\0\0\0\0\0\0{}", 10);
  spit("checkpoint", "empty", "", 0);
  dl_tensor *ts[7] = {f32, f64, i32, i64, u8, empty, scalar};
  for (int i = 0; i < 7; i++) dl_tensor_release(ts[i]);
}

/* ------------------------------------------------------------ IDX */

static size_t idx_bytes(unsigned char *out, int ndim, const uint32_t *dims) {
  size_t at = 0, total = 1;
  out[at++] = 0;
  out[at++] = 0;
  out[at++] = 0x08;
  out[at++] = (unsigned char)ndim;
  for (int i = 0; i < ndim; i++) {
    out[at++] = (unsigned char)(dims[i] >> 24);
    out[at++] = (unsigned char)(dims[i] >> 16);
    out[at++] = (unsigned char)(dims[i] >> 8);
    out[at++] = (unsigned char)dims[i];
    total *= dims[i];
  }
  for (size_t i = 0; i < total; i++) out[at++] = (unsigned char)(i * 37 + 5);
  return at;
}

static void gen_idx(void) {
  unsigned char b[512];
  static const struct { const char *name; int ndim; uint32_t dims[4]; } files[] = {
    {"images_3x2x2", 3, {3, 2, 2}}, {"labels_5", 1, {5}},    {"empty_0", 1, {0}},
    {"zero_rows_0x4", 2, {0, 4}},   {"zero_cols_3x0", 2, {3, 0}}, {"four_d_2x1x2x3", 4, {2, 1, 2, 3}},
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    size_t n = idx_bytes(b, files[i].ndim, files[i].dims);
    char name[64];
    spit("idx", files[i].name, b, n);
    spit("idx_gz", files[i].name, b, n);
    snprintf(name, sizeof name, "%s.gz", files[i].name);
    spit_gz("idx", name, b, n);
  }
  uint32_t d[3] = {3, 2, 2};
  size_t n = idx_bytes(b, 3, d);
  spit("idx", "truncated_data", b, n - 3);
  spit("idx_gz", "truncated_data", b, n - 3);
  spit("idx", "truncated_header", b, 9);
  spit("idx", "bad_type", "\0\0\x0d\x01\0\0\0\x01\0\0\0\0", 12);
  spit("idx", "empty", "", 0);
}

/* ------------------------------------------------------------ CSV */

static void csv_seed(const char *name, unsigned char flags, const char *text) {
  size_t n = strlen(text);
  unsigned char *b = malloc(n + 1);
  if (!b) die("memory");
  b[0] = flags;
  memcpy(b + 1, text, n);
  spit("csv", name, b, n + 1);
  free(b);
}

static void gen_csv(void) {
  /* flags: bit 0 header, 1 has_missing, 2-3 delimiter (, ; tab space), 4 gzip, 5 missing = -1 */
  csv_seed("header", 1, "x,y,label\n1.5,2,0\n-3e2,4.25,1\n0,0,2\n");
  csv_seed("no_header", 0, "1,2,3\n4,5,6\n");
  csv_seed("quoted", 1, "\"a,b\",\"c\"\"d\"\n\"1\",2\n 3 , \"4\" \n");
  csv_seed("missing_nan", 3, "a,b\n1,\n,2\n");
  csv_seed("missing_minus1", 35, "a,b\n1,\n,2\n");
  csv_seed("semicolon_crlf", 5, "a;b\r\n1;2\r\n\r\n3;4\r\n");
  csv_seed("tab", 9, "a\tb\n1\t2\n");
  csv_seed("space", 12, "1 2 3\n");
  csv_seed("specials", 1, "a,b,c\nnan,inf,-inf\n1e308,-0,9007199254740993\n0x10,+5,.5\n");
  csv_seed("gzip_header", 17, "x,y\n1,2\n3,4\n");
  csv_seed("ragged", 1, "a,b\n1,2\n3\n");
  csv_seed("not_a_number", 1, "a\nabc\n");
  csv_seed("blank_only", 1, "\n  \n\t\n");
  csv_seed("empty", 0, "");
}

/* ------------------------------------------------------------ cache */

static void cache_seed(dl_ctx *ctx, const char *name, dl_dataset *ds) {
  char path[1024];
  path_of(path, sizeof path, "cache", name);
  if (dl_cache_write(ctx, path, ds, "fuzz-fp") != 0) die(ctx->err);
}

static void gen_cache(dl_ctx *ctx) {
  int64_t s32[2] = {3, 2}, s4122[4] = {4, 1, 2, 2}, s4[1] = {4}, s0[2] = {0, 3};
  dl_tensor *u8 = filled(ctx, DL_U8, 2, s32);
  const char *n1[1] = {"x"};
  dl_dataset *a = dl_dataset_new(ctx, 1, n1, &u8, NULL);
  if (!a) die(ctx->err);
  cache_seed(ctx, "one_field", a);
  dl_tensor *img = filled(ctx, DL_F32, 4, s4122), *lab = filled(ctx, DL_I64, 1, s4);
  dl_tensor *f2[2] = {img, lab};
  const char *n2[2] = {"image", "label"};
  dl_dataset *b = dl_dataset_new(ctx, 2, n2, f2, NULL);
  if (!b) die(ctx->err);
  cache_seed(ctx, "image_label", b);
  int64_t idx[3] = {3, 0, 2};
  dl_dataset *sub = dl_dataset_new_subset(ctx, b, 3, idx);
  if (!sub) die(ctx->err);
  cache_seed(ctx, "subset_ids", sub);
  dl_tensor *e = filled(ctx, DL_F64, 2, s0);
  const char *n3[1] = {"empty"};
  dl_dataset *c = dl_dataset_new(ctx, 1, n3, &e, NULL);
  if (c) {                       /* an empty dataset may be refused: then no seed */
    cache_seed(ctx, "empty_rows", c);
    dl_dataset_release(c);
  }
  char path[1024];
  size_t len;
  path_of(path, sizeof path, "cache", "image_label");
  unsigned char *whole = slurp(path, &len);
  spit("cache", "truncated", whole, len - 7);
  whole[len - 1] ^= 0xff;
  spit("cache", "bad_crc", whole, len);
  free(whole);
  spit("cache", "magic_only", "DLUACACH\x01\0\0\0\0\0\0\0", 16);
  dl_dataset_release(sub);
  dl_dataset_release(b);
  dl_dataset_release(a);
  dl_tensor *ts[4] = {u8, img, lab, e};
  for (int i = 0; i < 4; i++) dl_tensor_release(ts[i]);
}

/* a ustar header by hand (the writer makes only plain ustar): type, name, size */
static void tar_header(unsigned char *h, const char *name, char type, size_t size, const char *magic) {
  memset(h, 0, 512);
  snprintf((char *)h, 100, "%s", name);
  snprintf((char *)h + 100, 8, "%07o", 0644);
  snprintf((char *)h + 124, 12, "%011zo", size);
  h[156] = (unsigned char)type;
  memcpy(h + 257, magic, 8);
  unsigned sum = 0;
  memset(h + 148, ' ', 8);
  for (int i = 0; i < 512; i++) sum += h[i];
  snprintf((char *)h + 148, 8, "%06o", sum);
}

static void gen_tar(dl_ctx *ctx) {
  char path[1024];
  path_of(path, sizeof path, "tar", "shard");
  dl_tar_writer w;
  if (dl_tar_writer_open(ctx, &w, path) || dl_tar_writer_add(ctx, &w, "000001.png", "\x89PNG\r\n\x1a\n", 8) ||
      dl_tar_writer_add(ctx, &w, "000001.cls", "3", 1) || dl_tar_writer_add(ctx, &w, "000002.cls", "", 0) ||
      dl_tar_writer_add(ctx, &w,
                        "a-directory-name-long-enough-to-need-the-ustar-prefix-field/"
                        "and-a-member-name-that-is-itself-longer-than-fifty-bytes.000003.json",
                        "{\"label\": 1}", 12) ||
      dl_tar_writer_close(ctx, &w))
    die(ctx->err);
  size_t n;
  unsigned char *b = slurp(path, &n);
  spit("tar", "truncated", b, n - 700);
  spit("tar", "one_zero_block", b, n - 512);
  b[148] ^= 1;
  spit("tar", "bad_checksum", b, n);
  free(b);
  /* pax path and size records, a GNU long name, a directory, then the end */
  static unsigned char t[512 * 12];
  const char *pax = "29 path=dir/000004.input.npy\n";
  tar_header(t, "PaxHeaders/x", 'x', strlen(pax), "ustar\00000");
  memcpy(t + 512, pax, strlen(pax));
  tar_header(t + 1024, "ignored", '0', 5, "ustar\00000");
  memcpy(t + 1536, "hello", 5);
  const char *longname = "gnu/long/name/000005.txt";
  tar_header(t + 2048, "././@LongLink", 'L', strlen(longname) + 1, "ustar  \0");
  memcpy(t + 2560, longname, strlen(longname));
  tar_header(t + 3072, "short", '0', 2, "ustar  \0");
  memcpy(t + 3584, "hi", 2);
  tar_header(t + 4096, "somedir/", '5', 0, "ustar\00000");
  spit("tar", "pax_gnu", t, 512 * 11);
  tar_header(t + 4608, "link", '2', 0, "ustar\00000");
  spit("tar", "symlink", t, 512 * 12);
  spit("tar", "empty", "", 0);
}

int main(int argc, char **argv) {
  if (argc != 2) die("usage: gen_seeds <dir>");
  root = argv[1];
  static const char *subs[6] = {"checkpoint", "idx", "idx_gz", "csv", "cache", "tar"};
  mkdir(root, 0777);
  for (int i = 0; i < 6; i++) {
    char d[1024];
    snprintf(d, sizeof d, "%s/%s", root, subs[i]);
    if (mkdir(d, 0777) != 0 && errno != EEXIST) die(d);
  }
  dl_ctx *ctx = dl_ctx_new();
  gen_checkpoint(ctx);
  gen_idx();
  gen_csv();
  gen_cache(ctx);
  gen_tar(ctx);
  dl_ctx_free(ctx);
  return 0;
}
