/* images.c -- JPEG (TurboJPEG) and PNG (libspng) files decoded into planar
 * uint8 [C, H, W], and the reading of an image file's bytes.
 *
 * Both decoders write interleaved RGB rows (H, W, 3) into a scratch buffer;
 * the last step converts to the channels asked for and to planar order. A
 * gray source asked for 1 channel is decoded straight into the output.
 * Sizes come from the headers and are checked against the limits before the
 * scratch or the output is allocated. The conventions (what happens to gray,
 * palette, alpha, 16-bit samples) are in images.h.
 *
 * It does not resize, apply EXIF orientation or colour profiles, or decode
 * CMYK, GIF, WebP or other formats.
 */
/* See LICENSE */
#include "io/images.h"

#include <errno.h>
#include <fcntl.h>
#include <spng.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *name, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(err, errlen, "'%s': %s", name, msg);
  return -1;
}

dl_image_format dl_image_sniff(const void *data, size_t n) {
  static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  const unsigned char *p = data;
  if (n >= 8 && memcmp(p, png, 8) == 0) return DL_IMAGE_PNG;
  if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) return DL_IMAGE_JPEG;
  return DL_IMAGE_UNKNOWN;
}

/* checks h x w against the limits; 0 or -1 with err */
static int check_size(int64_t h, int64_t w, int64_t max_pixels, const char *what, const char *name, char *err,
                      size_t errlen) {
  if (h < 1 || w < 1 || h > DL_IMAGE_MAX_SIDE || w > DL_IMAGE_MAX_SIDE)
    return fail(err, errlen, name, "%s image of %lld x %lld pixels (height x width): each side must be 1 to %d", what,
                (long long)h, (long long)w, DL_IMAGE_MAX_SIDE);
  if (h * w > max_pixels)
    return fail(err, errlen, name, "%s image of %lld x %lld pixels is larger than the limit of %lld pixels", what,
                (long long)h, (long long)w, (long long)max_pixels);
  return 0;
}

/* interleaved RGB [h, w, 3] -> planar [channels, h, w] at the caller's buffer */
static int finish(const unsigned char *rgb, int64_t h, int64_t w, int channels, dl_image_alloc alloc, void *user,
                  const char *name, char *err, size_t errlen) {
  unsigned char *out = alloc(user, channels, h, w);
  if (!out) return fail(err, errlen, name, "out of memory for a %d x %lld x %lld image", channels, (long long)h, (long long)w);
  size_t plane = (size_t)h * (size_t)w;
  if (channels == 3) {
    for (size_t i = 0; i < plane; i++) {
      out[i] = rgb[3 * i];
      out[plane + i] = rgb[3 * i + 1];
      out[2 * plane + i] = rgb[3 * i + 2];
    }
  } else {
    for (size_t i = 0; i < plane; i++)   /* PIL's "L": ITU-R 601-2 luma in 16-bit fixed point, rounded */
      out[i] = (unsigned char)(((uint32_t)rgb[3 * i] * 19595u + (uint32_t)rgb[3 * i + 1] * 38470u +
                                (uint32_t)rgb[3 * i + 2] * 7471u + 0x8000u) >> 16);
  }
  return 0;
}

/* ------------------------------------------------------------ JPEG */

static int decode_jpeg(const void *data, size_t n, const char *name, int channels, int64_t max_pixels,
                       dl_image_alloc alloc, void *user, char *err, size_t errlen) {
  if (n > (size_t)0xffffffffu) return fail(err, errlen, name, "JPEG file of %zu bytes is too large", n);
  tjhandle tj = tjInitDecompress();
  if (!tj) return fail(err, errlen, name, "cannot start the JPEG decoder: %s", tjGetErrorStr2(NULL));
  int w = 0, h = 0, subsamp = 0, cs = 0, rc = -1;
  unsigned char *rgb = NULL;
  if (tjDecompressHeader3(tj, data, (unsigned long)n, &w, &h, &subsamp, &cs) < 0) {
    fail(err, errlen, name, "corrupt JPEG header: %s", tjGetErrorStr2(tj));
    goto done;
  }
  if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
    fail(err, errlen, name, "CMYK JPEG images are not supported (convert it to RGB)");
    goto done;
  }
  if (check_size(h, w, max_pixels, "JPEG", name, err, errlen) < 0) goto done;
  if (cs == TJCS_GRAY && channels == 1) {      /* straight into the output: luma of gray is the gray */
    unsigned char *out = alloc(user, 1, h, w);
    if (!out) {
      fail(err, errlen, name, "out of memory for a 1 x %d x %d image", h, w);
      goto done;
    }
    if (tjDecompress2(tj, data, (unsigned long)n, out, w, 0, h, TJPF_GRAY, TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) < 0)
      fail(err, errlen, name, "corrupt or truncated JPEG data: %s", tjGetErrorStr2(tj));
    else
      rc = 0;
    goto done;
  }
  rgb = malloc((size_t)h * (size_t)w * 3);
  if (!rgb) {
    fail(err, errlen, name, "out of memory for a %d x %d JPEG image", h, w);
    goto done;
  }
  if (tjDecompress2(tj, data, (unsigned long)n, rgb, w, 0, h, TJPF_RGB, TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) < 0) {
    fail(err, errlen, name, "corrupt or truncated JPEG data: %s", tjGetErrorStr2(tj));
    goto done;
  }
  rc = finish(rgb, h, w, channels, alloc, user, name, err, errlen);
