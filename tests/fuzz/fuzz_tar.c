/* fuzz_tar.c -- libFuzzer harness for the tar reader of record shards
 * (engine/io/tar.h).
 *
 * The input is a tar file. It is read twice, from memory (dl_tar_scan_buffer)
 * and as a file (dl_tar_open, dl_tar_next, dl_tar_read), and the two must
 * agree: the same members (names, sizes, bytes) and the same verdict.
 * Promises checked besides: a member's data lies inside the file, names are
 * non-empty and NUL-terminated, a failure leaves a message naming the file,
 * and dl_tar_seek back to a member's header returns that member again.
 * Seeds: tests/fuzz/corpus/tar (gen_seeds.c), dictionary tests/fuzz/dict/tar.dict.
 */
/* See LICENSE */
#include "fuzz_common.h"

#include "io/tar.h"

#define MAXM 64

typedef struct {
  int n;
  char name[MAXM][DL_TAR_NAMELEN];
  int64_t size[MAXM];
  uint32_t crc[MAXM];
  size_t total;
} members;

static int collect(void *arg, const dl_tar_member *m, const void *data) {
  members *ms = arg;
  CHECK(m->name[0] != 0, "empty member name");
  CHECK(strlen(m->name) < DL_TAR_NAMELEN, "name not terminated");
  if (ms->n < MAXM) {
    strcpy(ms->name[ms->n], m->name);
    ms->size[ms->n] = m->size;
    ms->crc[ms->n] = dl_crc32(0, data, (size_t)m->size);
  }
  ms->n++;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static members a, b;
  char err[512], err2[512];
  a.n = b.n = 0;
  err[0] = err2[0] = 0;
  int ra = dl_tar_scan_buffer(data, size, "buffer", collect, &a, err, sizeof err);
  CHECK(ra == 0 || strncmp(err, "buffer: ", 8) == 0, "a buffer failure does not name it");

  const char *path = fuzz_file(data, size);
  dl_tar *t = dl_tar_open(path, err2, sizeof err2);
  CHECK(t != NULL, "a memory file does not open");
  dl_tar_member m;
  int r;
  int64_t first_header = -1;
  while ((r = dl_tar_next(t, &m, err2, sizeof err2)) == 1) {
    CHECK(m.offset >= 0 && m.size >= 0 && (uint64_t)m.offset + (uint64_t)m.size <= size, "member outside the file");
    void *buf = malloc(m.size ? (size_t)m.size : 1);
    CHECK(buf != NULL, "malloc");
    CHECK(dl_tar_read(t, &m, buf, err2, sizeof err2) == 0, "a listed member cannot be read");
    if (b.n < MAXM) {
      strcpy(b.name[b.n], m.name);
      b.size[b.n] = m.size;
      b.crc[b.n] = dl_crc32(0, buf, (size_t)m.size);
    }
    if (first_header < 0) first_header = m.header;
    b.n++;
    free(buf);
  }
  CHECK((r < 0) == (ra < 0), "file and buffer verdicts differ");
  CHECK(r >= 0 || strncmp(err2, path, strlen(path)) == 0, "a file failure does not name the file");
  CHECK(a.n == b.n, "file and buffer member counts differ");
  for (int i = 0; i < a.n && i < MAXM; i++) {
    CHECK(strcmp(a.name[i], b.name[i]) == 0, "member names differ");
    CHECK(a.size[i] == b.size[i] && a.crc[i] == b.crc[i], "member data differ");
  }
  if (first_header >= 0) {
    CHECK(dl_tar_seek(t, first_header, err2, sizeof err2) == 0, "seek to a member's header fails");
    CHECK(dl_tar_next(t, &m, err2, sizeof err2) == 1 && strcmp(m.name, a.name[0]) == 0, "seek does not return the member");
  }
  dl_tar_close(t);
  return 0;
}
