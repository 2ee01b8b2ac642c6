/* sgemm.c -- dlua's own float32 matrix product, C = alpha op(A) op(B) + beta C on one
 * thread, under gemm.c's split over the pool.
 *
 * Why not OpenBLAS alone: the OpenBLAS kernel that runs is fixed when the library loads
 * (by its CPU table, or by OPENBLAS_CORETYPE), so an AVX-512 CPU can end up on 256-bit
 * kernels, and its results change in the last bits with the core chosen and with the
 * thread split. Here the kernel is chosen for the CPU this process runs on, and every path
 * gives the same bits:
 *
 *   C[i][j] = beta C[i][j] (nothing when beta = 0; as is when beta = 1); then for each
 *   block of k, k0 = 0, KC, 2 KC, ... in order: s = 0, s = fma(alpha A[i][k], B[k][j], s)
 *   for k = k0 .. k0+KC-1 in order, and C[i][j] = C[i][j] + s (C[i][j] = s for the first
 *   block when beta = 0),
 *
 * one fused multiply-add chain per element and block of KC = 256 steps, the blocks' sums
 * added in order (the blocked sum keeps the error of long products at OpenBLAS's level: a
 * single chain over K = 4608 measured 3.5x its error), whatever the vector width, the tile
 * sizes or the thread split (gemm.c splits rows or columns, never k). alpha is folded into
 * A as it is packed, so alpha = 1 multiplies nothing.
 *
 * The layout is the usual one for register-tiled products (Goto's; BLIS's loop order):
 * B is packed KC x NC at a time into panels NR columns wide, A MC x KC at a time into
 * panels MR rows tall, and a micro-kernel keeps an MR x NR tile of C in registers while it
 * walks a KC-long A panel and B panel (the B panel stays in L1 over the A panels of a
 * block, the A block in L2). Tiles at the edges of C mask their columns and run fewer rows.
 *
 * Paths (DLUA_GEMM, read once; dl_sgemm_path() names the one that runs):
 *   avx512    12 x 32 tile in 24 zmm accumulators   (CPU with AVX-512F)
 *   avx2      6 x 16 tile in 12 ymm accumulators    (CPU with AVX2 and FMA)
 *   portable  the same chains with fmaf(), any CPU (the reference for the same-bits test)
 *   blas      OpenBLAS's cblas_sgemm (its own order: not the same bits as the others)
 * "auto" (unset) times the own kernels the CPU runs on one product when the process first
 * multiplies and takes the fastest (on a CPU that runs none of them: blas); any other value
 * forces that path (the module refuses one this build or CPU lacks: dl_sgemm_env_error).
 * dl_sgemm_path() says which runs and dl_sgemm_rate() what each measured.
 */
/* See LICENSE */
#include "core/cpu.h"
#include "core/env.h"
#include "ops/sgemm.h"

#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define SG_X86 1
#include <immintrin.h>
#else
#define SG_X86 0
#endif

enum { KC = DL_SGEMM_KC, MC = 144, NC = 1024, MR_MAX = 12, NR_MAX = 32 };

/* One tile of C, rows x cols (at most the path's mr x nr), over one block of kc steps of k:
 *   s[r][q] = fma(A(r, k), B(k, q), s[r][q]) for k = 0 .. kc-1 in order, from 0,
 * then c[r][q] = c[r][q] + s[r][q] (add) or s[r][q]. A(r, k) = a[r ars + k aks] (alpha
 * already applied), B(k, q) = b[k bks + q]. Kernels read no column of B past cols and no
 * row of A past rows. */
typedef struct {
  const float *a, *b;
  float *c;
  int64_t ars, aks, bks, ldc, kc;
  int rows, cols, add;
} sg_tile;

/* packed: A in a panel (ars 1, aks mr); strided: A where it lies */
typedef void (*sg_kernel)(const sg_tile *t);
/* dst[kk ldd + r] = alpha src[r lds + kk] for kk < the path's tk, r < width (lanes r >= rows 0) */
typedef void (*sg_transpose)(float *dst, int64_t ldd, const float *src, int64_t lds, int rows, int width, float alpha);

