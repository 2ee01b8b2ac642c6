/* checkpoint_write.c -- writes a checkpoint file (format: checkpoint.h and
 * docs/formats.md, "Checkpoints").
 *
 * Validate every name and key, checksum every tensor (non-contiguous views
 * are gathered in 1 MiB chunks, never copied whole), build the JSON header
 * (checkpoint_json.c), then write the file as one atomic replacement through
 * fileio.c: a failure leaves no temporary file and the target as it was.
 */
/* See LICENSE */
#include "io/checkpoint_internal.h"

#include <stdarg.h>
#include <stdio.h>

/* ------------------------------------------------------------ tensor bytes */

typedef int (*sink_fn)(void *arg, const void *p, size_t n);

/* feeds t's elements in row-major order to sink: straight from memory when
 * contiguous, else gathered through chunk (CK_CHUNK bytes). Returns sink's -1. */
static int feed_tensor(const dl_tensor *t, char *chunk, sink_fn sink, void *arg) {
  int64_t n = dl_numel(t);
  size_t es = dl_dtype_size(t->dtype);
  if (n == 0) return 0;
  const char *base = dl_data(t);
  if (dl_is_contiguous(t)) {
    size_t total = (size_t)n * es;
    for (size_t off = 0; off < total; off += CK_CHUNK)
      if (sink(arg, base + off, total - off < CK_CHUNK ? total - off : CK_CHUNK) < 0) return -1;
    return 0;
  }
  int64_t idx[DL_MAXDIM] = {0}, soff = 0;
  size_t per = CK_CHUNK / es, k = 0;
  for (int64_t i = 0; i < n; i++) {
    memcpy(chunk + k * es, base + soff * (int64_t)es, es);
    if (++k == per || i + 1 == n) {
      if (sink(arg, chunk, k * es) < 0) return -1;
      k = 0;
    }
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) {
        soff += t->stride[d];
        break;
      }
      soff -= t->stride[d] * (t->shape[d] - 1);
      idx[d] = 0;
    }
  }
  return 0;
}

static int crc_sink(void *arg, const void *p, size_t n) {
  uint32_t *c = arg;
  *c = dl_crc32(*c, p, n);
  return 0;
}

/* ------------------------------------------------------------ writing */

typedef struct {
  dl_checkpoint_entry e;
  const dl_tensor *src;
} wentry;

static int cmp_wentry(const void *a, const void *b) {
  const dl_checkpoint_entry *x = &((const wentry *)a)->e, *y = &((const wentry *)b)->e;
  return ck_bytes_cmp(x->name, x->name_len, y->name, y->name_len);
}

static int arg_fail(dl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int arg_fail(dl_ctx *ctx, const char *fmt, ...) {
  char s[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s, sizeof s, fmt, ap);
  va_end(ap);
  dl_fail(ctx, "checkpoint: %s", s);
  return DL_CHECKPOINT_EARG;
}

static int check_items(dl_ctx *ctx, const dl_checkpoint_item *items, int n, const dl_checkpoint_kv *meta,
                       int nmeta) {
  char a[96];
  if (n < 0 || nmeta < 0) return arg_fail(ctx, "negative tensor or metadata count");
  for (int i = 0; i < n; i++) {
    const dl_checkpoint_item *it = &items[i];
    if (!it->name) return arg_fail(ctx, "tensor %d has no name", i + 1);
    if (!ck_utf8_valid(it->name, it->name_len))
      return arg_fail(ctx, "tensor name '%s' is not valid UTF-8", ck_show(a, sizeof a, it->name, it->name_len));
    if (ck_bytes_eq(it->name, it->name_len, "__metadata__"))
      return arg_fail(ctx, "'__metadata__' is reserved and cannot name a tensor");
    if (!it->t || (unsigned)it->t->dtype >= DL_NDTYPES || it->t->ndim < 0 || it->t->ndim > DL_MAXDIM)
      return arg_fail(ctx, "tensor '%s' is not a valid tensor", ck_show(a, sizeof a, it->name, it->name_len));
  }
  for (int i = 0; i < nmeta; i++) {
    const dl_checkpoint_kv *kv = &meta[i];
    if (!kv->key || !kv->value) return arg_fail(ctx, "metadata entry %d has no key or value", i + 1);
    if (!ck_utf8_valid(kv->key, kv->key_len))
      return arg_fail(ctx, "metadata key '%s' is not valid UTF-8", ck_show(a, sizeof a, kv->key, kv->key_len));
    if (!ck_utf8_valid(kv->value, kv->value_len))
      return arg_fail(ctx, "metadata value for '%s' is not valid UTF-8", ck_show(a, sizeof a, kv->key, kv->key_len));
    if (dl_checkpoint_is_reserved_key(kv->key, kv->key_len))
      return arg_fail(ctx, "metadata key '%s' is reserved (dlua writes it)", ck_show(a, sizeof a, kv->key, kv->key_len));
  }
  return 0;
}

static int file_sink(void *arg, const void *p, size_t n) { return dl_fileio_write(arg, p, n); }

/* the fileio message, prefixed "checkpoint: " */
static int io_fail(dl_ctx *ctx) {
  char msg[sizeof ctx->err];
  snprintf(msg, sizeof msg, "%s", ctx->err);
  dl_fail(ctx, "checkpoint: %s", msg);
  return DL_CHECKPOINT_EIO;
}

/* the whole file, as an atomic replacement of path (fileio.c) */
static int write_file(dl_ctx *ctx, const char *path, const ck_sbuf *hdr, const wentry *w, int n, char *chunk) {
  dl_fileio_atomic f;
  if (dl_fileio_open_atomic(ctx, &f, path) < 0) return io_fail(ctx);
  unsigned char len8[8];
  uint64_t hn = hdr->n;
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hn >> (8 * i));
  int bad = dl_fileio_write(&f, len8, 8) < 0 || dl_fileio_write(&f, hdr->p, hdr->n) < 0;
  for (int i = 0; i < n && !bad; i++) bad = feed_tensor(w[i].src, chunk, file_sink, &f) < 0;
  if (bad) {
    dl_fileio_abort(&f);
    return io_fail(ctx);
  }
  if (dl_fileio_commit(&f) < 0) return io_fail(ctx);
  return 0;
}

