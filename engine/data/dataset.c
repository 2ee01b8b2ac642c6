/* dataset.c -- datasets (named fields over shared storage or read from a
 * source, subsets, seeded splits), the per-example field sets the transforms
 * rewrite, and reading one example.
 *
 * A dataset never copies rows: a subset or split is an index array over the
 * same tensors, and every example keeps the id of its row in the original
 * storage so that randomness keyed by id is the same through any subset or
 * cache. Example fields start as pointers into the dataset and get their own
 * scratch buffers only when a transform rewrites them.
 */
/* See LICENSE */
#include "data/dataset.h"
#include "io/fileio.h"   /* dl_crc32 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ datasets */

static dl_dataset *alloc_ds(dl_ctx *ctx) {
  dl_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) {
    ctx->oom = 1;
    return dl_fail(ctx, "dataset: out of memory");
  }
  atomic_init(&ds->refs, 1);
  for (int i = 0; i < DL_MAXFIELDS; i++) ds->src_field[i] = -1;
  return ds;
}

dl_dataset *dl_dataset_new(dl_ctx *ctx, int n, const char *const *names, dl_tensor *const *fields, dl_tensor *ids) {
  if (n < 1 || n > DL_MAXFIELDS) return dl_fail(ctx, "dataset: %d fields, 1 to %d supported", n, DL_MAXFIELDS);
  for (int i = 0; i < n; i++) {
    size_t l = strlen(names[i]);
    if (l == 0 || l >= DL_NAMELEN)
      return dl_fail(ctx, "dataset: field name '%s' must have 1 to %d characters", names[i], DL_NAMELEN - 1);
    for (int j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0) return dl_fail(ctx, "dataset: field '%s' given twice", names[i]);
    if (fields[i]->ndim < 1)
      return dl_fail(ctx, "dataset: field '%s' is a 0-d tensor; dimension 1 must index the examples", names[i]);
    if (fields[i]->shape[0] != fields[0]->shape[0])
      return dl_fail(ctx, "dataset: field '%s' has %lld examples but field '%s' has %lld", names[i],
                     (long long)fields[i]->shape[0], names[0], (long long)fields[0]->shape[0]);
  }
  if (ids && (ids->dtype != DL_I64 || ids->ndim != 1 || ids->shape[0] != fields[0]->shape[0] || !dl_is_contiguous(ids)))
    return dl_fail(ctx, "dataset: ids must be a contiguous int64 vector with one id per example");
  dl_dataset *ds = alloc_ds(ctx);
  if (!ds) return NULL;
  ds->nfields = n;
  ds->rows = ds->len = fields[0]->shape[0];
  for (int i = 0; i < n; i++) {
    snprintf(ds->names[i], DL_NAMELEN, "%s", names[i]);
    ds->fields[i] = dl_is_contiguous(fields[i]) ? dl_tensor_retain(fields[i])
                                                : dl_tensor_new_contiguous(ctx, fields[i], fields[i]->dtype);
    if (!ds->fields[i]) {
      dl_dataset_release(ds);
      return NULL;
    }
  }
  ds->ids = dl_tensor_retain(ids);
  return ds;
}

dl_dataset *dl_dataset_new_source(dl_ctx *ctx, dl_source *src, int n, const char *const *names,
                                  dl_tensor *const *fields, dl_tensor *ids) {
  if (n < 0 || src->nfields + n > DL_MAXFIELDS)
    return dl_fail(ctx, "dataset: %d fields, 1 to %d supported", src->nfields + n, DL_MAXFIELDS);
  for (int i = 0; i < n; i++) {
    if (fields[i]->ndim >= 1 && fields[i]->shape[0] != src->rows)
      return dl_fail(ctx, "dataset: field '%s' has %lld examples but the source has %lld", names[i],
                     (long long)fields[i]->shape[0], (long long)src->rows);
    for (int k = 0; k < src->nfields; k++)
      if (strcmp(names[i], src->names[k]) == 0) return dl_fail(ctx, "dataset: field '%s' given twice", names[i]);
  }
  if (ids && (ids->dtype != DL_I64 || ids->ndim != 1 || ids->shape[0] != src->rows || !dl_is_contiguous(ids)))
    return dl_fail(ctx, "dataset: ids must be a contiguous int64 vector with one id per example");
  dl_dataset *ds = NULL;
  if (n > 0) {
    ds = dl_dataset_new(ctx, n, names, fields, ids);
    if (!ds) return NULL;
  } else {
    ds = alloc_ds(ctx);
    if (!ds) return NULL;
    ds->rows = ds->len = src->rows;
    ds->ids = dl_tensor_retain(ids);
  }
  /* the source's fields first: move the tensors up */
  int m = src->nfields;
  for (int i = n - 1; i >= 0; i--) {
    memcpy(ds->names[i + m], ds->names[i], DL_NAMELEN);
    ds->fields[i + m] = ds->fields[i];
  }
  for (int k = 0; k < m; k++) {
    memcpy(ds->names[k], src->names[k], DL_NAMELEN);
    ds->fields[k] = NULL;
    ds->src_field[k] = k;
  }
  ds->nfields = n + m;
  ds->src = dl_source_retain(src);
  return ds;
}

