/* imagefiles.c -- the image-file source of datasets: the rows are files under
 * a root directory, each read and decoded (io/images.c) by whoever reads the
 * row, which in a pipeline is a worker thread.
 *
 * The list of files is fixed when the source is made (the Lua side lists an
 * ImageFolder tree or reads a list file); the files themselves are opened
 * only when read, so a dataset of 70,000 images costs its path list in
 * memory. Paths are checked once, here, to stay inside the root: relative,
 * no '..' component. It does not follow the listing's changes, cache decoded
 * images, or resize.
 */
/* See LICENSE */
#include "data/imagefiles.h"
#include "io/fileio.h"   /* dl_crc32 */
#include "io/images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PATHMAX 4096

typedef struct {
  dl_image_opts o;
  char *root;
  char *blob;                        /* the paths, each 0-terminated */
  size_t *at;                        /* row i's path is blob + at[i] */
} files;

static void destroy(void *state) {
  files *f = state;
  if (!f) return;
  free(f->root);
  free(f->blob);
  free(f->at);
  free(f);
}

/* root/rel into buf; 0, or -1 when it does not fit */
static int join(char *buf, const files *f, int64_t row) {
  int k = snprintf(buf, PATHMAX, "%s/%s", f->root, f->blob + f->at[row]);
  return k < 0 || k >= PATHMAX ? -1 : 0;
}

static int read_row(const dl_source *src, int64_t row, dl_example *ex, const int *slot, char *err, size_t errlen) {
  const files *f = src->state;
  char path[PATHMAX], msg[512];
  void *buf = NULL;
  size_t n = 0;
  dl_example_slot t = {ex, slot[0]};
  if (join(path, f, row) < 0) {
    snprintf(err, errlen, "images: the path of row %lld is longer than %d bytes", (long long)row + 1, PATHMAX - 1);
    return f->o.skip ? 1 : -1;
  }
  int rc = dl_image_read_file(path, 0, &buf, &n, msg, sizeof msg);
  if (rc == 0) rc = dl_image_decode(buf, n, path, f->o.channels, f->o.max_pixels, dl_example_begin_image, &t, msg, sizeof msg);
  free(buf);
  if (rc < 0) {
    snprintf(err, errlen, "images: %s", msg);
    return f->o.skip ? 1 : -1;
  }
  dl_example_commit(ex, slot[0]);
  return 0;
}

static uint32_t checksum(const dl_source *src, int64_t row, uint32_t crc) {
  const files *f = src->state;
  const char *rel = f->blob + f->at[row];
  crc = dl_crc32(crc, rel, strlen(rel) + 1);
  char path[PATHMAX];
  struct stat st;
  int64_t id[3] = {-1, -1, -1};                 /* size, modification time (s, ns); -1 when unreadable */
  if (join(path, f, row) == 0 && stat(path, &st) == 0) {
    id[0] = (int64_t)st.st_size;
    id[1] = (int64_t)st.st_mtim.tv_sec;
    id[2] = (int64_t)st.st_mtim.tv_nsec;
  }
  return dl_crc32(crc, id, sizeof id);
}

/* why rel may not be used (NULL: it may) */
static const char *bad_path(const char *rel) {
  if (!rel[0]) return "is empty";
  if (rel[0] == '/') return "is absolute";
  for (const char *p = rel; *p;) {
    size_t l = strcspn(p, "/");
    if (l == 2 && p[0] == '.' && p[1] == '.') return "has a '..' component";
    p += l;
    while (*p == '/') p++;
  }
  return NULL;
}

dl_source *dl_imagefiles_new(dl_ctx *ctx, const char *root, int64_t n, const char *const *paths,
                             const dl_image_opts *o) {
  if (o->channels != 1 && o->channels != 3) return dl_fail(ctx, "images: channels must be 1 or 3, got %d", o->channels);
  if (n < 0) return dl_fail(ctx, "images: %lld files", (long long)n);
  size_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *why = bad_path(paths[i]);
    if (why)
      return dl_fail(ctx, "images: file %lld, '%s', %s (paths must stay inside '%s')", (long long)i + 1, paths[i], why,
                     root);
    total += strlen(paths[i]) + 1;
  }
  files *f = calloc(1, sizeof *f);
  if (!f) goto oom;
  f->o = *o;
  if (!root[0]) root = ".";                      /* "" + "/" + path would be absolute */
  f->root = malloc(strlen(root) + 1);
  f->blob = malloc(total ? total : 1);
  f->at = malloc((size_t)(n ? n : 1) * sizeof *f->at);
  if (!f->root || !f->blob || !f->at) goto oom;
  strcpy(f->root, root);
  size_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    size_t l = strlen(paths[i]) + 1;
    memcpy(f->blob + at, paths[i], l);
    f->at[i] = at;
    at += l;
  }
  dl_source *src = dl_source_new(ctx, 1, n, f, read_row, checksum, destroy);
  if (!src) return NULL;                         /* f destroyed */
  snprintf(src->names[0], DL_NAMELEN, "image");
  src->dtype[0] = DL_U8;
  src->ndim[0] = 3;
  src->shape[0][0] = o->channels;
  src->shape[0][1] = src->shape[0][2] = -1;
  return src;
oom:
  destroy(f);
  ctx->oom = 1;
  return dl_fail(ctx, "images: out of memory for the paths of %lld files", (long long)n);
}
