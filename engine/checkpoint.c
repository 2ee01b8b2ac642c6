/* checkpoint.c -- writes and reads safetensors-compatible checkpoint files.
 *
 * Writing: validate every name and key, checksum every tensor (non-contiguous
 * views are gathered in 1 MiB chunks, never copied whole), build the JSON
 * header, then write a temporary file next to the target, fsync it, rename it
 * over the target and fsync the directory. Any failure removes the temporary
 * file and leaves the target as it was.
 *
 * Reading treats the file as hostile: the header length is checked against
 * the file and a 100 MB limit before anything is allocated, the JSON is read
 * by a small strict parser that accepts exactly the safetensors header shape
 * (no recursion, no unknown fields, strict UTF-8, no duplicate names), every
 * tensor's byte range must match its dtype and shape, and the ranges must tile
 * the data section exactly, so a load never allocates more tensor memory than
 * the file holds. A dlua checkpoint's CRCs (header and per tensor) are then
 * checked; a plain safetensors file from another tool has none to check.
 * Nothing in a file is ever executed or interpreted beyond this.
 * docs/formats.md ("Checkpoints") specifies the format.
 */
/* See LICENSE */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c writes host-order data and assumes a little-endian host"
#endif

#define CHUNK ((size_t)1 << 20)            /* gather / verify buffer */
#define MAX_INT ((uint64_t)1 << 62)        /* largest integer accepted in a header */

static const char *const st_names[DL_NDTYPES] = {"F32", "F64", "I32", "I64", "U8"};

static const char *const reserved_keys[] = {"crc32", "format", "format_version", "header_crc32"};

/* ------------------------------------------------------------ small helpers */

static int bytes_eq(const char *a, size_t na, const char *b) {
  return na == strlen(b) && memcmp(a, b, na) == 0;
}

static int bytes_cmp(const char *a, size_t na, const char *b, size_t nb) {
  int c = memcmp(a, b, na < nb ? na : nb);
  if (c) return c;
  return na < nb ? -1 : na > nb;
}

int dl_checkpoint_is_reserved_key(const char *key, size_t len) {
  for (size_t i = 0; i < sizeof reserved_keys / sizeof *reserved_keys; i++)
    if (bytes_eq(key, len, reserved_keys[i])) return 1;
  return 0;
}

/* length of the valid UTF-8 sequence at p (avail bytes), or 0: no overlongs,
 * no surrogates, nothing past U+10FFFF */
static size_t utf8_seq(const unsigned char *p, size_t avail) {
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t k = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
  if (k == 0 || k > avail) return 0;
  for (size_t i = 1; i < k; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && p[1] < 0xA0) return 0;
  if (c == 0xED && p[1] >= 0xA0) return 0;
  if (c == 0xF0 && p[1] < 0x90) return 0;
  if (c == 0xF4 && p[1] >= 0x90) return 0;
  return k;
}

static int utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq(p + i, n - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

/* a name for an error message: control bytes as \xNN, at most ~60 bytes */
static const char *show(char *buf, size_t cap, const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 8 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (k > 60) {
      memcpy(buf + k, "...", 3);
      k += 3;
      break;
    }
    if (c < 0x20 || c == 0x7f) k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", c);
    else buf[k++] = (char)c;
  }
  buf[k] = 0;
  return buf;
}

/* qsort, which must not see a NULL base even for 0 elements */
static void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  if (n > 1) qsort(base, n, size, cmp);
}

static uint64_t shape_bytes(dl_dtype d, int ndim, const int64_t *shape) {
  uint64_t n = dl_dtype_size(d);
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) return 0;
  for (int i = 0; i < ndim; i++) {
    uint64_t s = (uint64_t)shape[i];
    if (n > MAX_INT / s) return UINT64_MAX;
    n *= s;
  }
  return n;
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
  dl_shape_str(shape, ndim, buf, cap);
}

/* ------------------------------------------------------------ growable string */

typedef struct {
  dl_ctx *ctx;
  char *p;
  size_t n, cap;
  int failed;               /* an allocation failed (ctx->err is set) */
} sbuf;

static int sb_reserve(sbuf *b, size_t extra) {
  if (b->failed) return -1;
  if (b->n + extra <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + extra) cap *= 2;
  char *p = dl_alloc(b->ctx, cap);
  if (!p) {
    b->failed = 1;
    return -1;
  }
  if (b->n) memcpy(p, b->p, b->n);
  dl_free(b->ctx, b->p, b->cap);
  b->p = p;
  b->cap = cap;
  return 0;
}

static void sb_add(sbuf *b, const void *s, size_t n) {
  if (n == 0 || sb_reserve(b, n) < 0) return;
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static void sb_adds(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_addu(sbuf *b, uint64_t v) {
  char s[32];
  int k = snprintf(s, sizeof s, "%llu", (unsigned long long)v);
  sb_add(b, s, (size_t)k);
}

static void sb_free(sbuf *b) {
  dl_free(b->ctx, b->p, b->cap);
  b->p = NULL;
  b->n = b->cap = 0;
}

/* a JSON string literal for n bytes of (valid) UTF-8 */
static void sb_json_string(sbuf *b, const char *s, size_t n) {
  sb_add(b, "\"", 1);
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c != '"' && c != '\\' && c >= 0x20) continue;
    sb_add(b, s + run, i - run);
    run = i + 1;
    char esc[8];
    switch (c) {
      case '"': sb_add(b, "\\\"", 2); break;
      case '\\': sb_add(b, "\\\\", 2); break;
      case '\n': sb_add(b, "\\n", 2); break;
      case '\r': sb_add(b, "\\r", 2); break;
      case '\t': sb_add(b, "\\t", 2); break;
      default:
        snprintf(esc, sizeof esc, "\\u%04x", c);
        sb_add(b, esc, 6);
    }
  }
  sb_add(b, s + run, n - run);
  sb_add(b, "\"", 1);
}