static dl_dataset *share(dl_ctx *ctx, dl_dataset *ds, int64_t n) {
  dl_dataset *s = alloc_ds(ctx);
  if (!s) return NULL;
  s->nfields = ds->nfields;
  memcpy(s->names, ds->names, sizeof s->names);
  for (int i = 0; i < ds->nfields; i++) s->fields[i] = dl_tensor_retain(ds->fields[i]);
  memcpy(s->src_field, ds->src_field, sizeof s->src_field);
  s->src = dl_source_retain(ds->src);
  s->ids = dl_tensor_retain(ds->ids);
  s->rows = ds->rows;
  s->len = n;
  s->index = malloc((size_t)(n ? n : 1) * sizeof *s->index);
  if (!s->index) {
    dl_dataset_release(s);
    ctx->oom = 1;
    return dl_fail(ctx, "dataset: out of memory for an index of %lld examples", (long long)n);
  }
  return s;
}

dl_dataset *dl_dataset_new_subset(dl_ctx *ctx, dl_dataset *ds, int64_t n, const int64_t *index) {
  for (int64_t i = 0; i < n; i++)
    if (index[i] < 0 || index[i] >= ds->len)
      return dl_fail(ctx, "dataset: index %lld (position %lld) is out of range for %lld examples",
                     (long long)index[i] + 1, (long long)i + 1, (long long)ds->len);
  dl_dataset *s = share(ctx, ds, n);
  if (!s) return NULL;
  for (int64_t i = 0; i < n; i++) s->index[i] = dl_dataset_row(ds, index[i]);
  return s;
}

/* 64 bits from Philox block `counter` of `key` */
static uint64_t draw64(uint64_t key, uint64_t counter) {
  uint32_t b[4];
  dl_philox(key, counter, b);
  return (uint64_t)b[0] << 32 | b[1];
}

