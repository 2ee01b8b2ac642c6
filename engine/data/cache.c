/* cache.c -- the pipeline's offline cache: a dataset written once to a file
 * and read back instead of recomputing its preprocessing.
 *
 * The file (docs/formats.md, "Pipeline cache") is a fixed preamble, a header
 * with the fingerprint of what produced it and the field layout, the example
 * ids, the field data, and a CRC-32 of everything before it. Reading checks,
 * in order: magic and version, a header that fits the file, the file size
 * the header implies, the fingerprint (a mismatch is "stale"), then the CRC
 * while the data streams into the new tensors (a mismatch is "corrupt").
 * Writes are atomic replacements through fileio.c (temporary file, fsync,
 * rename, directory fsync), so a crash leaves the old cache or none, never
 * half of one. Little-endian hosts only (checked).
 */
/* See LICENSE */
#include "data/cache.h"
#include "io/fileio.h"   /* dl_crc32 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char MAGIC[8] = {'D', 'L', 'U', 'A', 'C', 'A', 'C', 'H'};
#define VERSION 1u
#define MAX_HEADER (1u << 20)

static int little_endian(void) {
  uint16_t x = 1;
  unsigned char c;
  memcpy(&c, &x, 1);
  return c == 1;
}

/* ------------------------------------------------------------ writing */

typedef struct {
  dl_fileio_atomic f;
  uint32_t crc;
  int bad;                  /* a write failed: ctx->err names the file */
} out_file;

static void put(out_file *o, const void *p, size_t n) {
  if (o->bad || n == 0) return;
  if (dl_fileio_write(&o->f, p, n) < 0) o->bad = 1;
  o->crc = dl_crc32(o->crc, p, n);
}

static void put_u32(out_file *o, uint32_t v) { put(o, &v, 4); }
static void put_i64(out_file *o, int64_t v) { put(o, &v, 8); }

/* "cache: " before the file I/O module's message */
static int io_fail(dl_ctx *ctx) {
  char msg[sizeof ctx->err];
  snprintf(msg, sizeof msg, "%s", ctx->err);
  dl_fail(ctx, "cache: %s", msg);
  return -1;
}

int dl_cache_write(dl_ctx *ctx, const char *path, const dl_dataset *ds, const char *fingerprint) {
  for (int f = 0; f < ds->nfields; f++)
    if (!ds->fields[f]) {
      dl_fail(ctx, "cache: '%s': the dataset's field '%s' is read from files, not held in memory (a cache stores "
              "the examples a pipeline produced)", path, ds->names[f]);
      return -1;
    }
  if (!little_endian()) {
    dl_fail(ctx, "cache: only little-endian hosts are supported");
    return -1;
  }
  /* header into memory first: its length goes in the preamble */
  size_t hcap = 4096, hn = 0;
  unsigned char *h = malloc(hcap);
  if (!h) goto oom;
#define HPUT(src, n)                                         \
  do {                                                       \
    size_t n_ = (n);                                         \
    while (hn + n_ > hcap) {                                 \
      unsigned char *g_ = realloc(h, hcap * 2);              \
      if (!g_) goto oom;                                     \
      h = g_;                                                \
      hcap *= 2;                                             \
    }                                                        \
    memcpy(h + hn, (src), n_);                               \
    hn += n_;                                                \
  } while (0)
  uint32_t u = (uint32_t)strlen(fingerprint);
  HPUT(&u, 4);
  HPUT(fingerprint, u);
  int64_t n = ds->len;
  HPUT(&n, 8);
  u = (uint32_t)ds->nfields;
  HPUT(&u, 4);
  for (int f = 0; f < ds->nfields; f++) {
    const dl_tensor *t = ds->fields[f];
    u = (uint32_t)strlen(ds->names[f]);
    HPUT(&u, 4);
    HPUT(ds->names[f], u);
    u = (uint32_t)t->dtype;
    HPUT(&u, 4);
    u = (uint32_t)(t->ndim - 1);
    HPUT(&u, 4);
    HPUT(t->shape + 1, 8 * (size_t)(t->ndim - 1));
  }
#undef HPUT
  out_file o = {.crc = 0, .bad = 0};
  if (dl_fileio_open_atomic(ctx, &o.f, path) < 0) {
    free(h);
    return io_fail(ctx);
  }
  put(&o, MAGIC, 8);
  put_u32(&o, VERSION);
  put_u32(&o, (uint32_t)hn);
  put(&o, h, hn);
  free(h);
  for (int64_t i = 0; i < n; i++) put_i64(&o, dl_dataset_id(ds, i));
  for (int f = 0; f < ds->nfields; f++) {
    const dl_tensor *t = ds->fields[f];
    size_t row = (size_t)(t->shape[0] ? dl_numel(t) / t->shape[0] : 0) * dl_dtype_size(t->dtype);
    const char *base = dl_data(t);
    if (!ds->index) put(&o, base, row * (size_t)n);
    else
      for (int64_t i = 0; i < n; i++) put(&o, base + (size_t)ds->index[i] * row, row);
  }
  uint32_t crc = o.crc;
  put(&o, &crc, 4);
  if (o.bad) {
    dl_fileio_abort(&o.f);
    return io_fail(ctx);
  }
  if (dl_fileio_commit(&o.f) < 0) return io_fail(ctx);
  return 0;
oom:
  free(h);
  ctx->oom = 1;
  dl_fail(ctx, "cache: out of memory writing '%s'", path);
  return -1;
}

