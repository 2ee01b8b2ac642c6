/* simd16.h -- sixteen float lanes as one type, on AVX-512 (one zmm register) or on AVX2 with
 * FMA (two ymm), so that a kernel written once against it runs on either and gives the same
 * bits: every operation is the same IEEE operation on each lane (fused where it says fma),
 * the masked loads fill the lanes they skip with zeros, and the one reduction, v16_sum, adds
 * the lanes in a fixed tree. The instruction set is the one the including file is compiled
 * for (-mavx512f, or -mavx2 -mfma: CMakeLists.txt sets it per file); such a file's functions
 * run only where dl_conv_simd() (conv_simd.c) chose that set.
 *
 * Kernels that use it are templates (a *_kern.h body) included by one file per instruction
 * set, each naming its exports with V16_NAME(x): x_avx512 or x_avx2. This is the one place
 * dlua compiles a body twice (STYLE.md 2.3 rules it out per dtype): the alternative is two
 * hand-written copies that must stay in step operation for operation to give the same bits,
 * which is what sgemm.c's two micro-kernels do, in one function each. */
/* See LICENSE */
#ifndef DL_SIMD16_H
#define DL_SIMD16_H

#include <immintrin.h>
#include <stdint.h>

#if defined(__AVX512F__)

#define V16_NAME(x) x##_avx512
typedef __m512 v16;
typedef __m512i v16_ix;               /* lane offsets, in floats, for gathers and scatters */

#define V16_INLINE static inline __attribute__((always_inline))

V16_INLINE __mmask16 v16_mask_(int64_t n) {
  return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}
V16_INLINE v16 v16_set1(float x) { return _mm512_set1_ps(x); }
V16_INLINE v16 v16_zero(void) { return _mm512_setzero_ps(); }
V16_INLINE v16 v16_load(const float *p) { return _mm512_loadu_ps(p); }
V16_INLINE void v16_store(float *p, v16 v) { _mm512_storeu_ps(p, v); }
/* the first n lanes from p (n may be <= 0 or >= 16), zeros in the others; no read past them */
V16_INLINE v16 v16_loadn(const float *p, int64_t n) { return _mm512_maskz_loadu_ps(v16_mask_(n), p); }
V16_INLINE void v16_storen(float *p, int64_t n, v16 v) { _mm512_mask_storeu_ps(p, v16_mask_(n), v); }
V16_INLINE v16 v16_add(v16 a, v16 b) { return _mm512_add_ps(a, b); }
V16_INLINE v16 v16_sub(v16 a, v16 b) { return _mm512_sub_ps(a, b); }
V16_INLINE v16 v16_mul(v16 a, v16 b) { return _mm512_mul_ps(a, b); }
/* a * b + c, rounded once */
V16_INLINE v16 v16_fma(v16 a, v16 b, v16 c) { return _mm512_fmadd_ps(a, b, c); }
/* lane l at l * stride floats (stride * 15 < 2^31) */
V16_INLINE v16_ix v16_offsets(int64_t stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32((int)stride));
}
V16_INLINE v16 v16_gather(const float *p, v16_ix ix) { return _mm512_i32gather_ps(ix, p, 4); }
V16_INLINE void v16_scatter(float *p, v16_ix ix, v16 v) { _mm512_i32scatter_ps(p, ix, v, 4); }
/* the lanes' sum: (l + l+8), then (+4), then (+2), then lane 0 + lane 1 */
V16_INLINE float v16_sum(v16 v) {
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

#elif defined(__AVX2__) && defined(__FMA__)

#define V16_NAME(x) x##_avx2
typedef struct {
  __m256 lo, hi;                      /* lanes 0-7, 8-15 */
} v16;
typedef struct {
  __m256i lo;                         /* lane l's offset for l < 8; lanes 8-15 start 8 strides on */
  int64_t stride;
} v16_ix;

#define V16_INLINE static inline __attribute__((always_inline))

V16_INLINE __m256i v16_mask8_(int64_t n) {
  int32_t k = n >= 8 ? 8 : n <= 0 ? 0 : (int32_t)n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
V16_INLINE v16 v16_set1(float x) { return (v16){_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
V16_INLINE v16 v16_zero(void) { return (v16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
V16_INLINE v16 v16_load(const float *p) { return (v16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
V16_INLINE void v16_store(float *p, v16 v) { _mm256_storeu_ps(p, v.lo), _mm256_storeu_ps(p + 8, v.hi); }
V16_INLINE v16 v16_loadn(const float *p, int64_t n) {
  if (n >= 16) return v16_load(p);
  v16 v = {_mm256_maskload_ps(p, v16_mask8_(n)), _mm256_setzero_ps()};
  if (n > 8) v.hi = _mm256_maskload_ps(p + 8, v16_mask8_(n - 8));
  return v;
}
V16_INLINE void v16_storen(float *p, int64_t n, v16 v) {
  if (n >= 16) {
    v16_store(p, v);
    return;
  }
  _mm256_maskstore_ps(p, v16_mask8_(n), v.lo);
  if (n > 8) _mm256_maskstore_ps(p + 8, v16_mask8_(n - 8), v.hi);
}
V16_INLINE v16 v16_add(v16 a, v16 b) { return (v16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
V16_INLINE v16 v16_sub(v16 a, v16 b) { return (v16){_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
V16_INLINE v16 v16_mul(v16 a, v16 b) { return (v16){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
V16_INLINE v16 v16_fma(v16 a, v16 b, v16 c) {
  return (v16){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
V16_INLINE v16_ix v16_offsets(int64_t stride) {
  return (v16_ix){_mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)stride)), stride};
}
V16_INLINE v16 v16_gather(const float *p, v16_ix ix) {
  return (v16){_mm256_i32gather_ps(p, ix.lo, 4), _mm256_i32gather_ps(p + 8 * ix.stride, ix.lo, 4)};
}
V16_INLINE void v16_scatter(float *p, v16_ix ix, v16 v) {   /* AVX2 has no scatter: lane by lane */
  float t[16];
  v16_store(t, v);
  for (int l = 0; l < 16; l++) p[l * ix.stride] = t[l];
}
V16_INLINE float v16_sum(v16 v) {
  __m256 h = _mm256_add_ps(v.lo, v.hi);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

#else
#error "simd16.h: compile this file with -mavx512f, or with -mavx2 -mfma"
#endif

#endif
