/* npz.c -- reads .npz archives: a small strict zip reader over pread(2) and zlib's raw
 * inflate, handing each member to the .npy reader as a byte stream (see npz.h).
 *
 * Zip layout used here (all little-endian): the end-of-central-directory record (EOCD,
 * "PK\5\6", 22 bytes + comment) at the end; for ZIP64 a locator ("PK\6\7", 20 bytes) just
 * before it pointing at the ZIP64 EOCD ("PK\6\6", 56 bytes); the central directory, one
 * "PK\1\2" entry of 46 bytes + name + extra + comment per member; each member's data after its
 * local header ("PK\3\4", 30 bytes + name + extra). Sizes and offsets come from the central
 * directory (a local header may carry 0xffffffff or zeros with a data descriptor after the
 * data, as Python's zipfile writes for numpy); the local header's lengths only locate the data.
 * libarchive would read the same archives but streams them in order, and looking a member up
 * by name in the central directory is what .npz needs; zlib is linked already.
 */
/* See LICENSE */
#include "io/npz.h"
#include "io/npy.h"
#include "io/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_RATIO 1032                      /* deflate's largest expansion, about 1032:1 */
#define CHUNK ((size_t)1 << 16)

typedef struct {
  char *name;
  uint64_t offset;                          /* of the local header */
  uint64_t csize, usize;
  uint32_t crc;
  int method;
} member;

struct dl_npz {
  char *path;
  int fd;
  uint64_t size;                            /* file bytes */
  uint64_t cd_offset;                       /* members' data lies before this */
  int n;
  member *m;
};

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* exactly n bytes at off, or -1 naming what was being read */
static int at(dl_ctx *ctx, const dl_npz *z, uint64_t off, void *buf, size_t n, const char *what) {
  if (off > z->size || n > z->size - off) {
    dl_fail(ctx, "npz: '%s' is truncated: %s needs %zu bytes at offset %llu, the file has %llu", z->path, what, n,
            (unsigned long long)off, (unsigned long long)z->size);
    return -1;
  }
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(z->fd, (char *)buf + done, n - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      dl_fail(ctx, "npz: '%s': cannot read %s at offset %llu: %s", z->path, what, (unsigned long long)(off + done),
              r < 0 ? strerror(errno) : "the file shrank");
      return -1;
    }
    done += (size_t)r;
  }
  return 0;
}

void dl_npz_close(dl_npz *z) {
  if (!z) return;
  if (z->fd >= 0) close(z->fd);
  for (int i = 0; i < z->n; i++) free(z->m[i].name);
  free(z->m);
  free(z->path);
  free(z);
}

int dl_npz_count(const dl_npz *z) { return z->n; }
const char *dl_npz_name(const dl_npz *z, int i) { return z->m[i].name; }

int dl_npz_find(const dl_npz *z, const char *name) {
  size_t k = strlen(name);
  for (int i = 0; i < z->n; i++)               /* the exact name first: "a" beside "a.npy" */
    if (strcmp(z->m[i].name, name) == 0) return i;
  for (int i = 0; i < z->n; i++)
    if (strncmp(z->m[i].name, name, k) == 0 && strcmp(z->m[i].name + k, ".npy") == 0) return i;
  return -1;
}

/* ------------------------------------------------------------ central directory */

typedef struct {
  uint64_t entries, cd_size, cd_offset, end;   /* end: where the central directory must stop */
} directory;

