/* dataset.h -- a dataset: named fields of equal length held as tensors or
 * read row by row from a source (files that stay on disk: image folders),
 * with the row ids that key each example's randomness, subsets and splits;
 * one example as it is being transformed (its fields, with scratch buffers
 * reused across examples).
 * The transforms (transforms.h), the batch producer (pipeline.h) and the
 * offline cache (cache.h) build on it.
 */
/* See LICENSE */
#ifndef DL_DATASET_H
#define DL_DATASET_H

#include <stdatomic.h>
#include "core/dl.h"

#define DL_MAXFIELDS 16              /* fields per example (a batch adds "weight") */
#define DL_NAMELEN 32                /* field names, with the terminating 0 */

/* ------------------------------------------------------------ datasets */

struct dl_source;

/* A dataset: named fields of equal length, each a contiguous tensor whose
 * dimension 0 is the row or a field of a source (fields[f] NULL,
 * src_field[f] its number in the source), optionally viewed through an index
 * (a subset). Immutable once made; reference counted (pipelines hold one). */
typedef struct dl_dataset {
  atomic_int refs;
  int nfields;
  char names[DL_MAXFIELDS][DL_NAMELEN];
  dl_tensor *fields[DL_MAXFIELDS];   /* [rows, ...], contiguous, owned; NULL: read from src */
  struct dl_source *src;             /* reads the fields without a tensor; NULL: none (owned reference) */
  int src_field[DL_MAXFIELDS];       /* field f is source field src_field[f]; -1: a tensor field */
  dl_tensor *ids;                    /* int64 [rows]: id of each row; NULL = the row number */
  int64_t rows;
  int64_t len;                       /* examples */
  int64_t *index;                    /* example i is row index[i]; NULL = row i; owned */
} dl_dataset;

/* A dataset over n fields (tensors retained, or copied when not contiguous).
 * ids, if given, is int64 [rows] (retained). Fails on: no fields or more
 * than DL_MAXFIELDS, empty, long or duplicate names, a 0-d tensor, first
 * dimensions that differ (the message names both fields and sizes), memory. */
dl_dataset *dl_dataset_new(dl_ctx *ctx, int n, const char *const *names, dl_tensor *const *fields, dl_tensor *ids);
/* A dataset whose first fields are src's (read by src->read, row by row) and
 * whose other n fields are tensors of src->rows rows (n may be 0). src is
 * retained. Fails as dl_dataset_new does, and on a tensor whose rows are not
 * src->rows or a name src has too. */
dl_dataset *dl_dataset_new_source(dl_ctx *ctx, struct dl_source *src, int n, const char *const *names,
                                  dl_tensor *const *fields, dl_tensor *ids);
/* The examples index[0..n) (0-based, of ds) as a new dataset sharing ds's
 * storage. Fails on an index out of range (naming it) or memory. */
dl_dataset *dl_dataset_new_subset(dl_ctx *ctx, dl_dataset *ds, int64_t n, const int64_t *index);
/* Splits ds into k disjoint consecutive parts of counts[i] examples, after a
 * permutation keyed by seed when shuffled. out[0..k) receive new datasets.
 * Fails (nothing allocated) when the counts add up to more than the length. */
int dl_dataset_split(dl_ctx *ctx, dl_dataset *ds, int k, const int64_t *counts, int shuffled, uint64_t seed,
                     dl_dataset **out);
dl_dataset *dl_dataset_retain(dl_dataset *ds);
void dl_dataset_release(dl_dataset *ds);             /* NULL is a no-op */
int64_t dl_dataset_row(const dl_dataset *ds, int64_t i);
int64_t dl_dataset_id(const dl_dataset *ds, int64_t i);
int dl_dataset_field(const dl_dataset *ds, const char *name);   /* index, or -1 */
/* CRC-32 over the fields' names, dtypes, shapes and values and the ids, in
 * example order (for a source's fields, what its checksum hook says of each
 * row): what the offline cache compares to see a stale source. */
uint32_t dl_dataset_checksum(const dl_dataset *ds);

/* ------------------------------------------------------------ examples */

/* One field of an example being transformed: shape without the batch
 * dimension; data points into the dataset (read-only) or into buf. */
typedef struct {
  char name[DL_NAMELEN];
  dl_dtype dtype;
  int ndim;
  int64_t shape[DL_MAXDIM];
  const void *data;
  void *buf, *spare;                 /* owned scratch (malloc), reused across examples */
  size_t cap, spare_cap;
  dl_dtype next_dtype;               /* set by dl_example_begin */
  int next_ndim;
  int64_t next_shape[DL_MAXDIM];
} dl_exfield;

typedef struct {
  int n;
  dl_exfield f[DL_MAXFIELDS];
  int64_t index;                     /* 0-based example of the source dataset */
  int64_t id;                        /* id for randomness */
  int skipped;                       /* the source skipped it (unreadable, on_error = "skip") */
} dl_example;

