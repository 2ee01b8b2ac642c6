/* fileio.h -- every durable file write of dlua, and its CRC-32.
 *
 * Three kinds of write, each with one policy:
 *   - atomic replace (dl_fileio_open_atomic / _write / _commit, or
 *     dl_fileio_replace for a buffer): the data goes to an exclusive temporary
 *     file "<path>.tmp-<pid>-<hex>" (O_EXCL) in the target's directory, which
 *     is fsync'ed, renamed over the target, and then the directory is
 *     fsync'ed. A crash or a failure leaves the old file or the new one, never
 *     a mixture, and on failure no temporary file is left behind.
 *   - append (dl_fileio_append): one write(2) of the whole buffer on a file
 *     opened with O_APPEND, so lines from processes appending at once never
 *     interleave. A failed or short write is an error. Appends are not
 *     fsync'ed unless the caller asks (sync = 1): a crashed *process* loses no
 *     appended line, a crashed *machine* may lose the last ones; callers that
 *     promise more (the study journal, the metrics log before a checkpoint's
 *     ledger names it) ask for sync or call dl_fileio_fsync.
 *   - CRC-32 (dl_crc32): zlib's polynomial, any length.
 *
 * Errors name the file and the operation, in one format:
 *   cannot write '<path>': <strerror> (<stage>)
 *   cannot append to '<path>': <strerror>
 * where stage is one of "creating a temporary file next to it", "writing the
 * temporary file", "syncing the temporary file", "closing the temporary
 * file", "renaming the temporary file over it".
 *
 * Test hook: dl_fileio_fail_from(n), or the environment variable
 * DLUA_FILEIO_FAIL=n read at the first write, makes the n-th data write of
 * the process (counting every dl_fileio_write and dl_fileio_append call from
 * 1) and every later one fail with ENOSPC, as a disk that fills up does.
 * This makes disk-full behaviour testable deterministically without root.
 * DLUA_FILEIO_TRACE=<file> appends "<n>\t<path>" to <file> for every data
 * write, so a test can tell which file the n-th write went to.
 */
/* See LICENSE */
#ifndef DL_FILEIO_H
#define DL_FILEIO_H

#include "core/dl.h"

/* An atomic replacement in progress; the fields are private. */
typedef struct {
  dl_ctx *ctx;
  int fd;                   /* the temporary file, -1 once closed */
  char *path;               /* owned copy of the target path */
  char *tmp;                /* owned: the temporary file's path */
  size_t path_cap, tmp_cap; /* bytes allocated for path and tmp */
  int failed;               /* a write failed: commit refuses */
} dl_fileio_atomic;

/* Starts replacing path: creates the temporary file. Returns 0, or -1 with
 * ctx->err ("cannot write '<path>': ... (creating a temporary file next to
 * it)") and nothing created. Fails on memory too (ctx->oom). After 0 the
 * caller must end with dl_fileio_commit or dl_fileio_abort. */
int dl_fileio_open_atomic(dl_ctx *ctx, dl_fileio_atomic *f, const char *path);

/* Appends n bytes to the temporary file (all of them, retrying short writes
 * and EINTR). Returns 0, or -1 with ctx->err naming the target path; after a
 * failure later writes do nothing and return -1, and commit refuses. */
int dl_fileio_write(dl_fileio_atomic *f, const void *p, size_t n);

/* fsyncs and closes the temporary file, renames it over the target and
 * fsyncs the directory. Returns 0, or -1 with ctx->err (after an earlier
 * write failure, that failure's message is kept). On failure before the
 * rename the temporary file is removed and the target is untouched; a failing
 * fsync of the directory after the rename is reported as "wrote '<path>' but
 * cannot sync its directory: ...". The handle is finished either way. */
int dl_fileio_commit(dl_fileio_atomic *f);

/* Abandons the replacement: closes and removes the temporary file. The
 * target is untouched. Safe on a finished handle. */
void dl_fileio_abort(dl_fileio_atomic *f);

/* Replaces path's contents with the n bytes at p (open, write, commit).
 * Returns 0, or -1 with ctx->err as above. */
int dl_fileio_replace(dl_ctx *ctx, const char *path, const void *p, size_t n);

/* Appends the n bytes at p to path (created 0666 & ~umask when missing) with
 * one write(2) on an O_APPEND descriptor; sync = 1 fsyncs the file after.
 * Returns 0, or -1 with ctx->err "cannot append to '<path>': <reason>": the
 * open, the write (ENOSPC, EIO, ...), a short write ("short write: k of n
 * bytes") or the fsync failed. A short write may leave a torn last line;
 * dlua's readers of appended files skip lines that do not parse. */
int dl_fileio_append(dl_ctx *ctx, const char *path, const void *p, size_t n, int sync);

/* fsyncs a file or directory. Returns 0, or -1 with ctx->err "cannot sync
 * '<path>': <strerror>". EINVAL (a file system that cannot sync, e.g. a
 * directory on some) is not an error. */
int dl_fileio_fsync(dl_ctx *ctx, const char *path);

/* CRC-32 (zlib's) of n bytes continuing crc (start with 0); any n. */
uint32_t dl_crc32(uint32_t crc, const void *data, size_t n);

/* Test hook: the n-th data write from now (1-based) and every later one fail
 * with ENOSPC; n = 0 turns the hook off. Resets the write count. */
void dl_fileio_fail_from(long n);

/* Data writes since the start (or the last dl_fileio_fail_from), failed
 * ones included. */
long dl_fileio_write_count(void);

#endif