typedef struct {
  const char *name;
  int mr, nr;
  int tk;                  /* its transpose's k per call (0: none) */
  sg_transpose transpose;  /* packs operands that lie the other way round, in the path's own instruction set */
  sg_kernel packed, strided;
} sg_path;

/* ------------------------------------------------------------ kernels */

static void kernel_portable(const sg_tile *t) {
  float acc[MR_MAX][NR_MAX];
  for (int r = 0; r < t->rows; r++)
    for (int q = 0; q < t->cols; q++) acc[r][q] = 0.0f;
  for (int64_t k = 0; k < t->kc; k++) {
    const float *a = t->a + k * t->aks, *b = t->b + k * t->bks;
    for (int r = 0; r < t->rows; r++)
      for (int q = 0; q < t->cols; q++) acc[r][q] = fmaf(a[r * t->ars], b[q], acc[r][q]);
  }
  for (int r = 0; r < t->rows; r++)
    for (int q = 0; q < t->cols; q++) t->c[r * t->ldc + q] = t->add ? t->c[r * t->ldc + q] + acc[r][q] : acc[r][q];
}

#if SG_X86
#define T512 __attribute__((target("avx512f")))
#define T256 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* the 12 x 32 tile in 24 zmm accumulators; R rows (a constant where inlined), columns
 * masked */
T512 INLINE void body512(int R, int full, const sg_tile *t, int64_t ars, int64_t aks) {
  __m512 x[MR_MAX], y[MR_MAX];
  int cols = full ? 32 : t->cols;
  __mmask16 m0 = cols >= 16 ? 0xFFFF : (__mmask16)((1u << cols) - 1);
  __mmask16 m1 = cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
  float *c = t->c;
  int64_t ldc = t->ldc, bks = t->bks, kc = t->kc;
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) {
    x[r] = _mm512_setzero_ps();
    y[r] = _mm512_setzero_ps();
  }
  const float *a = t->a, *b = t->b;
  for (int64_t k = 0; k < kc; k++, a += aks, b += bks) {
    __m512 b0 = full ? _mm512_loadu_ps(b) : _mm512_maskz_loadu_ps(m0, b);
    __m512 b1 = full ? _mm512_loadu_ps(b + 16) : _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
      __m512 ar = _mm512_set1_ps(a[r * ars]);
      x[r] = _mm512_fmadd_ps(ar, b0, x[r]);
      y[r] = _mm512_fmadd_ps(ar, b1, y[r]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; r++) {
    if (t->add) {
      x[r] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c + r * ldc), x[r]);
      y[r] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + r * ldc + 16), y[r]);
    }
    _mm512_mask_storeu_ps(c + r * ldc, m0, x[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, y[r]);
  }
}

/* the 6 x 16 tile in 12 ymm accumulators: body512 line for line at half the width (AVX2 has
 * no mask registers and 16 vector registers); the two stay apart because each is a different
 * instruction set, compiled for its own target */
T256 INLINE void body256(int R, int full, const sg_tile *t, int64_t ars, int64_t aks) {
  __m256 x[6], y[6];
  int cols = full ? 16 : t->cols;
  __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
  __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
  float *c = t->c;
  int64_t ldc = t->ldc, bks = t->bks, kc = t->kc;
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    x[r] = _mm256_setzero_ps();
    y[r] = _mm256_setzero_ps();
  }
  const float *a = t->a, *b = t->b;
  for (int64_t k = 0; k < kc; k++, a += aks, b += bks) {
    __m256 b0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0);
    __m256 b1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m256 ar = _mm256_broadcast_ss(a + r * ars);
      x[r] = _mm256_fmadd_ps(ar, b0, x[r]);
      y[r] = _mm256_fmadd_ps(ar, b1, y[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    if (t->add) {
      x[r] = _mm256_add_ps(_mm256_maskload_ps(c + r * ldc, m0), x[r]);
      y[r] = _mm256_add_ps(_mm256_maskload_ps(c + r * ldc + 8, m1), y[r]);
    }
    _mm256_maskstore_ps(c + r * ldc, m0, x[r]);
    _mm256_maskstore_ps(c + r * ldc + 8, m1, y[r]);
  }
}