/* ------------------------------------------------------------ reading */

typedef struct {
  const unsigned char *p;
  size_t n, at;
  int bad;
} cursor;

static void take(cursor *c, void *dst, size_t n) {
  if (c->bad || c->at + n > c->n) {
    c->bad = 1;
    memset(dst, 0, n);
    return;
  }
  memcpy(dst, c->p + c->at, n);
  c->at += n;
}

static dl_dataset *corrupt(dl_ctx *ctx, dl_cache_status *st, const char *path, long long off, const char *what) {
  *st = DL_CACHE_CORRUPT;
  return dl_fail(ctx, "cache: '%s' is corrupt at offset %lld: %s", path, off, what);
}

dl_dataset *dl_cache_read_new(dl_ctx *ctx, const char *path, const char *fingerprint, dl_cache_status *st) {
  *st = DL_CACHE_CORRUPT;
  FILE *f = fopen(path, "rb");
  if (!f) {
    *st = errno == ENOENT ? DL_CACHE_MISSING : DL_CACHE_CORRUPT;
    return dl_fail(ctx, "cache: cannot open '%s': %s", path, strerror(errno));
  }
  dl_dataset *ds = NULL;
  unsigned char *h = NULL;
  dl_tensor *fields[DL_MAXFIELDS] = {0}, *ids = NULL;
  int nf = 0;
  char names[DL_MAXFIELDS][DL_NAMELEN];
  const char *namep[DL_MAXFIELDS];
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0) {
    dl_fail(ctx, "cache: cannot stat '%s': %s", path, strerror(errno));
    goto done;
  }
  long long size = (long long)sb.st_size;
  unsigned char pre[16];
  if (fread(pre, 1, 16, f) != 16) {
    corrupt(ctx, st, path, 0, "shorter than the 16-byte preamble");
    goto done;
  }
  if (memcmp(pre, MAGIC, 8) != 0) {
    corrupt(ctx, st, path, 0, "bad magic (not a dlua pipeline cache)");
    goto done;
  }
  uint32_t version, hlen;
  memcpy(&version, pre + 8, 4);
  memcpy(&hlen, pre + 12, 4);
  if (version != VERSION) {
    char m[96];
    snprintf(m, sizeof m, "format version %u, this build reads %u", version, VERSION);
    corrupt(ctx, st, path, 8, m);
    goto done;
  }
  if (hlen > MAX_HEADER || 16 + (long long)hlen > size) {
    corrupt(ctx, st, path, 12, "the header length runs past the end of the file");
    goto done;
  }
  h = malloc(hlen ? hlen : 1);
  if (!h || fread(h, 1, hlen, f) != hlen) {
    corrupt(ctx, st, path, 16, "cannot read the header");
    goto done;
  }
  uint32_t crc = dl_crc32(dl_crc32(0, pre, 16), h, hlen);
  cursor c = {h, hlen, 0, 0};
  uint32_t fl;
  take(&c, &fl, 4);
  if (c.bad || fl > hlen - 4) {
    corrupt(ctx, st, path, 16, "bad fingerprint length");
    goto done;
  }
  const char *fp = (const char *)h + 4;
  c.at += fl;
  int64_t n;
  uint32_t k;
  take(&c, &n, 8);
  take(&c, &k, 4);
  if (c.bad || n < 0 || k < 1 || k > DL_MAXFIELDS) {
    corrupt(ctx, st, path, 16 + (long long)c.at, "bad example or field count");
    goto done;
  }
  int64_t shapes[DL_MAXFIELDS][DL_MAXDIM + 1];
  uint32_t dts[DL_MAXFIELDS], nds[DL_MAXFIELDS];
  long long data = 0;
  for (uint32_t i = 0; i < k; i++) {
    uint32_t nl;
    take(&c, &nl, 4);
    if (c.bad || nl == 0 || nl >= DL_NAMELEN || c.at + nl > c.n) {
      corrupt(ctx, st, path, 16 + (long long)c.at, "bad field name");
      goto done;
    }
    memcpy(names[i], h + c.at, nl);
    names[i][nl] = 0;
    namep[i] = names[i];
    c.at += nl;
    take(&c, &dts[i], 4);
    take(&c, &nds[i], 4);
    if (c.bad || dts[i] >= DL_NDTYPES || nds[i] >= DL_MAXDIM) {
      corrupt(ctx, st, path, 16 + (long long)c.at, "bad field dtype or dimensions");
      goto done;
    }
    shapes[i][0] = n;
    for (uint32_t d = 0; d < nds[i]; d++) {
      take(&c, &shapes[i][d + 1], 8);
      if (c.bad) {
        corrupt(ctx, st, path, 16 + (long long)c.at, "bad field shape");
        goto done;
      }
    }
    /* [examples, field shape...] through the checked shape arithmetic, before any size is used */
    int64_t numel, bytes;
    if (dl_shape_check(ctx, names[i], (int)nds[i] + 1, shapes[i], &numel) < 0 ||
        dl_shape_bytes(ctx, names[i], numel, dl_dtype_size((dl_dtype)dts[i]), &bytes) < 0) {
      char m[sizeof ctx->err + 8];
      snprintf(m, sizeof m, "field %s", ctx->err);
      corrupt(ctx, st, path, 16 + (long long)c.at, m);
      goto done;
    }
    data += bytes;                  /* <= DL_MAXFIELDS * 2^51: no overflow */
  }
  if (c.at != c.n) {
    corrupt(ctx, st, path, 16 + (long long)c.at, "trailing bytes in the header");
    goto done;
  }
  int64_t idbytes;
  if (dl_shape_bytes(ctx, "cache", n, 8, &idbytes) < 0) {
    corrupt(ctx, st, path, 16, "bad example count");
    goto done;
  }
  long long expect = 16 + (long long)hlen + idbytes + data + 4;
  if (size != expect) {
    char m[160];
    snprintf(m, sizeof m, "the file has %lld bytes, its header implies %lld (truncated or overwritten)", size, expect);
    corrupt(ctx, st, path, size < expect ? size : expect, m);
    goto done;
  }
  if (fl != strlen(fingerprint) || memcmp(fp, fingerprint, fl) != 0) {
    *st = DL_CACHE_STALE;
    dl_fail(ctx, "cache: '%s' is stale: it was built from %.*s, the pipeline now is %s", path, (int)fl, fp,
            fingerprint);
    goto done;
  }
  /* the body, straight into the tensors */
  int64_t ilen = n;
  ids = dl_tensor_new_empty(ctx, DL_I64, 1, &ilen);
  if (!ids) goto done;
  for (uint32_t i = 0; i < k; i++, nf++) {
    fields[i] = dl_tensor_new_empty(ctx, (dl_dtype)dts[i], (int)nds[i] + 1, shapes[i]);
    if (!fields[i]) goto done;
  }
  size_t want = (size_t)idbytes;
  if (fread(ids->st->data, 1, want, f) != want) {
    corrupt(ctx, st, path, 16 + (long long)hlen, "short read of the ids");
    goto done;
  }
  crc = dl_crc32(crc, ids->st->data, want);
  long long off = 16 + (long long)hlen + (long long)want;
  for (int i = 0; i < nf; i++) {
    want = fields[i]->st->nbytes;
    if (fread(fields[i]->st->data, 1, want, f) != want) {
      corrupt(ctx, st, path, off, "short read of the data");
      goto done;
    }
    crc = dl_crc32(crc, fields[i]->st->data, want);
    off += (long long)want;
  }
  uint32_t stored;
  if (fread(&stored, 1, 4, f) != 4) {
    corrupt(ctx, st, path, off, "missing checksum");
    goto done;
  }
  if (stored != crc) {
    char m[96];
    snprintf(m, sizeof m, "CRC-32 mismatch (stored %08x, computed %08x)", stored, crc);
    corrupt(ctx, st, path, off, m);
    goto done;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t id = ((int64_t *)ids->st->data)[i];
    if (id < 0) {
      corrupt(ctx, st, path, 16 + (long long)hlen + (long long)sizeof(int64_t) * i, "negative example id");
      goto done;
    }
  }
  ds = dl_dataset_new(ctx, nf, namep, fields, ids);
  if (ds) *st = DL_CACHE_OK;
done:
  for (int i = 0; i < nf; i++) dl_tensor_release(fields[i]);
  dl_tensor_release(ids);
  free(h);
  fclose(f);
  return ds;
}
