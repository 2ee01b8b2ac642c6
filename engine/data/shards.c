/* shards.c -- the record-shard source of datasets (shards.h has the
 * convention): a scan of the tar headers builds one offset per example, and
 * reading a row reads that example's members from its shard.
 *
 * The key of a member is its path up to the first '.' of its last component
 * ("a/000123.seg.png": key "a/000123", extension "seg.png"), as
 * WebDataset splits them; an example is a run of consecutive members with one
 * key. Members whose extension no field asks for are passed over.
 */
/* See LICENSE */
#include "data/shards.h"
#include "io/fileio.h"   /* dl_crc32 */
#include "io/images.h"
#include "io/tar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_CLASS_BYTES 32
#define MAX_MEMBER ((int64_t)256 << 20)   /* one member's bytes, read whole */

typedef struct {
  int nshards;
  char **paths;
  int64_t *start;                    /* [nshards + 1]: shard s holds rows start[s] .. start[s+1]-1 */
  int64_t *header;                   /* [rows]: offset of the example's first member header */
  int nfields;
  dl_shard_field f[DL_MAXFIELDS];
  dl_image_opts o;
} shards;

static void destroy(void *state) {
  shards *s = state;
  if (!s) return;
  for (int i = 0; i < s->nshards; i++) free(s->paths[i]);
  free(s->paths);
  free(s->start);
  free(s->header);
  free(s);
}

/* key length of a member name (up to the first '.' of its last component) and its extension */
static size_t split_name(const char *name, const char **ext) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *dot = strchr(base, '.');
  if (!dot) {
    *ext = name + strlen(name);
    return strlen(name);
  }
  *ext = dot + 1;
  return (size_t)(dot - name);
}

/* the field an extension belongs to, or -1 */
static int field_of(const shards *s, const char *ext) {
  for (int f = 0; f < s->nfields; f++)
    for (int k = 0; k < s->f[f].next; k++)
      if (strcmp(ext, s->f[f].ext[k]) == 0) return f;
  return -1;
}

static void want_list(const dl_shard_field *f, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int k = 0; k < f->next && at < n; k++)
    at += (size_t)snprintf(buf + at, n - at, "%s.%s", k ? " or " : "", f->ext[k]);
}

/* ------------------------------------------------------------ reading a row */

/* a class member's text as an int32 (plus offset); 0, or -1 with why */
static int parse_class(const char *p, int64_t n, int32_t offset, int32_t *out, const char **why) {
  char buf[MAX_CLASS_BYTES + 1];
  if (n <= 0 || n > MAX_CLASS_BYTES) {
    *why = n <= 0 ? "is empty" : "is longer than 32 bytes";
    return -1;
  }
  memcpy(buf, p, (size_t)n);
  buf[n] = 0;
  char *end;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t') end++;
  if (end == buf || *end || errno || v < -2147483647 || v > 2147483647 - (long long)offset) {
    *why = "is not a decimal integer in the int32 range";
    return -1;
  }
  *out = (int32_t)v + offset;
  return 0;
}