/* dst[kk ldd + r] = alpha src[r lds + kk] for kk < 16, r < width (lanes r >= rows are 0):
 * a 16 x 16 transpose in registers (pairs of rows, then pairs of pairs, then 128-bit lanes
 * twice), for packing operands that lie the other way round */
T512 static void transpose16(float *dst, int64_t ldd, const float *src, int64_t lds, int rows, int width,
                             float alpha) {
  __m512 r[16], t[16], u[16];
  __m512 al = _mm512_set1_ps(alpha);
  for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_mul_ps(al, _mm512_loadu_ps(src + i * lds)) : _mm512_setzero_ps();
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  /* u[4 i + j], 128-bit lane l: rows 4i..4i+3 of column 4l + j */
  __mmask16 m = (__mmask16)((1u << width) - 1);
  for (int j = 0; j < 4; j++) {
    __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), w = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xdd);
    __m512 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xdd);
    _mm512_mask_storeu_ps(dst + j * ldd, m, _mm512_shuffle_f32x4(v, v2, 0x88));
    _mm512_mask_storeu_ps(dst + (4 + j) * ldd, m, _mm512_shuffle_f32x4(w, w2, 0x88));
    _mm512_mask_storeu_ps(dst + (8 + j) * ldd, m, _mm512_shuffle_f32x4(v, v2, 0xdd));
    _mm512_mask_storeu_ps(dst + (12 + j) * ldd, m, _mm512_shuffle_f32x4(w, w2, 0xdd));
  }
}

/* the same for 8 x 8 in ymm registers (pairs of rows, pairs of pairs, then 128-bit halves), for
 * the AVX2 path: dst[kk ldd + r] = alpha src[r lds + kk] for kk < 8, r < width <= 8 */
T256 static void transpose8(float *dst, int64_t ldd, const float *src, int64_t lds, int rows, int width, float alpha) {
  __m256 r[8], t[8], u[8];
  __m256 al = _mm256_set1_ps(alpha);
  for (int i = 0; i < 8; i++) r[i] = i < rows ? _mm256_mul_ps(al, _mm256_loadu_ps(src + i * lds)) : _mm256_setzero_ps();
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; i++) {                 /* u[4 i + j]: rows 4i..4i+3 of columns j (low half), j + 4 */
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(width), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int j = 0; j < 4; j++) {
    _mm256_maskstore_ps(dst + j * ldd, m, _mm256_permute2f128_ps(u[j], u[4 + j], 0x20));
    _mm256_maskstore_ps(dst + (4 + j) * ldd, m, _mm256_permute2f128_ps(u[j], u[4 + j], 0x31));
  }
}

/* one function per path and A layout, one inlined body per row count (and the whole
 * tile, the common case, without column masks) */
#define CASE512(R, ARS, AKS) case R: body512(R, 0, t, ARS, AKS); break;
#define ROWS512(ARS, AKS) case 12: if (t->cols == 32) body512(12, 1, t, ARS, AKS); else body512(12, 0, t, ARS, AKS); break; \
  CASE512(11, ARS, AKS) CASE512(10, ARS, AKS) CASE512(9, ARS, AKS) \
  CASE512(8, ARS, AKS) CASE512(7, ARS, AKS) CASE512(6, ARS, AKS) CASE512(5, ARS, AKS) CASE512(4, ARS, AKS)         \
  CASE512(3, ARS, AKS) CASE512(2, ARS, AKS) CASE512(1, ARS, AKS)
T512 static void packed512(const sg_tile *t) { switch (t->rows) { ROWS512(1, 12) default: break; } }
T512 static void strided512(const sg_tile *t) { switch (t->rows) { ROWS512(t->ars, t->aks) default: break; } }

#define CASE256(R, ARS, AKS) case R: body256(R, 0, t, ARS, AKS); break;
#define ROWS256(ARS, AKS) case 6: if (t->cols == 16) body256(6, 1, t, ARS, AKS); else body256(6, 0, t, ARS, AKS); break; \
  CASE256(5, ARS, AKS) CASE256(4, ARS, AKS) CASE256(3, ARS, AKS) \
  CASE256(2, ARS, AKS) CASE256(1, ARS, AKS)