/* ------------------------------------------------------------ the header checksum */

static uint32_t crc_bytes(uint32_t c, const void *p, size_t n) {
  return (uint32_t)crc32_z(c, (const Bytef *)p, n);
}

static uint32_t crc_text(uint32_t c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint32_t crc_text(uint32_t c, const char *fmt, ...) {
  char s[64];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(s, sizeof s, fmt, ap);
  va_end(ap);
  return crc_bytes(c, s, (size_t)k);
}

/* CRC-32 of the canonical text of the tensor table and the metadata (except
 * header_crc32 itself), both in bytewise name order:
 *   "T" len ":" name " " DTYPE " " d0,d1,... " " begin " " end "\n"   per tensor
 *   "M" len ":" key " " len ":" value "\n"                           per entry */
static uint32_t header_crc(const dl_checkpoint_entry *e, int n, const dl_checkpoint_kv *kv, int nkv) {
  uint32_t c = crc_bytes(0, NULL, 0);
  for (int i = 0; i < n; i++) {
    c = crc_text(c, "T%zu:", e[i].name_len);
    c = crc_bytes(c, e[i].name, e[i].name_len);
    c = crc_text(c, " %s ", st_names[e[i].dtype]);
    for (int d = 0; d < e[i].ndim; d++) c = crc_text(c, d ? ",%lld" : "%lld", (long long)e[i].shape[d]);
    c = crc_text(c, " %llu %llu\n", (unsigned long long)e[i].begin, (unsigned long long)e[i].end);
  }
  for (int i = 0; i < nkv; i++) {
    if (bytes_eq(kv[i].key, kv[i].key_len, "header_crc32")) continue;
    c = crc_text(c, "M%zu:", kv[i].key_len);
    c = crc_bytes(c, kv[i].key, kv[i].key_len);
    c = crc_text(c, " %zu:", kv[i].value_len);
    c = crc_bytes(c, kv[i].value, kv[i].value_len);
    c = crc_bytes(c, "\n", 1);
  }
  return c;
}

/* ------------------------------------------------------------ tensor bytes */

typedef int (*sink_fn)(void *arg, const void *p, size_t n);

/* feeds t's elements in row-major order to sink: straight from memory when
 * contiguous, else gathered through chunk (CHUNK bytes). Returns sink's -1. */
static int feed_tensor(const dl_tensor *t, char *chunk, sink_fn sink, void *arg) {
  int64_t n = dl_numel(t);
  size_t es = dl_dtype_size(t->dtype);
  if (n == 0) return 0;
  const char *base = dl_data(t);
  if (dl_is_contiguous(t)) {
    size_t total = (size_t)n * es;
    for (size_t off = 0; off < total; off += CHUNK)
      if (sink(arg, base + off, total - off < CHUNK ? total - off : CHUNK) < 0) return -1;
    return 0;
  }
  int64_t idx[DL_MAXDIM] = {0}, soff = 0;
  size_t per = CHUNK / es, k = 0;
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
  *c = crc_bytes(*c, p, n);
  return 0;
}

static int write_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = write(fd, s, n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static int fd_sink(void *arg, const void *p, size_t n) { return write_all(*(int *)arg, p, n); }

/* ------------------------------------------------------------ writing */

typedef struct {
  dl_checkpoint_entry e;
  const dl_tensor *src;
} wentry;

static int cmp_wentry(const void *a, const void *b) {
  const dl_checkpoint_entry *x = &((const wentry *)a)->e, *y = &((const wentry *)b)->e;
  return bytes_cmp(x->name, x->name_len, y->name, y->name_len);
}

static int cmp_kv(const void *a, const void *b) {
  const dl_checkpoint_kv *x = a, *y = b;
  return bytes_cmp(x->key, x->key_len, y->key, y->key_len);
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
    if (!utf8_valid(it->name, it->name_len))
      return arg_fail(ctx, "tensor name '%s' is not valid UTF-8", show(a, sizeof a, it->name, it->name_len));
    if (bytes_eq(it->name, it->name_len, "__metadata__"))
      return arg_fail(ctx, "'__metadata__' is reserved and cannot name a tensor");
    if (!it->t || (unsigned)it->t->dtype >= DL_NDTYPES || it->t->ndim < 0 || it->t->ndim > DL_MAXDIM)
      return arg_fail(ctx, "tensor '%s' is not a valid tensor", show(a, sizeof a, it->name, it->name_len));
  }
  for (int i = 0; i < nmeta; i++) {
    const dl_checkpoint_kv *kv = &meta[i];
    if (!kv->key || !kv->value) return arg_fail(ctx, "metadata entry %d has no key or value", i + 1);
    if (!utf8_valid(kv->key, kv->key_len))
      return arg_fail(ctx, "metadata key '%s' is not valid UTF-8", show(a, sizeof a, kv->key, kv->key_len));
    if (!utf8_valid(kv->value, kv->value_len))
      return arg_fail(ctx, "metadata value for '%s' is not valid UTF-8", show(a, sizeof a, kv->key, kv->key_len));
    if (dl_checkpoint_is_reserved_key(kv->key, kv->key_len))
      return arg_fail(ctx, "metadata key '%s' is reserved (dlua writes it)", show(a, sizeof a, kv->key, kv->key_len));
  }
  return 0;
}

static int io_fail(dl_ctx *ctx, const char *path, const char *stage, int err) {
  dl_fail(ctx, "checkpoint: cannot write '%s': %s (%s)", path, strerror(err), stage);
  return DL_CHECKPOINT_EIO;
}

/* creates "<path>.tmp-<pid>-<hex>" exclusively; returns the fd or -1 (errno) */
static int open_temp(const char *path, char *tmp, size_t cap) {
  int fd = -1;
  for (unsigned attempt = 0; attempt < 64; attempt++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long r = (unsigned long)ts.tv_nsec ^ ((unsigned long)attempt * 0x9e3779b9ul);
    snprintf(tmp, cap, "%s.tmp-%ld-%lx", path, (long)getpid(), r);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) break;
  }
  return fd;
}