done:
  free(rgb);
  tjDestroy(tj);
  return rc;
}

/* ------------------------------------------------------------ PNG */

static int decode_png(const void *data, size_t n, const char *name, int channels, int64_t max_pixels,
                      dl_image_alloc alloc, void *user, char *err, size_t errlen) {
  spng_ctx *c = spng_ctx_new(0);
  if (!c) return fail(err, errlen, name, "out of memory for the PNG decoder");
  int rc = -1, e;
  unsigned char *rgb = NULL;
  struct spng_ihdr ihdr;
  size_t len = 0;
  /* ancillary chunks are bounded (text, ICC profiles): 16 MiB each, 64 MiB together */
  spng_set_chunk_limits(c, (size_t)1 << 24, (size_t)1 << 26);
  spng_set_image_limits(c, 0x7fffffffu, 0x7fffffffu);   /* the PNG maximum: check_size below says more */
  if ((e = spng_set_png_buffer(c, data, n)) != 0 || (e = spng_get_ihdr(c, &ihdr)) != 0) {
    fail(err, errlen, name, "corrupt PNG header: %s", spng_strerror(e));
    goto done;
  }
  if (check_size(ihdr.height, ihdr.width, max_pixels, "PNG", name, err, errlen) < 0) goto done;
  if (channels == 1 && ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8) {
    /* straight into the output (low bit depths scaled to 0..255 by libspng): luma of gray is the gray */
    if ((e = spng_decoded_image_size(c, SPNG_FMT_G8, &len)) != 0 || len != (size_t)ihdr.height * ihdr.width) {
      fail(err, errlen, name, "PNG cannot be decoded to gray: %s", e ? spng_strerror(e) : "unexpected size");
      goto done;
    }
    unsigned char *out = alloc(user, 1, ihdr.height, ihdr.width);
    if (!out) {
      fail(err, errlen, name, "out of memory for a 1 x %u x %u image", ihdr.height, ihdr.width);
      goto done;
    }
    if ((e = spng_decode_image(c, out, len, SPNG_FMT_G8, 0)) != 0)
      fail(err, errlen, name, "corrupt or truncated PNG data: %s", spng_strerror(e));
    else
      rc = 0;
    goto done;
  }
  if ((e = spng_decoded_image_size(c, SPNG_FMT_RGB8, &len)) != 0) {
    fail(err, errlen, name, "PNG cannot be decoded to RGB: %s", spng_strerror(e));
    goto done;
  }
  if (len != (size_t)ihdr.height * ihdr.width * 3) {
    fail(err, errlen, name, "PNG decoder reports %zu bytes for %u x %u RGB pixels", len, ihdr.height, ihdr.width);
    goto done;
  }
  rgb = malloc(len);
  if (!rgb) {
    fail(err, errlen, name, "out of memory for a %u x %u PNG image", ihdr.height, ihdr.width);
    goto done;
  }
  if ((e = spng_decode_image(c, rgb, len, SPNG_FMT_RGB8, 0)) != 0) {
    fail(err, errlen, name, "corrupt or truncated PNG data: %s", spng_strerror(e));
    goto done;
  }
  rc = finish(rgb, ihdr.height, ihdr.width, channels, alloc, user, name, err, errlen);
done:
  free(rgb);
  spng_ctx_free(c);
  return rc;
}

/* ------------------------------------------------------------ entry points */

