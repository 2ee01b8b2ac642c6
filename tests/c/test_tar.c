/* test_tar.c -- the tar reader and writer of record shards (engine/io/tar.h):
 * a written shard reads back member by member (names split into the ustar
 * prefix too), seeks return to a saved member, and broken files give errors
 * naming the file, the member and the offset. Python's tarfile re-reads the
 * writer's output in tests/lua/shards_spec.lua (an independent reader). */
/* See LICENSE */
#include "dl_test.h"
#include "io/tar.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/dlua-test-tar-XXXXXX";

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) { *n = 0; return NULL; }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len + 1);
  *n = fread(b, 1, (size_t)len, f);
  fclose(f);
  return b;
}

static void spit(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(p, 1, n, f);
  fclose(f);
}

static int count_cb(void *arg, const dl_tar_member *m, const void *data) {
  (void)m;
  (void)data;
  ++*(int *)arg;
  return 0;
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  char path[256], bad[256], err[512];
  snprintf(path, sizeof path, "%s/shard.tar", dir);
  snprintf(bad, sizeof bad, "%s/bad.tar", dir);
  dl_ctx *ctx = dl_ctx_new();

  /* write: three members, one of 600 bytes (padding), one name over 100 bytes */
  char big[600];
  for (int i = 0; i < 600; i++) big[i] = (char)(i * 7);
  char longname[200];
  snprintf(longname, sizeof longname, "%s/%s", "d123456789d123456789d123456789d123456789d123456789d123456789",
           "n123456789n123456789n123456789n123456789n123456789n123456789.png");
  dl_tar_writer w;
  DL_CHECK(dl_tar_writer_open(ctx, &w, path) == 0);
  DL_CHECK(dl_tar_writer_add(ctx, &w, "000001.cls", "7", 1) == 0);
  DL_CHECK(dl_tar_writer_add(ctx, &w, "000001.bin", big, 600) == 0);
  DL_CHECK(dl_tar_writer_add(ctx, &w, longname, "", 0) == 0);
  DL_CHECK(dl_tar_writer_close(ctx, &w) == 0);
  DL_CHECK(w.bytes == 512 * 2 + 512 + 1024 + 512 + 1024);

  /* a name no ustar header can hold is refused, naming it, and leaves no file */
  char toolong[300];
  memset(toolong, 'x', 299);
  toolong[299] = 0;
  DL_CHECK(dl_tar_writer_open(ctx, &w, bad) == 0);
  DL_CHECK(dl_tar_writer_add(ctx, &w, toolong, "", 0) == -1);
  DL_CHECK(strstr(ctx->err, "too long for ustar") != NULL);
  struct stat st;
  DL_CHECK(stat(bad, &st) != 0);

  /* read back */
  dl_tar *t = dl_tar_open(path, err, sizeof err);
  DL_CHECK(t != NULL);
  dl_tar_member m, second;
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == 1);
  DL_CHECK(strcmp(m.name, "000001.cls") == 0 && m.size == 1 && m.header == 0);
  char c;
  DL_CHECK(dl_tar_read(t, &m, &c, err, sizeof err) == 0 && c == '7');
  DL_CHECK(dl_tar_next(t, &second, err, sizeof err) == 1);
  DL_CHECK(strcmp(second.name, "000001.bin") == 0 && second.size == 600 && second.header == 1024);
  char back[600];
  DL_CHECK(dl_tar_read(t, &second, back, err, sizeof err) == 0 && memcmp(back, big, 600) == 0);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == 1);
  DL_CHECK(strcmp(m.name, longname) == 0 && m.size == 0);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == 0);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == 0);       /* stays at the end */
  DL_CHECK(dl_tar_seek(t, second.header, err, sizeof err) == 0);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == 1 && strcmp(m.name, "000001.bin") == 0);
  DL_CHECK(dl_tar_seek(t, 100, err, sizeof err) == -1 && strstr(err, "no member header at offset 100"));
  dl_tar_close(t);

  /* broken files: each message names the file, and where */
  size_t n = 0;
  unsigned char *b = slurp(path, &n);
  spit(bad, b, 1024 + 512 + 100);               /* cut inside the 600-byte member */
  t = dl_tar_open(bad, err, sizeof err);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == 1);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == -1);
  DL_CHECK(strstr(err, bad) == err && strstr(err, "member '000001.bin' at offset 1024") && strstr(err, "truncated"));
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == -1);      /* and stays failed */
  dl_tar_close(t);
  b[1024 + 148] ^= 2;                              /* the second header's checksum */
  spit(bad, b, n);
  t = dl_tar_open(bad, err, sizeof err);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == 1);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == -1 && strstr(err, "header at offset 1024: bad checksum"));
  dl_tar_close(t);
  b[1024 + 148] ^= 2;
  spit(bad, b, n - 1024);                          /* no end blocks */
  t = dl_tar_open(bad, err, sizeof err);
  int r, k = 0;
  while ((r = dl_tar_next(t, &m, err, sizeof err)) == 1) k++;
  DL_CHECK(k == 3 && r == -1 && strstr(err, "without its end-of-archive blocks"));
  dl_tar_close(t);
  b[156] = '2';                                    /* a symlink where a member was */
  unsigned sum = 0;
  memset(b + 148, ' ', 8);
  for (int i = 0; i < 512; i++) sum += b[i];
  snprintf((char *)b + 148, 8, "%06o", sum);
  spit(bad, b, n);
  t = dl_tar_open(bad, err, sizeof err);
  DL_CHECK(dl_tar_next(t, &m, err, sizeof err) == -1 && strstr(err, "member '000001.cls' at offset 0: type '2' is not a regular file"));
  dl_tar_close(t);
  int count = 0;
  DL_CHECK(dl_tar_scan_buffer(b, n, "mem", count_cb, &count, err, sizeof err) == -1 && strncmp(err, "mem: ", 5) == 0);
  free(b);

  /* only regular files: a directory and a FIFO are refused before any blocking open */
  DL_CHECK(dl_tar_open(dir, err, sizeof err) == NULL && strstr(err, "not a regular file"));
  char fifo[256];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  DL_CHECK(mkfifo(fifo, 0600) == 0);
  DL_CHECK(dl_tar_open(fifo, err, sizeof err) == NULL && strstr(err, "not a regular file"));
  DL_CHECK(dl_tar_open("/nonexistent/x.tar", err, sizeof err) == NULL && strstr(err, "cannot open"));

  unlink(fifo);
  unlink(bad);
  unlink(path);
  rmdir(dir);
  dl_ctx_free(ctx);
  DL_TEST_END();
}