int dl_dataset_split(dl_ctx *ctx, dl_dataset *ds, int k, const int64_t *counts, int shuffled, uint64_t seed,
                     dl_dataset **out) {
  int64_t total = 0;
  for (int i = 0; i < k; i++) {
    if (counts[i] < 0) {
      dl_fail(ctx, "split: count %d is negative (%lld)", i + 1, (long long)counts[i]);
      return -1;
    }
    total += counts[i];
  }
  if (total > ds->len) {
    dl_fail(ctx, "split: the parts add up to %lld examples, the dataset has %lld", (long long)total,
            (long long)ds->len);
    return -1;
  }
  int64_t *perm = malloc((size_t)(ds->len ? ds->len : 1) * sizeof *perm);
  if (!perm) {
    ctx->oom = 1;
    dl_fail(ctx, "split: out of memory");
    return -1;
  }
  for (int64_t i = 0; i < ds->len; i++) perm[i] = i;
  if (shuffled) {
    uint64_t key = draw64(seed, 0x73706c6974ull);          /* "split" */
    for (int64_t i = ds->len - 1; i > 0; i--) {
      int64_t j = (int64_t)(draw64(key, (uint64_t)i) % (uint64_t)(i + 1));
      int64_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  }
  int64_t at = 0;
  for (int i = 0; i < k; i++) {
    out[i] = dl_dataset_new_subset(ctx, ds, counts[i], perm + at);
    if (!out[i]) {
      for (int j = 0; j < i; j++) dl_dataset_release(out[j]);
      free(perm);
      return -1;
    }
    at += counts[i];
  }
  free(perm);
  return 0;
}

dl_dataset *dl_dataset_retain(dl_dataset *ds) {
  if (ds) atomic_fetch_add(&ds->refs, 1);
  return ds;
}

void dl_dataset_release(dl_dataset *ds) {
  if (!ds || atomic_fetch_sub(&ds->refs, 1) != 1) return;
  for (int i = 0; i < ds->nfields; i++) dl_tensor_release(ds->fields[i]);
  dl_tensor_release(ds->ids);
  dl_source_release(ds->src);
  free(ds->index);
  free(ds);
}

int64_t dl_dataset_row(const dl_dataset *ds, int64_t i) { return ds->index ? ds->index[i] : i; }

int64_t dl_dataset_id(const dl_dataset *ds, int64_t i) {
  int64_t r = dl_dataset_row(ds, i);
  return ds->ids ? ((const int64_t *)dl_data(ds->ids))[r] : r;
}

int dl_dataset_field(const dl_dataset *ds, const char *name) {
  for (int i = 0; i < ds->nfields; i++)
    if (strcmp(ds->names[i], name) == 0) return i;
  return -1;
}

uint32_t dl_dataset_checksum(const dl_dataset *ds) {
  uint32_t crc = 0;
  int64_t len = ds->len;
  crc = dl_crc32(crc, &len, sizeof len);
  for (int f = 0; f < ds->nfields; f++) {
    const dl_tensor *t = ds->fields[f];
    crc = dl_crc32(crc, ds->names[f], strlen(ds->names[f]) + 1);
    if (!t) {                                   /* a source's field: the source says what identifies a row */
      const dl_source *src = ds->src;
      int k = ds->src_field[f];
      int32_t meta[2] = {(int32_t)src->dtype[k], src->ndim[k]};
      crc = dl_crc32(crc, meta, sizeof meta);
      crc = dl_crc32(crc, src->shape[k], sizeof(int64_t) * (size_t)src->ndim[k]);
      for (int64_t i = 0; i < len; i++) crc = src->checksum(src, dl_dataset_row(ds, i), crc);
      continue;
    }
    int32_t meta[2] = {(int32_t)t->dtype, t->ndim};
    crc = dl_crc32(crc, meta, sizeof meta);
    crc = dl_crc32(crc, t->shape + 1, sizeof(int64_t) * (size_t)(t->ndim - 1));
    size_t row = (size_t)dl_shape_numel(t->ndim - 1, t->shape + 1) * dl_dtype_size(t->dtype);
    const char *base = dl_data(t);
    if (!ds->index) {
      crc = dl_crc32(crc, base, row * (size_t)ds->rows);
    } else {
      for (int64_t i = 0; i < len; i++) crc = dl_crc32(crc, base + (size_t)ds->index[i] * row, row);
    }
  }
  for (int64_t i = 0; i < len; i++) {
    int64_t id = dl_dataset_id(ds, i);
    crc = dl_crc32(crc, &id, sizeof id);
  }
  return crc;
}

/* ------------------------------------------------------------ examples */

int dl_example_find(const dl_example *ex, const char *name) {
  for (int i = 0; i < ex->n; i++)
    if (strcmp(ex->f[i].name, name) == 0) return i;
  return -1;
}

int dl_example_add(dl_example *ex, const char *name) {
  if (ex->n >= DL_MAXFIELDS) return -1;
  dl_exfield *f = &ex->f[ex->n];
  snprintf(f->name, DL_NAMELEN, "%s", name);
  f->dtype = DL_F32;
  f->ndim = 0;
  f->data = NULL;
  return ex->n++;
}

void dl_example_remove(dl_example *ex, int i) {
  dl_exfield gone = ex->f[i];                   /* its buffers move to the end, for reuse */
  memmove(&ex->f[i], &ex->f[i + 1], (size_t)(ex->n - i - 1) * sizeof gone);
  ex->f[--ex->n] = gone;
  ex->f[ex->n].data = NULL;
}

int64_t dl_exfield_numel(const dl_exfield *f) { return dl_shape_numel(f->ndim, f->shape); }

void *dl_example_begin(dl_example *ex, int i, dl_dtype d, int ndim, const int64_t *shape) {
  dl_exfield *f = &ex->f[i];
  int64_t n, nb;
  if (dl_shape_check(NULL, "example", ndim, shape, &n) < 0 || dl_shape_bytes(NULL, "example", n, dl_dtype_size(d), &nb) < 0)
    return NULL;
  size_t bytes = (size_t)nb;
  if (bytes == 0) bytes = 1;
  if (bytes > f->spare_cap) {
    size_t cap = f->spare_cap ? f->spare_cap : 64;
    while (cap < bytes) cap *= 2;
    void *p = realloc(f->spare, cap);
    if (!p) return NULL;
    f->spare = p;
    f->spare_cap = cap;
  }
  f->next_dtype = d;
  f->next_ndim = ndim;
  for (int k = 0; k < ndim; k++) f->next_shape[k] = shape[k];
  return f->spare;
}

void dl_example_commit(dl_example *ex, int i) {
  dl_exfield *f = &ex->f[i];
  void *b = f->buf;
  size_t c = f->cap;
  f->buf = f->spare;
  f->cap = f->spare_cap;
  f->spare = b;
  f->spare_cap = c;
  f->data = f->buf;
  f->dtype = f->next_dtype;
  f->ndim = f->next_ndim;
  memcpy(f->shape, f->next_shape, sizeof f->shape);
}

int dl_dataset_read(const dl_dataset *ds, int64_t pos, dl_example *ex, char *err, size_t errlen) {
  int64_t row = dl_dataset_row(ds, pos);
  int slot[DL_MAXFIELDS];
  ex->n = 0;
  ex->index = pos;
  ex->id = dl_dataset_id(ds, pos);
  ex->skipped = 0;
  for (int f = 0; f < ds->nfields; f++) {
    const dl_tensor *t = ds->fields[f];
    int i = dl_example_add(ex, ds->names[f]);
    if (!t) {
      slot[ds->src_field[f]] = i;
      continue;
    }
    dl_exfield *e = &ex->f[i];
    e->dtype = t->dtype;
    e->ndim = t->ndim - 1;
    for (int k = 1; k < t->ndim; k++) e->shape[k - 1] = t->shape[k];
    size_t rb = (size_t)dl_exfield_numel(e) * dl_dtype_size(t->dtype);   /* a row of a checked tensor */
    e->data = (const char *)dl_data(t) + (size_t)row * rb;
  }
  if (!ds->src) return 0;
  err[0] = 0;
  int rc = ds->src->read(ds->src, row, ex, slot, err, errlen);
  if (rc == 1) ex->skipped = 1;
  return rc < 0 ? -1 : rc;
}

/* ------------------------------------------------------------ sources */

dl_image_opts dl_image_defaults(void) {
  dl_image_opts o = {3, 0, 0};
  return o;
}

dl_source *dl_source_new(dl_ctx *ctx, int nfields, int64_t rows, void *state,
                         int (*read)(const dl_source *, int64_t, dl_example *, const int *, char *, size_t),
                         uint32_t (*checksum)(const dl_source *, int64_t, uint32_t), void (*destroy)(void *)) {
  if (nfields < 1 || nfields > DL_MAXFIELDS || rows < 0) {
    if (destroy) destroy(state);
    return dl_fail(ctx, "source: %d fields and %lld rows (1 to %d fields, rows >= 0)", nfields, (long long)rows,
                   DL_MAXFIELDS);
  }
  dl_source *s = calloc(1, sizeof *s);
  if (!s) {
    if (destroy) destroy(state);
    ctx->oom = 1;
    return dl_fail(ctx, "source: out of memory");
  }
  *s = (dl_source){.nfields = nfields, .rows = rows, .state = state, .read = read, .checksum = checksum,
                   .destroy = destroy};
  atomic_init(&s->refs, 1);
  return s;
}

dl_source *dl_source_retain(dl_source *src) {
  if (src) atomic_fetch_add(&src->refs, 1);
  return src;
}

void dl_source_release(dl_source *src) {
  if (!src || atomic_fetch_sub(&src->refs, 1) != 1) return;
  if (src->destroy) src->destroy(src->state);
  free(src);
}

void dl_example_free(dl_example *ex) {
  for (int i = 0; i < DL_MAXFIELDS; i++) {
    free(ex->f[i].buf);
    free(ex->f[i].spare);
    ex->f[i].buf = ex->f[i].spare = NULL;
    ex->f[i].cap = ex->f[i].spare_cap = 0;
  }
  ex->n = 0;
}

void *dl_example_begin_image(void *slot, int channels, int64_t height, int64_t width) {
  dl_example_slot *t = slot;
  int64_t shape[3] = {channels, height, width};
  return dl_example_begin(t->ex, t->slot, DL_U8, 3, shape);
}
