/* order.h -- which examples an epoch visits, in which order (pipeline.h's index
 * stages), and the key mixing every random choice of the pipeline uses.
 * Pure functions of the options and the epoch: the same seeds give the same
 * order whatever the worker count or when it is asked.
 */
/* See LICENSE */
#ifndef DL_ORDER_H
#define DL_ORDER_H

#include "data/dataset.h"

/* An index stage of a pipeline (applied in order to positions 0..len-1 each epoch). */
typedef enum { DL_IX_SHUFFLE, DL_IX_SHARD } dl_index_kind;

typedef struct {
  dl_index_kind kind;
  uint64_t seed;                     /* shuffle */
  int64_t window;                    /* shuffle: 0 = full permutation, else a buffer of this size */
  int64_t rank, world;               /* shard: keep positions p with p % world == rank */
  int blocks;                        /* on the source's blocks (record shards) instead of examples:
                                      * shuffle permutes the blocks, each kept in order; shard keeps
                                      * blocks b with b % world == rank. Only on a whole dataset
                                      * with blocks, before any stage on examples */
} dl_index_stage;

/* A 64-bit key from two (Philox-4x32-10 of key a at counter b). */
uint64_t dl_key_mix(uint64_t a, uint64_t b);

/* How many examples of ds an epoch visits after the n index stages. */
int64_t dl_order_count(const dl_dataset *ds, int n, const dl_index_stage *index);
/* The positions (0-based, of ds) epoch visits, in order: a malloc'd array of
 * dl_order_count entries (the caller frees it), or NULL when out of memory. The
 * stages were checked (dl_pipe_new). */
int64_t *dl_epoch_order(const dl_dataset *ds, int n, const dl_index_stage *index, int64_t epoch);

#endif