int dl_example_find(const dl_example *ex, const char *name);    /* index, or -1 */
/* Adds an empty field (no data yet); returns its index, or -1 when full. */
int dl_example_add(dl_example *ex, const char *name);
void dl_example_remove(dl_example *ex, int i);
/* Starts rewriting field i as dtype d and shape: returns a buffer for its new
 * values, or NULL when out of memory or when shape fails dl_shape_check (a
 * negative size, more than DL_MAX_NUMEL elements). The old values stay readable through
 * f[i].data until dl_example_commit(ex, i) makes the new ones current. */
void *dl_example_begin(dl_example *ex, int i, dl_dtype d, int ndim, const int64_t *shape);
void dl_example_commit(dl_example *ex, int i);
/* Where a decoder writes an image field (io/images.h's dl_image_alloc, with a
 * dl_example_slot as its user): dl_example_begin of a uint8 [C, H, W] field. */
typedef struct {
  dl_example *ex;
  int slot;
} dl_example_slot;
void *dl_example_begin_image(void *slot, int channels, int64_t height, int64_t width);
int64_t dl_exfield_numel(const dl_exfield *f);
void dl_example_free(dl_example *ex);                 /* frees the scratch buffers */

/* Reads example pos (0-based) of ds into ex: tensor fields point into the
 * dataset, a source's fields are read into ex's scratch buffers. Returns 0;
 * 1 when the source skips the row (ex->skipped set, err says why); -1 with
 * err on a failure (the source's message: the file and why). Thread-safe for
 * distinct ex; touches no dl_ctx. */
int dl_dataset_read(const dl_dataset *ds, int64_t pos, dl_example *ex, char *err, size_t errlen);

/* ------------------------------------------------------------ sources */

/* A source: fields produced row by row by a reader, e.g. image files decoded
 * on the pipeline's worker threads (lua_dataset.c's image folders). The
 * examples of a field may differ in shape (shape[f][k] = -1 where they do)
 * but not in dtype or number of dimensions.
 *
 * read(src, row, ex, slot, err, errlen) fills ex->f[slot[k]] (already added,
 * empty) for every source field k with dl_example_begin/commit, and returns 0;
 * 1 to skip the row (an unreadable file under on_error = "skip"; err says
 * why); -1 with err on a failure. It runs on worker threads, concurrently for
 * distinct rows: it must be thread-safe and must not touch a dl_ctx.
 * checksum(src, row, crc) continues crc with what identifies row's contents
 * (for image files: the path, size and modification time).
 * destroy(state) frees state when the last reference goes. */
typedef struct dl_source {
  atomic_int refs;
  int nfields;
  char names[DL_MAXFIELDS][DL_NAMELEN];
  dl_dtype dtype[DL_MAXFIELDS];
  int ndim[DL_MAXFIELDS];
  int64_t shape[DL_MAXFIELDS][DL_MAXDIM];   /* of one example; -1 where examples differ */
  int64_t rows;
  int64_t nblocks;                   /* rows come in blocks of consecutive rows (the shards of
                                      * shards.c): block b starts at row block_start[b]; 0: none */
  const int64_t *block_start;        /* [nblocks + 1], the last = rows; owned by state */
  void *state;                       /* owned, freed by destroy */
  int (*read)(const struct dl_source *src, int64_t row, dl_example *ex, const int *slot, char *err, size_t errlen);
  uint32_t (*checksum)(const struct dl_source *src, int64_t row, uint32_t crc);
  void (*destroy)(void *state);
} dl_source;

/* A source with one reference, over state (owned from now: destroyed on
 * failure too) and the hooks; the caller fills names, dtype, ndim and shape
 * for nfields fields. Fails on memory, nfields out of 1..DL_MAXFIELDS,
 * rows < 0. */
dl_source *dl_source_new(dl_ctx *ctx, int nfields, int64_t rows, void *state,
                         int (*read)(const dl_source *, int64_t, dl_example *, const int *, char *, size_t),
                         uint32_t (*checksum)(const dl_source *, int64_t, uint32_t), void (*destroy)(void *));
dl_source *dl_source_retain(dl_source *src);
void dl_source_release(dl_source *src);              /* NULL is a no-op */

/* How a source of images (imagefiles.h, shards.h) decodes them: the one option set both take. */
typedef struct {
  int channels;                      /* 1 or 3 */
  int skip;                          /* a row that cannot be read: 1 = skip it, 0 = fail */
  int64_t max_pixels;                /* height x width limit; <= 0: the decoder's (DL_IMAGE_MAX_PIXELS) */
} dl_image_opts;

dl_image_opts dl_image_defaults(void);   /* 3 channels, fail, the decoder's limit */

#endif
