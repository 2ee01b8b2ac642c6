/* idx.c -- reads IDX files (the MNIST family's format), plain or gzip-compressed.
 *
 * IDX: a 4-byte big-endian magic (0, 0, type, ndim), ndim big-endian uint32
 * sizes, then the data in row-major order. zlib's gz* functions stream both
 * compressed and plain files: the reader inflates as records are asked for
 * and never holds the compressed file in memory. Only unsigned-byte data
 * (type 0x08), the type of every MNIST-family file, is supported; other
 * types are refused with a message. Errors name the file and the byte offset.
 * The file must hold exactly what its header declares. A plain file's size is
 * compared with the header when it is opened, so trailing bytes are refused
 * before any data is read. A read that reaches the declared end checks that
 * nothing follows (trailing bytes, or a second gzip member with data) and that
 * the gzip trailer -- the uncompressed size of the last member -- covers the
 * whole file, which refuses files of several concatenated members. (A reader
 * stopped early, by a limit, does not look past what it read in a gzip file.)
 */
/* See LICENSE */
#include "io/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

struct dl_idx_reader {
  gzFile f;
  char *path;
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

/* A plain file must not be longer than its header declares (shorter is found by the reads). */
static int check_plain_size(dl_ctx *ctx, dl_idx_reader *r) {
  struct stat sb;
  uint64_t want = (uint64_t)r->hdr + r->total;
  if (stat(r->path, &sb) != 0 || (uint64_t)sb.st_size <= want) return 0;
  dl_fail(ctx, "idx: '%s' has %llu trailing bytes after the %d-byte header and the %llu data bytes it declares",
          r->path, (unsigned long long)((uint64_t)sb.st_size - want), r->hdr, (unsigned long long)r->total);
  return -1;
}

/* After the last declared byte: nothing may follow, and a gzip file's trailer (the size of its
 * last member, mod 2^32) must be the whole decompressed file, or the file has several members. */
static int check_end(dl_ctx *ctx, dl_idx_reader *r) {
  unsigned char extra;
  uint64_t want = (uint64_t)r->hdr + r->total;
  int got = gzread(r->f, &extra, 1);
  const char *z = gz_problem(r->f);
  if (z) {
    dl_fail(ctx, "idx: '%s': decompression failed after the %llu data bytes: %s", r->path,
            (unsigned long long)r->total, z);
    return -1;
  }
  if (got > 0) {
    dl_fail(ctx, "idx: '%s' has trailing bytes after the %d-byte header and the %llu data bytes it declares", r->path,
            r->hdr, (unsigned long long)r->total);
    return -1;
  }
  if (gzdirect(r->f)) return 0;
  FILE *f = fopen(r->path, "rb");
  unsigned char t[4];
  int rc = 0;
  if (f && fseek(f, -4, SEEK_END) == 0 && fread(t, 1, 4, f) == 4) {
    uint32_t isize = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
    if (isize != (uint32_t)want) {
      dl_fail(ctx, "idx: '%s' holds several gzip members (its last one inflates to %lu bytes, the IDX file is "
                   "%llu); one member is supported",
              r->path, (unsigned long)isize, (unsigned long long)want);
      rc = -1;
    }
  }
  if (f) fclose(f);
  return rc;
}

void dl_idx_close(dl_idx_reader *r) {
  if (!r) return;
  if (r->f) gzclose(r->f);
  free(r->path);
  free(r);
}

dl_idx_reader *dl_idx_open(dl_ctx *ctx, const char *path) {
  dl_idx_reader *r = calloc(1, sizeof *r);
  if (!r) return dl_fail(ctx, "idx: out of memory opening '%s'", path);
  r->path = strdup(path);
  if (!r->path) {
    free(r);
    return dl_fail(ctx, "idx: out of memory opening '%s'", path);
  }
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
  for (int i = 0; i < r->ndim; i++) {
    unsigned char b[4];
    if (read_full(r->f, b, 4, &got) < 0) {
      dl_fail(ctx, "idx: '%s' is truncated in the header at offset %d", path, 4 + 4 * i + (int)got);
      goto fail;
    }
    r->shape[i] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
  }
  char op[440];
  snprintf(op, sizeof op, "idx: '%s'", path);
  int64_t total;
  if (dl_shape_check(ctx, op, r->ndim, r->shape, &total) < 0) goto fail;
  r->total = (uint64_t)total;
  r->hdr = 4 + 4 * r->ndim;
  r->record = (uint64_t)dl_shape_numel(r->ndim - 1, r->shape + 1);
  if (gzdirect(r->f) && check_plain_size(ctx, r) < 0) goto fail;
  return r;
fail:
  dl_idx_close(r);
  return NULL;
}

int dl_idx_ndim(const dl_idx_reader *r) { return r->ndim; }
const int64_t *dl_idx_shape(const dl_idx_reader *r) { return r->shape; }

int dl_idx_read(dl_ctx *ctx, dl_idx_reader *r, void *buf, int64_t n) {
  int64_t want64;
  if (n < 0 || dl_shape_mul(NULL, "idx", "records x bytes", n, (int64_t)r->record, &want64) < 0 ||
      r->pos + (uint64_t)want64 > r->total) {
    dl_fail(ctx, "idx: '%s': cannot read %lld records at record %llu, the file declares %lld", r->path, (long long)n,
            (unsigned long long)(r->record ? r->pos / r->record : 0), (long long)r->shape[0]);
    return -1;
  }
  size_t got;
  int rc = read_full(r->f, buf, (size_t)want64, &got);
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
  return r->pos == r->total ? check_end(ctx, r) : 0;
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
