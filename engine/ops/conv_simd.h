/* conv_simd.h -- vector kernels under conv.c: row copies for im2col/col2im, a direct
 * convolution for inputs with few channels (the first layer of a CNN) and 2x2 max pooling,
 * on AVX-512 or on AVX2 with FMA (the same bits on both), and the choice of that path, which
 * the Winograd kernels follow too. */
/* See LICENSE */
#ifndef DL_CONV_SIMD_H
#define DL_CONV_SIMD_H

#include <stdint.h>

#include <stddef.h>

/* DL_SIMD_BUILD: 1 when this build has the vector kernels (x86-64 with a GCC-style compiler:
 * conv_simd_avx512.c and conv_simd_avx2.c, compiled for their sets); dl_conv_simd() says at
 * run time which may run */
#if defined(__x86_64__) && defined(__GNUC__)
#define DL_SIMD_BUILD 1
#else
#define DL_SIMD_BUILD 0
#endif

/* the paths, in the order DLUA_CONV_SIMD and dl.machine() name them */
enum { DL_CONV_PORTABLE, DL_CONV_AVX2, DL_CONV_AVX512 };

/* The path that runs: DLUA_CONV_SIMD when it names one ("avx512", "avx2", "portable"), else
 * (unset or "auto") the widest the CPU has: AVX-512F, else AVX2 with FMA, else the portable
 * loops. With DL_CONV_PORTABLE conv.c keeps its loops and Winograd is off. Read once;
 * thread-safe. */
int dl_conv_simd(void);
/* its name: "avx512", "avx2" or "portable" */
const char *dl_conv_simd_name(void);
/* 1 when DLUA_CONV_SIMD forces the path (names one), 0 for auto */
int dl_conv_simd_forced(void);
/* 1 when this build and CPU can run path p (DL_CONV_...) */
int dl_conv_simd_runs(int p);
/* 1 with a message in msg when DLUA_CONV_SIMD names no path, or one this build or CPU
 * cannot run (the module refuses to load then), else 0 */
int dl_conv_simd_env_error(char *msg, size_t cap);

/* r[0:n] summed in double by four running sums, so no serial add chain bounds it: the bias
 * gradient's row sum (conv.c and conv_winograd.c). */
static inline double dl_conv_row_sum(const float *r, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t q = 0;
  for (; q + 4 <= n; q += 4) {
    a0 += (double)r[q]; a1 += (double)r[q + 1]; a2 += (double)r[q + 2]; a3 += (double)r[q + 3];
  }
  for (; q < n; q++) a0 += (double)r[q];
  return (a0 + a1) + (a2 + a3);
}

/* The functions below run the chosen path's kernels (the portable loops for the row copies
 * when it is DL_CONV_PORTABLE; the direct and pooling kernels are only called on a vector
 * path). */

/* dst[r, 0:len] = src[r, 0:len] for r < rows; rows dld and sld floats apart */
void dl_conv_copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len);

/* dst[r, 0:len] += src[r, 0:len] for r < rows (each element one float add, as the portable loop) */
void dl_conv_add_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len);

/* The direct kernels see one example's group at stride 1 and dilation 1, over its
 * zero-padded input xp [C, Hp, Wp] with Hp = Ho + kh - 1, Wp = Wo + kw - 1. */
typedef struct {
  int64_t C, Hp, Wp, O, kh, kw, Ho, Wo;
} dl_conv_direct_geom;

/* where the direct kernels apply: kw <= 7, C*kh*kw <= 100, Wo >= 12 */
int dl_conv_direct_fits(int64_t C, int64_t kh, int64_t kw, int64_t Wo);

/* out [O, Ho, Wo] (rows ldo = Ho*Wo apart per channel) = bias (or 0) + w [O, C*kh*kw] conv xp.
 * Each output sums its terms in (c, i, j) order with fused multiply-adds, starting from the bias. */
void dl_conv_direct_forward(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                            float *out);

/* gw [O, C*kh*kw] = (accumulate ? gw : 0) + gy [O, Ho, Wo] correlated with xp: each weight's
 * sum runs over rows h, 16-column strips and lanes in a fixed order */
void dl_conv_direct_wgrad(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw, int accumulate);

/* one output row of 2x2 max pooling at stride 2 (conv.c's rule, ties and NaN included): input rows
 * r0 and r0 + W, r0[0] at index i0 of its plane; out [Wo] the maxima, arg [Wo] their indices; W < 2^31 */
void dl_conv_maxpool2x2_row(const float *r0, int64_t W, int64_t i0, int64_t Wo, float *out, int64_t *arg);

/* one instruction set's kernels (conv_simd_kern.h), as conv_simd.c calls them */
typedef struct {
  void (*copy_rows)(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len);
  void (*add_rows)(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len);
  void (*direct_forward)(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                         float *out);
  void (*direct_wgrad)(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw, int accumulate);
  void (*maxpool2x2_row)(const float *r0, int64_t W, int64_t i0, int64_t Wo, float *out, int64_t *arg);
} dl_conv_kernels;

extern const dl_conv_kernels dl_conv_kernels_avx512, dl_conv_kernels_avx2;

#endif
