/* fileio.c -- atomic replacement, checked appends, fsync and CRC-32 for every
 * file dlua writes (checkpoints, the pipeline cache, and through the binding
 * dlua.util.fs: ledgers, journals, metrics, tracking CSVs, reports).
 *
 * It deliberately knows nothing about formats: callers hand it bytes. The
 * policies and the message format are in fileio.h; the one process-wide
 * state is the write-failure test hook (an atomic counter).
 */
/* See LICENSE */
#include "io/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_WRITE ((size_t)1 << 30)        /* one write(2) at most; Linux caps at ~2 GiB */

/* ------------------------------------------------------------ the test hook */

static atomic_long writes;                 /* data writes so far */
static atomic_long fail_from;              /* 0: off; else the first failing write */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static const char *trace_path;             /* DLUA_FILEIO_TRACE: "<n>\t<path>" per write */

static void read_env(void) {
  const char *s = getenv("DLUA_FILEIO_FAIL");
  if (s && *s) {
    char *end;
    long n = strtol(s, &end, 10);
    if (*end == 0 && n > 0) atomic_store(&fail_from, n);
  }
  s = getenv("DLUA_FILEIO_TRACE");
  if (s && *s) trace_path = s;
}

/* counts one data write to path; 1 when the hook says it must fail */
static int hook_fails(const char *path) {
  pthread_once(&env_once, read_env);
  long k = atomic_fetch_add(&writes, 1) + 1;
  if (trace_path) {                        /* test aid: which write went to which file */
    FILE *t = fopen(trace_path, "a");
    if (t) {
      fprintf(t, "%ld\t%s\n", k, path);
      fclose(t);
    }
  }
  long f = atomic_load(&fail_from);
  return f > 0 && k >= f;
}

void dl_fileio_fail_from(long n) {
  pthread_once(&env_once, read_env);
  atomic_store(&fail_from, n > 0 ? n : 0);
  atomic_store(&writes, 0);
}

long dl_fileio_write_count(void) { return atomic_load(&writes); }

/* ------------------------------------------------------------ CRC-32 */