/* fsyncs the directory holding path; 0 or -1 (errno). EINVAL (a file system
 * that cannot sync directories) is not an error. */
static int sync_dir(const char *path, char *dir, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, cap, ".");
  else if (slash == path) snprintf(dir, cap, "/");
  else snprintf(dir, cap, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc < 0 && err == EINVAL) rc = 0;
  errno = err;
  return rc;
}

/* writes the whole file to a temp file and renames it over path */
static int write_file(dl_ctx *ctx, const char *path, const sbuf *hdr, const wentry *w, int n, char *chunk) {
  size_t cap = strlen(path) + 64;
  char *tmp = dl_alloc(ctx, cap);
  if (!tmp) return DL_CHECKPOINT_EIO;
  int rc = 0;
  int fd = open_temp(path, tmp, cap);
  if (fd < 0) {
    rc = io_fail(ctx, path, "creating a temporary file next to it", errno);
    goto done;
  }
  unsigned char len8[8];
  uint64_t hn = hdr->n;
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hn >> (8 * i));
  int bad = write_all(fd, len8, 8) < 0 || write_all(fd, hdr->p, hdr->n) < 0;
  for (int i = 0; i < n && !bad; i++) bad = feed_tensor(w[i].src, chunk, fd_sink, &fd) < 0;
  if (bad) {
    rc = io_fail(ctx, path, "writing the temporary file", errno);
  } else if (fsync(fd) < 0) {
    rc = io_fail(ctx, path, "syncing the temporary file", errno);
  }
  if (close(fd) < 0 && rc == 0) rc = io_fail(ctx, path, "closing the temporary file", errno);
  if (rc == 0 && rename(tmp, path) < 0) rc = io_fail(ctx, path, "renaming the temporary file over it", errno);
  if (rc != 0) {
    unlink(tmp);
    goto done;
  }
  if (sync_dir(path, tmp, cap) < 0) {
    dl_fail(ctx, "checkpoint: wrote '%s' but cannot sync its directory: %s", path, strerror(errno));
    rc = DL_CHECKPOINT_EIO;
  }
done:
  dl_free(ctx, tmp, cap);
  return rc;
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
  sbuf crcs = {ctx, NULL, 0, 0, 0}, hdr = {ctx, NULL, 0, 0, 0};
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
  sort_n(w, (size_t)n, sizeof *w, cmp_wentry);
  for (int i = 1; i < n; i++)
    if (cmp_wentry(&w[i - 1], &w[i]) == 0) {
      rc = arg_fail(ctx, "duplicate tensor name '%s'", show(a, sizeof a, w[i].e.name, w[i].e.name_len));
      goto done;
    }
  if (nmeta) memcpy(kv, meta, sizeof *kv * (size_t)nmeta);
  sort_n(kv, (size_t)nmeta, sizeof *kv, cmp_kv);
  for (int i = 1; i < nmeta; i++)
    if (cmp_kv(&kv[i - 1], &kv[i]) == 0) {
      rc = arg_fail(ctx, "duplicate metadata key '%s'", show(a, sizeof a, kv[i].key, kv[i].key_len));
      goto done;
    }
  if (need_chunk && !(chunk = dl_alloc(ctx, CHUNK))) goto done;

  /* pass 1: offsets and checksums */
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    w[i].e.begin = off;
    off += shape_bytes(w[i].e.dtype, w[i].e.ndim, w[i].e.shape);
    w[i].e.end = off;
    uint32_t c = crc_bytes(0, NULL, 0);
    feed_tensor(w[i].src, chunk, crc_sink, &c);
    w[i].e.crc = c;
    ents[i] = w[i].e;
    char hex[16];
    snprintf(hex, sizeof hex, i ? ",%08x" : "%08x", (unsigned)c);
    sb_adds(&crcs, hex);
  }
  if (crcs.failed) goto done;

  /* metadata: ours and the caller's, sorted; the header CRC covers all but itself */
  int nkv = nmeta;
  kv[nkv++] = (dl_checkpoint_kv){"crc32", 5, crcs.p ? crcs.p : "", crcs.n};
  kv[nkv++] = (dl_checkpoint_kv){"format", 6, "dlua-checkpoint", 15};
  kv[nkv++] = (dl_checkpoint_kv){"format_version", 14, "1", 1};
  sort_n(kv, (size_t)nkv, sizeof *kv, cmp_kv);
  char hcrc[16];
  snprintf(hcrc, sizeof hcrc, "%08x", (unsigned)header_crc(ents, n, kv, nkv));
  kv[nkv++] = (dl_checkpoint_kv){"header_crc32", 12, hcrc, 8};
  sort_n(kv, (size_t)nkv, sizeof *kv, cmp_kv);

  /* the JSON header, padded with spaces to a multiple of 8 */
  sb_adds(&hdr, "{\"__metadata__\":{");
  for (int i = 0; i < nkv; i++) {
    if (i) sb_add(&hdr, ",", 1);
    sb_json_string(&hdr, kv[i].key, kv[i].key_len);
    sb_add(&hdr, ":", 1);
    sb_json_string(&hdr, kv[i].value, kv[i].value_len);
  }
  sb_add(&hdr, "}", 1);
  for (int i = 0; i < n; i++) {
    const dl_checkpoint_entry *e = &w[i].e;
    sb_add(&hdr, ",", 1);
    sb_json_string(&hdr, e->name, e->name_len);
    sb_adds(&hdr, ":{\"dtype\":\"");
    sb_adds(&hdr, st_names[e->dtype]);
    sb_adds(&hdr, "\",\"shape\":[");
    for (int d = 0; d < e->ndim; d++) {
      if (d) sb_add(&hdr, ",", 1);
      sb_addu(&hdr, (uint64_t)e->shape[d]);
    }
    sb_adds(&hdr, "],\"data_offsets\":[");
    sb_addu(&hdr, e->begin);
    sb_add(&hdr, ",", 1);
    sb_addu(&hdr, e->end);
    sb_adds(&hdr, "]}");
  }
  sb_add(&hdr, "}", 1);
  while (!hdr.failed && hdr.n % 8) sb_add(&hdr, " ", 1);
  if (hdr.failed) goto done;
  if (hdr.n > DL_CHECKPOINT_MAX_HEADER) {
    rc = arg_fail(ctx, "the header would be %zu bytes, more than the %d-byte limit", hdr.n,
                  DL_CHECKPOINT_MAX_HEADER);
    goto done;
  }

  /* pass 2: the file */
  rc = write_file(ctx, path, &hdr, w, n, chunk);

