/* tar.h -- POSIX tar files, the container of record shards (the WebDataset
 * convention: members grouped by key, "000123.png" and "000123.cls" are one
 * example). A strict reader of our own and a writer, both small enough to read
 * and to fuzz (tests/fuzz/fuzz_tar.c).
 *
 * Worked example:
 *
 *   char err[512];
 *   dl_tar *t = dl_tar_open("shard-000000.tar", err, sizeof err);
 *   dl_tar_member m;
 *   int r;
 *   while ((r = dl_tar_next(t, &m, err, sizeof err)) == 1) {
 *     void *buf = malloc(m.size ? m.size : 1);
 *     if (dl_tar_read(t, &m, buf, err, sizeof err)) ...;   // m.name, m.size bytes
 *   }
 *   if (r < 0) ...;                                       // err names file, member, offset
 *   dl_tar_close(t);
 *
 * What the reader accepts: ustar and GNU headers (checksum checked, octal
 * fields strict, GNU base-256 sizes), pax extended headers ('x': path and size
 * records; 'g' global headers skipped), GNU long names ('L'). Regular files
 * ('0' and the old '\0') are members; directories are skipped; any other type
 * (links, devices, FIFOs, sparse files) is an error naming the member, as are a
 * member that runs past the end of the file, a name with a NUL byte or
 * over DL_TAR_NAMELEN bytes, and a header that is neither a member nor the end
 * (two zero blocks, or one zero block then the end of the file). Names are
 * data, never paths this reader opens.
 *
 * The writer emits ustar (names up to 100 bytes, or 255 split at a '/' into
 * prefix and name, as POSIX allows; longer is an error), mode 0644, uid/gid 0,
 * mtime 0 so the same members give the same bytes, and two zero blocks at the
 * end. The file is written through fileio's atomic replace: a failed write
 * leaves no shard behind, or the previous one.
 */
/* See LICENSE */
#ifndef DL_TAR_H
#define DL_TAR_H

#include "core/dl.h"
#include "io/fileio.h"

#define DL_TAR_NAMELEN 1024          /* longest member name read, with the terminating 0 */
#define DL_TAR_MAXSIZE ((int64_t)1 << 40)   /* larger members are refused */

typedef struct dl_tar dl_tar;

typedef struct {
  char name[DL_TAR_NAMELEN];
  int64_t size;                      /* bytes of data */
  int64_t offset;                    /* of the data in the file */
  int64_t header;                    /* of its (first) header in the file, for messages */
} dl_tar_member;

/* Opens a tar file for reading: only a regular file (checked before the open
 * can block, and again on the descriptor). NULL with err on failure. */
dl_tar *dl_tar_open(const char *path, char *err, size_t errlen);
/* The next member: 1 with *m filled, 0 at the end, -1 with err ("<path>:
 * member '<name>' at offset <n>: ..."). After -1 every call returns -1. */
int dl_tar_next(dl_tar *t, dl_tar_member *m, char *err, size_t errlen);
/* Reads m's data (m.size bytes) into buf. 0, or -1 with err. */
int dl_tar_read(dl_tar *t, const dl_tar_member *m, void *buf, char *err, size_t errlen);
/* Moves to the member whose header is at offset `header` (a position saved
 * from dl_tar_member.header), so the next dl_tar_next returns it. */
int dl_tar_seek(dl_tar *t, int64_t header, char *err, size_t errlen);
void dl_tar_close(dl_tar *t);                 /* NULL is a no-op */

/* Reads a tar already in memory (the fuzzer's entry, and small shards):
 * calls fn for every member with its data; stops at fn's nonzero return.
 * 0, or -1 with err (the same checks as the file reader). */
int dl_tar_scan_buffer(const void *buf, size_t n, const char *label,
                       int (*fn)(void *arg, const dl_tar_member *m, const void *data), void *arg,
                       char *err, size_t errlen);

/* A shard being written. */
typedef struct {
  dl_fileio_atomic f;
  int64_t bytes;                     /* written so far, headers and padding included */
  int open;
} dl_tar_writer;

int dl_tar_writer_open(dl_ctx *ctx, dl_tar_writer *w, const char *path);
/* Appends one member. -1 with ctx->err on a bad name or a failed write (the
 * writer is then aborted: no file is left). */
int dl_tar_writer_add(dl_ctx *ctx, dl_tar_writer *w, const char *name, const void *data, int64_t size);
/* Writes the end blocks and replaces the target atomically. */
int dl_tar_writer_close(dl_ctx *ctx, dl_tar_writer *w);
void dl_tar_writer_abort(dl_tar_writer *w);

#endif
