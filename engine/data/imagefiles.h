/* imagefiles.h -- a dataset source (dataset.h) over image files: one field,
 * "image", uint8 [channels, H, W], each row a file decoded (io/images.h)
 * when the row is read, i.e. on the pipeline's worker threads.
 */
/* See LICENSE */
#ifndef DL_IMAGEFILES_H
#define DL_IMAGEFILES_H

#include "data/dataset.h"

/* A source of n rows: row i is the file root/paths[i] (paths are copied).
 * A path must be relative and stay inside root: an empty or absolute path, a
 * '..' component or a NUL byte is refused (naming the row, 1-based). Whether
 * each file exists and is an image is found out when it is read; the error
 * (or skip reason) then reads "images: '<root>/<path>': <why>". Fails on those
 * paths, bad options, memory. */
dl_source *dl_imagefiles_new(dl_ctx *ctx, const char *root, int64_t n, const char *const *paths,
                             const dl_image_opts *o);

#endif
