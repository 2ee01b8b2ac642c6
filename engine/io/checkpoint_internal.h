/* checkpoint_internal.h -- what the three checkpoint files share: the header
 * JSON (checkpoint_json.c: emit, strict parse, header CRC, UTF-8 and name
 * helpers), used by the writer (checkpoint_write.c) and the reader
 * (checkpoint_read.c). Not part of the public API (see checkpoint.h).
 */
/* See LICENSE */
#ifndef DL_CHECKPOINT_INTERNAL_H
#define DL_CHECKPOINT_INTERNAL_H

#include "io/checkpoint.h"
#include "io/fileio.h"

#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint files write host-order data and assume a little-endian host"
#endif

#define CK_CHUNK ((size_t)1 << 20)         /* gather / verify buffer, bytes */
#define CK_MAX_INT ((uint64_t)1 << 62)     /* largest integer accepted in a header */

extern const char *const ck_dtype_names[DL_NDTYPES];   /* "F32", "F64", "I32", "I64", "U8" */

static inline int ck_bytes_eq(const char *a, size_t na, const char *b) {
  return na == strlen(b) && memcmp(a, b, na) == 0;
}

static inline int ck_bytes_cmp(const char *a, size_t na, const char *b, size_t nb) {
  int c = memcmp(a, b, na < nb ? na : nb);
  if (c) return c;
  return na < nb ? -1 : na > nb;
}

/* qsort, which must not see a NULL base even for 0 elements */
static inline void ck_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  if (n > 1) qsort(base, n, size, cmp);
}

static inline int ck_hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* is s (n bytes) valid UTF-8 (no overlongs, surrogates, nothing past U+10FFFF)? */
int ck_utf8_valid(const char *s, size_t n);

/* a name for an error message in buf: control bytes as \xNN, ~60 bytes at most */
const char *ck_show(char *buf, size_t cap, const char *s, size_t n);

/* metadata entries by key, bytewise (qsort comparator) */
int ck_cmp_kv(const void *a, const void *b);

/* CRC-32 of the canonical text of a tensor table (sorted by name) and its
 * metadata (sorted by key; header_crc32 itself is skipped); docs/formats.md */
uint32_t ck_header_crc(const dl_checkpoint_entry *e, int n, const dl_checkpoint_kv *kv, int nkv);

/* ------------------------------------------------------------ emitting the header */

/* A growable byte string over dl_alloc; after a failed allocation every call
 * does nothing and failed is set (ctx->err holds the message). */
typedef struct {
  dl_ctx *ctx;
  char *p;
  size_t n, cap;
  int failed;
} ck_sbuf;

void ck_sb_add(ck_sbuf *b, const void *s, size_t n);
void ck_sb_adds(ck_sbuf *b, const char *s);
void ck_sb_free(ck_sbuf *b);

/* The header JSON into hdr: the metadata map kv (nkv entries, sorted) then the
 * tensors e (n, sorted, with offsets), padded with spaces to a multiple of 8. */
void ck_emit_header(ck_sbuf *hdr, const dl_checkpoint_kv *kv, int nkv, const dl_checkpoint_entry *e, int n);

/* ------------------------------------------------------------ parsing the header */

typedef struct {
  dl_ctx *ctx;
  dl_checkpoint *ck;
  const char *s, *p, *end;  /* the header JSON */
  size_t used;              /* bytes of ck->arena in use */
  int oom;                  /* a dl_alloc failed: ctx->err holds its message */
  char why[400];            /* the reason, without the path */
} ck_reader;

/* records a reason in r->why; returns -1 */
int ck_fail(ck_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* parses r->s..r->end (the header JSON) into r->ck's tensors and meta, with
 * strings decoded into r->ck->arena (which holds the header's size); 0 or -1
 * (r->why, or r->oom) */
int ck_parse_header(ck_reader *r);

#endif
