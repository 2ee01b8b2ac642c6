/* idx.h -- IDX (MNIST-family) file reader. */
/* See LICENSE */
#ifndef DL_IDX_H
#define DL_IDX_H

#include "dl.h"

/* Reads a whole IDX or IDX.gz file of unsigned bytes into a new uint8 tensor
 * with the file's dimensions. Fails (NULL, message naming the file and
 * offset) on open errors, bad magic, other data types, truncation. */
dl_tensor *dl_idx_read_new(dl_ctx *ctx, const char *path);

#endif
