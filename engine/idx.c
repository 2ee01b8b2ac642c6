/* idx.c -- reads IDX files (the MNIST family's format), plain or gzip-compressed.
 *
 * IDX: a 4-byte big-endian magic (0, 0, type, ndim), ndim big-endian uint32
 * sizes, then the data in row-major order. zlib's gz* functions stream both
 * compressed and plain files: the reader inflates as records are asked for
 * and never holds the compressed file in memory. Only unsigned-byte data
 * (type 0x08), the type of every MNIST-family file, is supported; other
 * types are refused with a message. Errors name the file and the byte offset.
 */
/* See LICENSE */
#include "idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct dl_idx_reader {
  gzFile f;
  char path[400];
  int ndim;
  int64_t shape[DL_MAXDIM];
  uint64_t total;               /* declared data bytes */
  uint64_t record;              /* bytes per record (along dimension 1) */
  uint64_t pos;                 /* data bytes read so far */
  int hdr;                      /* header bytes */
};

static int read_full(gzFile f, void *buf, size_t n, size_t *got) {
  size_t done = 0;
  while (done < n) {
    unsigned chunk = (unsigned)(n - done > (1u << 30) ? (1u << 30) : n - done);
    int r = gzread(f, (char *)buf + done, chunk);
    if (r <= 0) break;
    done += (size_t)r;
  }
  *got = done;
  return done == n ? 0 : -1;
}

/* a zlib error after a short read, or NULL if the stream simply ended */
static const char *gz_problem(gzFile f) {
  int errnum;
  const char *msg = gzerror(f, &errnum);
  return errnum != Z_OK && errnum != Z_STREAM_END ? msg : NULL;
}

void dl_idx_close(dl_idx_reader *r) {
  if (!r) return;
  if (r->f) gzclose(r->f);
  free(r);
}

dl_idx_reader *dl_idx_open(dl_ctx *ctx, const char *path) {
  dl_idx_reader *r = calloc(1, sizeof *r);
  if (!r) return dl_fail(ctx, "idx: out of memory opening '%s'", path);
  snprintf(r->path, sizeof r->path, "%s", path);
  r->f = gzopen(path, "rb");
  if (!r->f) {
    dl_fail(ctx, "idx: cannot open '%s': %s", path, strerror(errno));
    goto fail;
  }
  unsigned char hdr[4];
  size_t got;
  if (read_full(r->f, hdr, 4, &got) < 0) {
    const char *z = gz_problem(r->f);
    if (z) dl_fail(ctx, "idx: '%s': decompression failed at offset %zu: %s", path, got, z);
    else dl_fail(ctx, "idx: '%s' is truncated: header needs 4 bytes, file has %zu", path, got);
    goto fail;
  }
  if (hdr[0] != 0 || hdr[1] != 0) {
    dl_fail(ctx, "idx: '%s' has a bad magic number %02x %02x %02x %02x at offset 0 (not an IDX file)", path,
            hdr[0], hdr[1], hdr[2], hdr[3]);
    goto fail;
  }
  if (hdr[2] != 0x08) {
    dl_fail(ctx, "idx: '%s' has data type 0x%02x at offset 2; only unsigned byte (0x08) is supported", path, hdr[2]);
    goto fail;
  }
  r->ndim = hdr[3];
  if (r->ndim < 1 || r->ndim > DL_MAXDIM) {
    dl_fail(ctx, "idx: '%s' declares %d dimensions at offset 3 (1 to %d supported)", path, r->ndim, DL_MAXDIM);
    goto fail;
  }
  r->total = 1;
  for (int i = 0; i < r->ndim; i++) {
    unsigned char b[4];
    if (read_full(r->f, b, 4, &got) < 0) {
      dl_fail(ctx, "idx: '%s' is truncated in the header at offset %d", path, 4 + 4 * i + (int)got);
      goto fail;
    }
    r->shape[i] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
    r->total *= (uint64_t)r->shape[i];
    if (r->total > ((uint64_t)1 << 36)) {
      dl_fail(ctx, "idx: '%s' declares more than 2^36 elements", path);
      goto fail;
    }
  }
  r->hdr = 4 + 4 * r->ndim;
  r->record = r->shape[0] ? r->total / (uint64_t)r->shape[0] : 0;
  return r;
fail:
  dl_idx_close(r);
  return NULL;
}

int dl_idx_ndim(const dl_idx_reader *r) { return r->ndim; }
const int64_t *dl_idx_shape(const dl_idx_reader *r) { return r->shape; }

int dl_idx_read(dl_ctx *ctx, dl_idx_reader *r, void *buf, int64_t n) {
  uint64_t want = (uint64_t)n * r->record;
  if (n < 0 || r->pos + want > r->total) {
    dl_fail(ctx, "idx: '%s': cannot read %lld records at record %llu, the file declares %lld", r->path, (long long)n,
            (unsigned long long)(r->record ? r->pos / r->record : 0), (long long)r->shape[0]);
    return -1;
  }
  size_t got;
  int rc = read_full(r->f, buf, (size_t)want, &got);
  r->pos += got;
  const char *z = gz_problem(r->f);
  if (z) {
    dl_fail(ctx, "idx: '%s': decompression failed at data byte %llu (offset %llu of the decompressed file): %s",
            r->path, (unsigned long long)r->pos, (unsigned long long)r->pos + (unsigned long long)r->hdr, z);
    return -1;
  }
  if (rc < 0) {
    dl_fail(ctx, "idx: '%s' is truncated: expected %llu data bytes after the %d-byte header, got %llu", r->path,
            (unsigned long long)r->total, r->hdr, (unsigned long long)r->pos);
    return -1;
  }
  return 0;
}

dl_tensor *dl_idx_read_new(dl_ctx *ctx, const char *path) {
  dl_idx_reader *r = dl_idx_open(ctx, path);
  if (!r) return NULL;
  dl_tensor *t = dl_tensor_new_empty(ctx, DL_U8, r->ndim, r->shape);
  if (t && dl_idx_read(ctx, r, t->st->data, r->shape[0]) < 0) {
    dl_tensor_release(t);
    t = NULL;
  }
  dl_idx_close(r);
  return t;
}
