/* fuzz_image.h -- the body of the PNG and JPEG harnesses (fuzz_png.c,
 * fuzz_jpeg.c): an input is an image file, read through dl_image_read_file
 * (as the pipeline's workers read them) and decoded by dl_image_decode
 * (engine/io/images.h) with channels 3 for inputs of even size, 1 for odd,
 * and a limit of 2^22 pixels (the harnesses' memory budget; the default
 * limit is tested by images_spec.lua). The two harnesses differ in their
 * seeds and dictionaries only: the format is sniffed from the bytes.
 * Promises checked: the file reader returns the input's bytes; a failure
 * leaves a message naming the file; a success asked for exactly one buffer,
 * of the channels asked and a size within the limit (the buffer is malloc'd
 * uninitialised, so MemorySanitizer-style reads of unwritten bytes would show
 * under ASan as use of the pattern ASan leaves; the decoders write every byte).
 */
/* See LICENSE */
#ifndef DLUA_FUZZ_IMAGE_H
#define DLUA_FUZZ_IMAGE_H

#include "fuzz_common.h"

#include "io/images.h"

#define FUZZ_MAX_PIXELS (1LL << 22)

typedef struct {
  int calls, channels;
  int64_t h, w;
  unsigned char *buf;
} fuzz_out;

static void *fuzz_alloc(void *user, int channels, int64_t h, int64_t w) {
  fuzz_out *o = user;
  o->calls++;
  CHECK(o->calls == 1, "alloc called twice");
  CHECK(h >= 1 && w >= 1 && h * w <= FUZZ_MAX_PIXELS, "alloc past the pixel limit");
  o->channels = channels;
  o->h = h;
  o->w = w;
  o->buf = malloc((size_t)(channels * h * w));
  return o->buf;
}

static inline int fuzz_image_one(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  void *bytes = NULL;
  size_t n = 0;
  char err[600];
  memset(err, 0, sizeof err);
  CHECK(dl_image_read_file(path, 0, &bytes, &n, err, sizeof err) == 0, "reading the memory file failed");
  CHECK(n == size, "read a different size than the file's");
  int channels = size % 2 ? 1 : 3;
  fuzz_out o = {0, 0, 0, 0, NULL};
  int rc = dl_image_decode(bytes, n, path, channels, FUZZ_MAX_PIXELS, fuzz_alloc, &o, err, sizeof err);
  if (rc < 0) {
    CHECK(err[0] == '\'' && strncmp(err + 1, path, strlen(path)) == 0, "the message does not name the file");
    CHECK(memchr(err, 0, sizeof err) != NULL, "unterminated message");
  } else {
    CHECK(o.calls == 1 && o.buf, "success without an output buffer");
    CHECK(o.channels == channels, "wrong number of channels");
  }
  free(o.buf);
  free(bytes);
  return 0;
}

#endif
