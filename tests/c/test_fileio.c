/* test_fileio.c -- the file I/O module from C: CRC-32 against its published
 * check value, atomic replacement (content, no temporary file left, the old
 * file intact after every kind of failure, exact messages), appends (one line
 * per call, /dev/full and the write-failure hook raise), fsync errors, and
 * an allocation-failure sweep over replace that must fail cleanly; and the
 * two writers built on it (checkpoint, pipeline cache) failing at every one
 * of their writes with the old file intact. */
/* See LICENSE */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "dl_test.h"
#include "io/fileio.h"
#include "data/pipeline.h"
#include "data/cache.h"

static char dir[64];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* the whole file into buf (NUL-terminated); its length, or -1 */
static long slurp(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = 0;
  return (long)n;
}

static int has_temp(void) {
  DIR *d = opendir(dir);
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp-")) found = 1;
  closedir(d);
  return found;
}

static void test_crc(void) {
  DL_CHECK(dl_crc32(0, "123456789", 9) == 0xCBF43926u);       /* the CRC-32 check value */
  DL_CHECK(dl_crc32(dl_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
  DL_CHECK(dl_crc32(0, NULL, 0) == 0);
  DL_CHECK(dl_crc32(0, "a", 1) == 0xE8B7BE43u);
}

static void test_replace(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128], buf[256], want[256];
  path_in(p, sizeof p, "r.txt");
  DL_CHECK(dl_fileio_replace(ctx, p, "first\n", 6) == 0);
  DL_CHECK(slurp(p, buf, sizeof buf) == 6 && strcmp(buf, "first\n") == 0);
  DL_CHECK(dl_fileio_replace(ctx, p, "second!\n", 8) == 0);
  DL_CHECK(slurp(p, buf, sizeof buf) == 8 && strcmp(buf, "second!\n") == 0);
  DL_CHECK(dl_fileio_replace(ctx, p, "", 0) == 0);
  DL_CHECK(slurp(p, buf, sizeof buf) == 0);
  DL_CHECK(dl_fileio_replace(ctx, p, "keep\n", 5) == 0);
  DL_CHECK(!has_temp());

  /* a missing directory: nothing created */
  char q[128];
  path_in(q, sizeof q, "missing/x.json");
  DL_CHECK(dl_fileio_replace(ctx, q, "x", 1) == -1);
  snprintf(want, sizeof want, "cannot write '%s': No such file or directory (creating a temporary file next to it)", q);
  DL_CHECK(strcmp(ctx->err, want) == 0);

  /* a directory (or FIFO, device) is never replaced: refused before anything is written */
  path_in(q, sizeof q, "adir");
  DL_CHECK(mkdir(q, 0777) == 0);
  DL_CHECK(dl_fileio_replace(ctx, q, "x", 1) == -1);
  snprintf(want, sizeof want,
           "cannot write '%s': not a regular file (a device, FIFO, socket or directory is never replaced)", q);
  DL_CHECK(strcmp(ctx->err, want) == 0);
  DL_CHECK(!has_temp());
  rmdir(q);

  /* the hook: the 2nd write of a multi-write replacement fails; the old file survives */
  dl_fileio_atomic f;
  dl_fileio_fail_from(2);
  DL_CHECK(dl_fileio_open_atomic(ctx, &f, p) == 0);
  DL_CHECK(dl_fileio_write(&f, "new ", 4) == 0);
  DL_CHECK(dl_fileio_write(&f, "content\n", 8) == -1);
  snprintf(want, sizeof want, "cannot write '%s': No space left on device (writing the temporary file)", p);
  DL_CHECK(strcmp(ctx->err, want) == 0);
  DL_CHECK(dl_fileio_write(&f, "more", 4) == -1);               /* refused after a failure, not counted */
  DL_CHECK(dl_fileio_commit(&f) == -1);
  DL_CHECK(strcmp(ctx->err, want) == 0);                         /* the first failure's message is kept */
  DL_CHECK(dl_fileio_commit(&f) == -1);                          /* finished: harmless */
  dl_fileio_abort(&f);
  DL_CHECK(dl_fileio_write_count() == 2);
  DL_CHECK(slurp(p, buf, sizeof buf) == 5 && strcmp(buf, "keep\n") == 0);
  DL_CHECK(!has_temp());
  /* a full disk stays full: every later write fails too */
  DL_CHECK(dl_fileio_replace(ctx, p, "x", 1) == -1);
  DL_CHECK(dl_fileio_write_count() == 3);
  dl_fileio_fail_from(0);
  DL_CHECK(dl_fileio_write_count() == 0);
  DL_CHECK(dl_fileio_replace(ctx, p, "back\n", 5) == 0);
  DL_CHECK(slurp(p, buf, sizeof buf) == 5 && strcmp(buf, "back\n") == 0);

  /* abort leaves the target and no temp file */
  DL_CHECK(dl_fileio_open_atomic(ctx, &f, p) == 0);
  DL_CHECK(dl_fileio_write(&f, "zzz", 3) == 0);
  dl_fileio_abort(&f);
  DL_CHECK(slurp(p, buf, sizeof buf) == 5 && strcmp(buf, "back\n") == 0);
  DL_CHECK(!has_temp());

  /* allocation failures (the two path copies) fail cleanly, nothing created */
  for (uint64_t k = 1; k <= 3; k++) {
    ctx->mem.fail_at = ctx->mem.allocs + k;
    path_in(q, sizeof q, "alloc.txt");
    int rc = dl_fileio_replace(ctx, q, "a", 1);
    ctx->mem.fail_at = 0;
    if (k <= 2) {
      DL_CHECK(rc == -1 && ctx->oom);
      DL_CHECK(access(q, F_OK) != 0);
    } else {
      DL_CHECK(rc == 0);
    }
    DL_CHECK(!has_temp());
  }
  unlink(q);
  unlink(p);
  dl_ctx_free(ctx);
}

static void test_append(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128], buf[256], want[256];
  path_in(p, sizeof p, "log.jsonl");
  DL_CHECK(dl_fileio_append(ctx, p, "a\n", 2, 0) == 0);
  DL_CHECK(dl_fileio_append(ctx, p, "bb\n", 3, 1) == 0);
  DL_CHECK(dl_fileio_append(ctx, p, "", 0, 0) == 0);
  DL_CHECK(slurp(p, buf, sizeof buf) == 5 && strcmp(buf, "a\nbb\n") == 0);

  /* only regular files: a device and a directory are refused (a full disk: the hook below) */
  DL_CHECK(dl_fileio_append(ctx, "/dev/full", "x\n", 2, 0) == -1);
  DL_CHECK(strcmp(ctx->err, "cannot append to '/dev/full': not a regular file (a device, FIFO, socket or directory)") == 0);

  DL_CHECK(dl_fileio_append(ctx, dir, "x\n", 2, 0) == -1);
  snprintf(want, sizeof want, "cannot append to '%s': not a regular file (a device, FIFO, socket or directory)", dir);
  DL_CHECK(strcmp(ctx->err, want) == 0);

  dl_fileio_fail_from(1);
  DL_CHECK(dl_fileio_append(ctx, p, "c\n", 2, 0) == -1);
  snprintf(want, sizeof want, "cannot append to '%s': No space left on device", p);
  DL_CHECK(strcmp(ctx->err, want) == 0);
  dl_fileio_fail_from(0);
  DL_CHECK(slurp(p, buf, sizeof buf) == 5);                      /* nothing of the failed line */

  char q[128];
  path_in(q, sizeof q, "nope/x");
  DL_CHECK(dl_fileio_fsync(ctx, q) == -1);
  snprintf(want, sizeof want, "cannot sync '%s': No such file or directory", q);
  DL_CHECK(strcmp(ctx->err, want) == 0);
  DL_CHECK(dl_fileio_fsync(ctx, p) == 0 && dl_fileio_fsync(ctx, dir) == 0);
  unlink(p);
  dl_ctx_free(ctx);
}