static int find_directory(dl_ctx *ctx, dl_npz *z, directory *d) {
  if (z->size < 22) {
    dl_fail(ctx, "npz: '%s' has %llu bytes, too few for a zip archive (not an .npz file)", z->path,
            (unsigned long long)z->size);
    return -1;
  }
  size_t tail = z->size < 22 + 65535 ? (size_t)z->size : 22 + 65535;
  uint8_t *t = malloc(tail);
  if (!t) {
    ctx->oom = 1;
    dl_fail(ctx, "npz: out of memory reading '%s'", z->path);
    return -1;
  }
  uint64_t base = z->size - tail;
  if (at(ctx, z, base, t, tail, "the end of the archive") < 0) {
    free(t);
    return -1;
  }
  long e = -1;
  for (long p = (long)tail - 22; p >= 0; p--)
    if (le(t + p, 4) == 0x06054b50 && (size_t)p + 22 + le(t + p + 20, 2) == tail) {
      e = p;
      break;
    }
  if (e < 0) {
    free(t);
    dl_fail(ctx, "npz: '%s' has no end-of-central-directory record in its last %zu bytes (not a zip archive, or truncated)", z->path,
            tail);
    return -1;
  }
  const uint8_t *r = t + e;
  uint64_t eocd = base + (uint64_t)e;
  uint64_t disk = le(r + 4, 2), cd_disk = le(r + 6, 2), n_here = le(r + 8, 2);
  d->entries = le(r + 10, 2);
  d->cd_size = le(r + 12, 4);
  d->cd_offset = le(r + 16, 4);
  d->end = eocd;
  int zip64 = d->entries == 0xffff || d->cd_size == 0xffffffffu || d->cd_offset == 0xffffffffu;
  free(t);
  if (!zip64 && (disk != 0 || cd_disk != 0 || n_here != d->entries)) {
    dl_fail(ctx, "npz: '%s' is a multi-disk archive (EOCD at offset %llu): not supported", z->path,
            (unsigned long long)eocd);
    return -1;
  }
  if (zip64) {
    uint8_t l[20], r64[56];
    if (eocd < 20 || at(ctx, z, eocd - 20, l, 20, "the ZIP64 locator") < 0) {
      if (eocd < 20) dl_fail(ctx, "npz: '%s': the EOCD at offset %llu asks for ZIP64 records, none precede it", z->path,
                             (unsigned long long)eocd);
      return -1;
    }
    if (le(l, 4) != 0x07064b50 || le(l + 4, 4) != 0 || le(l + 16, 4) != 1) {
      dl_fail(ctx, "npz: '%s': the EOCD at offset %llu asks for ZIP64 records, but offset %llu holds no single-disk "
                   "ZIP64 locator", z->path, (unsigned long long)eocd, (unsigned long long)(eocd - 20));
      return -1;
    }
    uint64_t off = le(l + 8, 8);
    if (off > eocd - 20 || eocd - 20 - off < 56) {
      dl_fail(ctx, "npz: '%s': the ZIP64 locator at offset %llu points at offset %llu, outside the archive", z->path,
              (unsigned long long)(eocd - 20), (unsigned long long)off);
      return -1;
    }
    if (at(ctx, z, off, r64, 56, "the ZIP64 end record") < 0) return -1;
    if (le(r64, 4) != 0x06064b50 || le(r64 + 16, 4) != 0 || le(r64 + 20, 4) != 0 ||
        le(r64 + 24, 8) != le(r64 + 32, 8)) {
      dl_fail(ctx, "npz: '%s' has a bad or multi-disk ZIP64 end record at offset %llu", z->path, (unsigned long long)off);
      return -1;
    }
    d->entries = le(r64 + 32, 8);
    d->cd_size = le(r64 + 40, 8);
    d->cd_offset = le(r64 + 48, 8);
    d->end = off;
  }
  if (d->cd_offset > d->end || d->cd_size != d->end - d->cd_offset) {
    dl_fail(ctx, "npz: '%s': the central directory (%llu bytes at offset %llu) does not end where the end record "
                 "starts (offset %llu)", z->path, (unsigned long long)d->cd_size, (unsigned long long)d->cd_offset,
            (unsigned long long)d->end);
    return -1;
  }
  if (d->entries > DL_NPZ_MAX_MEMBERS || d->entries > d->cd_size / 46) {
    dl_fail(ctx, "npz: '%s' declares %llu members in a central directory of %llu bytes (at most %d members)", z->path,
            (unsigned long long)d->entries, (unsigned long long)d->cd_size, DL_NPZ_MAX_MEMBERS);
    return -1;
  }
  return 0;
}

