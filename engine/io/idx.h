/* idx.h -- IDX (MNIST-family) file reader, plain or gzip-compressed.
 *
 * Two ways in: dl_idx_read_new loads a whole file; the streaming reader
 * (dl_idx_open, dl_idx_read, dl_idx_close) decodes the header and then hands
 * out records (slices along dimension 1) as zlib inflates them, so a caller
 * can stop after the first n examples without decompressing the rest.
 */
/* See LICENSE */
#ifndef DL_IDX_H
#define DL_IDX_H

#include "core/dl.h"

typedef struct dl_idx_reader dl_idx_reader;

/* Reads a whole IDX or IDX.gz file of unsigned bytes into a new uint8 tensor
 * with the file's dimensions. Fails (NULL, message naming the file and
 * offset) on open errors, bad magic, other data types, truncation. */
dl_tensor *dl_idx_read_new(dl_ctx *ctx, const char *path);

/* Opens path and decodes its header. Fails as dl_idx_read_new does on the
 * header; the reader must be closed with dl_idx_close. */
dl_idx_reader *dl_idx_open(dl_ctx *ctx, const char *path);
int dl_idx_ndim(const dl_idx_reader *r);
const int64_t *dl_idx_shape(const dl_idx_reader *r);   /* shape[0] records of shape[1..] */
/* Reads the next n records (n * record bytes) into buf. Returns 0, or -1 with
 * a message naming the file, the byte offset reached and what was expected
 * (truncated data, decompression errors, or n beyond the declared count). */
int dl_idx_read(dl_ctx *ctx, dl_idx_reader *r, void *buf, int64_t n);
void dl_idx_close(dl_idx_reader *r);                    /* NULL is a no-op */

#endif
