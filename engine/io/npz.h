/* npz.h -- NumPy .npz archives: zip files of .npy members (np.savez, np.savez_compressed).
 *
 * dl_npz_open reads and checks the archive's central directory; dl_npz_read_new reads one
 * member as an array (npy.h), inflating deflated members as it goes and checking the CRC-32
 * of every member read. Members are read into memory, never mapped or extracted to files, and
 * only from inside the archive: member names are looked up, never used as paths.
 *
 * Strict, as the rest of dlua's readers: a single-disk archive whose end-of-central-directory
 * record ends the file (after its comment); ZIP64 records and extra fields (numpy's savez
 * writes them) are read; members are stored (method 0) or deflated (8), unencrypted, with
 * unique names holding no NUL byte, each lying before the central directory without
 * overlapping the next, and claiming no more than deflate can produce from its compressed
 * size (1032:1), so a declared size cannot make the reader allocate more than the archive
 * could hold. A member's local header must agree with the central directory (name, method).
 * Errors start "npz: '<path>'" and name the member and the offset.
 */
/* See LICENSE */
#ifndef DL_NPZ_H
#define DL_NPZ_H

#include "core/dl.h"

typedef struct dl_npz dl_npz;

#define DL_NPZ_MAX_MEMBERS 65536

/* Opens path and reads its central directory. Fails (NULL, ctx->err naming the file and the
 * offset) on open and read errors and on anything the header comment above refuses. Close
 * the archive with dl_npz_close. */
dl_npz *dl_npz_open(dl_ctx *ctx, const char *path);
void dl_npz_close(dl_npz *z);                                 /* NULL is a no-op */

int dl_npz_count(const dl_npz *z);                            /* members, in directory order */
const char *dl_npz_name(const dl_npz *z, int i);              /* borrowed: "x_train.npy" */
/* The member named name, else the one named name with ".npy" added; -1 when there is none. */
int dl_npz_find(const dl_npz *z, const char *name);

/* Member i (0 <= i < count) as a new tensor (dl_npy_read_source_new). Fails (NULL, ctx->err
 * naming the file, the member and the offset) on a bad local header, read or inflate errors,
 * a deflate stream longer or shorter than declared, a CRC-32 mismatch, and every .npy error. */
dl_tensor *dl_npz_read_new(dl_ctx *ctx, dl_npz *z, int i);

#endif