done:
  sb_free(&hdr);
  sb_free(&crcs);
  dl_free(ctx, chunk, CHUNK);
  dl_free(ctx, kv, kbytes);
  dl_free(ctx, ents, ebytes);
  dl_free(ctx, w, wbytes);
  return rc;
}

/* ------------------------------------------------------------ the header parser */

typedef struct {
  dl_ctx *ctx;
  dl_checkpoint *ck;
  const char *s, *p, *end;  /* the header JSON */
  size_t used;              /* bytes of ck->arena in use */
  int oom;                  /* a dl_alloc failed: ctx->err holds its message */
  char why[400];            /* the reason, without the path */
} reader;

static int fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(reader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof r->why, fmt, ap);
  va_end(ap);
  return -1;
}

static int json_fail(reader *r, const char *what) {
  if (r->p >= r->end)
    return fail(r, "header is not valid JSON: %s, but the header ends at byte %ld", what, (long)(r->end - r->s));
  return fail(r, "header is not valid JSON: %s at byte %ld", what, (long)(r->p - r->s));
}

static void ws(reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int peek(reader *r, char c) {
  ws(r);
  return r->p < r->end && *r->p == c;
}

static int expect(reader *r, char c, const char *what) {
  if (!peek(r, c)) return json_fail(r, what);
  r->p++;
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int hex4(reader *r, unsigned *v) {
  if (r->end - r->p < 4) return json_fail(r, "expected 4 hex digits after \\u");
  unsigned x = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(r->p[i]);
    if (h < 0) return json_fail(r, "expected 4 hex digits after \\u");
    x = x * 16 + (unsigned)h;
  }
  r->p += 4;
  *v = x;
  return 0;
}

static char *put_utf8(char *d, unsigned cp) {
  if (cp < 0x80) *d++ = (char)cp;
  else if (cp < 0x800) {
    *d++ = (char)(0xC0 | (cp >> 6));
    *d++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *d++ = (char)(0xE0 | (cp >> 12));
    *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *d++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *d++ = (char)(0xF0 | (cp >> 18));
    *d++ = (char)(0x80 | ((cp >> 12) & 0x3F));
    *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *d++ = (char)(0x80 | (cp & 0x3F));
  }
  return d;
}

/* a JSON string, decoded into the arena (NUL-terminated). The arena holds the
 * header's size: a decoded string plus its NUL never exceeds its literal. */
static int parse_string(reader *r, const char **out, size_t *len, const char *what) {
  if (!peek(r, '"')) return json_fail(r, what);
  r->p++;
  char *start = r->ck->arena + r->used, *d = start;
  for (;;) {
    if (r->p >= r->end) return json_fail(r, "unterminated string");
    unsigned char c = (unsigned char)*r->p;
    if (c == '"') {
      r->p++;
      break;
    }
    if (c == '\\') {
      r->p++;
      if (r->p >= r->end) return json_fail(r, "unterminated string");
      char e = *r->p++;
      unsigned cp;
      switch (e) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '/': *d++ = '/'; break;
        case 'b': *d++ = '\b'; break;
        case 'f': *d++ = '\f'; break;
        case 'n': *d++ = '\n'; break;
        case 'r': *d++ = '\r'; break;
        case 't': *d++ = '\t'; break;
        case 'u':
          if (hex4(r, &cp) < 0) return -1;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return json_fail(r, "lone low surrogate in a \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
              return json_fail(r, "high surrogate not followed by a low surrogate");
            r->p += 2;
            if (hex4(r, &lo) < 0) return -1;
            if (lo < 0xDC00 || lo > 0xDFFF) return json_fail(r, "high surrogate not followed by a low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          d = put_utf8(d, cp);
          break;
        default:
          r->p--;
          return json_fail(r, "invalid escape in a string");
      }
      continue;
    }
    if (c < 0x20) return json_fail(r, "control character in a string");
    size_t k = utf8_seq((const unsigned char *)r->p, (size_t)(r->end - r->p));
    if (!k) return json_fail(r, "invalid UTF-8 in a string");
    memcpy(d, r->p, k);
    d += k;
    r->p += k;
  }
  *d = 0;
  *out = start;
  *len = (size_t)(d - start);
  r->used += *len + 1;
  return 0;
}

static int parse_uint(reader *r, uint64_t *v, const char *what, const char *name) {
  char a[96];
  ws(r);
  if (r->p < r->end && *r->p == '-')
    return fail(r, "tensor '%s' has a negative number in %s", show(a, sizeof a, name, strlen(name)), what);
  if (r->p >= r->end || *r->p < '0' || *r->p > '9') return json_fail(r, "expected a number");
  if (*r->p == '0' && r->end - r->p > 1 && r->p[1] >= '0' && r->p[1] <= '9')
    return json_fail(r, "number with a leading zero");
  uint64_t x = 0;
  while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
    uint64_t digit = (uint64_t)(*r->p++ - '0');
    if (x > (MAX_INT - digit) / 10)
      return fail(r, "tensor '%s' has a number larger than 2^62 in %s", show(a, sizeof a, name, strlen(name)), what);
    x = x * 10 + digit;
  }
  if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E'))
    return fail(r, "tensor '%s' has a non-integer number in %s", show(a, sizeof a, name, strlen(name)), what);
  *v = x;
  return 0;
}

/* [n0, n1, ...] with at most max entries */
static int parse_uints(reader *r, uint64_t *out, int max, int *count, const char *what, const char *name) {
  char a[96];
  if (expect(r, '[', "expected '['") < 0) return -1;
  *count = 0;
  if (peek(r, ']')) {
    r->p++;
    return 0;
  }
  for (;;) {
    uint64_t v = 0;
    if (parse_uint(r, &v, what, name) < 0) return -1;
    if (*count == max)
      return fail(r, "tensor '%s' has more than %d entries in %s", show(a, sizeof a, name, strlen(name)), max, what);
    out[(*count)++] = v;
    if (peek(r, ',')) {
      r->p++;
      continue;
    }
    return expect(r, ']', "expected ',' or ']'");
  }
}

static void *grow(reader *r, void *old, int *cap, size_t elem) {
  int ncap = *cap ? 2 * *cap : 16;
  void *p = dl_alloc(r->ctx, elem * (size_t)ncap);
  if (!p) {
    r->oom = 1;
    return NULL;
  }
  if (old) memcpy(p, old, elem * (size_t)*cap);
  dl_free(r->ctx, old, elem * (size_t)*cap);
  *cap = ncap;
  return p;
}

static int parse_tensor(reader *r, dl_checkpoint_entry *e) {
  char a[96], b[96];
  const char *nm = show(a, sizeof a, e->name, e->name_len);
  int have_dtype = 0, have_shape = 0, have_off = 0;
  if (expect(r, '{', "expected '{' for a tensor's description") < 0) return -1;
  if (peek(r, '}')) r->p++;
  else
    for (;;) {
      const char *key, *val;
      size_t klen, vlen;
      if (parse_string(r, &key, &klen, "expected a field name") < 0) return -1;
      if (expect(r, ':', "expected ':'") < 0) return -1;
      if (bytes_eq(key, klen, "dtype")) {
        if (have_dtype++) return fail(r, "tensor '%s' has two dtype fields", nm);
        if (!peek(r, '"')) return fail(r, "tensor '%s' has a dtype that is not a string", nm);
        if (parse_string(r, &val, &vlen, "expected a string") < 0) return -1;
        int d = -1;
        for (int i = 0; i < DL_NDTYPES; i++)
          if (bytes_eq(val, vlen, st_names[i])) d = i;
        if (d < 0)
          return fail(r, "tensor '%s' has unsupported dtype '%s' (dlua reads F32, F64, I32, I64, U8)", nm,
                      show(b, sizeof b, val, vlen));
        e->dtype = (dl_dtype)d;
      } else if (bytes_eq(key, klen, "shape")) {
        uint64_t dims[DL_MAXDIM];
        if (have_shape++) return fail(r, "tensor '%s' has two shape fields", nm);
        if (parse_uints(r, dims, DL_MAXDIM, &e->ndim, "its shape", e->name) < 0) return -1;
        for (int i = 0; i < e->ndim; i++) e->shape[i] = (int64_t)dims[i];
      } else if (bytes_eq(key, klen, "data_offsets")) {
        uint64_t o[2];
        int k;
        if (have_off++) return fail(r, "tensor '%s' has two data_offsets fields", nm);
        if (parse_uints(r, o, 2, &k, "its data_offsets", e->name) < 0) return -1;
        if (k != 2) return fail(r, "tensor '%s' has %d data_offsets, expected 2 (begin, end)", nm, k);
        e->begin = o[0];
        e->end = o[1];
      } else {
        return fail(r, "tensor '%s' has an unknown field '%s'", nm, show(b, sizeof b, key, klen));
      }
      if (peek(r, ',')) {
        r->p++;
        continue;
      }
      if (expect(r, '}', "expected ',' or '}'") < 0) return -1;
      break;
    }
  if (!have_dtype) return fail(r, "tensor '%s' has no dtype", nm);
  if (!have_shape) return fail(r, "tensor '%s' has no shape", nm);
  if (!have_off) return fail(r, "tensor '%s' has no data_offsets", nm);
  return 0;
}

static int add_meta(reader *r, const char *k, size_t kl, const char *v, size_t vl) {
  dl_checkpoint *ck = r->ck;
  if (ck->nmeta == ck->cap_meta) {
    void *p = grow(r, ck->meta, &ck->cap_meta, sizeof *ck->meta);
    if (!p) return -1;
    ck->meta = p;
  }
  ck->meta[ck->nmeta++] = (dl_checkpoint_kv){k, kl, v, vl};
  return 0;
}

static int parse_metadata(reader *r) {
  char a[96];
  ws(r);
  if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
    r->p += 4;
    return 0;
  }
  if (expect(r, '{', "expected '{' or null for __metadata__") < 0) return -1;
  if (peek(r, '}')) {
    r->p++;
    return 0;
  }
  for (;;) {
    const char *k, *v;
    size_t kl, vl;
    if (parse_string(r, &k, &kl, "expected a string key in __metadata__") < 0) return -1;
    if (expect(r, ':', "expected ':'") < 0) return -1;
    if (!peek(r, '"')) return fail(r, "__metadata__ value for '%s' is not a string", show(a, sizeof a, k, kl));
    if (parse_string(r, &v, &vl, "expected a string") < 0) return -1;
    if (add_meta(r, k, kl, v, vl) < 0) return -1;
    if (peek(r, ',')) {
      r->p++;
      continue;
    }
    return expect(r, '}', "expected ',' or '}'");
  }
}

