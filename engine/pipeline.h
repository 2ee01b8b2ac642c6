/* pipeline.h -- the input pipeline: datasets, per-example transforms, the
 * threaded batch producer, the offline cache.
 *
 * Worked example (what `ds:shuffle{seed = 1}:map(scale):batch(128):workers(2)`
 * turns into):
 *
 *   dl_tensor *fields[2] = {images, labels};          // [N, 1, 28, 28], [N]
 *   const char *names[2] = {"image", "label"};
 *   dl_dataset *ds = dl_dataset_new(ctx, 2, names, fields, NULL);
 *   dl_transform tf = dl_transform_defaults(DL_TF_SCALE, "image");
 *   tf.scale = 1.0f / 255;
 *   dl_pipe_opts o = dl_pipe_defaults();
 *   o.ds = ds; o.tf = &tf; o.ntf = 1; o.batch = 128; o.workers = 2; o.seed = 1;
 *   o.index[o.nindex++] = (dl_index_stage){DL_IX_SHUFFLE, 1, 0, 0, 1};
 *   dl_pipe *p = dl_pipe_new(ctx, &o);                // threads start here
 *   dl_batch b;
 *   while (dl_pipe_next(ctx, p, &b) == 1) { ...; dl_batch_release(&b); }
 *   dl_pipe_free(p);                                  // joins the threads
 *   dl_dataset_release(ds);
 *
 * Determinism: example i of a dataset has an id (its row in the original
 * storage, kept through subsets and caches). The randomness a transform uses
 * for an example is a Philox stream keyed by (data seed, rank, epoch, id,
 * stage), and shuffles are keyed by (seed, epoch): which worker produces a
 * batch, or when, never changes its contents. Batches do not cross epochs.
 *
 * Threads: worker threads only read the dataset, write into batch buffers the
 * consumer allocated, and call transforms; they never touch a dl_ctx (their
 * errors go into per-batch messages the consumer raises). Everything else
 * here runs on the consumer's thread.
 */
/* See LICENSE */
#ifndef DL_PIPELINE_H
#define DL_PIPELINE_H

#include "dl.h"
#include "fileio.h"   /* dl_crc32 */
#include "trace.h"

#define DL_MAXFIELDS 16              /* fields per example (a batch adds "weight") */
#define DL_NAMELEN 32                /* field names, with the terminating 0 */
#define DL_MAXCH 64                  /* channels of normalize */
#define DL_PIPE_MAXSTAGES 16         /* index stages */
#define DL_PIPE_MAXTF 32             /* transforms */

/* ------------------------------------------------------------ datasets */

/* A dataset: named fields of equal length, each a contiguous tensor whose
 * dimension 0 is the row, optionally viewed through an index (a subset).
 * Immutable once made; reference counted (pipelines hold one). */