/* the checkpoint and cache writers, failing at their k-th write for every k:
 * the message names the file, the previous file survives, no temp is left */
static void test_writers(void) {
  dl_ctx *ctx = dl_ctx_new();
  char p[128], q[128], want[256];
  path_in(p, sizeof p, "ck.safetensors");
  path_in(q, sizeof q, "ds.cache");
  int64_t s[2] = {3, 4};
  dl_tensor *a = dl_tensor_new_empty(ctx, DL_F32, 2, s), *b = dl_tensor_new_empty(ctx, DL_I64, 1, s);
  memset(a->st->data, 0, a->st->nbytes);
  memset(b->st->data, 0, b->st->nbytes);
  dl_checkpoint_item items[2] = {{"a", 1, a}, {"b", 1, b}};
  DL_CHECK(dl_checkpoint_save(ctx, p, items, 2, NULL, 0) == 0);
  const char *names[2] = {"x", "y"};
  dl_tensor *fields[2] = {a, b};
  dl_dataset *ds = dl_dataset_new(ctx, 2, names, fields, NULL);
  DL_CHECK(ds != NULL);
  DL_CHECK(dl_cache_write(ctx, q, ds, "fp-1") == 0);
  long ck_writes, cache_writes;
  dl_fileio_fail_from(0);
  DL_CHECK(dl_checkpoint_save(ctx, p, items, 2, NULL, 0) == 0);
  ck_writes = dl_fileio_write_count();
  dl_fileio_fail_from(0);
  DL_CHECK(dl_cache_write(ctx, q, ds, "fp-1") == 0);
  cache_writes = dl_fileio_write_count();
  DL_CHECK(ck_writes == 4);                       /* length, header, two tensors */
  DL_CHECK(cache_writes >= 5);
  ((float *)a->st->data)[0] = 1.0f;               /* what a failed save would have written */
  for (long k = 1; k <= ck_writes; k++) {
    dl_fileio_fail_from(k);
    DL_CHECK(dl_checkpoint_save(ctx, p, items, 2, NULL, 0) == DL_CHECKPOINT_EIO);
    snprintf(want, sizeof want, "checkpoint: cannot write '%s': No space left on device (writing the temporary file)", p);
    DL_CHECK(strcmp(ctx->err, want) == 0);
    dl_fileio_fail_from(0);
    dl_checkpoint *ck = dl_checkpoint_read_new(ctx, p, DL_CHECKPOINT_DATA);
    DL_CHECK(ck && ck->ntensors == 2 && ((float *)ck->tensors[0].t->st->data)[0] == 0.0f);
    dl_checkpoint_release(ck);
    DL_CHECK(!has_temp());
  }
  for (long k = 1; k <= cache_writes; k++) {
    dl_fileio_fail_from(k);
    DL_CHECK(dl_cache_write(ctx, q, ds, "fp-2") == -1);
    snprintf(want, sizeof want, "cache: cannot write '%s': No space left on device (writing the temporary file)", q);
    DL_CHECK(strcmp(ctx->err, want) == 0);
    dl_fileio_fail_from(0);
    dl_cache_status st;
    dl_dataset *back = dl_cache_read_new(ctx, q, "fp-1", &st);  /* the old cache, still valid */
    DL_CHECK(back && st == DL_CACHE_OK);
    dl_dataset_release(back);
    DL_CHECK(!has_temp());
  }
  dl_dataset_release(ds);
  dl_tensor_release(a);
  dl_tensor_release(b);
  unlink(p);
  unlink(q);
  dl_ctx_free(ctx);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/dl_fileio_XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_crc();
  test_replace();
  test_append();
  test_writers();
  rmdir(dir);
  DL_TEST_END();
}
