/* checkpoint_json.c -- the JSON header of a checkpoint file: emitting it,
 * parsing it strictly, and its CRC.
 *
 * The parser accepts exactly the safetensors header shape (an object of
 * tensor name -> {"dtype", "shape", "data_offsets"} plus an optional
 * "__metadata__" map of strings): no recursion, no unknown fields, strict
 * UTF-8, integers up to 2^62. It only decodes; the layout checks (offsets
 * tiling the data, shapes matching byte counts, duplicates, CRCs) are the
 * reader's (checkpoint_read.c). Nothing in a header is ever executed.
 * docs/formats.md ("Checkpoints") specifies the format.
 */
/* See LICENSE */
#include "io/checkpoint_internal.h"
#include "io/json.h"

#include <stdarg.h>
#include <stdio.h>

const char *const ck_dtype_names[DL_NDTYPES] = {"F32", "F64", "I32", "I64", "U8"};

static const char *const reserved_keys[] = {"crc32", "format", "format_version", "header_crc32"};

int dl_checkpoint_is_reserved_key(const char *key, size_t len) {
  for (size_t i = 0; i < sizeof reserved_keys / sizeof *reserved_keys; i++)
    if (ck_bytes_eq(key, len, reserved_keys[i])) return 1;
  return 0;
}

/* ------------------------------------------------------------ small helpers */

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

