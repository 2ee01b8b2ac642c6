/* dist.h -- the multi-process layer: thin MPI wrappers (rank, world, allreduce,
 * broadcast, barrier, byte messages) that report errors through dl_ctx, and a
 * fused allreduce that packs many tensors into a few large buffers.
 *
 * A worked example: average the gradients of every parameter in one call.
 *
 *   if (dl_dist_init(ctx) < 0) return -1;         // MPI_Init when started by mpirun
 *   dl_tensor *avg[n];
 *   if (dl_dist_allreduce_new(ctx, avg, grads, n, DL_DIST_MEAN) < 0) return -1;
 *   // avg[i] has grads[i]'s shape; all of them are views of one buffer per
 *   // dtype and bucket, reduced with one MPI_Allreduce each
 *
 * MPI is used only when the process was started by a launcher (mpirun sets
 * OMPI_COMM_WORLD_SIZE, Hydra/Slurm PMI_SIZE); a plain `dlua` never calls MPI,
 * and without DLUA_WITH_MPI every function behaves as a world of one rank.
 * DLUA_DIST=0 in the environment forces a world of one (dl_dist_init sets it
 * after MPI_Init, so processes a rank starts -- study trials -- run alone).
 *
 * MPI is process-wide state (one MPI_Init per process), so this file keeps a
 * few process-wide variables: whether MPI was initialised, the "solo" depth
 * (a study trial running inside a rank sees a world of one) and the time spent
 * in collectives. Only the main thread may call these functions
 * (MPI_THREAD_FUNNELED). MPI_Finalize runs at exit when the exit status is 0;
 * a non-zero exit skips it, so mpirun ends the other ranks instead of leaving
 * them waiting in a collective.
 */
/* See LICENSE */
#ifndef DL_DIST_H
#define DL_DIST_H

#include "core/dl.h"

typedef enum { DL_DIST_SUM = 0, DL_DIST_MEAN, DL_DIST_MAX, DL_DIST_MIN } dl_dist_op;

/* Seconds and calls of the collectives since start, and bytes they reduced. */
typedef struct {
  double allreduce_seconds;   /* wall time inside MPI_Allreduce */
  uint64_t allreduce_calls;
  uint64_t allreduce_bytes;
  double broadcast_seconds;
  uint64_t broadcast_calls;
} dl_dist_stats;

/* Initialises MPI if the process was started by an MPI launcher and it has not
 * been done yet; otherwise does nothing. Returns 0, or -1 with ctx->err set
 * (MPI_Init failed, or the build has no MPI while a launcher started it with
 * more than one rank). Idempotent. */
int dl_dist_init(dl_ctx *ctx);
/* 1 when built with MPI (DLUA_WITH_MPI). */
int dl_dist_available(void);
/* DLUA_DIST malformed? (core/env.h: 1 and the message, else 0) */
int dl_dist_env_error(char *msg, size_t cap);
/* 0-based rank and number of ranks (0 and 1 before init, without MPI, or solo). */
int dl_dist_rank(void);
int dl_dist_world(void);
/* Enters (+1) or leaves (-1) a solo section: rank 0 of a world of one, every
 * collective a local no-op. Returns the new depth. */
int dl_dist_solo(int delta);

/* Replaces buf[0..n) of dtype d (float32, float64, int32 or int64) by its
 * elementwise reduction over all ranks; MEAN divides the sum by the world
 * size (float dtypes only). Every rank calls it with the same n, d and op.
 * Fails on: dtype, MEAN of integers, MPI errors (message names the call). */
int dl_dist_allreduce(dl_ctx *ctx, void *buf, int64_t n, dl_dtype d, dl_dist_op op);

/* Fused allreduce of n tensors: out[i] receives a new reference to a
 * contiguous tensor shaped like in[i], holding the reduction of in[i] over all
 * ranks. Tensors are grouped by dtype and packed, in order, into buckets of at
 * most DL_DIST_BUCKET_BYTES (one larger tensor gets a bucket of its own); each
 * bucket is one MPI_Allreduce and the outputs are views of it. Inputs are not
 * modified and may be strided. On failure out[] holds no references. */
#define DL_DIST_BUCKET_BYTES ((size_t)32 << 20)
int dl_dist_allreduce_new(dl_ctx *ctx, dl_tensor **out, dl_tensor *const *in, int n, dl_dist_op op);

/* Root's nbytes at buf are copied to buf on every rank. Fails on a root
 * outside [0, world) and MPI errors. */
int dl_dist_broadcast(dl_ctx *ctx, void *buf, size_t nbytes, int root);
int dl_dist_barrier(dl_ctx *ctx);

/* Every rank contributes n bytes; *out (dl_alloc'd, *outn bytes, free with
 * dl_free) receives all contributions in rank order, with lens[r] (a [world]
 * array, dl_alloc'd) giving each length. */
int dl_dist_allgather(dl_ctx *ctx, const void *buf, size_t n, char **out, size_t *outn, int64_t **lens);

/* Point-to-point byte messages (study trials): send blocks until buf may be
 * reused; probe says whether a message from src waits (*len its size);
 * recv takes it into buf (len bytes, from probe). */
int dl_dist_send(dl_ctx *ctx, int dest, const void *buf, size_t n);
int dl_dist_probe(dl_ctx *ctx, int src, int *ready, size_t *len);
int dl_dist_recv(dl_ctx *ctx, int src, void *buf, size_t len);

/* *out = FNV-1a 64 over each tensor's dtype, shape and element bytes in
 * row-major order, in order: equal on two ranks iff the tensors are bitwise
 * equal (up to hash collisions). Local; fails on memory (strided tensors are
 * copied). */
int dl_dist_checksum(dl_ctx *ctx, dl_tensor *const *ts, int n, uint64_t *out);

dl_dist_stats dl_dist_get_stats(void);

/* The cross-rank sum of batch-norm statistics shared over ranks (dl_bn_opts
 * sync = 1): *out is a static reducer (it outlives every graph) when the world
 * has more than one rank, NULL in a world of one. Initialises MPI first like
 * dl_dist_init; returns 0, or -1 with ctx->err set when that fails. */
struct dl_bn_reducer;
int dl_dist_bn_reducer(dl_ctx *ctx, const struct dl_bn_reducer **out);

#endif
