/* pipeline.h -- the input pipeline's threaded batch producer: index stages
 * (shuffle, shard) over a dataset (dataset.h), per-example transforms
 * (transforms.h), batches collated by worker threads, prefetched in order.
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
 *   o.index[o.nindex++] = (dl_index_stage){DL_IX_SHUFFLE, 1, 0, 0, 1, 0};
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
 * Shapes: batching needs every example's field to have the first example's
 * dtype and shape (else the batch fails naming both); without batching
 * (batch 0) each example keeps its own shape (images of different sizes).
 *
 * Skips: an example the dataset's source skips (an unreadable image under
 * on_error = "skip") is left out of its batch, which comes out shorter (or
 * padded with weight-0 copies under pad); a batch with no example left is
 * not handed out, and the position moves past it. Skips are counted in the
 * statistics.
 *
 * Threads: worker threads only read the dataset, write into batch buffers the
 * consumer allocated, and call transforms; they never touch a dl_ctx (their
 * errors go into per-batch messages the consumer raises). Everything else
 * here runs on the consumer's thread.
 */
/* See LICENSE */
#ifndef DL_PIPELINE_H
#define DL_PIPELINE_H

#include "data/transforms.h"
#include "data/order.h"
#include "io/trace.h"

#define DL_PIPE_MAXSTAGES 16         /* index stages */
#define DL_PIPE_MAXTF 32             /* transforms */

/* ------------------------------------------------------------ pipeline */


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
  int64_t skipped;                   /* examples the source skipped (on_error = "skip") in the batches
                                      * handed out so far (or passed over: all skipped) */
  char first_skip[512];              /* why the first of them was skipped */
} dl_pipe_stats;

void dl_pipe_get_stats(const dl_pipe *p, dl_pipe_stats *s);

#endif
