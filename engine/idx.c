/* idx.c -- reads IDX files (the MNIST family's format), plain or gzip-compressed.
 *
 * IDX: a 4-byte big-endian magic (0, 0, type, ndim), ndim big-endian uint32
 * sizes, then the data in row-major order. zlib's gz* functions stream both
 * compressed and plain files. Only unsigned-byte data (type 0x08), the type
 * of every MNIST-family file, is supported; other types are refused with a
 * message. Errors name the file and the byte offset.
 */
/* See LICENSE */
#include "idx.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

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

dl_tensor *dl_idx_read_new(dl_ctx *ctx, const char *path) {
  gzFile f = gzopen(path, "rb");
  if (!f) return dl_fail(ctx, "idx: cannot open '%s': %s", path, strerror(errno));
  unsigned char hdr[4];
  size_t got;
  dl_tensor *t = NULL;
  if (read_full(f, hdr, 4, &got) < 0) {
    dl_fail(ctx, "idx: '%s' is truncated: header needs 4 bytes, file has %zu", path, got);
    goto done;
  }
  if (hdr[0] != 0 || hdr[1] != 0) {
    dl_fail(ctx, "idx: '%s' has a bad magic number %02x %02x %02x %02x at offset 0 (not an IDX file)", path,
            hdr[0], hdr[1], hdr[2], hdr[3]);
    goto done;
  }
  if (hdr[2] != 0x08) {
    dl_fail(ctx, "idx: '%s' has data type 0x%02x at offset 2; only unsigned byte (0x08) is supported", path, hdr[2]);
    goto done;
  }
  int nd = hdr[3];
  if (nd < 1 || nd > DL_MAXDIM) {
    dl_fail(ctx, "idx: '%s' declares %d dimensions at offset 3 (1 to %d supported)", path, nd, DL_MAXDIM);
    goto done;
  }
  int64_t shape[DL_MAXDIM];
  uint64_t total = 1;
  for (int i = 0; i < nd; i++) {
    unsigned char b[4];
    if (read_full(f, b, 4, &got) < 0) {
      dl_fail(ctx, "idx: '%s' is truncated in the header at offset %d", path, 4 + 4 * i + (int)got);
      goto done;
    }
    shape[i] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
    total *= (uint64_t)shape[i];
    if (total > ((uint64_t)1 << 36)) {
      dl_fail(ctx, "idx: '%s' declares more than 2^36 elements", path);
      goto done;
    }
  }
  t = dl_tensor_new_empty(ctx, DL_U8, nd, shape);
  if (!t) goto done;
  if (read_full(f, t->st->data, (size_t)total, &got) < 0) {
    dl_fail(ctx, "idx: '%s' is truncated: expected %llu data bytes after the %d-byte header, got %zu", path,
            (unsigned long long)total, 4 + 4 * nd, got);
    dl_tensor_release(t);
    t = NULL;
    goto done;
  }
  int errnum;
  gzerror(f, &errnum);
  if (errnum != Z_OK && errnum != Z_STREAM_END) {
    dl_fail(ctx, "idx: '%s': decompression failed: %s", path, gzerror(f, &errnum));
    dl_tensor_release(t);
    t = NULL;
  }
done:
  gzclose(f);
  return t;
}
