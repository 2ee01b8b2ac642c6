/* tar.c -- the strict tar reader and the ustar writer of record shards
 * (tar.h has the rules; docs/formats.md, "Record shards").
 *
 * The reader walks 512-byte headers: each is checked (checksum, octal fields,
 * type) before its size moves the position on, and a member's data must lie
 * inside the file. Extended headers (pax 'x', GNU 'L') only set the name or
 * size of the member that follows them. One parser serves files (pread, so a
 * member can be read while the walk has moved on) and buffers (the fuzzer).
 */
/* See LICENSE */
#include "io/tar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 512

struct dl_tar {
  int fd;                            /* -1 for a buffer */
  const unsigned char *buf;          /* the buffer, when fd < 0 */
  int64_t size;                      /* of the file or buffer */
  int64_t pos;                       /* of the next header */
  int failed;
  char path[512];
};

static int fail(dl_tar *t, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(dl_tar *t, char *err, size_t errlen, const char *fmt, ...) {
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(err, errlen, "%s: %s", t->path, msg);
  t->failed = 1;
  return -1;
}

/* n bytes at off; -1 when they are not all there */
static int src_read(dl_tar *t, int64_t off, void *p, size_t n) {
  if (off < 0 || off > t->size || (int64_t)n > t->size - off) return -1;
  if (t->fd < 0) {
    memcpy(p, t->buf + off, n);
    return 0;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(t->fd, (char *)p + got, n - got, (off_t)(off + (int64_t)got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

/* ------------------------------------------------------------ header fields */

/* An octal field: digits, then spaces or NULs (leading spaces allowed). GNU
 * base-256 (first byte 0x80) for sizes past 8 GiB. -1 when malformed. */
static int64_t field_num(const unsigned char *f, size_t n) {
  if (f[0] == 0x80) {
    int64_t v = 0;
    for (size_t i = 1; i < n; i++) {
      if (v > (INT64_MAX >> 8)) return -1;
      v = (v << 8) | f[i];
    }
    return v;
  }
  size_t i = 0;
  while (i < n && f[i] == ' ') i++;
  int64_t v = 0;
  size_t digits = 0;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
    if (v > (INT64_MAX >> 3)) return -1;
    v = v * 8 + (f[i] - '0');
  }
  for (; i < n; i++)
    if (f[i] != ' ' && f[i] != 0) return -1;
  return digits ? v : -1;
}

static int zero_block(const unsigned char *h) {
  for (int i = 0; i < BLOCK; i++)
    if (h[i]) return 0;
  return 1;
}

static int checksum_ok(const unsigned char *h) {
  int64_t want = field_num(h + 148, 8);
  int64_t sum = 0;
  for (int i = 0; i < BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return want == sum;
}

/* the NUL-terminated (or full-width) text of a field, appended to out */
static size_t field_str(char *out, size_t cap, size_t at, const unsigned char *f, size_t n) {
  size_t k = 0;
  while (k < n && f[k]) k++;
  if (at + k >= cap) return cap;     /* too long: the caller reports it */
  memcpy(out + at, f, k);
  out[at + k] = 0;
  return at + k;
}

/* pax records "len key=value\n": path and size override the next header */
static int pax_parse(const char *p, int64_t n, char *name, int *has_name, int64_t *size, int *has_size) {
  int64_t i = 0;
  while (i < n) {
    int64_t len = 0, j = i;
    while (j < n && p[j] >= '0' && p[j] <= '9') {
      if (len > 100000000) return -1;
      len = len * 10 + (p[j] - '0');
      j++;
    }
    if (j == i || j >= n || p[j] != ' ' || len <= j - i + 1 || len > n - i || p[i + len - 1] != '\n') return -1;
    const char *kv = p + j + 1, *end = p + i + len - 1;
    const char *eq = memchr(kv, '=', (size_t)(end - kv));
    if (!eq) return -1;
    size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
    if (klen == 4 && !memcmp(kv, "path", 4)) {
      if (vlen == 0 || vlen >= DL_TAR_NAMELEN || memchr(eq + 1, 0, vlen)) return -1;
      memcpy(name, eq + 1, vlen);
      name[vlen] = 0;
      *has_name = 1;
    } else if (klen == 4 && !memcmp(kv, "size", 4)) {
      int64_t v = 0;
      if (vlen == 0 || vlen > 18) return -1;
      for (size_t k = 0; k < vlen; k++) {
        char c = eq[1 + k];
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
      }
      *size = v;
      *has_size = 1;
    }
    i += len;
  }
  return 0;
}

static int64_t padded(int64_t size) { return (size + BLOCK - 1) / BLOCK * BLOCK; }

/* ------------------------------------------------------------ reader */

static dl_tar *tar_new(const char *path) {
  dl_tar *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->fd = -1;
  snprintf(t->path, sizeof t->path, "%s", path);
  return t;
}

dl_tar *dl_tar_open(const char *path, char *err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s: not a regular file", path);
    return NULL;
  }
  /* O_NONBLOCK: a FIFO put in its place after the stat does not block the open */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(err, errlen, "%s: not a regular file", path);
    return NULL;
  }
  dl_tar *t = tar_new(path);
  if (!t) {
    close(fd);
    snprintf(err, errlen, "%s: out of memory", path);
    return NULL;
  }
  t->fd = fd;
  t->size = (int64_t)st.st_size;
  return t;
}

void dl_tar_close(dl_tar *t) {
  if (!t) return;
  if (t->fd >= 0) close(t->fd);
  free(t);
}


int dl_tar_seek(dl_tar *t, int64_t header, char *err, size_t errlen) {
  if (header < 0 || header % BLOCK || header > t->size)
    return fail(t, err, errlen, "no member header at offset %lld", (long long)header);
  t->pos = header;
  t->failed = 0;
  return 0;
}

int dl_tar_next(dl_tar *t, dl_tar_member *m, char *err, size_t errlen) {
  if (t->failed) return fail(t, err, errlen, "read after an error");
  char name[DL_TAR_NAMELEN];
  int has_name = 0, has_size = 0;
  int64_t size_override = 0, first = -1;
  unsigned char h[BLOCK];
  for (;;) {
    int64_t at = t->pos;
    if (at == t->size && first < 0)
      return fail(t, err, errlen, "ends at offset %lld without its end-of-archive blocks (truncated?)", (long long)at);
    if (src_read(t, at, h, BLOCK))
      return fail(t, err, errlen, "truncated header at offset %lld", (long long)at);
    if (first < 0) first = at;
    if (zero_block(h)) {
      if (has_name || has_size) return fail(t, err, errlen, "extended header at offset %lld has no member", (long long)first);
      /* the end: a second zero block, or the end of the file right after the first */
      unsigned char h2[BLOCK];
      if (at + BLOCK == t->size || (src_read(t, at + BLOCK, h2, BLOCK) == 0 && zero_block(h2))) {
        t->pos = at;                 /* stays at the end */
        return 0;
      }
      return fail(t, err, errlen, "a zero block at offset %lld is followed by data", (long long)at);
    }
    if (!checksum_ok(h)) return fail(t, err, errlen, "header at offset %lld: bad checksum", (long long)at);
    if (memcmp(h + 257, "ustar", 5) != 0)
      return fail(t, err, errlen, "header at offset %lld: not a ustar header", (long long)at);
    int64_t size = field_num(h + 124, 12);
    if (size < 0 || size > DL_TAR_MAXSIZE)
      return fail(t, err, errlen, "header at offset %lld: bad size field", (long long)at);
    char type = (char)h[156];
    int64_t data = at + BLOCK;
    if (type == 'x' || type == 'g' || type == 'L') {
      if (size > 1 << 20) return fail(t, err, errlen, "extended header at offset %lld is too large", (long long)at);
      if (size > t->size - data) return fail(t, err, errlen, "extended header at offset %lld runs past the end", (long long)at);
      char *ext = malloc((size_t)size + 1);
      if (!ext) return fail(t, err, errlen, "out of memory");
      if (src_read(t, data, ext, (size_t)size)) {
        free(ext);
        return fail(t, err, errlen, "extended header at offset %lld runs past the end", (long long)at);
      }
      ext[size] = 0;
      int bad = 0;
      if (type == 'x') {
        bad = pax_parse(ext, size, name, &has_name, &size_override, &has_size);
      } else if (type == 'L') {
        size_t k = strnlen(ext, (size_t)size);
        if (k == 0 || k >= DL_TAR_NAMELEN) bad = 1;
        else {
          memcpy(name, ext, k);
          name[k] = 0;
          has_name = 1;
        }
      }
      free(ext);
      if (bad) return fail(t, err, errlen, "extended header at offset %lld is malformed", (long long)at);
      t->pos = data + padded(size);
      continue;
    }
    if (!has_name) {
      size_t k = 0;
      if (h[345]) {                   /* ustar prefix */
        k = field_str(name, sizeof name, 0, h + 345, 155);
        if (k < sizeof name - 1) name[k++] = '/';
      }
      if (k >= sizeof name - 1 || field_str(name, sizeof name, k, h, 100) >= sizeof name)
        return fail(t, err, errlen, "header at offset %lld: name too long", (long long)at);
    }
    if (!name[0]) return fail(t, err, errlen, "header at offset %lld: empty name", (long long)at);
    if (has_size) size = size_override;
    if (size > DL_TAR_MAXSIZE) return fail(t, err, errlen, "member '%s' at offset %lld: too large", name, (long long)at);
    if (size > t->size - data)
      return fail(t, err, errlen, "member '%s' at offset %lld: its %lld bytes run past the end of the file (truncated?)",
                  name, (long long)first, (long long)size);
    t->pos = data + padded(size);
    if (t->pos > t->size) t->pos = t->size;
    if (type == '5') {                /* a directory: nothing to read */
      has_name = has_size = 0;
      first = -1;
      continue;
    }
    if (type != '0' && type != 0)
      return fail(t, err, errlen, "member '%s' at offset %lld: type '%c' is not a regular file", name, (long long)first,
                  type >= 32 && type < 127 ? type : '?');
    snprintf(m->name, sizeof m->name, "%s", name);
    m->size = size;
    m->offset = data;
    m->header = first;
    return 1;
  }
}

int dl_tar_read(dl_tar *t, const dl_tar_member *m, void *buf, char *err, size_t errlen) {
  if (m->size < 0 || src_read(t, m->offset, buf, (size_t)m->size))
    return fail(t, err, errlen, "member '%s' at offset %lld: cannot read its data", m->name, (long long)m->header);
  return 0;
}

int dl_tar_scan_buffer(const void *buf, size_t n, const char *label,
                       int (*fn)(void *arg, const dl_tar_member *m, const void *data), void *arg,
                       char *err, size_t errlen) {
  dl_tar *t = tar_new(label);
  if (!t) {
    snprintf(err, errlen, "%s: out of memory", label);
    return -1;
  }
  t->buf = buf;
  t->size = (int64_t)n;
  dl_tar_member m;
  int r;
  while ((r = dl_tar_next(t, &m, err, errlen)) == 1)
    if (fn && fn(arg, &m, t->buf + m.offset)) break;
  dl_tar_close(t);
  return r < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ writer */

static void put_octal(unsigned char *f, size_t n, int64_t v) {
  /* n - 1 digits, zero-padded, then NUL */
  for (size_t i = n - 1; i-- > 0;) {
    f[i] = (unsigned char)('0' + (v & 7));
    v >>= 3;
  }
  f[n - 1] = 0;
}

int dl_tar_writer_open(dl_ctx *ctx, dl_tar_writer *w, const char *path) {
  memset(w, 0, sizeof *w);
  if (dl_fileio_open_atomic(ctx, &w->f, path)) return -1;
  w->open = 1;
  return 0;
}

void dl_tar_writer_abort(dl_tar_writer *w) {
  if (w->open) dl_fileio_abort(&w->f);
  w->open = 0;
}

int dl_tar_writer_add(dl_ctx *ctx, dl_tar_writer *w, const char *name, const void *data, int64_t size) {
  if (!w->open) return dl_fail(ctx, "tar: the writer is closed"), -1;
  size_t len = strlen(name);
  const char *base = name;
  size_t plen = 0;
  if (len == 0 || size < 0 || size >= ((int64_t)1 << 33)) {
    dl_tar_writer_abort(w);
    dl_fail(ctx, "tar: member '%s': %s", name, len == 0 ? "empty name" : "size out of range (0 to 8 GiB)");
    return -1;
  }
  if (len > 100) {                    /* split at a '/' into prefix (<= 155) and name (<= 100) */
    const char *cut = NULL;
    for (const char *s = name + len - 1; s > name; s--)
      if (*s == '/' && (size_t)(s - name) <= 155 && len - (size_t)(s - name) - 1 <= 100) {
        cut = s;
        break;
      }
    if (!cut) {
      dl_tar_writer_abort(w);
      dl_fail(ctx, "tar: member name '%s' is too long for ustar (100 bytes, or 255 with a '/' to split at)", name);
      return -1;
    }
    plen = (size_t)(cut - name);
    base = cut + 1;
  }
  unsigned char h[BLOCK];
  memset(h, 0, sizeof h);
  memcpy(h, base, strlen(base));
  put_octal(h + 100, 8, 0644);
  put_octal(h + 108, 8, 0);
  put_octal(h + 116, 8, 0);
  put_octal(h + 124, 12, size);
  put_octal(h + 136, 12, 0);
  h[156] = '0';
  memcpy(h + 257, "ustar", 6);        /* "ustar\0" */
  memcpy(h + 263, "00", 2);
  if (plen) memcpy(h + 345, name, plen);
  int64_t sum = 0;
  memset(h + 148, ' ', 8);
  for (int i = 0; i < BLOCK; i++) sum += h[i];
  put_octal(h + 148, 7, sum);
  h[155] = ' ';
  static const unsigned char zeros[BLOCK];
  int64_t pad = padded(size) - size;
  if (dl_fileio_write(&w->f, h, BLOCK) || (size && dl_fileio_write(&w->f, data, (size_t)size)) ||
      (pad && dl_fileio_write(&w->f, zeros, (size_t)pad))) {
    dl_tar_writer_abort(w);
    return -1;
  }
  w->bytes += BLOCK + size + pad;
  return 0;
}

int dl_tar_writer_close(dl_ctx *ctx, dl_tar_writer *w) {
  if (!w->open) return dl_fail(ctx, "tar: the writer is closed"), -1;
  static const unsigned char zeros[2 * BLOCK];
  if (dl_fileio_write(&w->f, zeros, sizeof zeros)) {
    dl_tar_writer_abort(w);
    return -1;
  }
  w->open = 0;
  if (dl_fileio_commit(&w->f)) return -1;
  w->bytes += 2 * BLOCK;
  return 0;
}