T256 static void packed256(const sg_tile *t) { switch (t->rows) { ROWS256(1, 6) default: break; } }
T256 static void strided256(const sg_tile *t) { switch (t->rows) { ROWS256(t->ars, t->aks) default: break; } }
#endif

static const sg_path PATHS[] = {
#if SG_X86
  {"avx512", 12, 32, 16, transpose16, packed512, strided512},
  {"avx2", 6, 16, 8, transpose8, packed256, strided256},
#endif
  {"portable", 4, 16, 0, NULL, kernel_portable, kernel_portable},
  {"blas", 0, 0, 0, NULL, NULL, NULL},
};
enum { NPATHS = sizeof PATHS / sizeof PATHS[0] };

/* ------------------------------------------------------------ choice */

static const sg_path *chosen;
static pthread_once_t choice_once = PTHREAD_ONCE_INIT;

static int runnable(const sg_path *p) {
#if SG_X86
  __builtin_cpu_init();
  if (strcmp(p->name, "avx512") == 0) return __builtin_cpu_supports("avx512f");
  if (strcmp(p->name, "avx2") == 0) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return 1;
}

static const sg_path *by_name(const char *name) {
  for (int i = 0; i < NPATHS; i++)
    if (strcmp(PATHS[i].name, name) == 0) return &PATHS[i];
  return NULL;
}

/* auto's choice: the widest kernel the CPU runs; portable is slow, so then OpenBLAS */
static const sg_path *widest(void) {
  for (int i = 0; i < NPATHS; i++)
    if (PATHS[i].packed != kernel_portable && runnable(&PATHS[i])) return &PATHS[i];
  return &PATHS[NPATHS - 1];
}

static const char *chosen_name_for_cpu(void) { return widest()->name; }

