/* images.h -- image files decoded into uint8 [C, H, W]: JPEG through
 * libjpeg-turbo's TurboJPEG API, PNG through libspng.
 *
 * The format is sniffed from the first bytes (the magic), never from the
 * name. Every source layout is converted explicitly to the channels asked for:
 *   - 3 (RGB): grayscale is replicated into R, G and B; palette entries are
 *     looked up; an alpha channel (RGBA, gray+alpha, a palette's or a
 *     colour's tRNS transparency) is dropped, as PIL's convert("RGB") does
 *     (no compositing: a transparent pixel keeps its colour values).
 *   - 1 (gray): the RGB image above, converted with PIL's "L" formula
 *     L = (19595 R + 38470 G + 7471 B + 32768) >> 16, i.e. ITU-R 601-2 luma
 *     0.299 R + 0.587 G + 0.114 B rounded; on a gray source it is the
 *     identity.
 *   - 16-bit samples keep their high byte (v >> 8).
 * JPEG: libjpeg-turbo's default (accurate integer) IDCT and fancy upsampling,
 * which is what PIL does through libjpeg62-turbo, so the pixels are equal;
 * any warning libjpeg-turbo raises (a truncated file, corrupt data) is an
 * error, and progressive files are limited to 500 scans. CMYK JPEGs are
 * refused. EXIF orientation is not applied (neither PIL's open nor
 * torchvision applies it).
 * Sizes are checked against limits before anything is allocated.
 *
 * Every function here is thread-safe and touches no dl_ctx: the pipeline's
 * worker threads call them. Errors are messages in a caller's buffer.
 */
/* See LICENSE */
#ifndef DL_IMAGES_H
#define DL_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#define DL_IMAGE_MAX_SIDE 65535             /* pixels, height or width */
#define DL_IMAGE_MAX_PIXELS (1LL << 27)     /* height x width, default limit (134M) */
#define DL_IMAGE_MAX_FILE (1LL << 30)       /* bytes of one image file */

typedef enum { DL_IMAGE_UNKNOWN, DL_IMAGE_PNG, DL_IMAGE_JPEG } dl_image_format;

/* The format of a file from its first n bytes (8 suffice). */
dl_image_format dl_image_sniff(const void *data, size_t n);

/* Where the decoder puts its output: called once the size is known, returns
 * a buffer of channels * height * width bytes or NULL (out of memory). */
typedef void *(*dl_image_alloc)(void *user, int channels, int64_t height, int64_t width);

/* Decodes the n bytes of an image file (name: for messages) into
 * [channels, height, width] uint8 at alloc's buffer. channels is 1 or 3;
 * max_pixels bounds height x width (<= 0: DL_IMAGE_MAX_PIXELS). Returns 0, or
 * -1 with err = "'<name>': <why>" (not an image, truncated, corrupt, too
 * large, out of memory); alloc is then either not called or its buffer holds
 * no meaningful values. */
int dl_image_decode(const void *data, size_t n, const char *name, int channels, int64_t max_pixels,
                    dl_image_alloc alloc, void *user, char *err, size_t errlen);

/* Reads a whole regular file into a malloc'd buffer (*out, *n; the caller
 * frees it). Refuses, without blocking, anything that is not a regular file
 * (a directory, a FIFO, a device, a socket), and files over max_bytes (<= 0:
 * DL_IMAGE_MAX_FILE). Returns 0, or -1 with err = "'<path>': <why>". */
int dl_image_read_file(const char *path, int64_t max_bytes, void **out, size_t *n, char *err, size_t errlen);

/* Encodes [channels, height, width] uint8 (channels 1: gray, 3: RGB) as a PNG
 * file in a malloc'd buffer (*out, *n; the caller frees it), lossless, so
 * dl_image_decode gives back the same bytes. Returns 0, or -1 with err. */
int dl_image_encode_png(const uint8_t *chw, int channels, int64_t height, int64_t width, void **out, size_t *n,
                        char *err, size_t errlen);

#endif
