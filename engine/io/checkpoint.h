/* checkpoint.h -- safetensors-compatible checkpoint files: atomic write, checked read.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON (tensor
 * name -> {"dtype", "shape", "data_offsets"}, plus a "__metadata__" map of
 * strings), padded with spaces so the data starts at a multiple of 8, then the
 * tensors' raw little-endian bytes, contiguous and in header order. dlua adds
 * to the metadata: format = "dlua-checkpoint", format_version = "1", crc32 (one
 * zlib CRC-32 per tensor, 8 lowercase hex digits, comma-separated, in the
 * bytewise order of the tensor names) and header_crc32 (over the decoded
 * tensor table and the other metadata). docs/formats.md is the full spec.
 *
 * Worked example:
 *   dl_checkpoint_item it[1] = {{"w", 1, w}};
 *   dl_checkpoint_kv kv[1] = {{"step", 4, "100", 3}};
 *   if (dl_checkpoint_save(ctx, "run/ck.safetensors", it, 1, kv, 1) < 0) puts(ctx->err);
 *   dl_checkpoint *ck = dl_checkpoint_read_new(ctx, "run/ck.safetensors", DL_CHECKPOINT_DATA);
 *   if (!ck) puts(ctx->err); else { use ck->tensors[0].t; dl_checkpoint_release(ck); }
 */
/* See LICENSE */
#ifndef DL_CHECKPOINT_H
#define DL_CHECKPOINT_H

#include "core/dl.h"

#define DL_CHECKPOINT_MAX_HEADER 100000000   /* bytes; the safetensors reference limit */

/* Return codes of dl_checkpoint_save */
#define DL_CHECKPOINT_EIO (-1)     /* the file could not be written; path untouched */
#define DL_CHECKPOINT_EARG (-2)    /* invalid input (names, keys, dtypes); nothing written */

/* What dl_checkpoint_read_new reads */
typedef enum {
  DL_CHECKPOINT_HEADER = 0,      /* header only: no data byte is read */
  DL_CHECKPOINT_VERIFY = 1,      /* header, then every data byte streamed and checksummed */
  DL_CHECKPOINT_DATA = 2         /* as VERIFY, into new tensors (entry.t) */
} dl_checkpoint_mode;

/* A tensor to save: name is name_len bytes of UTF-8 (not necessarily NUL-terminated). */
typedef struct {
  const char *name;
  size_t name_len;
  const dl_tensor *t;            /* borrowed; any strides; written contiguously */
} dl_checkpoint_item;

/* A metadata entry: both strings are UTF-8 byte strings with lengths. */
typedef struct {
  const char *key;
  size_t key_len;
  const char *value;
  size_t value_len;
} dl_checkpoint_kv;

/* One tensor of a file, as the header describes it. */
typedef struct {
  const char *name;              /* decoded UTF-8, NUL-terminated (may also contain NUL) */
  size_t name_len;
  dl_dtype dtype;
  int ndim;
  int64_t shape[DL_MAXDIM];
  uint64_t begin, end;           /* data_offsets: bytes, relative to the data section */
  uint32_t crc;                  /* the stored CRC-32 (if the checkpoint is checksummed) */
  dl_tensor *t;                  /* read data (mode DATA), owned by the checkpoint; a caller
                                    may take it and set the field to NULL */
} dl_checkpoint_entry;

typedef struct dl_checkpoint {
  dl_ctx *ctx;
  int ntensors;
  dl_checkpoint_entry *tensors;  /* sorted by name, bytewise */
  int nmeta;
  dl_checkpoint_kv *meta;        /* the whole __metadata__ map, sorted by key */
  int checksummed;               /* 1: a dlua checkpoint, CRCs verified; 0: plain safetensors */
  uint64_t header_len;           /* N */
  uint64_t data_len;             /* bytes after the header */
  /* private */
  char *arena;                   /* decoded strings */
  size_t arena_cap;
  int cap_tensors, cap_meta;
} dl_checkpoint;

/* Writes items (n >= 0 tensors, any order; names unique) and meta (nmeta user
 * entries; keys unique, none of format, format_version, crc32, header_crc32)
 * to path atomically: a temporary file "<path>.tmp-<pid>-<hex>" in the same
 * directory is written, fsync'ed and renamed over path, then the directory
 * is fsync'ed. Returns 0; DL_CHECKPOINT_EIO with ctx->err naming path and the
 * errno text (the temporary file is removed and an existing file at path is
 * left untouched; the one exception is a failing fsync of the directory after
 * the rename, whose message says the file was written); or DL_CHECKPOINT_EARG
 * (invalid UTF-8, a duplicate or
 * reserved name or key, a bad tensor) before anything is written. Fails on
 * memory too (DL_CHECKPOINT_EIO). */
int dl_checkpoint_save(dl_ctx *ctx, const char *path, const dl_checkpoint_item *items, int n,
                       const dl_checkpoint_kv *meta, int nmeta);

/* Reads path (see dl_checkpoint_mode) and returns a new checkpoint, or NULL
 * with ctx->err "checkpoint: '<path>': <reason>" for a file that is missing,
 * truncated, not a safetensors file, hostile (header length past the file or
 * over DL_CHECKPOINT_MAX_HEADER, invalid JSON, unknown or unsupported dtype,
 * shape/offset mismatch, offsets out of range, overlapping or leaving gaps,
 * duplicate names) or corrupt (CRC mismatch of a tensor or of the header).
 * Never allocates more than the file's size in tensor data. A file without
 * dlua's metadata is read unchecked (checksummed = 0). */
dl_checkpoint *dl_checkpoint_read_new(dl_ctx *ctx, const char *path, dl_checkpoint_mode mode);

/* Frees ck and the tensors it still owns; NULL is a no-op. */
void dl_checkpoint_release(dl_checkpoint *ck);

/* Is key (len bytes) one of the metadata keys dlua writes itself? */
int dl_checkpoint_is_reserved_key(const char *key, size_t len);

#endif