static int run(const sg_path *P, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
               int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* GFLOP/s each own path measured at the choice (0: not measured) */
static double rate[NPATHS];

/* one calibration product on a path (dl_cpu_best_seconds' callback) */
typedef struct {
  const sg_path *path;
  const float *a, *b;
  float *c;
} sg_probe;

enum { CM = 192, CN = 256, CK = 256 };

static int probe_product(void *arg) {
  const sg_probe *p = arg;
  return run(p->path, 0, 0, CM, CN, CK, 1.0f, p->a, CK, p->b, CN, 0.0f, p->c, CN);
}

/* auto on a CPU with more than one own kernel: time each on one packed product (192 x 256
 * x 256, best of 3 runs, CPU time of this thread: about a millisecond in all) and take the
 * fastest. Every own path gives the same bits, so the choice (made per process, recorded by
 * dl.machine()) can follow the measurement without changing any result. */
static const sg_path *calibrate(const sg_path *fallback) {
  float *a = malloc(sizeof(float) * CM * CK), *b = malloc(sizeof(float) * CK * CN), *c = malloc(sizeof(float) * CM * CN);
  const sg_path *best = fallback;
  double best_t = 0;
  if (a && b && c) {
    for (int i = 0; i < CM * CK; i++) a[i] = (float)(i % 7) * 0.25f;
    for (int i = 0; i < CK * CN; i++) b[i] = (float)(i % 5) * 0.5f;
    for (int i = 0; i < NPATHS; i++) {
      if (!PATHS[i].packed || PATHS[i].packed == kernel_portable || !runnable(&PATHS[i])) continue;
      sg_probe p = {&PATHS[i], a, b, c};
      double t = dl_cpu_best_seconds(probe_product, &p, 3);
      if (t <= 0) continue;
      rate[i] = 2.0 * CM * CN * CK / t * 1e-9;
      if (best_t == 0 || t < best_t) best = &PATHS[i], best_t = t;
    }
  }
  free(a), free(b), free(c);
  return best;
}

static void choose(void) {
  const char *s = dl_env_get("DLUA_GEMM");
  const sg_path *p = s && strcmp(s, "auto") != 0 ? by_name(s) : NULL;
  if (p && runnable(p)) {
    chosen = p;
    return;
  }
  chosen = widest();
  if (chosen->packed) chosen = calibrate(chosen);
}

double dl_sgemm_rate(const char *path) {
  pthread_once(&choice_once, choose);
  const sg_path *p = by_name(path);
  return p ? rate[p - PATHS] : 0;
}

const char *dl_sgemm_path(void) {
  pthread_once(&choice_once, choose);
  return chosen->name;
}


int dl_sgemm_env_error(char *msg, size_t cap) {
  const char *s = dl_env_get("DLUA_GEMM");
  if (!s || strcmp(s, "auto") == 0) return 0;
  const sg_path *p = by_name(s);
  if (p && runnable(p)) return 0;
  if (p) {
    snprintf(msg, cap, "DLUA_GEMM=%s: this CPU cannot run that path (it has %s)", s, chosen_name_for_cpu());
    return 1;
  }
  size_t n = (size_t)snprintf(msg, cap, "DLUA_GEMM=%.40s: no such matrix-product path (valid: auto", s);
  for (int i = 0; i < NPATHS && n < cap; i++) n += (size_t)snprintf(msg + n, cap - n, ", %s", PATHS[i].name);
  if (n < cap) snprintf(msg + n, cap - n, ")");
  return 1;
}

/* ------------------------------------------------------------ packing and blocking */

/* per-thread packing buffers, kept for the thread's life (freed when it exits) */
typedef struct {
  float *a, *b;
} sg_buffers;

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void buf_free(void *p) {
  sg_buffers *s = p;
  free(s->a);
  free(s->b);
  free(s);
}

static void buf_init(void) { (void)pthread_key_create(&buf_key, buf_free); }

static sg_buffers *buffers(void) {
  pthread_once(&buf_once, buf_init);
  sg_buffers *s = pthread_getspecific(buf_key);
  if (s) return s;
  s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->a = aligned_alloc(64, sizeof(float) * (MC + MR_MAX) * KC);
  s->b = aligned_alloc(64, sizeof(float) * (NC + NR_MAX) * KC);
  if (!s->a || !s->b || pthread_setspecific(buf_key, s) != 0) {
    buf_free(s);
    return NULL;
  }
  return s;
}


/* A[i0:i0+mc, k0:k0+kc] times alpha into panels mr rows tall (k-major within a panel),
 * rows past mc zero */
static void pack_a(float *dst, const float *A, int64_t lda, int ta, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                   float alpha, int mr, const sg_path *P) {
  const int tk = P->tk, fast = !ta && mr <= tk && P->transpose;
  for (int64_t p = 0; p < mc; p += mr, dst += kc * mr) {
    int64_t rows = mc - p < mr ? mc - p : mr, k = 0;
    if (fast)                                      /* A's rows run along k: transpose tk k at a time */
      for (; k + tk <= kc; k += tk) P->transpose(dst + k * mr, mr, A + (i0 + p) * lda + k0 + k, lda, (int)rows, mr, alpha);
    if (ta)                                        /* A(i, k) = A[k][i]: a panel's rows lie side by side */
      for (int64_t q = k; q < kc; q++) {
        const float *s = A + (k0 + q) * lda + i0 + p;
        float *d = dst + q * mr;
        for (int64_t r = 0; r < rows; r++) d[r] = alpha * s[r];
      }
    else
      for (int64_t r = 0; r < rows; r++) {
        const float *s = A + (i0 + p + r) * lda + k0;
        for (int64_t q = k; q < kc; q++) dst[q * mr + r] = alpha * s[q];
      }
    for (int64_t r = rows; r < mr; r++)
      for (int64_t q = k; q < kc; q++) dst[q * mr + r] = 0.0f;
  }
}

/* B[k0:k0+kc, j0:j0+nc] into panels nr columns wide (k-major within a panel), columns
 * past nc zero */
static void pack_b(float *dst, const float *B, int64_t ldb, int tb, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                   int nr, const sg_path *P) {
  const int tk = P->tk, fast = tb && P->transpose && nr % tk == 0;
  for (int64_t p = 0; p < nc; p += nr, dst += kc * nr) {
    int64_t cols = nc - p < nr ? nc - p : nr;
    if (!tb) {
      for (int64_t k = 0; k < kc; k++) {
        const float *s = B + (k0 + k) * ldb + j0 + p;
        float *d = dst + k * nr;
        memcpy(d, s, sizeof(float) * (size_t)cols);
        for (int64_t q = cols; q < nr; q++) d[q] = 0.0f;
      }
      continue;
    }
    int64_t k = 0;                                 /* B(k, j) = B[j][k]: B's rows run along k */
    if (fast)
      for (; k + tk <= kc; k += tk)
        for (int q = 0; q < nr; q += tk) {
          int64_t n = cols - q < tk ? cols - q : tk;
          P->transpose(dst + k * nr + q, nr, B + (j0 + p + q) * ldb + k0 + k, ldb, n > 0 ? (int)n : 0, tk, 1.0f);
        }
    for (int64_t q = 0; q < cols; q++) {
      const float *s = B + (j0 + p + q) * ldb + k0;
      for (int64_t kk = k; kk < kc; kk++) dst[kk * nr + q] = s[kk];
    }
    for (int64_t q = cols; q < nr; q++)
      for (int64_t kk = k; kk < kc; kk++) dst[kk * nr + q] = 0.0f;
  }
}

/* the first-level data cache, for the choice to leave small operands unpacked */
static int64_t l1_bytes(void) {
  static int64_t l1;
  if (!l1) {
    long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    l1 = v >= 16384 && v <= (1L << 22) ? v : 32768;
  }
  return l1;
}

static int run(const sg_path *P, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
               int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  int mr = P->mr, nr = P->nr;
  /* operands small enough to stay in cache are read where they lie: packing them would cost
   * more than it saves (Winograd's tile products, attention's blocks) */
  int64_t l1 = l1_bytes();
  int a_packed = alpha != 1.0f || (M * K * 4 > l1 / 2), b_packed = tb || (K * N * 4 > l1 / 2);
  sg_buffers *buf = a_packed || b_packed ? buffers() : NULL;
  if ((a_packed || b_packed) && !buf) return 0;    /* out of memory: the caller's BLAS does it */
  if (beta != 0.0f && beta != 1.0f)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] *= beta;
  int64_t ars = ta ? 1 : lda, aks = ta ? lda : 1;
  sg_kernel kern = a_packed ? P->packed : P->strided;
  for (int64_t jc = 0; jc < N; jc += NC) {
    int64_t nc = N - jc < NC ? N - jc : NC;
    for (int64_t pc = 0; pc < K; pc += KC) {
      int64_t kc = K - pc < KC ? K - pc : KC;
      if (b_packed) pack_b(buf->b, B, ldb, tb, pc, kc, jc, nc, nr, P);
      for (int64_t ic = 0; ic < M; ic += MC) {
        int64_t mc = M - ic < MC ? M - ic : MC;
        if (a_packed) pack_a(buf->a, A, lda, ta, ic, mc, pc, kc, alpha, mr, P);
        for (int64_t jr = 0; jr < nc; jr += nr) {
          sg_tile t = {.kc = kc, .ldc = ldc, .add = pc > 0 || beta != 0.0f};
          t.b = b_packed ? buf->b + (jr / nr) * kc * nr : B + pc * ldb + jc + jr;
          t.bks = b_packed ? nr : ldb;
          t.cols = (int)(nc - jr < nr ? nc - jr : nr);
          for (int64_t ir = 0; ir < mc; ir += mr) {
            t.rows = (int)(mc - ir < mr ? mc - ir : mr);
            t.a = a_packed ? buf->a + (ir / mr) * kc * mr : A + (ic + ir) * ars + pc * aks;
            t.ars = a_packed ? 1 : ars;
            t.aks = a_packed ? mr : aks;
            t.c = C + (ic + ir) * ldc + jc + jr;
            kern(&t);
          }
        }
      }
    }
  }
  return 1;
}

int dl_sgemm_block(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  pthread_once(&choice_once, choose);
  if (!chosen->packed) return 0;
  return run(chosen, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int dl_sgemm_block_on(const char *path, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                      int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  const sg_path *P = by_name(path);
  if (!P || !P->packed || !runnable(P)) return -1;
  return run(P, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
