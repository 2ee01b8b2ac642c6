/* cache.h -- the pipeline's offline cache: a dataset written once, after its
 * preprocessing, and read back instead of recomputing it (docs/formats.md).
 */
/* See LICENSE */
#ifndef DL_CACHE_H
#define DL_CACHE_H

#include "data/dataset.h"

/* ------------------------------------------------------------ offline cache */

/* Writes ds (examples in order, their ids) and the fingerprint to path, via
 * a temporary file renamed into place. Format: docs/formats.md, "Pipeline
 * cache". Fails (-1, no file left behind) on I/O errors and on a dataset
 * with a source's fields (not in memory). */
int dl_cache_write(dl_ctx *ctx, const char *path, const dl_dataset *ds, const char *fingerprint);

typedef enum { DL_CACHE_OK, DL_CACHE_MISSING, DL_CACHE_STALE, DL_CACHE_CORRUPT } dl_cache_status;

/* Reads a cache written by dl_cache_write. Returns a new dataset, or NULL
 * with *status and a message in ctx->err: MISSING (no file), STALE (the
 * fingerprint differs), CORRUPT (bad magic or version, truncation, checksum
 * mismatch, an impossible header; the message names the file and offset). */
dl_dataset *dl_cache_read_new(dl_ctx *ctx, const char *path, const char *fingerprint, dl_cache_status *status);

#endif
