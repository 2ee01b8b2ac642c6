/* npy.c -- reads NumPy .npy arrays (format versions 1.0, 2.0, 3.0); see npy.h.
 *
 * The header dict is parsed as the Python literal numpy writes, strictly: one dict of exactly
 * the keys 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a tuple of
 * non-negative integers, (n,) for one dimension, () for none; Python 2's 10L suffix is
 * accepted), in any order, separated by commas with an optional trailing one, blanks between
 * tokens, then blanks up to the newline that ends the header. Strings are quoted with ' or "
 * and hold no escapes. Anything else is refused with the offset of the first bad byte.
 *
 * Data goes straight into the tensor when its bytes need no conversion, else through a 64 KiB
 * buffer converted element by element. A mapped file stays mapped for the life of the tensor
 * (released by the storage's callback: dl_tensor_new_external). What this file does not do:
 * write .npy files, read pickled object arrays, or read several arrays from one file.
 */
/* See LICENSE */
#include "io/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK ((size_t)1 << 16)

static int host_little(void) {
  const uint16_t one = 1;
  uint8_t b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int dl_npy_header_len(dl_ctx *ctx, const char *where, const uint8_t *p, size_t n, uint64_t size,
                      uint64_t *len) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (n < 10) {
    dl_fail(ctx, "%s is truncated: the preamble needs 10 bytes, the stream has %zu (not a .npy file)", where, n);
    return -1;
  }
  if (memcmp(p, magic, 6) != 0) {
    dl_fail(ctx, "%s has a bad magic %02x %02x %02x %02x %02x %02x at offset 0 (not a .npy file)", where, p[0],
            p[1], p[2], p[3], p[4], p[5]);
    return -1;
  }
  int major = p[6], minor = p[7];
  if (major < 1 || major > 3 || minor != 0) {
    dl_fail(ctx, "%s has format version %d.%d at offset 6 (1.0, 2.0 and 3.0 are supported)", where, major, minor);
    return -1;
  }
  int lb = major == 1 ? 2 : 4;
  if (n < (size_t)(8 + lb)) {
    dl_fail(ctx, "%s is truncated: the version %d.0 preamble needs %d bytes, the stream has %zu", where, major, 8 + lb,
            n);
    return -1;
  }
  uint64_t hl = le(p + 8, lb);
  if (hl < 3) {
    dl_fail(ctx, "%s declares a header of %llu bytes at offset 8 (too short for a dict)", where, (unsigned long long)hl);
    return -1;
  }
  if (hl > DL_NPY_MAX_HEADER) {
    dl_fail(ctx, "%s declares a header of %llu bytes at offset 8 (at most %d accepted)", where, (unsigned long long)hl,
            DL_NPY_MAX_HEADER);
    return -1;
  }
  *len = (uint64_t)(8 + lb) + hl;
  if (*len > size) {
    dl_fail(ctx, "%s is truncated: the header ends at offset %llu, the stream has %llu bytes", where,
            (unsigned long long)*len, (unsigned long long)size);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ the header dict */

typedef struct {
  dl_ctx *ctx;
  const char *where;
  const uint8_t *p;
  size_t i, n;               /* cursor and end, in bytes of the whole header */
} parser;

static int bad(parser *ps, const char *what) {
  if (ps->i < ps->n) {
    uint8_t c = ps->p[ps->i];
    if (c >= 0x20 && c < 0x7f)
      dl_fail(ps->ctx, "%s: bad header at offset %zu: %s, found '%c'", ps->where, ps->i, what, c);
    else dl_fail(ps->ctx, "%s: bad header at offset %zu: %s, found byte 0x%02x", ps->where, ps->i, what, c);
  } else {
    dl_fail(ps->ctx, "%s: bad header at offset %zu: %s, found the end of the header", ps->where, ps->i, what);
  }
  return -1;
}

static void blanks(parser *ps) {
  while (ps->i < ps->n && (ps->p[ps->i] == ' ' || ps->p[ps->i] == '\t')) ps->i++;
}

static int expect(parser *ps, char c, const char *what) {
  blanks(ps);
  if (ps->i >= ps->n || ps->p[ps->i] != (uint8_t)c) return bad(ps, what);
  ps->i++;
  return 0;
}

/* a quoted string into out (at most cap - 1 bytes of printable ASCII, no escapes) */
static int string(parser *ps, char *out, size_t cap, const char *what) {
  blanks(ps);
  if (ps->i >= ps->n || (ps->p[ps->i] != '\'' && ps->p[ps->i] != '"')) return bad(ps, what);
  uint8_t q = ps->p[ps->i++];
  size_t k = 0;
  while (ps->i < ps->n && ps->p[ps->i] != q) {
    uint8_t c = ps->p[ps->i];
    if (c < 0x20 || c >= 0x7f || c == '\\' || k + 1 >= cap) return bad(ps, "a short string of printable characters");
    out[k++] = (char)c;
    ps->i++;
  }
  if (ps->i >= ps->n) return bad(ps, "the closing quote");
  ps->i++;
  out[k] = 0;
  return 0;
}

static int word(parser *ps, const char *w) {
  size_t k = strlen(w);
  if (ps->n - ps->i < k || memcmp(ps->p + ps->i, w, k) != 0) return 0;
  ps->i += k;
  return 1;
}

static int boolean(parser *ps, int *v) {
  blanks(ps);
  if (word(ps, "True")) *v = 1;
  else if (word(ps, "False")) *v = 0;
  else return bad(ps, "True or False for 'fortran_order'");
  return 0;
}

/* (a, b, ...) of decimal integers; (a,) for one, () for none */
static int shape(parser *ps, dl_npy_header *h) {
  if (expect(ps, '(', "a tuple '(' for 'shape'") < 0) return -1;
  h->ndim = 0;
  for (;;) {
    blanks(ps);
    if (ps->i < ps->n && ps->p[ps->i] == ')') {
      ps->i++;
      return 0;
    }
    if (ps->i >= ps->n || ps->p[ps->i] < '0' || ps->p[ps->i] > '9') return bad(ps, "a size (a non-negative integer)");
    if (h->ndim == DL_MAXDIM) return bad(ps, "')' after at most 8 sizes (dlua's maximum of dimensions)");
    int64_t v = 0;
    size_t start = ps->i;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9') {
      if (v > DL_MAX_NUMEL) {
        ps->i = start;
        return bad(ps, "a size of at most 2^48");
      }
      v = v * 10 + (ps->p[ps->i++] - '0');
    }
    if (v > DL_MAX_NUMEL) {
      ps->i = start;
      return bad(ps, "a size of at most 2^48");
    }
    if (ps->i < ps->n && ps->p[ps->i] == 'L') ps->i++;      /* Python 2 long */
    h->shape[h->ndim++] = v;
    blanks(ps);
    if (ps->i < ps->n && ps->p[ps->i] == ',') {
      ps->i++;
      continue;
    }
    if (h->ndim == 1) return bad(ps, "',' after the size of a 1-dimensional shape: (n,)");
    if (ps->i < ps->n && ps->p[ps->i] == ')') continue;
    return bad(ps, "',' or ')' in 'shape'");
  }
}

typedef struct {
  const char *descr;        /* without the byte order */
  char kind;
  int elsize;
  dl_dtype dtype;
} npy_type;

static const npy_type types[] = {
  {"f2", 'f', 2, DL_F32}, {"f4", 'f', 4, DL_F32}, {"f8", 'f', 8, DL_F64},
  {"i1", 'i', 1, DL_I32}, {"i2", 'i', 2, DL_I32}, {"i4", 'i', 4, DL_I32}, {"i8", 'i', 8, DL_I64},
  {"u1", 'u', 1, DL_U8},  {"u2", 'u', 2, DL_I32}, {"u4", 'u', 4, DL_I64}, {"u8", 'u', 8, DL_I64},
  {"b1", 'b', 1, DL_U8},
};

static int descr(parser *ps, dl_npy_header *h, size_t at) {
  char d[32];
  if (string(ps, d, sizeof d, "a string for 'descr' (structured dtypes are not supported)") < 0) return -1;
  const npy_type *t = NULL;
  if ((d[0] == '<' || d[0] == '>' || d[0] == '|') && strlen(d) == 3)
    for (size_t k = 0; k < sizeof types / sizeof *types; k++)
      if (strcmp(d + 1, types[k].descr) == 0) t = &types[k];
  if (t && d[0] == '|' && t->elsize != 1) t = NULL;    /* '|' only where order does not apply */
  if (!t) {
    dl_fail(ps->ctx, "%s: dtype '%s' at offset %zu is not supported (supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 "
            "<u4 <u8 |b1, and their big-endian '>' forms)", ps->where, d, at);
    return -1;
  }
  h->order = t->elsize == 1 ? '|' : d[0];
  h->kind = t->kind;
  h->elsize = t->elsize;
  h->dtype = t->dtype;
  h->direct = dl_dtype_size(t->dtype) == (size_t)t->elsize && t->kind != 'b' && !(t->kind == 'u' && t->elsize > 1) &&
              (h->order == '|' || (h->order == '<') == host_little());
  return 0;
}

int dl_npy_parse(dl_ctx *ctx, const char *where, const uint8_t *p, size_t n, uint64_t size, dl_npy_header *h) {
  uint64_t len;
  memset(h, 0, sizeof *h);
  if (dl_npy_header_len(ctx, where, p, n, size, &len) < 0) return -1;
  if (len != n) {
    dl_fail(ctx, "%s: the header is %llu bytes, %zu given", where, (unsigned long long)len, n);
    return -1;
  }
  h->major = p[6];
  h->minor = p[7];
  h->data_offset = len;
  parser ps = {ctx, where, p, h->major == 1 ? 10 : 12, n};
  if (ps.n == ps.i || p[ps.n - 1] != '\n') {
    ps.i = ps.n ? ps.n - 1 : 0;
    return bad(&ps, "a newline at the end of the header");
  }
  ps.n--;
  int seen = 0;                                        /* bits: descr, fortran_order, shape */
  if (expect(&ps, '{', "'{' opening the header dict") < 0) return -1;
  for (;;) {
    blanks(&ps);
    if (ps.i < ps.n && ps.p[ps.i] == '}') break;
    size_t at = ps.i;
    char key[32];
    if (string(&ps, key, sizeof key, "a quoted key or '}'") < 0) return -1;
    int bit = strcmp(key, "descr") == 0 ? 1 : strcmp(key, "fortran_order") == 0 ? 2 : strcmp(key, "shape") == 0 ? 4 : 0;
    if (!bit || (seen & bit)) {
      dl_fail(ctx, "%s: bad header at offset %zu: %s key '%s' (the keys are 'descr', 'fortran_order', 'shape')", where,
              at, bit ? "a repeated" : "an unknown", key);
      return -1;
    }
    seen |= bit;
    if (expect(&ps, ':', "':' after the key") < 0) return -1;
    blanks(&ps);
    int rc = bit == 1 ? descr(&ps, h, ps.i) : bit == 2 ? boolean(&ps, &h->fortran) : shape(&ps, h);
    if (rc < 0) return -1;
    blanks(&ps);
    if (ps.i < ps.n && ps.p[ps.i] == ',') {
      ps.i++;
      continue;
    }
    blanks(&ps);
    if (ps.i >= ps.n || ps.p[ps.i] != '}') return bad(&ps, "',' or '}' after a value");
  }
  ps.i++;
  blanks(&ps);
  if (ps.i != ps.n) return bad(&ps, "only blanks after the dict");
  if (seen != 7) {
    dl_fail(ctx, "%s: bad header: the key '%s' is missing", where,
            !(seen & 1) ? "descr" : !(seen & 2) ? "fortran_order" : "shape");
    return -1;
  }
  char op[400];
  snprintf(op, sizeof op, "%s: shape", where);
  int64_t bytes;
  if (dl_shape_check(ctx, op, h->ndim, h->shape, &h->numel) < 0 ||
      dl_shape_bytes(ctx, op, h->numel, (size_t)h->elsize, &bytes) < 0)
    return -1;
  h->data_bytes = (uint64_t)bytes;
  if (size - len < h->data_bytes) {
    dl_fail(ctx, "%s is truncated: the header declares %llu data bytes at offset %llu, the stream has %llu", where,
            (unsigned long long)h->data_bytes, (unsigned long long)len, (unsigned long long)(size - len));
    return -1;
  }
  if (size - len > h->data_bytes) {
    dl_fail(ctx, "%s has %llu trailing bytes after the %llu data bytes at offset %llu (one array per file)", where,
            (unsigned long long)(size - len - h->data_bytes), (unsigned long long)h->data_bytes,
            (unsigned long long)len);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ conversion */

static float half_to_float(uint16_t v) {
  uint32_t sign = (uint32_t)(v >> 15) << 31, e = (v >> 10) & 0x1fu, m = v & 0x3ffu, bits;
  if (e == 0x1f) {
    bits = sign | 0x7f800000u | m << 13;
  } else if (e == 0) {
    float f = ldexpf((float)m, -24);                   /* zero or subnormal: exact in float32 */
    return sign ? -f : f;
  } else {
    bits = sign | (e + 112) << 23 | m << 13;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* n elements of the file's layout at src into dst (dlua's dtype) from element first on.
 * Returns -1 at a <u8 value past int64, with *bad its index; else 0. */
static int convert(const dl_npy_header *h, const uint8_t *src, void *dst, int64_t first, int64_t n, int64_t *bad_at) {
  int swap = h->order != '|' && (h->order == '<') != host_little();
  int sz = h->elsize;
  for (int64_t k = 0; k < n; k++) {
    uint8_t b[8];
    const uint8_t *s = src + k * sz;
    for (int j = 0; j < sz; j++) b[j] = swap ? s[sz - 1 - j] : s[j];
    int64_t i = first + k;
    switch (h->kind) {
      case 'f':
        if (sz == 2) {
          uint16_t v;
          memcpy(&v, b, 2);
          ((float *)dst)[i] = half_to_float(v);
        } else if (sz == 4) {
          memcpy((float *)dst + i, b, 4);
        } else {
          memcpy((double *)dst + i, b, 8);
        }
        break;
      case 'b': ((uint8_t *)dst)[i] = b[0] != 0; break;
      default: {
        uint64_t u = 0;
        memcpy(&u, b, (size_t)sz);                     /* host order, low bytes */
        if (!host_little()) u >>= 8 * (8 - sz);
        int64_t v;
        if (h->kind == 'i' && sz < 8 && (u >> (8 * sz - 1)) & 1) v = (int64_t)(u | ~(((uint64_t)1 << 8 * sz) - 1));
        else v = (int64_t)u;
        if (h->kind == 'u' && sz == 8 && u > (uint64_t)INT64_MAX) {
          *bad_at = i;
          return -1;
        }
        if (h->dtype == DL_I32) ((int32_t *)dst)[i] = (int32_t)v;
        else if (h->dtype == DL_I64) ((int64_t *)dst)[i] = v;
        else ((uint8_t *)dst)[i] = (uint8_t)v;
      }
    }
  }
  return 0;
}

/* ------------------------------------------------------------ reading */

/* the data of h from src into a new tensor (C order) */
static dl_tensor *read_data(dl_ctx *ctx, dl_npy_source *src, const dl_npy_header *h) {
  int64_t rshape[DL_MAXDIM];
  int transposed = h->fortran && h->ndim > 1;
  for (int d = 0; d < h->ndim; d++) rshape[d] = transposed ? h->shape[h->ndim - 1 - d] : h->shape[d];
  dl_tensor *t = dl_tensor_new_empty(ctx, h->dtype, h->ndim, rshape);
  if (!t) return NULL;
  if (h->direct) {
    if (h->data_bytes && src->read(src, ctx, t->st->data, (size_t)h->data_bytes) < 0) goto fail;
  } else {
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
      ctx->oom = 1;
      dl_fail(ctx, "%s: out of memory for a read buffer", src->where);
      goto fail;
    }
    int64_t per = (int64_t)(CHUNK / (size_t)h->elsize), done = 0;
    while (done < h->numel) {
      int64_t k = h->numel - done < per ? h->numel - done : per, at;
      if (src->read(src, ctx, buf, (size_t)(k * h->elsize)) < 0) {
        free(buf);
        goto fail;
      }
      if (convert(h, buf, t->st->data, done, k, &at) < 0) {
        dl_fail(ctx, "%s: the uint64 value at offset %llu (element %lld) is past int64's range", src->where,
                (unsigned long long)(h->data_offset + (uint64_t)at * 8), (long long)at);
        free(buf);
        goto fail;
      }
      done += k;
    }
    free(buf);
  }
  if (!transposed) return t;
  /* the file holds the array in column-major order: the C-order tensor of the reversed shape,
   * viewed with reversed strides, is the array; copied into C order */
  int64_t vstride[DL_MAXDIM];
  for (int d = 0; d < h->ndim; d++) vstride[d] = t->stride[h->ndim - 1 - d];
  dl_tensor *v = dl_view_new(ctx, t, h->ndim, h->shape, vstride, 0);
  dl_tensor *c = v ? dl_tensor_new_contiguous(ctx, v, h->dtype) : NULL;
  dl_tensor_release(v);
  dl_tensor_release(t);
  return c;
fail:
  dl_tensor_release(t);
  return NULL;
}

dl_tensor *dl_npy_read_source_new(dl_ctx *ctx, dl_npy_source *src) {
  uint8_t pre[12];
  size_t n = src->size < sizeof pre ? (size_t)src->size : sizeof pre;
  uint64_t len;
  if (src->read(src, ctx, pre, n) < 0) return NULL;
  if (dl_npy_header_len(ctx, src->where, pre, n, src->size, &len) < 0) return NULL;
  uint8_t *hdr = malloc((size_t)len);
  if (!hdr) {
    ctx->oom = 1;
    return dl_fail(ctx, "%s: out of memory for the header", src->where);
  }
  memcpy(hdr, pre, n);
  dl_npy_header h;
  dl_tensor *t = NULL;
  if (src->read(src, ctx, hdr + n, (size_t)len - n) == 0 && dl_npy_parse(ctx, src->where, hdr, (size_t)len, src->size, &h) == 0)
    t = read_data(ctx, src, &h);
  free(hdr);
  return t;
}

/* a buffer in memory */
typedef struct {
  dl_npy_source s;
  const uint8_t *p;
  uint64_t pos;
} mem_source;

static int mem_read(dl_npy_source *s, dl_ctx *ctx, void *buf, size_t n) {
  mem_source *m = (mem_source *)s;
  if (n > m->s.size - m->pos) {
    dl_fail(ctx, "%s is truncated at offset %llu", s->where, (unsigned long long)m->s.size);
    return -1;
  }
  if (n) memcpy(buf, m->p + m->pos, n);
  m->pos += n;
  return 0;
}

dl_tensor *dl_npy_read_mem_new(dl_ctx *ctx, const char *name, const void *buf, size_t n) {
  char where[400];
  snprintf(where, sizeof where, "npy: '%s'", name);
  mem_source m = {{where, n, mem_read}, buf, 0};
  return dl_npy_read_source_new(ctx, &m.s);
}

/* a file descriptor, read sequentially */
typedef struct {
  dl_npy_source s;
  int fd;
  uint64_t pos;
} fd_source;

static int fd_read(dl_npy_source *s, dl_ctx *ctx, void *buf, size_t n) {
  fd_source *f = (fd_source *)s;
  size_t done = 0;
  while (done < n) {
    size_t want = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : n - done;
    ssize_t r = read(f->fd, (char *)buf + done, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      dl_fail(ctx, "%s: read failed at offset %llu: %s", s->where, (unsigned long long)(f->pos + done), strerror(errno));
      return -1;
    }
    if (r == 0) {
      dl_fail(ctx, "%s is truncated at offset %llu (the file shrank while it was read)", s->where,
              (unsigned long long)(f->pos + done));
      return -1;
    }
    done += (size_t)r;
  }
  f->pos += n;
  return 0;
}

typedef struct {
  void *base;
  size_t len;
} mapping;

static void unmap(void *arg) {
  mapping *m = arg;
  munmap(m->base, m->len);
  free(m);
}

int dl_npy_is_mapped(const dl_tensor *t) { return t->st->release == unmap; }

/* the whole file mapped at base: a tensor viewing it when the layout allows, else converted
 * from it (the mapping is then dropped) */
static dl_tensor *read_mapped(dl_ctx *ctx, const char *where, void *base, uint64_t size) {
  mem_source m = {{where, size, mem_read}, base, 0};
  uint64_t len;
  dl_npy_header h;
  dl_tensor *t = NULL;
  if (dl_npy_header_len(ctx, where, base, size < 12 ? (size_t)size : 12, size, &len) < 0 ||
      dl_npy_parse(ctx, where, base, (size_t)len, size, &h) < 0)
    goto done;
  if (h.direct && !(h.fortran && h.ndim > 1) && h.data_bytes > 0 && len % (uint64_t)h.elsize == 0) {
    mapping *mp = malloc(sizeof *mp);
    if (!mp) {
      ctx->oom = 1;
      dl_fail(ctx, "%s: out of memory", where);
      goto done;
    }
    mp->base = base;
    mp->len = (size_t)size;
    t = dl_tensor_new_external(ctx, h.dtype, h.ndim, h.shape, (uint8_t *)base + len, (size_t)h.data_bytes, unmap, mp);
    if (t) return t;
    free(mp);
    goto done;
  }
  m.pos = len;
  t = read_data(ctx, &m.s, &h);
done:
  munmap(base, (size_t)size);
  return t;
}

dl_tensor *dl_npy_read_new(dl_ctx *ctx, const char *path, int map) {
  char where[400];
  snprintf(where, sizeof where, "npy: '%s'", path);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO must not block the open */
  if (fd < 0) return dl_fail(ctx, "npy: cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  dl_tensor *t = NULL;
  if (fstat(fd, &sb) != 0) {
    dl_fail(ctx, "npy: cannot stat '%s': %s", path, strerror(errno));
  } else if (!S_ISREG(sb.st_mode)) {
    dl_fail(ctx, "npy: '%s' is not a regular file", path);
  } else if (sb.st_size < 10) {
    dl_fail(ctx, "%s is truncated: the preamble needs 10 bytes, the file has %lld (not a .npy file)", where,
            (long long)sb.st_size);
  } else {
    /* a file system that cannot map (some FUSE ones) is read instead */
    void *base = map ? mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (base != MAP_FAILED) {
      t = read_mapped(ctx, where, base, (uint64_t)sb.st_size);
    } else {
      fd_source f = {{where, (uint64_t)sb.st_size, fd_read}, fd, 0};
      t = dl_npy_read_source_new(ctx, &f.s);
    }
  }
  close(fd);
  return t;
}