static int shard_of(const shards *s, int64_t row) {
  int lo = 0, hi = s->nshards - 1;             /* the last s with start[s] <= row */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (s->start[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

static int read_row(const dl_source *src, int64_t row, dl_example *ex, const int *slot, char *err, size_t errlen) {
  const shards *s = src->state;
  int sh = shard_of(s, row);
  char msg[3072];
  dl_tar *t = dl_tar_open(s->paths[sh], msg, sizeof msg);
  if (!t) {
    snprintf(err, errlen, "shards: %s", msg);
    return s->o.skip ? 1 : -1;
  }
  int rc = 0, done[DL_MAXFIELDS] = {0}, got = 0;
  char key[DL_TAR_NAMELEN];
  key[0] = 0;
  void *buf = NULL;
  dl_tar_member m;
  if (dl_tar_seek(t, s->header[row], msg, sizeof msg) < 0) rc = -1;
  while (rc == 0 && got < s->nfields) {
    int r = dl_tar_next(t, &m, msg, sizeof msg);
    if (r <= 0) {
      if (r == 0) snprintf(msg, sizeof msg, "%s: example '%s' ends early (the shard changed since it was scanned?)",
                           s->paths[sh], key);
      rc = -1;
      break;
    }
    const char *ext;
    size_t kl = split_name(m.name, &ext);
    if (!key[0]) {
      memcpy(key, m.name, kl);
      key[kl] = 0;
    } else if (kl != strlen(key) || memcmp(m.name, key, kl) != 0) {
      snprintf(msg, sizeof msg, "%s: example '%s' lacks a field (the shard changed since it was scanned?)", s->paths[sh],
               key);
      rc = -1;
      break;
    }
    int f = field_of(s, ext);
    if (f < 0 || done[f]) continue;
    if (m.size > MAX_MEMBER) {
      snprintf(msg, sizeof msg, "%s: member '%s' at offset %lld: %lld bytes, more than the 256 MiB a member may have",
               s->paths[sh], m.name, (long long)m.header, (long long)m.size);
      rc = -1;
      break;
    }
    free(buf);
    buf = malloc(m.size ? (size_t)m.size : 1);
    if (!buf) {
      snprintf(msg, sizeof msg, "%s: member '%s': out of memory for %lld bytes", s->paths[sh], m.name, (long long)m.size);
      rc = -1;
      break;
    }
    if (dl_tar_read(t, &m, buf, msg, sizeof msg) < 0) {
      rc = -1;
      break;
    }
    char where[DL_TAR_NAMELEN + 640];
    snprintf(where, sizeof where, "%s: member '%s' at offset %lld", s->paths[sh], m.name, (long long)m.header);
    if (s->f[f].kind == DL_SHARD_IMAGE) {
      dl_example_slot tg = {ex, slot[f]};
      if (dl_image_decode(buf, (size_t)m.size, where, s->o.channels, s->o.max_pixels, dl_example_begin_image, &tg, msg,
                          sizeof msg) < 0) {
        rc = -1;
        break;
      }
    } else {
      int32_t v;
      const char *why;
      if (parse_class(buf, m.size, s->f[f].offset, &v, &why) < 0) {
        snprintf(msg, sizeof msg, "%s: the class %s", where, why);
        rc = -1;
        break;
      }
      int32_t *out = dl_example_begin(ex, slot[f], DL_I32, 0, NULL);
      if (!out) {
        snprintf(msg, sizeof msg, "%s: out of memory", where);
        rc = -1;
        break;
      }
      *out = v;
    }
    dl_example_commit(ex, slot[f]);
    done[f] = 1;
    got++;
  }
  free(buf);
  dl_tar_close(t);
  if (rc < 0) {
    snprintf(err, errlen, "shards: %s", msg);
    return s->o.skip ? 1 : -1;
  }
  return 0;
}

/* the shard's path, size and modification time, and the row's offset */
static uint32_t checksum(const dl_source *src, int64_t row, uint32_t crc) {
  const shards *s = src->state;
  int sh = shard_of(s, row);
  crc = dl_crc32(crc, s->paths[sh], strlen(s->paths[sh]) + 1);
  struct stat st;
  int64_t id[4] = {-1, -1, -1, s->header[row]};
  if (stat(s->paths[sh], &st) == 0) {
    id[0] = (int64_t)st.st_size;
    id[1] = (int64_t)st.st_mtim.tv_sec;
    id[2] = (int64_t)st.st_mtim.tv_nsec;
  }
  return dl_crc32(crc, id, sizeof id);
}

/* ------------------------------------------------------------ the scan */

/* appends the examples of shard sh to s->header (growing it); -1 with ctx->err */
static int scan_shard(dl_ctx *ctx, shards *s, int sh, int64_t *rows, int64_t *cap, int64_t *incomplete) {
  char msg[3072];
  dl_tar *t = dl_tar_open(s->paths[sh], msg, sizeof msg);
  if (!t) return dl_fail(ctx, "shards: %s", msg), -1;
  dl_tar_member m;
  int r, have[DL_MAXFIELDS];
  char key[DL_TAR_NAMELEN];
  int64_t first = -1;
  key[0] = 0;
  memset(have, 0, sizeof have);
  for (;;) {
    r = dl_tar_next(t, &m, msg, sizeof msg);
    const char *ext = "";
    size_t kl = 0;
    int same = 0;
    if (r == 1) {
      kl = split_name(m.name, &ext);
      same = key[0] && kl == strlen(key) && memcmp(m.name, key, kl) == 0;
    }
    if (key[0] && !same) {                         /* the example in key is complete or not */
      int missing = -1;
      for (int f = 0; f < s->nfields && missing < 0; f++)
        if (!have[f]) missing = f;
      if (missing >= 0) {
        if (!s->o.skip) {
          char want[256];
          want_list(&s->f[missing], want, sizeof want);
          dl_tar_close(t);
          return dl_fail(ctx, "shards: %s: example '%s' (at offset %lld) has no %s member for field '%s'",
                         s->paths[sh], key, (long long)first, want, s->f[missing].name), -1;
        }
        ++*incomplete;
      } else {
        if (*rows == *cap) {
          int64_t nc = *cap ? *cap * 2 : 1024;
          int64_t *h = realloc(s->header, (size_t)nc * sizeof *h);
          if (!h) {
            dl_tar_close(t);
            ctx->oom = 1;
            return dl_fail(ctx, "shards: out of memory for the index of %lld examples", (long long)nc), -1;
          }
          s->header = h;
          *cap = nc;
        }
        s->header[(*rows)++] = first;
      }
      key[0] = 0;
    }
    if (r <= 0) break;
    if (!key[0]) {
      if (kl == 0) {
        dl_tar_close(t);
        return dl_fail(ctx, "shards: %s: member '%s' at offset %lld has no key before its extension", s->paths[sh],
                       m.name, (long long)m.header), -1;
      }
      memcpy(key, m.name, kl);
      key[kl] = 0;
      first = m.header;
      memset(have, 0, sizeof have);
    }
    int f = field_of(s, ext);
    if (f >= 0) have[f] = 1;
  }
  dl_tar_close(t);
  if (r < 0) return dl_fail(ctx, "shards: %s", msg), -1;
  return 0;
}

dl_source *dl_shards_new(dl_ctx *ctx, int nshards, const char *const *paths, int nfields, const dl_shard_field *fields,
                         const dl_image_opts *o, int64_t *incomplete) {
  *incomplete = 0;
  if (nshards < 1) return dl_fail(ctx, "shards: no shard files");
  if (nfields < 1 || nfields > DL_MAXFIELDS) return dl_fail(ctx, "shards: %d fields (1 to %d)", nfields, DL_MAXFIELDS);
  if (o->channels != 1 && o->channels != 3) return dl_fail(ctx, "shards: channels must be 1 or 3, got %d", o->channels);
  for (int f = 0; f < nfields; f++) {
    if (fields[f].next < 1 || fields[f].next > DL_SHARDS_MAXEXT)
      return dl_fail(ctx, "shards: field '%s' has %d extensions (1 to %d)", fields[f].name, fields[f].next,
                     DL_SHARDS_MAXEXT);
    for (int k = 0; k < fields[f].next; k++)
      for (int g = 0; g <= f; g++)
        for (int j = 0; j < (g == f ? k : fields[g].next); j++)
          if (strcmp(fields[f].ext[k], fields[g].ext[j]) == 0)
            return dl_fail(ctx, "shards: the extension '%s' is named twice (fields '%s' and '%s')", fields[f].ext[k],
                           fields[g].name, fields[f].name);
  }
  shards *s = calloc(1, sizeof *s);
  if (!s) goto oom;
  s->o = *o;
  s->nfields = nfields;
  memcpy(s->f, fields, (size_t)nfields * sizeof *fields);
  s->paths = calloc((size_t)nshards, sizeof *s->paths);
  s->start = malloc((size_t)(nshards + 1) * sizeof *s->start);
  if (!s->paths || !s->start) goto oom;
  s->nshards = nshards;
  for (int i = 0; i < nshards; i++) {
    s->paths[i] = malloc(strlen(paths[i]) + 1);
    if (!s->paths[i]) goto oom;
    strcpy(s->paths[i], paths[i]);
  }
  int64_t rows = 0, cap = 0;
  for (int i = 0; i < nshards; i++) {
    s->start[i] = rows;
    if (scan_shard(ctx, s, i, &rows, &cap, incomplete) < 0) {
      destroy(s);
      return NULL;
    }
  }
  s->start[nshards] = rows;
  dl_source *src = dl_source_new(ctx, nfields, rows, s, read_row, checksum, destroy);
  if (!src) return NULL;                         /* s destroyed */
  src->nblocks = nshards;
  src->block_start = s->start;
  for (int f = 0; f < nfields; f++) {
    snprintf(src->names[f], DL_NAMELEN, "%s", fields[f].name);
    if (fields[f].kind == DL_SHARD_IMAGE) {
      src->dtype[f] = DL_U8;
      src->ndim[f] = 3;
      src->shape[f][0] = o->channels;
      src->shape[f][1] = src->shape[f][2] = -1;
    } else {
      src->dtype[f] = DL_I32;
      src->ndim[f] = 0;
    }
  }
  return src;
oom:
  destroy(s);
  ctx->oom = 1;
  return dl_fail(ctx, "shards: out of memory");
}
