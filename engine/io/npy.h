/* npy.h -- NumPy .npy arrays: a strict reader of the format (versions 1.0, 2.0 and 3.0).
 *
 * A .npy file is the magic "\x93NUMPY", a version (major, minor), the length of a header
 * (2 bytes little-endian in version 1, 4 in 2 and 3), the header -- a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), } padded with spaces
 * and ended by a newline -- and then the data. Three ways in: a file by path (memory-mapped
 * when asked and the layout allows, else read), a buffer in memory, or any byte stream
 * (dl_npy_source: the .npz reader hands out its members this way).
 *
 * dtypes, as dlua holds them (the file's bytes are kept as they are when marked "as is"):
 *   <f4 float32 (as is)   <f8 float64 (as is)   <f2 float32 (exact)
 *   <i4 int32 (as is)     <i8 int64 (as is)     |i1 <i2 <u2 int32 (widened)
 *   |u1 uint8 (as is)     <u4 int64 (widened)   <u8 int64 (refused past 2^63 - 1)
 *   |b1 uint8 (0 or 1; any non-zero byte is 1, as numpy reads it: True)
 * Big-endian ('>') forms of each are byte-swapped on reading (never mapped). Others (complex,
 * strings, objects, datetimes, structured records) are refused, naming the descr.
 * fortran_order True is read and transposed into C order (never mapped).
 *
 * Every size is checked before anything is allocated: the header length (at most
 * DL_NPY_MAX_HEADER bytes), the shape (dl_shape_check: at most 2^48 elements), and the
 * declared data against the bytes the stream holds. A stream must hold exactly the header
 * and the data: a short one and trailing bytes are both refused. Errors start with the
 * caller's `where` ("npy: 'x.npy'" or "npz: 'd.npz' member 'x.npy'") and give the offset.
 */
/* See LICENSE */
#ifndef DL_NPY_H
#define DL_NPY_H

#include "core/dl.h"

#define DL_NPY_MAX_HEADER 65536   /* bytes of header dict accepted (numpy writes ~128) */

typedef struct {
  int major, minor;          /* format version */
  char order;                /* '<' little-endian, '>' big-endian, '|' not applicable */
  char kind;                 /* 'f', 'i', 'u' or 'b' */
  int elsize;                /* bytes per element in the file */
  int fortran;               /* fortran_order */
  int ndim;
  int64_t shape[DL_MAXDIM];
  int64_t numel;
  uint64_t data_offset;      /* bytes before the data: magic, version, length and dict */
  uint64_t data_bytes;       /* numel * elsize */
  dl_dtype dtype;            /* the dtype dlua holds the array as */
  int direct;                /* 1: the file's bytes are that dtype's (no conversion) */
} dl_npy_header;

/* A byte stream holding one .npy array. read fills buf with exactly n bytes from the current
 * position, or returns -1 with ctx->err set (naming the stream). size is the stream's length. */
typedef struct dl_npy_source {
  const char *where;         /* message prefix: "npy: 'x.npy'" */
  uint64_t size;             /* bytes in the stream */
  int (*read)(struct dl_npy_source *s, dl_ctx *ctx, void *buf, size_t n);
} dl_npy_source;

/* The header's total length (the data offset) from the first n bytes of a stream of size
 * bytes: needs 12 (10 for version 1). Fails (-1, ctx->err) on a short stream, a bad magic,
 * an unknown version, or a length past DL_NPY_MAX_HEADER or the stream. */
int dl_npy_header_len(dl_ctx *ctx, const char *where, const uint8_t *p, size_t n, uint64_t size,
                      uint64_t *len);

/* Parses the whole header p[0..n) (n = the length above) of a stream of size bytes into h.
 * Fails (-1, ctx->err with the offset of the problem) on a dict that is not exactly the three
 * keys with values of their types, an unsupported descr, a bad shape, or a stream whose size
 * is not the header plus the declared data. */
int dl_npy_parse(dl_ctx *ctx, const char *where, const uint8_t *p, size_t n, uint64_t size, dl_npy_header *h);

/* Reads one array from src into a new tensor of the header's shape (0-d included) and dlua's
 * dtype above. Fails (NULL, ctx->err) as the two above, on a read error, on a <u8 value past
 * int64, and on memory (the limit included). Nothing is allocated for the data before the
 * header has been checked against src->size. */
dl_tensor *dl_npy_read_source_new(dl_ctx *ctx, dl_npy_source *src);

/* The array in the file at path. With map = 1 the file is memory-mapped, and when the data
 * needs no conversion (an "as is" dtype, C order, aligned, not empty) the tensor views the
 * mapping (copy-on-write: writes never reach the file; counted in ctx->mem.external, not
 * in_use); otherwise it is converted from the mapping, which is then dropped. map = 0, or a
 * file that cannot be mapped, reads. Fails as dl_npy_read_source_new, and on open or stat
 * errors and files that are not regular files (a FIFO is refused without blocking). */
dl_tensor *dl_npy_read_new(dl_ctx *ctx, const char *path, int map);

/* The array in buf[0..n), named name in messages ("npy: '<name>'"). */
dl_tensor *dl_npy_read_mem_new(dl_ctx *ctx, const char *name, const void *buf, size_t n);

/* 1 if t views a memory-mapped file (dl_npy_read_new with map = 1), else 0. */
int dl_npy_is_mapped(const dl_tensor *t);

#endif