static int parse_header(reader *r) {
  dl_checkpoint *ck = r->ck;
  int have_meta = 0;
  ws(r);
  if (r->p >= r->end || *r->p != '{')
    return fail(r, "not a safetensors file: the header does not start with a JSON object");
  r->p++;
  if (peek(r, '}')) r->p++;
  else
    for (;;) {
      const char *name;
      size_t nlen;
      if (parse_string(r, &name, &nlen, "expected a tensor name") < 0) return -1;
      if (expect(r, ':', "expected ':'") < 0) return -1;
      if (bytes_eq(name, nlen, "__metadata__")) {
        if (have_meta++) return fail(r, "the header has two __metadata__ entries");
        if (parse_metadata(r) < 0) return -1;
      } else {
        if (ck->ntensors == ck->cap_tensors) {
          void *p = grow(r, ck->tensors, &ck->cap_tensors, sizeof *ck->tensors);
          if (!p) return -1;
          ck->tensors = p;
        }
        dl_checkpoint_entry *e = &ck->tensors[ck->ntensors++];
        memset(e, 0, sizeof *e);
        e->name = name;
        e->name_len = nlen;
        if (parse_tensor(r, e) < 0) return -1;
      }
      if (peek(r, ',')) {
        r->p++;
        continue;
      }
      if (expect(r, '}', "expected ',' or '}'") < 0) return -1;
      break;
    }
  ws(r);
  if (r->p != r->end) return json_fail(r, "unexpected data after the header's JSON object");
  return 0;
}