int dl_checkpoint_save(dl_ctx *ctx, const char *path, const dl_checkpoint_item *items, int n,
                       const dl_checkpoint_kv *meta, int nmeta) {
  int rc = check_items(ctx, items, n, meta, nmeta);
  if (rc) return rc;
  char a[96];
  size_t wbytes = sizeof(wentry) * (size_t)(n ? n : 1);
  size_t ebytes = sizeof(dl_checkpoint_entry) * (size_t)(n ? n : 1);
  size_t kbytes = sizeof(dl_checkpoint_kv) * (size_t)(nmeta + 4);
  wentry *w = dl_alloc(ctx, wbytes);
  dl_checkpoint_entry *ents = dl_alloc(ctx, ebytes);
  dl_checkpoint_kv *kv = dl_alloc(ctx, kbytes);
  char *chunk = NULL;
  ck_sbuf crcs = {ctx, NULL, 0, 0, 0}, hdr = {ctx, NULL, 0, 0, 0};
  rc = DL_CHECKPOINT_EIO;
  if (!w || !ents || !kv) goto done;

  int need_chunk = 0;
  for (int i = 0; i < n; i++) {
    const dl_tensor *t = items[i].t;
    memset(&w[i], 0, sizeof w[i]);
    w[i].e.name = items[i].name;
    w[i].e.name_len = items[i].name_len;
    w[i].e.dtype = t->dtype;
    w[i].e.ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) w[i].e.shape[d] = t->shape[d];
    w[i].src = t;
    if (!dl_is_contiguous(t) && dl_numel(t) > 0) need_chunk = 1;
  }
  ck_sort(w, (size_t)n, sizeof *w, cmp_wentry);
  for (int i = 1; i < n; i++)
    if (cmp_wentry(&w[i - 1], &w[i]) == 0) {
      rc = arg_fail(ctx, "duplicate tensor name '%s'", ck_show(a, sizeof a, w[i].e.name, w[i].e.name_len));
      goto done;
    }
  if (nmeta) memcpy(kv, meta, sizeof *kv * (size_t)nmeta);
  ck_sort(kv, (size_t)nmeta, sizeof *kv, ck_cmp_kv);
  for (int i = 1; i < nmeta; i++)
    if (ck_cmp_kv(&kv[i - 1], &kv[i]) == 0) {
      rc = arg_fail(ctx, "duplicate metadata key '%s'", ck_show(a, sizeof a, kv[i].key, kv[i].key_len));
      goto done;
    }
  if (need_chunk && !(chunk = dl_alloc(ctx, CK_CHUNK))) goto done;

  /* pass 1: offsets and checksums */
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    w[i].e.begin = off;
    off += (uint64_t)dl_shape_numel(w[i].e.ndim, w[i].e.shape) * dl_dtype_size(w[i].e.dtype);   /* a live tensor's shape */
    w[i].e.end = off;
    uint32_t c = dl_crc32(0, NULL, 0);
    feed_tensor(w[i].src, chunk, crc_sink, &c);
    w[i].e.crc = c;
    ents[i] = w[i].e;
    char hex[16];
    snprintf(hex, sizeof hex, i ? ",%08x" : "%08x", (unsigned)c);
    ck_sb_adds(&crcs, hex);
  }
  if (crcs.failed) goto done;

  /* metadata: ours and the caller's, sorted; the header CRC covers all but itself */
  int nkv = nmeta;
  kv[nkv++] = (dl_checkpoint_kv){"crc32", 5, crcs.p ? crcs.p : "", crcs.n};
  kv[nkv++] = (dl_checkpoint_kv){"format", 6, "dlua-checkpoint", 15};
  kv[nkv++] = (dl_checkpoint_kv){"format_version", 14, "1", 1};
  ck_sort(kv, (size_t)nkv, sizeof *kv, ck_cmp_kv);
  char hcrc[16];
  snprintf(hcrc, sizeof hcrc, "%08x", (unsigned)ck_header_crc(ents, n, kv, nkv));
  kv[nkv++] = (dl_checkpoint_kv){"header_crc32", 12, hcrc, 8};
  ck_sort(kv, (size_t)nkv, sizeof *kv, ck_cmp_kv);

  /* the JSON header, padded with spaces to a multiple of 8 */
  ck_emit_header(&hdr, kv, nkv, ents, n);
  if (hdr.failed) goto done;
  if (hdr.n > DL_CHECKPOINT_MAX_HEADER) {
    rc = arg_fail(ctx, "the header would be %zu bytes, more than the %d-byte limit", hdr.n,
                  DL_CHECKPOINT_MAX_HEADER);
    goto done;
  }

  /* pass 2: the file */
  rc = write_file(ctx, path, &hdr, w, n, chunk);

done:
  ck_sb_free(&hdr);
  ck_sb_free(&crcs);
  dl_free(ctx, chunk, CK_CHUNK);
  dl_free(ctx, kv, kbytes);
  dl_free(ctx, ents, ebytes);
  dl_free(ctx, w, wbytes);
  return rc;
}
