/* checkpoint_read.c -- reads a checkpoint file, treating it as hostile.
 *
 * The header length is checked against the file and a 100 MB limit before
 * anything is allocated; the JSON is decoded by checkpoint_json.c; every
 * tensor's byte range must match its dtype and shape, and the ranges must
 * tile the data section exactly, so a load never allocates more tensor
 * memory than the file holds. A dlua checkpoint's CRCs (header and per
 * tensor) are then checked; a plain safetensors file from another tool has
 * none to check. docs/formats.md ("Checkpoints") specifies the format.
 */
/* See LICENSE */
#include "io/checkpoint_internal.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
  dl_shape_str(shape, ndim, buf, cap);
}

/* ------------------------------------------------------------ header checks */

static int cmp_entry(const void *a, const void *b) {
  const dl_checkpoint_entry *x = a, *y = b;
  return ck_bytes_cmp(x->name, x->name_len, y->name, y->name_len);
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
static int check_layout(ck_reader *r, span *order) {
  dl_checkpoint *ck = r->ck;
  char a[96], b[96], s[160];
  for (int i = 0; i < ck->ntensors; i++) {
    const dl_checkpoint_entry *e = &ck->tensors[i];
    const char *nm = ck_show(a, sizeof a, e->name, e->name_len);
    if (e->end < e->begin)
      return ck_fail(r, "tensor '%s' has data_offsets [%llu, %llu] that end before they begin", nm,
                  (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > ck->data_len)
      return ck_fail(r, "tensor '%s' has data_offsets [%llu, %llu] past the end of the %llu-byte data section "
                  "(truncated file or bad offsets)", nm, (unsigned long long)e->begin,
                  (unsigned long long)e->end, (unsigned long long)ck->data_len);
    int64_t numel, bytes;           /* shape.c's checked arithmetic (ctx->err is replaced below) */
    if (dl_shape_check(r->ctx, "checkpoint", e->ndim, e->shape, &numel) < 0 ||
        dl_shape_bytes(r->ctx, "checkpoint", numel, dl_dtype_size(e->dtype), &bytes) < 0) {
      shape_text(s, sizeof s, e->ndim, e->shape);
      return ck_fail(r, "tensor '%s' has an absurd shape %s", nm, s);
    }
    uint64_t want = (uint64_t)bytes;
    if (want != e->end - e->begin) {
      shape_text(s, sizeof s, e->ndim, e->shape);
      return ck_fail(r, "tensor '%s' is %s of shape %s (%llu bytes) but its data_offsets [%llu, %llu] hold %llu bytes",
                  nm, ck_dtype_names[e->dtype], s, (unsigned long long)want, (unsigned long long)e->begin,
                  (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
    }
  }
  ck_sort(ck->tensors, (size_t)ck->ntensors, sizeof *ck->tensors, cmp_entry);
  for (int i = 1; i < ck->ntensors; i++)
    if (cmp_entry(&ck->tensors[i - 1], &ck->tensors[i]) == 0)
      return ck_fail(r, "duplicate tensor name '%s'", ck_show(a, sizeof a, ck->tensors[i].name, ck->tensors[i].name_len));
  ck_sort(ck->meta, (size_t)ck->nmeta, sizeof *ck->meta, ck_cmp_kv);
  for (int i = 1; i < ck->nmeta; i++)
    if (ck_cmp_kv(&ck->meta[i - 1], &ck->meta[i]) == 0)
      return ck_fail(r, "duplicate __metadata__ key '%s'", ck_show(a, sizeof a, ck->meta[i].key, ck->meta[i].key_len));

  for (int i = 0; i < ck->ntensors; i++)
    order[i] = (span){ck->tensors[i].begin, ck->tensors[i].end, i};
  ck_sort(order, (size_t)ck->ntensors, sizeof *order, cmp_span);
  uint64_t pos = 0;
  for (int i = 0; i < ck->ntensors; i++) {
    const dl_checkpoint_entry *e = &ck->tensors[order[i].idx];
    if (e->begin < pos) {
      const dl_checkpoint_entry *p = &ck->tensors[order[i - 1].idx];
      return ck_fail(r, "tensors '%s' and '%s' overlap (data_offsets [%llu, %llu] and [%llu, %llu])",
                  ck_show(a, sizeof a, p->name, p->name_len), ck_show(b, sizeof b, e->name, e->name_len),
                  (unsigned long long)p->begin, (unsigned long long)p->end, (unsigned long long)e->begin,
                  (unsigned long long)e->end);
    }
    if (e->begin > pos)
      return ck_fail(r, "bytes %llu to %llu of the data section belong to no tensor", (unsigned long long)pos,
                  (unsigned long long)e->begin);
    pos = e->end;
  }
  if (pos != ck->data_len)
    return ck_fail(r, "the data section has %llu bytes but its tensors cover %llu", (unsigned long long)ck->data_len,
                (unsigned long long)pos);
  return 0;
}

static const dl_checkpoint_kv *find_meta(const dl_checkpoint *ck, const char *key) {
  for (int i = 0; i < ck->nmeta; i++)
    if (ck_bytes_eq(ck->meta[i].key, ck->meta[i].key_len, key)) return &ck->meta[i];
  return NULL;
}

static int parse_hex8(const char *s, size_t n, uint32_t *v) {
  if (n != 8) return -1;
  uint32_t x = 0;
  for (size_t i = 0; i < 8; i++) {
    int h = ck_hexval(s[i]);
    if (h < 0) return -1;
    x = x * 16 + (uint32_t)h;
  }
  *v = x;
  return 0;
}

/* a dlua checkpoint (format = dlua-checkpoint, or a header_crc32 present):
 * version, header CRC, the per-tensor CRC list */
static int check_dlua_meta(ck_reader *r) {
  dl_checkpoint *ck = r->ck;
  char a[96];
  const dl_checkpoint_kv *fmt = find_meta(ck, "format"), *hc = find_meta(ck, "header_crc32");
  int ours = fmt && ck_bytes_eq(fmt->value, fmt->value_len, "dlua-checkpoint");
  if (!ours && !hc) return 0;
  if (!ours)
    return ck_fail(r, "the header has a header_crc32 but its format is '%s', not 'dlua-checkpoint'",
                fmt ? ck_show(a, sizeof a, fmt->value, fmt->value_len) : "(none)");
  const dl_checkpoint_kv *ver = find_meta(ck, "format_version");
  if (!ver) return ck_fail(r, "dlua checkpoint without a format_version");
  if (!ck_bytes_eq(ver->value, ver->value_len, "1"))
    return ck_fail(r, "format_version '%s' is not supported (this dlua reads version 1)",
                ck_show(a, sizeof a, ver->value, ver->value_len));
  uint32_t stored;
  if (!hc) return ck_fail(r, "dlua checkpoint without a header_crc32");
  if (parse_hex8(hc->value, hc->value_len, &stored) < 0)
    return ck_fail(r, "malformed header_crc32 '%s' (expected 8 hex digits)",
                ck_show(a, sizeof a, hc->value, hc->value_len));
  uint32_t got = ck_header_crc(ck->tensors, ck->ntensors, ck->meta, ck->nmeta);
  if (got != stored)
    return ck_fail(r, "checksum mismatch for the header (stored %08x, computed %08x)", (unsigned)stored, (unsigned)got);
  const dl_checkpoint_kv *cl = find_meta(ck, "crc32");
  if (!cl) return ck_fail(r, "dlua checkpoint without a crc32 list");
  size_t want = ck->ntensors ? 9 * (size_t)ck->ntensors - 1 : 0;
  if (cl->value_len != want)
    return ck_fail(r, "the crc32 list (%zu bytes) does not hold %d checksums", cl->value_len, ck->ntensors);
  for (int i = 0; i < ck->ntensors; i++) {
    if ((i && cl->value[9 * i - 1] != ',') || parse_hex8(cl->value + 9 * i, 8, &ck->tensors[i].crc) < 0)
      return ck_fail(r, "malformed crc32 list at entry %d", i + 1);
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

static int short_read(ck_reader *r, FILE *f, const char *what) {
  if (ferror(f)) return ck_fail(r, "read error in %s: %s", what, strerror(errno));
  return ck_fail(r, "the file is truncated in %s (it shrank while being read)", what);
}

/* the data section, in offset order: into new tensors (keep) or streamed */
static int read_data(ck_reader *r, FILE *f, const span *order, int keep) {
  dl_checkpoint *ck = r->ck;
  char a[96];
  char *chunk = NULL;
  int rc = 0;
  if (!keep && ck->data_len && !(chunk = dl_alloc(r->ctx, CK_CHUNK))) {
    r->oom = 1;
    return -1;
  }
  if (fseeko(f, (off_t)(8 + ck->header_len), SEEK_SET) < 0) {
    rc = ck_fail(r, "cannot seek to the data: %s", strerror(errno));
    goto done;
  }
  for (int i = 0; i < ck->ntensors && rc == 0; i++) {
    dl_checkpoint_entry *e = &ck->tensors[order[i].idx];
    const char *nm = ck_show(a, sizeof a, e->name, e->name_len);
    size_t nbytes = (size_t)(e->end - e->begin);
    uint32_t c = dl_crc32(0, NULL, 0);
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
      c = dl_crc32(c, e->t->st->data, nbytes);
    } else {
      for (size_t off = 0; off < nbytes; off += CK_CHUNK) {
        size_t k = nbytes - off < CK_CHUNK ? nbytes - off : CK_CHUNK;
        if (read_full(f, chunk, k) < 0) {
          char w[128];
          snprintf(w, sizeof w, "tensor '%s'", nm);
          rc = short_read(r, f, w);
          break;
        }
        c = dl_crc32(c, chunk, k);
      }
    }
    if (rc == 0 && ck->checksummed && c != e->crc)
      rc = ck_fail(r, "checksum mismatch for tensor '%s' (stored %08x, computed %08x)", nm, (unsigned)e->crc,
                (unsigned)c);
  }
done:
  dl_free(r->ctx, chunk, CK_CHUNK);
  return rc;
}

static int read_checkpoint(ck_reader *r, FILE *f, dl_checkpoint_mode mode) {
  dl_checkpoint *ck = r->ck;
  struct stat st;
  if (fstat(fileno(f), &st) < 0) return ck_fail(r, "cannot stat: %s", strerror(errno));
  if (!S_ISREG(st.st_mode)) return ck_fail(r, "not a regular file");
  uint64_t size = (uint64_t)st.st_size;
  if (size < 8)
    return ck_fail(r, "the file is truncated: %llu bytes, less than the 8-byte header length",
                (unsigned long long)size);
  unsigned char len8[8];
  if (read_full(f, len8, 8) < 0) return short_read(r, f, "the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
  if (n > size - 8)
    return ck_fail(r, "header length %llu is larger than the rest of the file (%llu bytes): truncated or not a "
                "safetensors file", (unsigned long long)n, (unsigned long long)(size - 8));
  if (n > DL_CHECKPOINT_MAX_HEADER)
    return ck_fail(r, "header length %llu is over the %d-byte limit", (unsigned long long)n, DL_CHECKPOINT_MAX_HEADER);
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
  if (ck_parse_header(r) < 0) goto done;
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
  ck_reader r;
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