/* the ZIP64 extra field (id 1) of entry e, if any, into its 0xffffffff fields */
static int zip64_extra(dl_ctx *ctx, const dl_npz *z, const uint8_t *x, size_t n, member *m, uint64_t disk,
                       uint64_t where) {
  size_t i = 0;
  while (i < n) {
    if (n - i < 4) goto bad;
    size_t id = (size_t)le(x + i, 2), len = (size_t)le(x + i + 2, 2);
    i += 4;
    if (len > n - i) goto bad;
    if (id == 1) {
      size_t k = 0;
      uint64_t *f[3] = {&m->usize, &m->csize, &m->offset};
      for (int j = 0; j < 3; j++)
        if (*f[j] == 0xffffffffu) {
          if (len - k < 8) goto bad;
          *f[j] = le(x + i + k, 8);
          k += 8;
        }
      if (disk == 0xffff && len - k < 4) goto bad;
    }
    i += len;
  }
  return 0;
bad:
  dl_fail(ctx, "npz: '%s': member '%s' has a malformed extra field in its directory entry at offset %llu", z->path,
          m->name, (unsigned long long)where);
  return -1;
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(const member *const *)a)->name, (*(const member *const *)b)->name);
}

static int by_offset(const void *a, const void *b) {
  uint64_t x = (*(const member *const *)a)->offset, y = (*(const member *const *)b)->offset;
  return x < y ? -1 : x > y;
}

/* every member's name unique, and its data (at least 30 + name + csize bytes from its offset)
 * before the next member's local header */
static int check_members(dl_ctx *ctx, dl_npz *z) {
  if (z->n < 2) return 0;
  member **s = malloc((size_t)z->n * sizeof *s);
  if (!s) {
    ctx->oom = 1;
    dl_fail(ctx, "npz: out of memory reading '%s'", z->path);
    return -1;
  }
  for (int i = 0; i < z->n; i++) s[i] = &z->m[i];
  int rc = 0;
  qsort(s, (size_t)z->n, sizeof *s, by_name);
  for (int i = 1; i < z->n && rc == 0; i++)
    if (strcmp(s[i - 1]->name, s[i]->name) == 0) {
      dl_fail(ctx, "npz: '%s' holds two members named '%s'", z->path, s[i]->name);
      rc = -1;
    }
  qsort(s, (size_t)z->n, sizeof *s, by_offset);
  for (int i = 1; i < z->n && rc == 0; i++) {
    const member *a = s[i - 1];
    if (s[i]->offset - a->offset < 30 + strlen(a->name) + a->csize) {
      dl_fail(ctx, "npz: '%s': member '%s' at offset %llu overlaps member '%s' at offset %llu", z->path, a->name,
              (unsigned long long)a->offset, s[i]->name, (unsigned long long)s[i]->offset);
      rc = -1;
    }
  }
  free(s);
  return rc;
}