/* ------------------------------------------------------------ header checks */

static int cmp_entry(const void *a, const void *b) {
  const dl_checkpoint_entry *x = a, *y = b;
  return bytes_cmp(x->name, x->name_len, y->name, y->name_len);
}

/* a tensor's byte range, for sorting by offset */
typedef struct {
  uint64_t begin, end;
  int idx;
} span;

static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* sizes, duplicates, and the byte ranges tiling [0, data_len) exactly;
 * order receives the tensors' ranges sorted by offset */
static int check_layout(reader *r, span *order) {
  dl_checkpoint *ck = r->ck;
  char a[96], b[96], s[160];
  for (int i = 0; i < ck->ntensors; i++) {
    const dl_checkpoint_entry *e = &ck->tensors[i];
    const char *nm = show(a, sizeof a, e->name, e->name_len);
    if (e->end < e->begin)
      return fail(r, "tensor '%s' has data_offsets [%llu, %llu] that end before they begin", nm,
                  (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > ck->data_len)
      return fail(r, "tensor '%s' has data_offsets [%llu, %llu] past the end of the %llu-byte data section "
                  "(truncated file or bad offsets)", nm, (unsigned long long)e->begin,
                  (unsigned long long)e->end, (unsigned long long)ck->data_len);
    uint64_t elems = 1;             /* of the non-zero dims: bounds every stride */
    for (int d = 0; d < e->ndim; d++) {
      uint64_t s1 = e->shape[d] ? (uint64_t)e->shape[d] : 1;
      if (elems > ((uint64_t)1 << 56) / s1) {
        shape_text(s, sizeof s, e->ndim, e->shape);
        return fail(r, "tensor '%s' has an absurd shape %s", nm, s);
      }
      elems *= s1;
    }
    uint64_t want = shape_bytes(e->dtype, e->ndim, e->shape);
    if (want != e->end - e->begin) {
      shape_text(s, sizeof s, e->ndim, e->shape);
      return fail(r, "tensor '%s' is %s of shape %s (%llu bytes) but its data_offsets [%llu, %llu] hold %llu bytes",
                  nm, st_names[e->dtype], s, (unsigned long long)want, (unsigned long long)e->begin,
                  (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
    }
  }
  sort_n(ck->tensors, (size_t)ck->ntensors, sizeof *ck->tensors, cmp_entry);
  for (int i = 1; i < ck->ntensors; i++)
    if (cmp_entry(&ck->tensors[i - 1], &ck->tensors[i]) == 0)
      return fail(r, "duplicate tensor name '%s'", show(a, sizeof a, ck->tensors[i].name, ck->tensors[i].name_len));
  sort_n(ck->meta, (size_t)ck->nmeta, sizeof *ck->meta, cmp_kv);
  for (int i = 1; i < ck->nmeta; i++)
    if (cmp_kv(&ck->meta[i - 1], &ck->meta[i]) == 0)
      return fail(r, "duplicate __metadata__ key '%s'", show(a, sizeof a, ck->meta[i].key, ck->meta[i].key_len));

  for (int i = 0; i < ck->ntensors; i++)
    order[i] = (span){ck->tensors[i].begin, ck->tensors[i].end, i};
  sort_n(order, (size_t)ck->ntensors, sizeof *order, cmp_span);
  uint64_t pos = 0;
  for (int i = 0; i < ck->ntensors; i++) {
    const dl_checkpoint_entry *e = &ck->tensors[order[i].idx];
    if (e->begin < pos) {
      const dl_checkpoint_entry *p = &ck->tensors[order[i - 1].idx];
      return fail(r, "tensors '%s' and '%s' overlap (data_offsets [%llu, %llu] and [%llu, %llu])",
                  show(a, sizeof a, p->name, p->name_len), show(b, sizeof b, e->name, e->name_len),
                  (unsigned long long)p->begin, (unsigned long long)p->end, (unsigned long long)e->begin,
                  (unsigned long long)e->end);
    }
    if (e->begin > pos)
      return fail(r, "bytes %llu to %llu of the data section belong to no tensor", (unsigned long long)pos,
                  (unsigned long long)e->begin);
    pos = e->end;
  }
  if (pos != ck->data_len)
    return fail(r, "the data section has %llu bytes but its tensors cover %llu", (unsigned long long)ck->data_len,
                (unsigned long long)pos);
  return 0;
}

static const dl_checkpoint_kv *find_meta(const dl_checkpoint *ck, const char *key) {
  for (int i = 0; i < ck->nmeta; i++)
    if (bytes_eq(ck->meta[i].key, ck->meta[i].key_len, key)) return &ck->meta[i];
  return NULL;
}

static int parse_hex8(const char *s, size_t n, uint32_t *v) {
  if (n != 8) return -1;
  uint32_t x = 0;
  for (size_t i = 0; i < 8; i++) {
    int h = hexval(s[i]);
    if (h < 0) return -1;
    x = x * 16 + (uint32_t)h;
  }
  *v = x;
  return 0;
}

/* a dlua checkpoint (format = dlua-checkpoint, or a header_crc32 present):
 * version, header CRC, the per-tensor CRC list */
static int check_dlua_meta(reader *r) {
  dl_checkpoint *ck = r->ck;
  char a[96];
  const dl_checkpoint_kv *fmt = find_meta(ck, "format"), *hc = find_meta(ck, "header_crc32");
  int ours = fmt && bytes_eq(fmt->value, fmt->value_len, "dlua-checkpoint");
  if (!ours && !hc) return 0;
  if (!ours)
    return fail(r, "the header has a header_crc32 but its format is '%s', not 'dlua-checkpoint'",
                fmt ? show(a, sizeof a, fmt->value, fmt->value_len) : "(none)");
  const dl_checkpoint_kv *ver = find_meta(ck, "format_version");
  if (!ver) return fail(r, "dlua checkpoint without a format_version");
  if (!bytes_eq(ver->value, ver->value_len, "1"))
    return fail(r, "format_version '%s' is not supported (this dlua reads version 1)",
                show(a, sizeof a, ver->value, ver->value_len));
  uint32_t stored;
  if (!hc) return fail(r, "dlua checkpoint without a header_crc32");
  if (parse_hex8(hc->value, hc->value_len, &stored) < 0)
    return fail(r, "malformed header_crc32 '%s' (expected 8 hex digits)",
                show(a, sizeof a, hc->value, hc->value_len));
  uint32_t got = header_crc(ck->tensors, ck->ntensors, ck->meta, ck->nmeta);
  if (got != stored)
    return fail(r, "checksum mismatch for the header (stored %08x, computed %08x)", (unsigned)stored, (unsigned)got);
  const dl_checkpoint_kv *cl = find_meta(ck, "crc32");
  if (!cl) return fail(r, "dlua checkpoint without a crc32 list");
  size_t want = ck->ntensors ? 9 * (size_t)ck->ntensors - 1 : 0;
  if (cl->value_len != want)
    return fail(r, "the crc32 list (%zu bytes) does not hold %d checksums", cl->value_len, ck->ntensors);
  for (int i = 0; i < ck->ntensors; i++) {
    if ((i && cl->value[9 * i - 1] != ',') || parse_hex8(cl->value + 9 * i, 8, &ck->tensors[i].crc) < 0)
      return fail(r, "malformed crc32 list at entry %d", i + 1);
  }
  ck->checksummed = 1;
  return 0;
}

/* ------------------------------------------------------------ reading */

void dl_checkpoint_release(dl_checkpoint *ck) {
  if (!ck) return;
  dl_ctx *ctx = ck->ctx;
  for (int i = 0; i < ck->ntensors; i++) dl_tensor_release(ck->tensors[i].t);
  dl_free(ctx, ck->tensors, sizeof *ck->tensors * (size_t)ck->cap_tensors);
  dl_free(ctx, ck->meta, sizeof *ck->meta * (size_t)ck->cap_meta);
  dl_free(ctx, ck->arena, ck->arena_cap);
  dl_free(ctx, ck, sizeof *ck);
}

static int read_full(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n ? 0 : -1; }

static int short_read(reader *r, FILE *f, const char *what) {
  if (ferror(f)) return fail(r, "read error in %s: %s", what, strerror(errno));
  return fail(r, "the file is truncated in %s (it shrank while being read)", what);
}

/* the data section, in offset order: into new tensors (keep) or streamed */
static int read_data(reader *r, FILE *f, const span *order, int keep) {
  dl_checkpoint *ck = r->ck;
  char a[96];
  char *chunk = NULL;
  int rc = 0;
  if (!keep && ck->data_len && !(chunk = dl_alloc(r->ctx, CHUNK))) {
    r->oom = 1;
    return -1;
  }
  if (fseeko(f, (off_t)(8 + ck->header_len), SEEK_SET) < 0) {
    rc = fail(r, "cannot seek to the data: %s", strerror(errno));
    goto done;
  }
  for (int i = 0; i < ck->ntensors && rc == 0; i++) {
    dl_checkpoint_entry *e = &ck->tensors[order[i].idx];
    const char *nm = show(a, sizeof a, e->name, e->name_len);
    size_t nbytes = (size_t)(e->end - e->begin);
    uint32_t c = crc_bytes(0, NULL, 0);
    if (keep) {
      e->t = dl_tensor_new_empty(r->ctx, e->dtype, e->ndim, e->shape);
      if (!e->t) {
        r->oom = 1;
        rc = -1;
        break;
      }
      if (nbytes && read_full(f, e->t->st->data, nbytes) < 0) {
        char w[128];
        snprintf(w, sizeof w, "tensor '%s'", nm);
        rc = short_read(r, f, w);
        break;
      }
      c = crc_bytes(c, e->t->st->data, nbytes);
    } else {
      for (size_t off = 0; off < nbytes; off += CHUNK) {
        size_t k = nbytes - off < CHUNK ? nbytes - off : CHUNK;
        if (read_full(f, chunk, k) < 0) {
          char w[128];
          snprintf(w, sizeof w, "tensor '%s'", nm);
          rc = short_read(r, f, w);
          break;
        }
        c = crc_bytes(c, chunk, k);
      }
    }
    if (rc == 0 && ck->checksummed && c != e->crc)
      rc = fail(r, "checksum mismatch for tensor '%s' (stored %08x, computed %08x)", nm, (unsigned)e->crc,
                (unsigned)c);
  }
done:
  dl_free(r->ctx, chunk, CHUNK);
  return rc;
}

static int read_checkpoint(reader *r, FILE *f, dl_checkpoint_mode mode) {
  dl_checkpoint *ck = r->ck;
  struct stat st;
  if (fstat(fileno(f), &st) < 0) return fail(r, "cannot stat: %s", strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail(r, "not a regular file");
  uint64_t size = (uint64_t)st.st_size;
  if (size < 8)
    return fail(r, "the file is truncated: %llu bytes, less than the 8-byte header length",
                (unsigned long long)size);
  unsigned char len8[8];
  if (read_full(f, len8, 8) < 0) return short_read(r, f, "the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
  if (n > size - 8)
    return fail(r, "header length %llu is larger than the rest of the file (%llu bytes): truncated or not a "
                "safetensors file", (unsigned long long)n, (unsigned long long)(size - 8));
  if (n > DL_CHECKPOINT_MAX_HEADER)
    return fail(r, "header length %llu is over the %d-byte limit", (unsigned long long)n, DL_CHECKPOINT_MAX_HEADER);
  ck->header_len = n;
  ck->data_len = size - 8 - n;
  ck->arena_cap = (size_t)n + 1;
  ck->arena = dl_alloc(r->ctx, ck->arena_cap);
  char *text = dl_alloc(r->ctx, (size_t)n + 1);
  span *order = NULL;
  size_t order_bytes = 0;
  int rc = -1;
  if (!ck->arena || !text) {
    r->oom = 1;
    goto done;
  }
  if (read_full(f, text, (size_t)n) < 0) {
    rc = short_read(r, f, "the header");
    goto done;
  }
  r->s = r->p = text;
  r->end = text + n;
  if (parse_header(r) < 0) goto done;
  order_bytes = sizeof *order * (size_t)(ck->ntensors ? ck->ntensors : 1);
  order = dl_alloc(r->ctx, order_bytes);
  if (!order) {
    r->oom = 1;
    goto done;
  }
  if (check_layout(r, order) < 0 || check_dlua_meta(r) < 0) goto done;
  rc = mode == DL_CHECKPOINT_HEADER ? 0 : read_data(r, f, order, mode == DL_CHECKPOINT_DATA);
done:
  dl_free(r->ctx, order, order_bytes);
  dl_free(r->ctx, text, (size_t)n + 1);
  return rc;
}

dl_checkpoint *dl_checkpoint_read_new(dl_ctx *ctx, const char *path, dl_checkpoint_mode mode) {
  FILE *f = fopen(path, "rb");
  if (!f) return dl_fail(ctx, "checkpoint: cannot open '%s': %s", path, strerror(errno));
  reader r;
  memset(&r, 0, sizeof r);
  r.ctx = ctx;
  dl_checkpoint *ck = r.ck = dl_alloc(ctx, sizeof *ck);
  int rc = -1;
  if (ck) {
    memset(ck, 0, sizeof *ck);
    ck->ctx = ctx;
    rc = read_checkpoint(&r, f, mode);
  } else {
    r.oom = 1;
  }
  fclose(f);
  if (rc == 0) return ck;
  if (r.oom) {
    char msg[sizeof ctx->err];
    snprintf(msg, sizeof msg, "%s", ctx->err);
    dl_fail(ctx, "checkpoint: '%s': %s", path, msg);
  } else {
    dl_fail(ctx, "checkpoint: '%s': %s", path, r.why);
  }
  dl_checkpoint_release(ck);
  return NULL;
}
