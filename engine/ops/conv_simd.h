/* conv_simd.h -- AVX-512 kernels under conv.c: row copies for im2col/col2im and
 * a direct convolution for inputs with few channels (the first layer of a CNN). */
/* See LICENSE */
#ifndef DL_CONV_SIMD_H
#define DL_CONV_SIMD_H

#include <stdint.h>

/* DL_AVX512_BUILD: 1 when this compiler can build the AVX-512 kernels (x86-64, GCC-style
 * target attributes), which then include <immintrin.h> and mark their functions
 * DL_AVX512_TARGET (and inlined helpers DL_AVX512_INLINE); dl_conv_simd() says at run time
 * whether the CPU may run them */
#if defined(__x86_64__) && defined(__GNUC__)
#define DL_AVX512_BUILD 1
#include <immintrin.h>
#define DL_AVX512_TARGET __attribute__((target("avx512f")))
#define DL_AVX512_INLINE static inline __attribute__((always_inline))
#else
#define DL_AVX512_BUILD 0
#endif

/* 1 when the kernels below may run: the CPU has AVX-512F and DLUA_CONV_SIMD is not "0"
 * (the test hook that keeps the portable loops). Read once; thread-safe. */
int dl_conv_simd(void);

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

#endif
