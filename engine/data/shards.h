/* shards.h -- record shards as a dataset source: POSIX tar files in the
 * WebDataset convention (io/tar.h reads them), whose consecutive members
 * sharing a key are one example: "000123.png" and "000123.cls" are the image
 * and the label of example "000123".
 *
 * The shards are scanned once, header by header (no data is read), into an
 * index of one int64 per example: the offset of its first member's header.
 * Reading row r opens its shard, seeks there and reads the example's members,
 * on whichever thread reads the row (a pipeline worker), so memory holds the
 * index and the examples being decoded, whatever the shards' size. The shard
 * of each row is a block of consecutive rows (src->block_start): the pipeline
 * shuffles shards as blocks (pipeline.h, DL_IX_BLOCKS) and a bounded buffer
 * mixes examples within reach, as WebDataset does.
 *
 * A field is given by the extensions of its members: an image field by
 * "png", "jpg" or "jpeg" (decoded by io/images.c to uint8 [channels, H, W]),
 * a class field by "cls" (a decimal integer in ASCII, stored as int32 [] plus
 * `offset`: 1 for labels stored 0-based, as WebDataset's are).
 */
/* See LICENSE */
#ifndef DL_SHARDS_H
#define DL_SHARDS_H

#include "data/dataset.h"

#define DL_SHARDS_MAXEXT 8            /* extensions of one field */

typedef enum { DL_SHARD_IMAGE, DL_SHARD_CLASS } dl_shard_kind;

typedef struct {
  char name[DL_NAMELEN];
  dl_shard_kind kind;
  int next;                                /* extensions */
  char ext[DL_SHARDS_MAXEXT][16];          /* "png", "jpg": the member name after the key's '.' */
  int32_t offset;                          /* added to a class value */
} dl_shard_field;

/* A source over the examples of the shards at paths[0..nshards), in order.
 * An example missing a field is an error at the scan, naming the shard, the
 * key and the extensions looked for (with opts->skip it is left out, counted
 * in *incomplete). Fails on a shard that is not a regular tar file or that
 * the tar reader refuses (its message), bad field specs, memory. */
dl_source *dl_shards_new(dl_ctx *ctx, int nshards, const char *const *paths, int nfields, const dl_shard_field *fields,
                         const dl_image_opts *opts, int64_t *incomplete);

#endif