int dl_image_decode(const void *data, size_t n, const char *name, int channels, int64_t max_pixels,
                    dl_image_alloc alloc, void *user, char *err, size_t errlen) {
  if (channels != 1 && channels != 3) return fail(err, errlen, name, "channels must be 1 or 3, got %d", channels);
  if (max_pixels <= 0) max_pixels = DL_IMAGE_MAX_PIXELS;
  if (n == 0) return fail(err, errlen, name, "empty file (0 bytes), not an image");
  switch (dl_image_sniff(data, n)) {
  case DL_IMAGE_PNG: return decode_png(data, n, name, channels, max_pixels, alloc, user, err, errlen);
  case DL_IMAGE_JPEG: return decode_jpeg(data, n, name, channels, max_pixels, alloc, user, err, errlen);
  default: break;
  }
  return fail(err, errlen, name, "not a PNG or JPEG file (%zu bytes; its first bytes are neither signature)", n);
}

int dl_image_read_file(const char *path, int64_t max_bytes, void **out, size_t *n, char *err, size_t errlen) {
  *out = NULL;
  *n = 0;
  if (max_bytes <= 0) max_bytes = DL_IMAGE_MAX_FILE;
  struct stat st;
  if (stat(path, &st) < 0) return fail(err, errlen, path, "cannot read: %s", strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(err, errlen, path, "is %s, not a regular file", S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
  /* O_NONBLOCK: should the path turn into a FIFO between stat and open, open does not wait for a writer */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return fail(err, errlen, path, "cannot open: %s", strerror(errno));
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(err, errlen, path, "is not a regular file");
  }
  if ((int64_t)st.st_size > max_bytes) {
    close(fd);
    return fail(err, errlen, path, "file of %lld bytes is larger than the limit of %lld", (long long)st.st_size, (long long)max_bytes);
  }
  size_t size = (size_t)st.st_size, got = 0;
  unsigned char *buf = malloc(size ? size : 1);
  if (!buf) {
    close(fd);
    return fail(err, errlen, path, "out of memory for %zu bytes", size);
  }
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return fail(err, errlen, path, "read failed: %s", strerror(e));
    }
    if (r == 0) break;                     /* shrank since fstat: what is there is the file */
    got += (size_t)r;
  }
  close(fd);
  *out = buf;
  *n = got;
  return 0;
}

/* ------------------------------------------------------------ encoding */

int dl_image_encode_png(const uint8_t *chw, int channels, int64_t height, int64_t width, void **out, size_t *n,
                        char *err, size_t errlen) {
  *out = NULL;
  *n = 0;
  if ((channels != 1 && channels != 3) || height < 1 || width < 1 || height > 0x7fffffff || width > 0x7fffffff ||
      height * width > DL_IMAGE_MAX_PIXELS) {
    snprintf(err, errlen, "PNG: cannot encode [%d, %lld, %lld] (1 or 3 channels, at most %lld pixels)", channels,
             (long long)height, (long long)width, (long long)DL_IMAGE_MAX_PIXELS);
    return -1;
  }
  size_t plane = (size_t)height * (size_t)width, len = plane * (size_t)channels;
  uint8_t *hwc = malloc(len);
  spng_ctx *c = spng_ctx_new(SPNG_CTX_ENCODER);
  int e = 0;
  if (!hwc || !c) {
    snprintf(err, errlen, "PNG: out of memory");
    goto done;
  }
  for (size_t i = 0; i < plane; i++)                /* planar [C, H, W] to interleaved rows */
    for (int k = 0; k < channels; k++) hwc[i * (size_t)channels + (size_t)k] = chw[(size_t)k * plane + i];
  struct spng_ihdr ihdr = {0};
  ihdr.width = (uint32_t)width;
  ihdr.height = (uint32_t)height;
  ihdr.bit_depth = 8;
  ihdr.color_type = channels == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR;
  if ((e = spng_set_option(c, SPNG_ENCODE_TO_BUFFER, 1)) != 0 || (e = spng_set_ihdr(c, &ihdr)) != 0 ||
      (e = spng_encode_image(c, hwc, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE)) != 0) {
    snprintf(err, errlen, "PNG: cannot encode: %s", spng_strerror(e));
    goto done;
  }
  *out = spng_get_png_buffer(c, n, &e);
  if (!*out) snprintf(err, errlen, "PNG: cannot encode: %s", spng_strerror(e));
done:
  free(hwc);
  spng_ctx_free(c);
  return *out ? 0 : -1;
}