static int read_entries(dl_ctx *ctx, dl_npz *z, const directory *d) {
  uint8_t *cd = malloc(d->cd_size ? (size_t)d->cd_size : 1);
  z->m = calloc(d->entries ? (size_t)d->entries : 1, sizeof *z->m);
  int rc = -1;
  if (!cd || !z->m) {
    ctx->oom = 1;
    dl_fail(ctx, "npz: out of memory reading the central directory of '%s'", z->path);
    goto done;
  }
  if (at(ctx, z, d->cd_offset, cd, (size_t)d->cd_size, "the central directory") < 0) goto done;
  size_t p = 0;
  for (uint64_t k = 0; k < d->entries; k++) {
    uint64_t where = d->cd_offset + p;
    if (d->cd_size - p < 46 || le(cd + p, 4) != 0x02014b50) {
      dl_fail(ctx, "npz: '%s': directory entry %llu at offset %llu is %s", z->path, (unsigned long long)k + 1,
              (unsigned long long)where, d->cd_size - p < 46 ? "truncated" : "missing (bad signature)");
      goto done;
    }
    const uint8_t *e = cd + p;
    size_t nl = (size_t)le(e + 28, 2), xl = (size_t)le(e + 30, 2), cl = (size_t)le(e + 32, 2);
    if (d->cd_size - p - 46 < nl + xl + cl) {
      dl_fail(ctx, "npz: '%s': directory entry %llu at offset %llu is truncated", z->path, (unsigned long long)k + 1,
              (unsigned long long)where);
      goto done;
    }
    member *m = &z->m[z->n];
    if (nl == 0 || memchr(e + 46, 0, nl)) {
      dl_fail(ctx, "npz: '%s': directory entry %llu at offset %llu has an empty name or one with a NUL byte", z->path,
              (unsigned long long)k + 1, (unsigned long long)where);
      goto done;
    }
    m->name = malloc(nl + 1);
    if (!m->name) {
      ctx->oom = 1;
      dl_fail(ctx, "npz: out of memory reading the central directory of '%s'", z->path);
      goto done;
    }
    memcpy(m->name, e + 46, nl);
    m->name[nl] = 0;
    z->n++;
    uint64_t flags = le(e + 8, 2), disk = le(e + 34, 2);
    m->method = (int)le(e + 10, 2);
    m->crc = (uint32_t)le(e + 16, 4);
    m->csize = le(e + 20, 4);
    m->usize = le(e + 24, 4);
    m->offset = le(e + 42, 4);
    if (zip64_extra(ctx, z, e + 46 + nl, xl, m, disk, where) < 0) goto done;
    if (flags & 0x41) {
      dl_fail(ctx, "npz: '%s': member '%s' (entry at offset %llu) is encrypted: not supported", z->path, m->name,
              (unsigned long long)where);
      goto done;
    }
    if (m->method != 0 && m->method != 8) {
      dl_fail(ctx, "npz: '%s': member '%s' (entry at offset %llu) uses compression method %d (stored 0 and "
                   "deflated 8 are supported)", z->path, m->name, (unsigned long long)where, m->method);
      goto done;
    }
    if (disk != 0 && disk != 0xffff) {
      dl_fail(ctx, "npz: '%s': member '%s' starts on disk %llu: multi-disk archives are not supported", z->path,
              m->name, (unsigned long long)disk);
      goto done;
    }
    if (m->offset > d->cd_offset || d->cd_offset - m->offset < 30 + (uint64_t)nl ||
        d->cd_offset - m->offset - 30 - nl < m->csize) {
      dl_fail(ctx, "npz: '%s': member '%s' (%llu bytes at offset %llu) does not lie before the central directory at "
                   "offset %llu", z->path, m->name, (unsigned long long)m->csize, (unsigned long long)m->offset,
              (unsigned long long)d->cd_offset);
      goto done;
    }
    if ((m->method == 0 && m->csize != m->usize) ||
        (m->method == 8 && m->usize / MAX_RATIO > m->csize + 1)) {
      dl_fail(ctx, "npz: '%s': member '%s' declares %llu bytes from %llu %s bytes, which %s", z->path, m->name,
              (unsigned long long)m->usize, (unsigned long long)m->csize, m->method ? "deflated" : "stored",
              m->method ? "deflate cannot produce" : "differ");
      goto done;
    }
    p += 46 + nl + xl + cl;
  }
  if (p != d->cd_size) {
    dl_fail(ctx, "npz: '%s': %llu bytes follow the %llu directory entries at offset %llu", z->path,
            (unsigned long long)(d->cd_size - p), (unsigned long long)d->entries,
            (unsigned long long)(d->cd_offset + p));
    goto done;
  }
  rc = check_members(ctx, z);
done:
  free(cd);
  return rc;
}