int ck_utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq(p + i, n - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

/* a name for an error message: control bytes as \xNN, at most ~60 bytes */
const char *ck_show(char *buf, size_t cap, const char *s, size_t n) {
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

int ck_cmp_kv(const void *a, const void *b) {
  const dl_checkpoint_kv *x = a, *y = b;
  return ck_bytes_cmp(x->key, x->key_len, y->key, y->key_len);
}

/* ------------------------------------------------------------ emitting */

static int sb_reserve(ck_sbuf *b, size_t extra) {
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

void ck_sb_add(ck_sbuf *b, const void *s, size_t n) {
  if (n == 0 || sb_reserve(b, n) < 0) return;
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

void ck_sb_adds(ck_sbuf *b, const char *s) { ck_sb_add(b, s, strlen(s)); }

static void sb_addu(ck_sbuf *b, uint64_t v) {
  char s[32];
  int k = snprintf(s, sizeof s, "%llu", (unsigned long long)v);
  ck_sb_add(b, s, (size_t)k);
}

void ck_sb_free(ck_sbuf *b) {
  dl_free(b->ctx, b->p, b->cap);
  b->p = NULL;
  b->n = b->cap = 0;
}

/* dl_json_string's sink: a ck_sbuf */
static void sb_put(void *b, const char *s, size_t n) { ck_sb_add(b, s, n); }

static void sb_json_string(ck_sbuf *b, const char *s, size_t n) { dl_json_string(sb_put, b, s, n); }

void ck_emit_header(ck_sbuf *hdr, const dl_checkpoint_kv *kv, int nkv, const dl_checkpoint_entry *e, int n) {
  ck_sb_adds(hdr, "{\"__metadata__\":{");
  for (int i = 0; i < nkv; i++) {
    if (i) ck_sb_add(hdr, ",", 1);
    sb_json_string(hdr, kv[i].key, kv[i].key_len);
    ck_sb_add(hdr, ":", 1);
    sb_json_string(hdr, kv[i].value, kv[i].value_len);
  }
  ck_sb_add(hdr, "}", 1);
  for (int i = 0; i < n; i++) {
    ck_sb_add(hdr, ",", 1);
    sb_json_string(hdr, e[i].name, e[i].name_len);
    ck_sb_adds(hdr, ":{\"dtype\":\"");
    ck_sb_adds(hdr, ck_dtype_names[e[i].dtype]);
    ck_sb_adds(hdr, "\",\"shape\":[");
    for (int d = 0; d < e[i].ndim; d++) {
      if (d) ck_sb_add(hdr, ",", 1);
      sb_addu(hdr, (uint64_t)e[i].shape[d]);
    }
    ck_sb_adds(hdr, "],\"data_offsets\":[");
    sb_addu(hdr, e[i].begin);
    ck_sb_add(hdr, ",", 1);
    sb_addu(hdr, e[i].end);
    ck_sb_adds(hdr, "]}");
  }
  ck_sb_add(hdr, "}", 1);
  while (!hdr->failed && hdr->n % 8) ck_sb_add(hdr, " ", 1);
}

/* ------------------------------------------------------------ the header checksum */

static uint32_t crc_text(uint32_t c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint32_t crc_text(uint32_t c, const char *fmt, ...) {
  char s[64];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(s, sizeof s, fmt, ap);
  va_end(ap);
  return dl_crc32(c, s, (size_t)k);
}

/* CRC-32 of the canonical text of the tensor table and the metadata (except
 * header_crc32 itself), both in bytewise name order:
 *   "T" len ":" name " " DTYPE " " d0,d1,... " " begin " " end "\n"   per tensor
 *   "M" len ":" key " " len ":" value "\n"                           per entry */
uint32_t ck_header_crc(const dl_checkpoint_entry *e, int n, const dl_checkpoint_kv *kv, int nkv) {
  uint32_t c = dl_crc32(0, NULL, 0);
  for (int i = 0; i < n; i++) {
    c = crc_text(c, "T%zu:", e[i].name_len);
    c = dl_crc32(c, e[i].name, e[i].name_len);
    c = crc_text(c, " %s ", ck_dtype_names[e[i].dtype]);
    for (int d = 0; d < e[i].ndim; d++) c = crc_text(c, d ? ",%lld" : "%lld", (long long)e[i].shape[d]);
    c = crc_text(c, " %llu %llu\n", (unsigned long long)e[i].begin, (unsigned long long)e[i].end);
  }
  for (int i = 0; i < nkv; i++) {
    if (ck_bytes_eq(kv[i].key, kv[i].key_len, "header_crc32")) continue;
    c = crc_text(c, "M%zu:", kv[i].key_len);
    c = dl_crc32(c, kv[i].key, kv[i].key_len);
    c = crc_text(c, " %zu:", kv[i].value_len);
    c = dl_crc32(c, kv[i].value, kv[i].value_len);
    c = dl_crc32(c, "\n", 1);
  }
  return c;
}

/* ------------------------------------------------------------ the header parser */

int ck_fail(ck_reader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof r->why, fmt, ap);
  va_end(ap);
  return -1;
}

static int json_fail(ck_reader *r, const char *what) {
  if (r->p >= r->end)
    return ck_fail(r, "header is not valid JSON: %s, but the header ends at byte %ld", what, (long)(r->end - r->s));
  return ck_fail(r, "header is not valid JSON: %s at byte %ld", what, (long)(r->p - r->s));
}

static void ws(ck_reader *r) {
  while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) r->p++;
}

static int peek(ck_reader *r, char c) {
  ws(r);
  return r->p < r->end && *r->p == c;
}

static int expect(ck_reader *r, char c, const char *what) {
  if (!peek(r, c)) return json_fail(r, what);
  r->p++;
  return 0;
}

static int hex4(ck_reader *r, unsigned *v) {
  if (r->end - r->p < 4) return json_fail(r, "expected 4 hex digits after \\u");
  unsigned x = 0;
  for (int i = 0; i < 4; i++) {
    int h = ck_hexval(r->p[i]);
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
static int parse_string(ck_reader *r, const char **out, size_t *len, const char *what) {
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

static int parse_uint(ck_reader *r, uint64_t *v, const char *what, const char *name) {
  char a[96];
  ws(r);
  if (r->p < r->end && *r->p == '-')
    return ck_fail(r, "tensor '%s' has a negative number in %s", ck_show(a, sizeof a, name, strlen(name)), what);
  if (r->p >= r->end || *r->p < '0' || *r->p > '9') return json_fail(r, "expected a number");
  if (*r->p == '0' && r->end - r->p > 1 && r->p[1] >= '0' && r->p[1] <= '9')
    return json_fail(r, "number with a leading zero");
  uint64_t x = 0;
  while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
    uint64_t digit = (uint64_t)(*r->p++ - '0');
    if (x > (CK_MAX_INT - digit) / 10)
      return ck_fail(r, "tensor '%s' has a number larger than 2^62 in %s", ck_show(a, sizeof a, name, strlen(name)), what);
    x = x * 10 + digit;
  }
  if (r->p < r->end && (*r->p == '.' || *r->p == 'e' || *r->p == 'E'))
    return ck_fail(r, "tensor '%s' has a non-integer number in %s", ck_show(a, sizeof a, name, strlen(name)), what);
  *v = x;
  return 0;
}

/* [n0, n1, ...] with at most max entries */
static int parse_uints(ck_reader *r, uint64_t *out, int max, int *count, const char *what, const char *name) {
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
      return ck_fail(r, "tensor '%s' has more than %d entries in %s", ck_show(a, sizeof a, name, strlen(name)), max, what);
    out[(*count)++] = v;
    if (peek(r, ',')) {
      r->p++;
      continue;
    }
    return expect(r, ']', "expected ',' or ']'");
  }
}

static void *grow(ck_reader *r, void *old, int *cap, size_t elem) {
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

static int parse_tensor(ck_reader *r, dl_checkpoint_entry *e) {
  char a[96], b[96];
  const char *nm = ck_show(a, sizeof a, e->name, e->name_len);
  int have_dtype = 0, have_shape = 0, have_off = 0;
  if (expect(r, '{', "expected '{' for a tensor's description") < 0) return -1;
  if (peek(r, '}')) r->p++;
  else
    for (;;) {
      const char *key, *val;
      size_t klen, vlen;
      if (parse_string(r, &key, &klen, "expected a field name") < 0) return -1;
      if (expect(r, ':', "expected ':'") < 0) return -1;
      if (ck_bytes_eq(key, klen, "dtype")) {
        if (have_dtype++) return ck_fail(r, "tensor '%s' has two dtype fields", nm);
        if (!peek(r, '"')) return ck_fail(r, "tensor '%s' has a dtype that is not a string", nm);
        if (parse_string(r, &val, &vlen, "expected a string") < 0) return -1;
        int d = -1;
        for (int i = 0; i < DL_NDTYPES; i++)
          if (ck_bytes_eq(val, vlen, ck_dtype_names[i])) d = i;
        if (d < 0)
          return ck_fail(r, "tensor '%s' has unsupported dtype '%s' (dlua reads F32, F64, I32, I64, U8)", nm,
                      ck_show(b, sizeof b, val, vlen));
        e->dtype = (dl_dtype)d;
      } else if (ck_bytes_eq(key, klen, "shape")) {
        uint64_t dims[DL_MAXDIM];
        if (have_shape++) return ck_fail(r, "tensor '%s' has two shape fields", nm);
        if (parse_uints(r, dims, DL_MAXDIM, &e->ndim, "its shape", e->name) < 0) return -1;
        for (int i = 0; i < e->ndim; i++) e->shape[i] = (int64_t)dims[i];
      } else if (ck_bytes_eq(key, klen, "data_offsets")) {
        uint64_t o[2];
        int k;
        if (have_off++) return ck_fail(r, "tensor '%s' has two data_offsets fields", nm);
        if (parse_uints(r, o, 2, &k, "its data_offsets", e->name) < 0) return -1;
        if (k != 2) return ck_fail(r, "tensor '%s' has %d data_offsets, expected 2 (begin, end)", nm, k);
        e->begin = o[0];
        e->end = o[1];
      } else {
        return ck_fail(r, "tensor '%s' has an unknown field '%s'", nm, ck_show(b, sizeof b, key, klen));
      }
      if (peek(r, ',')) {
        r->p++;
        continue;
      }
      if (expect(r, '}', "expected ',' or '}'") < 0) return -1;
      break;
    }
  if (!have_dtype) return ck_fail(r, "tensor '%s' has no dtype", nm);
  if (!have_shape) return ck_fail(r, "tensor '%s' has no shape", nm);
  if (!have_off) return ck_fail(r, "tensor '%s' has no data_offsets", nm);
  return 0;
}

static int add_meta(ck_reader *r, const char *k, size_t kl, const char *v, size_t vl) {
  dl_checkpoint *ck = r->ck;
  if (ck->nmeta == ck->cap_meta) {
    void *p = grow(r, ck->meta, &ck->cap_meta, sizeof *ck->meta);
    if (!p) return -1;
    ck->meta = p;
  }
  ck->meta[ck->nmeta++] = (dl_checkpoint_kv){k, kl, v, vl};
  return 0;
}

static int parse_metadata(ck_reader *r) {
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
    if (!peek(r, '"')) return ck_fail(r, "__metadata__ value for '%s' is not a string", ck_show(a, sizeof a, k, kl));
    if (parse_string(r, &v, &vl, "expected a string") < 0) return -1;
    if (add_meta(r, k, kl, v, vl) < 0) return -1;
    if (peek(r, ',')) {
      r->p++;
      continue;
    }
    return expect(r, '}', "expected ',' or '}'");
  }
}

int ck_parse_header(ck_reader *r) {
  dl_checkpoint *ck = r->ck;
  int have_meta = 0;
  ws(r);
  if (r->p >= r->end || *r->p != '{')
    return ck_fail(r, "not a safetensors file: the header does not start with a JSON object");
  r->p++;
  if (peek(r, '}')) r->p++;
  else
    for (;;) {
      const char *name;
      size_t nlen;
      if (parse_string(r, &name, &nlen, "expected a tensor name") < 0) return -1;
      if (expect(r, ':', "expected ':'") < 0) return -1;
      if (ck_bytes_eq(name, nlen, "__metadata__")) {
        if (have_meta++) return ck_fail(r, "the header has two __metadata__ entries");
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

