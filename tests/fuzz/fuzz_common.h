/* fuzz_common.h -- what every libFuzzer harness of tests/fuzz shares: the
 * input as a file the readers can open by path, without touching the disk.
 *
 * The readers under test (checkpoint, IDX, CSV, pipeline cache) take a path,
 * so each input is written into an anonymous in-memory file (memfd_create)
 * and handed over as "/proc/self/fd/<n>": nothing is ever written to a file
 * system, and every process (libFuzzer -jobs/-fork workers included) has its
 * own file. A harness calls fuzz_file(data, size) per input and passes the
 * returned path to the reader; fuzz_gzip(...) gives the gzip-compressed form
 * of an input for the harnesses that fuzz a format inside gzip.
 */
/* See LICENSE */
#ifndef DLUA_FUZZ_COMMON_H
#define DLUA_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

/* A harness's promise: a broken one says which (and the harness's file) and aborts,
 * so libFuzzer keeps the input as a finding. */
#define CHECK(cond, what)                                                   \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s: broken promise: %s\n", __FILE__, what);         \
      abort();                                                              \
    }                                                                       \
  } while (0)

static int fuzz_fd = -1;
static char fuzz_path[64];

/* Makes the memory file hold exactly data[0..size) and returns its path
 * (valid for the life of the process); aborts when the kernel refuses, which
 * is a broken harness, not a finding. */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
  if (fuzz_fd < 0) {
    fuzz_fd = memfd_create("dlua-fuzz", 0);
    if (fuzz_fd < 0) {
      perror("fuzz: memfd_create");
      abort();
    }
    snprintf(fuzz_path, sizeof fuzz_path, "/proc/self/fd/%d", fuzz_fd);
  }
  if (ftruncate(fuzz_fd, 0) != 0) abort();
  size_t done = 0;
  while (done < size) {
    ssize_t w = pwrite(fuzz_fd, data + done, size - done, (off_t)done);
    if (w <= 0) abort();
    done += (size_t)w;
  }
  return fuzz_path;
}

/* gzip (deflate level 1, gzip wrapper) of data[0..size) into a new buffer,
 * *out_size bytes; the caller frees it. Aborts on memory. */
static inline uint8_t *fuzz_gzip(const uint8_t *data, size_t size, size_t *out_size) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
  uLong cap = deflateBound(&z, (uLong)size) + 32;
  uint8_t *out = malloc(cap);
  if (!out) abort();
  z.next_in = (Bytef *)(uintptr_t)data;
  z.avail_in = (uInt)size;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
  *out_size = (size_t)z.total_out;
  deflateEnd(&z);
  return out;
}

#endif