uint32_t dl_crc32(uint32_t crc, const void *data, size_t n) {
  const unsigned char *p = data;
  while (n > 0) {
    uInt chunk = n > MAX_WRITE ? (uInt)MAX_WRITE : (uInt)n;
    crc = (uint32_t)crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return crc;
}

/* ------------------------------------------------------------ helpers */

/* writes all n bytes to fd, the temporary file of path (retrying EINTR and
 * short writes); 0 or -1 with errno */
static int write_all(int fd, const char *path, const void *p, size_t n) {
  if (hook_fails(path)) {
    errno = ENOSPC;
    return -1;
  }
  const char *s = p;
  while (n) {
    ssize_t w = write(fd, s, n > MAX_WRITE ? MAX_WRITE : n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (w == 0) {                          /* no progress and no error: treat as full */
      errno = ENOSPC;
      return -1;
    }
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static int sync_fd(int fd) {
  int rc = fsync(fd);
  if (rc < 0 && errno == EINVAL) rc = 0;   /* cannot sync this kind of file: nothing to do */
  return rc;
}

/* the directory holding path into dir (cap bytes) */
static void dir_of(const char *path, char *dir, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, cap, ".");
  else if (slash == path) snprintf(dir, cap, "/");
  else snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

static int stage_fail(dl_fileio_atomic *f, const char *stage, int err) {
  dl_fail(f->ctx, "cannot write '%s': %s (%s)", f->path, strerror(err), stage);
  f->failed = 1;
  return -1;
}

static void free_names(dl_fileio_atomic *f) {
  dl_free(f->ctx, f->path, f->path_cap);
  dl_free(f->ctx, f->tmp, f->tmp_cap);
  f->path = f->tmp = NULL;
  f->path_cap = f->tmp_cap = 0;
}

/* ------------------------------------------------------------ atomic replace */

/* 0 when path names something other than a regular file (a link to one
 * counts as one); 1 otherwise, also when it cannot be looked at (the open that
 * follows reports why) */
static int regular_or_missing(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return 1;
  return S_ISREG(st.st_mode);
}

int dl_fileio_open_atomic(dl_ctx *ctx, dl_fileio_atomic *f, const char *path) {
  memset(f, 0, sizeof *f);
  f->ctx = ctx;
  f->fd = -1;
  size_t n = strlen(path);
  f->path_cap = n + 1;
  f->tmp_cap = n + 64;
  f->path = dl_alloc(ctx, f->path_cap);
  f->tmp = dl_alloc(ctx, f->tmp_cap);
  if (!f->path || !f->tmp) {
    free_names(f);
    f->failed = 1;
    return -1;
  }
  memcpy(f->path, path, n + 1);
  /* only a regular file is replaced: a device node, FIFO or directory at path
   * (`--trace /dev/null` run as root) is left alone and the write refused */
  if (!regular_or_missing(path)) {
    dl_fail(ctx, "cannot write '%s': not a regular file (a device, FIFO, socket or directory is never replaced)", path);
    free_names(f);
    f->failed = 1;
    return -1;
  }
  for (unsigned attempt = 0; attempt < 64; attempt++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long r = (unsigned long)ts.tv_nsec ^ ((unsigned long)attempt * 0x9e3779b9ul);
    snprintf(f->tmp, f->tmp_cap, "%s.tmp-%ld-%lx", path, (long)getpid(), r);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f->fd >= 0 || errno != EEXIST) break;
  }
  if (f->fd < 0) {
    stage_fail(f, "creating a temporary file next to it", errno);
    free_names(f);
    return -1;
  }
  return 0;
}

int dl_fileio_write(dl_fileio_atomic *f, const void *p, size_t n) {
  if (f->failed || f->fd < 0) return -1;
  if (n == 0) return 0;
  if (write_all(f->fd, f->path, p, n) < 0) return stage_fail(f, "writing the temporary file", errno);
  return 0;
}

void dl_fileio_abort(dl_fileio_atomic *f) {
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  if (f->tmp) unlink(f->tmp);
  free_names(f);
}

int dl_fileio_commit(dl_fileio_atomic *f) {
  if (!f->path) return -1;                 /* finished or never opened: ctx->err says why */
  if (f->failed) {
    dl_fileio_abort(f);
    return -1;
  }
  int rc = 0;
  if (sync_fd(f->fd) < 0) rc = stage_fail(f, "syncing the temporary file", errno);
  int fd = f->fd;
  f->fd = -1;
  if (close(fd) < 0 && rc == 0) rc = stage_fail(f, "closing the temporary file", errno);
  if (rc == 0 && rename(f->tmp, f->path) < 0) rc = stage_fail(f, "renaming the temporary file over it", errno);
  if (rc < 0) {
    dl_fileio_abort(f);
    return -1;
  }
  dir_of(f->path, f->tmp, f->tmp_cap);     /* tmp is free now: reuse it for the directory */
  int dfd = open(f->tmp, O_RDONLY | O_CLOEXEC);
  if (dfd < 0 || sync_fd(dfd) < 0) {
    dl_fail(f->ctx, "wrote '%s' but cannot sync its directory: %s", f->path, strerror(errno));
    rc = -1;
  }
  if (dfd >= 0) close(dfd);
  free_names(f);
  return rc;
}

int dl_fileio_replace(dl_ctx *ctx, const char *path, const void *p, size_t n) {
  dl_fileio_atomic f;
  if (dl_fileio_open_atomic(ctx, &f, path) < 0) return -1;
  if (dl_fileio_write(&f, p, n) < 0) {
    dl_fileio_abort(&f);
    return -1;
  }
  return dl_fileio_commit(&f);
}

/* ------------------------------------------------------------ append, fsync */

int dl_fileio_append(dl_ctx *ctx, const char *path, const void *p, size_t n, int sync) {
  if (!regular_or_missing(path)) {
    dl_fail(ctx, "cannot append to '%s': not a regular file (a device, FIFO, socket or directory)", path);
    return -1;
  }
  /* O_NONBLOCK: a FIFO put in its place after the check fails the open (ENXIO)
   * instead of blocking it until a reader comes */
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0666);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    dl_fail(ctx, "cannot append to '%s': not a regular file (a device, FIFO, socket or directory)", path);
    return -1;
  }
  if (fd < 0) {
    dl_fail(ctx, "cannot append to '%s': %s", path, strerror(errno));
    return -1;
  }
  {
    int fl = fcntl(fd, F_GETFL);      /* a regular file: back to blocking writes */
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  int rc = 0;
  if (n > 0) {
    ssize_t w;
    if (hook_fails(path)) {
      w = -1;
      errno = ENOSPC;
    } else {
      do w = write(fd, p, n); while (w < 0 && errno == EINTR);
    }
    if (w < 0) {
      dl_fail(ctx, "cannot append to '%s': %s", path, strerror(errno));
      rc = -1;
    } else if ((size_t)w != n) {
      dl_fail(ctx, "cannot append to '%s': short write: %zd of %zu bytes (disk full?)", path, w, n);
      rc = -1;
    }
  }
  if (rc == 0 && sync && sync_fd(fd) < 0) {
    dl_fail(ctx, "cannot append to '%s': %s (syncing)", path, strerror(errno));
    rc = -1;
  }
  if (close(fd) < 0 && rc == 0) {
    dl_fail(ctx, "cannot append to '%s': %s (closing)", path, strerror(errno));
    rc = -1;
  }
  return rc;
}

int dl_fileio_fsync(dl_ctx *ctx, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || sync_fd(fd) < 0) {
    dl_fail(ctx, "cannot sync '%s': %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}
