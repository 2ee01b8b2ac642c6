/* conv_winograd.h -- stride-1 3x3 and 5x5 convolutions by Winograd's minimal filtering,
 * under conv.c: the forward and the exact adjoint of it, on AVX-512 and AVX2 machines. */
/* See LICENSE */
#ifndef DL_CONV_WINOGRAD_H
#define DL_CONV_WINOGRAD_H

#include "core/dl.h"

#include <stdatomic.h>

/* one convolution: x [N, C, H, W] with a square k x k kernel w [O, C, k, k] at stride 1,
 * dilation 1, one group, padding (ph, pw), giving [N, O, Ho, Wo] */
typedef struct {
  int64_t N, C, H, W, O, k, ph, pw, Ho, Wo;
} dl_wino_geom;

/* 1 when the kernels below take this convolution: a vector path (dl_conv_simd()), k 3 or 5,
 * C and O multiples of 16, and DLUA_CONV_WINOGRAD is not "0" (the test hook that keeps
 * im2col). Thread-safe. */
int dl_wino_fits(const dl_wino_geom *g);
/* 1 when Winograd may take layers at all: a vector path (dl_conv_simd()) and DLUA_CONV_WINOGRAD not "0" */
int dl_wino_enabled(void);
/* DLUA_CONV_WINOGRAD malformed? (env.h: 1 and the message, else 0) */
int dl_wino_env_error(char *msg, size_t cap);

/* the instruction set the kernels run on: "avx512", "avx2" (DLUA_CONV_SIMD's path, or with auto
 * the faster of the two on this CPU: see conv_winograd.c), or "off" when Winograd is off */
const char *dl_wino_path(void);
/* seconds the probe took on that set ("avx512", "avx2") when auto timed both, else 0 */
double dl_wino_probe_seconds(const char *path);

/* out = conv(x, w) + bias (bias [O] or NULL). Returns 0, or -1 with ctx's error set
 * when its buffers cannot be allocated. */
int dl_wino_forward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *bias,
                    float *out);

/* the gradients of dl_wino_forward's computation from gy [N, O, Ho, Wo]: gx [N, C, H, W],
 * gw [O, C, k, k] and gb [O], each written whole, or skipped when NULL. Returns 0 or -1 as
 * above. Results do not depend on the thread count. */
int dl_wino_backward(dl_ctx *ctx, const dl_wino_geom *g, const float *x, const float *w, const float *gy, float *gx,
                     float *gw, float *gb);

/* ------------------------------------------------------------ for the kernels
 * What conv_winograd.c (the matrices, the work split, the entry points) shares with the
 * kernels of conv_winograd_kern.h, which are compiled once per instruction set
 * (conv_winograd_avx512.c, conv_winograd_avx2.c) on simd16.h's 16-lane vectors and give the
 * same bits on each. */
#define DL_WINO_AMAX 7           /* the largest tile a */
#define DL_WINO_LANES 16

/* the tile's matrices: A [a, m], G [a, r], B [a, a], row-major */
typedef struct {
  int m, r, a;
  float A[DL_WINO_AMAX * DL_WINO_AMAX];     /* [a, m]: A[p][i] = point_p ^ i, the infinity row picks i = m - 1 */
  float G[DL_WINO_AMAX * DL_WINO_AMAX];     /* [a, r], the same for the kernel */
  float B[DL_WINO_AMAX * DL_WINO_AMAX];     /* [a, a]: the inverse of the a x a evaluation matrix */
} dl_wino_mats;

/* one convolution's work: the split into blocks and chunks (conv_winograd.c's setup), the
 * operands, and the buffers */
typedef struct {
  const dl_wino_geom *g;
  dl_wino_mats t;
  int64_t th, tw, pt;          /* tiles down, across, per example */
  int64_t Hq, Wq;              /* the packed plane: th*m + r - 1 by tw*m + r - 1 */
  int64_t cb, ob;              /* channel blocks of 16 in and out */
  int64_t nb, nch, emax;       /* blocks, chunks, the most examples in a block */
  int64_t task_floats;         /* each task's V, M and plane */
  int ntask;
  atomic_llong next;
  const float *x, *w, *bias, *gy;
  float *out, *gx, *gw, *gb;
  float *U;                    /* [aa, C, O] (forward) */
  float *Ut;                   /* [aa, O, C] (input gradient) */
  float *dU;                   /* [nch, aa, C, O]: the chunk sums */
  float *scratch;              /* [ntask, task_floats] */
} dl_wino_job;

/* the pool tasks of one instruction set; each takes items from job->next until none is left */
typedef struct {
  void (*kernel)(void *job, int t);       /* U [xi, c, o], or Ut [xi, o, c] when U is NULL */
  void (*forward)(void *job, int t);      /* blocks: transforms, products, transforms back */
  void (*backward)(void *job, int t);     /* chunks: dM, dU's chunk sums and dV, dx */
  void (*weight_grad)(void *job, int t);  /* gw from dU's chunk sums, per input channel */
} dl_wino_tasks;

extern const dl_wino_tasks dl_wino_tasks_avx512, dl_wino_tasks_avx2;

#endif