dl_npz *dl_npz_open(dl_ctx *ctx, const char *path) {
  dl_npz *z = calloc(1, sizeof *z);
  if (!z || !(z->path = strdup(path))) {
    free(z);
    ctx->oom = 1;
    return dl_fail(ctx, "npz: out of memory opening '%s'", path);
  }
  z->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO must not block the open */
  struct stat sb;
  directory d;
  if (z->fd < 0) {
    dl_fail(ctx, "npz: cannot open '%s': %s", path, strerror(errno));
  } else if (fstat(z->fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    dl_fail(ctx, "npz: '%s' is not a regular file", path);
  } else {
    z->size = (uint64_t)sb.st_size;
    if (find_directory(ctx, z, &d) == 0 && read_entries(ctx, z, &d) == 0) {
      z->cd_offset = d.cd_offset;
      return z;
    }
  }
  dl_npz_close(z);
  return NULL;
}

/* ------------------------------------------------------------ members */

typedef struct {
  dl_npy_source s;
  int failed;                               /* a read failed (its message is the cause) */
  const dl_npz *z;
  const member *m;
  uint64_t data;                            /* offset of the member's data in the archive */
  uint64_t cpos, upos;                      /* compressed bytes fed, uncompressed bytes given */
  uint32_t crc;
  z_stream zs;
  int inflating;
  uint8_t in[CHUNK];
} member_source;

/* the inflater's input, when it has used it all, refilled with the member's next CHUNK of
 * compressed bytes (none past its end) */
static int refill(dl_ctx *ctx, member_source *r) {
  const member *m = r->m;
  if (r->zs.avail_in > 0 || r->cpos >= m->csize) return 0;
  size_t k = m->csize - r->cpos < CHUNK ? (size_t)(m->csize - r->cpos) : CHUNK;
  if (at(ctx, r->z, r->data + r->cpos, r->in, k, "member data") < 0) return -1;
  r->zs.next_in = r->in;
  r->zs.avail_in = (uInt)k;
  r->cpos += k;
  return 0;
}

static int member_read_raw(dl_npy_source *s, dl_ctx *ctx, void *buf, size_t n) {
  member_source *r = (member_source *)s;
  const member *m = r->m;
  if (n > m->usize - r->upos) {
    dl_fail(ctx, "%s is truncated at offset %llu", s->where, (unsigned long long)m->usize);
    return -1;
  }
  if (m->method == 0) {
    if (at(ctx, r->z, r->data + r->upos, buf, n, "member data") < 0) return -1;
  } else {
    r->zs.next_out = buf;
    size_t left = n;
    while (left > 0) {
      r->zs.avail_out = left > (1u << 30) ? 1u << 30 : (uInt)left;
      if (refill(ctx, r) < 0) return -1;
      uInt before = r->zs.avail_out;
      int zr = inflate(&r->zs, Z_NO_FLUSH);
      left -= before - r->zs.avail_out;
      if (zr == Z_STREAM_END && left > 0) {
        dl_fail(ctx, "%s: the deflate stream ends after %llu bytes, the member declares %llu", s->where,
                (unsigned long long)(r->upos + n - left), (unsigned long long)m->usize);
        return -1;
      }
      if (zr != Z_OK && zr != Z_STREAM_END && !(zr == Z_BUF_ERROR && r->cpos < m->csize)) {
        dl_fail(ctx, "%s: decompression failed at byte %llu of the member (compressed offset %llu): %s", s->where,
                (unsigned long long)(r->upos + n - left), (unsigned long long)(r->cpos - r->zs.avail_in),
                zr == Z_BUF_ERROR ? "the compressed data ends early" : r->zs.msg ? r->zs.msg : "zlib error");
        return -1;
      }
    }
  }
  r->crc = dl_crc32(r->crc, buf, n);
  r->upos += n;
  return 0;
}

static int member_read(dl_npy_source *s, dl_ctx *ctx, void *buf, size_t n) {
  int rc = member_read_raw(s, ctx, buf, n);
  if (rc < 0) ((member_source *)s)->failed = 1;
  return rc;
}

/* after the whole member was read: the deflate stream ends exactly there, and the CRC matches */
static int member_finish(dl_ctx *ctx, member_source *r) {
  const member *m = r->m;
  if (m->method == 8) {
    uint8_t extra;
    for (;;) {
      if (refill(ctx, r) < 0) return -1;
      r->zs.next_out = &extra;
      r->zs.avail_out = 1;
      int zr = inflate(&r->zs, Z_NO_FLUSH);
      if (r->zs.avail_out == 0) {
        dl_fail(ctx, "%s: the deflate stream holds more than the %llu bytes the member declares", r->s.where,
                (unsigned long long)m->usize);
        return -1;
      }
      if (zr == Z_STREAM_END) break;
      if (zr != Z_OK && !(zr == Z_BUF_ERROR && r->cpos < m->csize)) {
        dl_fail(ctx, "%s: the deflate stream does not end after the %llu bytes the member declares%s%s", r->s.where,
                (unsigned long long)m->usize, r->zs.msg ? ": " : "", r->zs.msg ? r->zs.msg : "");
        return -1;
      }
    }
    if (r->zs.avail_in != 0 || r->cpos != m->csize) {
      dl_fail(ctx, "%s: %llu compressed bytes follow the end of the deflate stream", r->s.where,
              (unsigned long long)(m->csize - r->cpos + r->zs.avail_in));
      return -1;
    }
  }
  if (r->crc != m->crc) {
    dl_fail(ctx, "%s: CRC-32 mismatch: the directory says %08lx, the data gives %08lx", r->s.where,
            (unsigned long)m->crc, (unsigned long)r->crc);
    return -1;
  }
  return 0;
}

/* The .npy reader failed on the member's bytes (not on reading them): a member that does not
 * inflate to its end or whose bytes do not match their CRC-32 is corrupt, and that is the
 * better message (the .npy one is kept after a CRC mismatch). */
static void corrupt_or(dl_ctx *ctx, member_source *r) {
  if (r->failed) return;
  char first[sizeof ctx->err];
  memcpy(first, ctx->err, sizeof first);
  uint8_t *buf = malloc(CHUNK);
  int ok = buf != NULL;
  while (ok && r->upos < r->m->usize) {
    size_t k = r->m->usize - r->upos < CHUNK ? (size_t)(r->m->usize - r->upos) : CHUNK;
    ok = member_read(&r->s, ctx, buf, k) == 0;
  }
  free(buf);
  if (ok && r->crc != r->m->crc)
    dl_fail(ctx, "%s: CRC-32 mismatch: the directory says %08lx, the data gives %08lx (%s)", r->s.where,
            (unsigned long)r->m->crc, (unsigned long)r->crc, first);
  else if (ok || !buf) memcpy(ctx->err, first, sizeof first);
}

dl_tensor *dl_npz_read_new(dl_ctx *ctx, dl_npz *z, int i) {
  const member *m = &z->m[i];
  uint8_t lh[30];
  if (at(ctx, z, m->offset, lh, 30, "a local header") < 0) return NULL;
  size_t nl = (size_t)le(lh + 26, 2), xl = (size_t)le(lh + 28, 2);
  char *name = malloc(nl + 1);
  if (!name) {
    ctx->oom = 1;
    return dl_fail(ctx, "npz: out of memory reading '%s'", z->path);
  }
  int ok = le(lh, 4) == 0x04034b50 && (int)le(lh + 8, 2) == m->method && nl == strlen(m->name) &&
           at(ctx, z, m->offset + 30, name, nl, "a local header") == 0 && memcmp(name, m->name, nl) == 0;
  free(name);
  uint64_t data = m->offset + 30 + nl + xl;
  if (!ok) {
    return dl_fail(ctx, "npz: '%s': member '%s': the local header at offset %llu does not match the central directory "
                        "(signature, method or name)", z->path, m->name, (unsigned long long)m->offset);
  }
  if (data > z->cd_offset || z->cd_offset - data < m->csize) {
    return dl_fail(ctx, "npz: '%s': member '%s': its %llu bytes at offset %llu run into the central directory", z->path,
                   m->name, (unsigned long long)m->csize, (unsigned long long)data);
  }
  member_source *r = calloc(1, sizeof *r);
  char where[600];
  snprintf(where, sizeof where, "npz: '%s' member '%s'", z->path, m->name);
  if (!r) {
    ctx->oom = 1;
    return dl_fail(ctx, "%s: out of memory", where);
  }
  r->s.where = where;
  r->s.size = m->usize;
  r->s.read = member_read;
  r->z = z;
  r->m = m;
  r->data = data;
  dl_tensor *t = NULL;
  if (m->method == 8) {
    if (inflateInit2(&r->zs, -15) != Z_OK) {
      ctx->oom = 1;
      dl_fail(ctx, "%s: cannot start inflating (out of memory)", where);
      free(r);
      return NULL;
    }
    r->inflating = 1;
  }
  t = dl_npy_read_source_new(ctx, &r->s);
  if (t && member_finish(ctx, r) < 0) {
    dl_tensor_release(t);
    t = NULL;
  } else if (!t && !ctx->oom) {
    corrupt_or(ctx, r);
  }
  if (r->inflating) inflateEnd(&r->zs);
  free(r);
  return t;
}