typedef struct dl_dataset {
  atomic_int refs;
  int nfields;
  char names[DL_MAXFIELDS][DL_NAMELEN];
  dl_tensor *fields[DL_MAXFIELDS];   /* [rows, ...], contiguous, owned */
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
 * example order: what the offline cache compares to see a stale source. */
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
int64_t dl_exfield_numel(const dl_exfield *f);
void dl_example_free(dl_example *ex);                 /* frees the scratch buffers */

/* ------------------------------------------------------------ transforms */

typedef enum {
  DL_TF_CAST,          /* dtype */
  DL_TF_SCALE,         /* float32 x * scale */
  DL_TF_NORMALIZE,     /* float32 (x - mean[c]) / std[c]; nch 1 = all channels */
  DL_TF_CROP,          /* random crop size[] after padding by `padding` (fill) */
  DL_TF_FLIP,          /* mirror with probability p_h (horizontal) / p_v (vertical) */
  DL_TF_TRANSLATE,     /* random integer shift within +-max_shift[] (fill) */
  DL_TF_AFFINE,        /* random rotation (+-degrees), scale, translation; bilinear */
  DL_TF_ONE_HOT,       /* 1-based integer label -> float32 [classes] */
  DL_TF_SELECT,        /* keep only the named fields */
  DL_TF_CALL           /* a callback (the binding's Lua functions) */
} dl_tf_kind;

struct dl_transform;
/* A callback transform: rewrite ex for (epoch, key); worker is 0..workers-1
 * (0 on the consumer thread when there are none). Returns 0, or -1 with a
 * message in err. Called from worker threads: must not touch a dl_ctx that
 * other threads use. */
typedef int (*dl_tf_call)(const struct dl_transform *tf, int worker, dl_example *ex, int64_t epoch, uint64_t key,
                          char *err, size_t errlen);

typedef struct dl_transform {
  dl_tf_kind kind;
  char name[48];                     /* for messages, statistics and traces */
  char field[DL_NAMELEN];            /* the field it rewrites */
  dl_dtype dtype;                    /* cast */
  float scale;                       /* scale */
  int nch;                           /* normalize */
  float mean[DL_MAXCH], std[DL_MAXCH];
  int64_t size[2];                   /* crop: out height, width */
  int64_t padding;                   /* crop */
  float fill;                        /* crop, translate, affine: value outside the image */
  float p_h, p_v;                    /* flip */
  int64_t max_shift[2];              /* translate: rows, columns */
  float degrees;                     /* affine: rotation in [-degrees, degrees] */
  float translate;                   /* affine: shift up to this fraction of the size */
  float scale_lo, scale_hi;          /* affine: zoom factor range */
  int64_t classes;                   /* one-hot */
  int nsel;                          /* select */
  char sel[DL_MAXFIELDS][DL_NAMELEN];
  dl_tf_call call;                   /* call */
  void *user;
  int user_index;
  int stage;                         /* 0-based position among the maps that keys its draws
                                      * (and numbers it in messages); -1: its index here */
} dl_transform;

/* A transform of the kind on field with the documented defaults (scale 1,
 * padding 0, fill 0, p 0.5 horizontal, scale range 1..1, ...). */
dl_transform dl_transform_defaults(dl_tf_kind kind, const char *field);
int dl_transform_is_random(const dl_transform *tf);
/* Applies tf to ex; key seeds its random draws. Returns 0, or -1 with a
 * message in err (missing field, wrong shape or dtype, label out of range). */
int dl_transform_apply(const dl_transform *tf, dl_example *ex, int worker, int64_t epoch, uint64_t key, char *err,
                       size_t errlen);

/* ------------------------------------------------------------ pipeline */

typedef enum { DL_IX_SHUFFLE, DL_IX_SHARD } dl_index_kind;

typedef struct {
  dl_index_kind kind;
  uint64_t seed;                     /* shuffle */
  int64_t window;                    /* shuffle: 0 = full permutation, else a buffer of this size */
  int64_t rank, world;               /* shard: keep positions p with p % world == rank */
} dl_index_stage;

typedef struct {
  dl_dataset *ds;                    /* the source (retained by the pipe) */
  int nindex;
  dl_index_stage index[DL_PIPE_MAXSTAGES];  /* applied in order to 0..len-1 each epoch */
  int ntf;
  const dl_transform *tf;            /* applied in order to every example (copied) */
  int64_t batch;                     /* 0: examples one at a time, no weight field */
  int pad;                           /* pad the last batch (weight 0 on the padding) */
  int drop_remainder;                /* drop the last batch when short */
  int workers;                       /* 0: produce on the consumer's thread */
  int prefetch;                      /* ready batches kept ahead of the consumer */
  uint64_t seed;                     /* data seed of the augmentation keys */
  int64_t rank;                      /* mixed into the augmentation keys */
  int64_t start_epoch, start_batch;  /* where to begin (0-based) */
  int64_t epochs;                    /* epochs to run from start_epoch; < 0 = forever */
  dl_trace *trace;                   /* spans go here while it is active; may be NULL */
  int trace_id;                      /* names this pipe's threads in the trace */
} dl_pipe_opts;

dl_pipe_opts dl_pipe_defaults(void);   /* 1 worker, prefetch 2, one epoch, batch 0 */

typedef struct dl_pipe dl_pipe;

/* Examples per epoch after the index stages, and batches per epoch. */
int64_t dl_pipe_epoch_examples(const dl_pipe_opts *o);
int64_t dl_pipe_epoch_batches(const dl_pipe_opts *o);

/* Validates o, runs the transforms on one example to learn the output fields,
 * allocates the batch buffers and starts the workers. Fails (NULL, nothing
 * left running) on bad options, a transform error on that example (naming
 * stage and example), memory, thread creation. */
dl_pipe *dl_pipe_new(dl_ctx *ctx, const dl_pipe_opts *o);

typedef struct {
  int n;                              /* fields, in output order ("weight" last when batched) */
  const char *names[DL_MAXFIELDS + 1];
  dl_tensor *t[DL_MAXFIELDS + 1];     /* new references */
  int64_t epoch, batch;               /* 0-based position of this batch */
} dl_batch;

/* The next batch, in order: 1 with out filled, 0 at the end, -1 with ctx->err
 * set when a worker failed (the message names the stage and the example) or
 * memory ran out. After -1 the pipe is stopped and only frees. */
int dl_pipe_next(dl_ctx *ctx, dl_pipe *p, dl_batch *out);
void dl_batch_release(dl_batch *b);
/* The position of the next batch dl_pipe_next hands out (0-based). */
void dl_pipe_position(const dl_pipe *p, int64_t *epoch, int64_t *batch);
/* Stops the workers and joins them; idempotent. dl_pipe_free calls it. */
void dl_pipe_stop(dl_pipe *p);
void dl_pipe_free(dl_pipe *p);                         /* NULL is a no-op */

typedef struct {
  int64_t batches;                   /* handed out */
  double wait_s;                     /* consumer time blocked in dl_pipe_next, after the first batch */
  double startup_s;                  /* time blocked for the first batch */
  double span_s;                     /* from the first batch's return to the latest return */
  int nstages;                       /* read, the transforms, collate */
  const char *stage[DL_PIPE_MAXTF + 2];
  double stage_s[DL_PIPE_MAXTF + 2];  /* summed over workers */
  int workers, prefetch;
} dl_pipe_stats;

void dl_pipe_get_stats(const dl_pipe *p, dl_pipe_stats *s);

/* ------------------------------------------------------------ offline cache */

/* Writes ds (examples in order, their ids) and the fingerprint to path, via
 * a temporary file renamed into place. Format: docs/formats.md, "Pipeline
 * cache". Fails (-1, no file left behind) on I/O errors. */
int dl_cache_write(dl_ctx *ctx, const char *path, const dl_dataset *ds, const char *fingerprint);

typedef enum { DL_CACHE_OK, DL_CACHE_MISSING, DL_CACHE_STALE, DL_CACHE_CORRUPT } dl_cache_status;

/* Reads a cache written by dl_cache_write. Returns a new dataset, or NULL
 * with *status and a message in ctx->err: MISSING (no file), STALE (the
 * fingerprint differs), CORRUPT (bad magic or version, truncation, checksum
 * mismatch, an impossible header; the message names the file and offset). */
dl_dataset *dl_cache_read_new(dl_ctx *ctx, const char *path, const char *fingerprint, dl_cache_status *status);

#endif
