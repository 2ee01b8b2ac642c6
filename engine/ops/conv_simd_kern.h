/* conv_simd_kern.h -- conv_simd's kernels, written once on simd16.h's 16-lane vectors and
 * compiled per instruction set by conv_simd_avx512.c and conv_simd_avx2.c:
 *   - short row copies and adds: an im2col row of a 14x14 output is 14 rows of 14
 *     floats, each one masked 16-lane load and store here (the baseline x86-64-v2
 *     build does 3 SSE moves and 2 scalar ones plus the loop per row);
 *   - the first layer's convolution, C*kh*kw = 25 for a 5x5 kernel over one channel:
 *     as a GEMM it is a thin product (K = 25) behind a 25-row patch matrix, below half
 *     the sgemm rate. The direct kernel here keeps a block of output channels x 16 or 32
 *     columns of one output row in registers and adds the 25 taps with fused
 *     multiply-adds; its weight gradient keeps a block of taps x output channels of sums
 *     over the rows;
 *   - 2x2 max pooling, whose data-dependent branches mispredict: compares and blends.
 * Copies, adds and pooling give the portable loops' bits exactly. The direct kernels sum in
 * their own fixed order (stated at each), which depends on the shape only: not on the thread
 * count, nor on the instruction set (the register blocks differ, each sum's order does not).
 */
/* See LICENSE */
#include "ops/conv_simd.h"
#include "ops/simd16.h"

/* register blocks: output channels x 16-lane vectors across for the forward, output channels
 * x taps for the weight gradient; 32 zmm registers hold 16 and 28 sums, 16 ymm a quarter */
#if defined(__AVX512F__)
enum { FWD_OB = 8, FWD_NV = 2, WG_OB = 4, WG_JN = 7 };
#else
enum { FWD_OB = 4, FWD_NV = 1, WG_OB = 1, WG_JN = 4 };
#endif

static void copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; r++) {
    float *d = dst + r * dld;
    const float *s = src + r * sld;
    int64_t q = 0;
    for (; q + 16 <= len; q += 16) v16_store(d + q, v16_load(s + q));
    if (q < len) v16_storen(d + q, len - q, v16_loadn(s + q, len - q));
  }
}

static void add_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; r++) {
    float *d = dst + r * dld;
    const float *s = src + r * sld;
    int64_t q = 0;
    for (; q + 16 <= len; q += 16) v16_store(d + q, v16_add(v16_load(d + q), v16_load(s + q)));
    if (q < len) v16_storen(d + q, len - q, v16_add(v16_loadn(d + q, len - q), v16_loadn(s + q, len - q)));
  }
}

/* Output row h, columns w0.. (NV vectors of 16; left columns remain from w0) of OB output
 * channels: out[b, h, w0 + l] = bias[b] + sum over (c, i, j) in that order of
 * w[b, c, i, j] xp[c, h + i, w0 + l + j]. Lanes past the row load zeros (never past a row's
 * end: w0 + l + j < Wo + kw - 1 = Wp). */
V16_INLINE void fwd_block(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                          float *out, int64_t h, int64_t w0, int64_t left, const int OB, const int NV) {
  const int64_t kh = g->kh, kw = g->kw, K = g->C * kh * kw, HW = g->Hp * g->Wp, P = g->Ho * g->Wo;
  v16 acc[FWD_OB][2];
  _Pragma("GCC unroll 8")
  for (int b = 0; b < OB; b++) acc[b][0] = acc[b][1] = v16_set1(bias ? bias[b] : 0.0f);
  for (int64_t c = 0; c < g->C; c++)
    for (int64_t i = 0; i < kh; i++) {
      const float *row = xp + c * HW + (h + i) * g->Wp + w0;
      const float *wk = w + (c * kh + i) * kw;
      for (int64_t j = 0; j < kw; j++) {
        v16 x0 = v16_loadn(row + j, left);
        v16 x1 = NV > 1 ? v16_loadn(row + j + 16, left - 16) : x0;
        _Pragma("GCC unroll 8")
        for (int b = 0; b < OB; b++) {
          v16 wv = v16_set1(wk[b * K + j]);
          acc[b][0] = v16_fma(wv, x0, acc[b][0]);
          if (NV > 1) acc[b][1] = v16_fma(wv, x1, acc[b][1]);
        }
      }
    }
  _Pragma("GCC unroll 8")
  for (int b = 0; b < OB; b++) {
    float *o = out + b * P + h * g->Wo + w0;
    v16_storen(o, left, acc[b][0]);
    if (NV > 1) v16_storen(o + 16, left - 16, acc[b][1]);
  }
}

static void direct_forward(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                           float *out) {
  const int64_t K = g->C * g->kh * g->kw, P = g->Ho * g->Wo;
  for (int64_t h = 0; h < g->Ho; h++)
    for (int64_t w0 = 0; w0 < g->Wo; w0 += 16 * FWD_NV) {
      int64_t left = g->Wo - w0, o = 0;
      if (FWD_NV > 1 && left > 16) {
        for (; o + FWD_OB <= g->O; o += FWD_OB)
          fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, left, FWD_OB, 2);
        for (; o < g->O; o++) fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, left, 1, 2);
      } else {
        for (; o + FWD_OB <= g->O; o += FWD_OB)
          fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, left, FWD_OB, 1);
        for (; o < g->O; o++) fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, left, 1, 1);
      }
    }
}

/* Kernel row (c, i), taps j0 .. j0 + JN - 1, OB output channels:
 * gw[b, c, i, j] (+)= the lanes of sum over h, then 16-column strips, of gy[b, h, strip] * xp[c, h + i, strip + j],
 * the 16 lanes added by v16_sum. */
V16_INLINE void wg_block(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw, int64_t c,
                         int64_t i, int64_t j0, int accumulate, const int OB, const int JN) {
  const int64_t K = g->C * g->kh * g->kw, HW = g->Hp * g->Wp, P = g->Ho * g->Wo, Wo = g->Wo;
  v16 acc[7][4];
  _Pragma("GCC unroll 8")
  for (int j = 0; j < JN; j++)
    _Pragma("GCC unroll 8")
    for (int b = 0; b < OB; b++) acc[j][b] = v16_zero();
  for (int64_t h = 0; h < g->Ho; h++) {
    const float *xr = xp + c * HW + (h + i) * g->Wp + j0, *gr = gy + h * Wo;
    for (int64_t w0 = 0; w0 < Wo; w0 += 16) {
      int64_t n = Wo - w0;
      v16 gv[4];
      _Pragma("GCC unroll 8")
      for (int b = 0; b < OB; b++) gv[b] = v16_loadn(gr + b * P + w0, n);
      _Pragma("GCC unroll 8")
      for (int j = 0; j < JN; j++) {
        v16 xv = v16_loadn(xr + w0 + j, n);
        _Pragma("GCC unroll 8")
        for (int b = 0; b < OB; b++) acc[j][b] = v16_fma(gv[b], xv, acc[j][b]);
      }
    }
  }
  _Pragma("GCC unroll 8")
  for (int b = 0; b < OB; b++)
    _Pragma("GCC unroll 8")
    for (int j = 0; j < JN; j++) {
      float s = v16_sum(acc[j][b]), *d = gw + b * K + (c * g->kh + i) * g->kw + j0 + j;
      *d = accumulate ? *d + s : s;
    }
}

static void direct_wgrad(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw, int accumulate) {
  const int64_t K = g->C * g->kh * g->kw, P = g->Ho * g->Wo;
  for (int64_t o = 0; o < g->O;) {       /* a block of channels' gy rows stays in L1 over every kernel row */
    int ob = g->O - o >= WG_OB ? WG_OB : 1;
    for (int64_t c = 0; c < g->C; c++)
      for (int64_t i = 0; i < g->kh; i++)
        for (int64_t j0 = 0; j0 < g->kw; j0 += WG_JN) {
          const float *gyo = gy + o * P;
          float *gwo = gw + o * K;
          switch (g->kw - j0 < WG_JN ? g->kw - j0 : WG_JN) {
#define WG_CASE(JN)                                                                 \
  case JN:                                                                          \
    if (ob == WG_OB) wg_block(g, xp, gyo, gwo, c, i, j0, accumulate, WG_OB, JN);    \
    else wg_block(g, xp, gyo, gwo, c, i, j0, accumulate, 1, JN);                    \
    break;
            WG_CASE(1) WG_CASE(2) WG_CASE(3) WG_CASE(4) WG_CASE(5) WG_CASE(6) WG_CASE(7)
#undef WG_CASE
            default: break;              /* dl_conv_direct_fits: kw <= 7 */
          }
        }
    o += ob;
  }
}

/* One output row of 2x2 max pooling at stride 2: rows r0 and r1 of the input (r0[0] has index i0 in
 * its plane, r1 = r0 + W), out[ow] the window's max, arg[ow] its index. The same rule as conv.c's
 * loop: the window is read r0[2ow], r0[2ow+1], r1[2ow], r1[2ow+1] and a later value wins when it
 * is greater or NaN. Compares and blends are exact, so each set spells it in its own registers. */
#if defined(__AVX512F__)
static void maxpool2x2_row(const float *r0, int64_t W, int64_t i0, int64_t Wo, float *out, int64_t *arg) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
  const float *r1 = r0 + W;
  for (int64_t ow = 0; ow < Wo; ow += 16) {
    int64_t n = Wo - ow < 16 ? Wo - ow : 16;
    __mmask16 m = v16_mask_(n);
    __m512 a0 = v16_loadn(r0 + 2 * ow, 2 * n), a1 = v16_loadn(r0 + 2 * ow + 16, 2 * n - 16);
    __m512 b0 = v16_loadn(r1 + 2 * ow, 2 * n), b1 = v16_loadn(r1 + 2 * ow + 16, 2 * n - 16);
    __m512 v[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                   _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)};
    const int32_t code[4] = {0, 1, (int32_t)W, (int32_t)W + 1};
    __m512 best = v[0];
    __m512i c = _mm512_setzero_si512();
    for (int k = 1; k < 4; k++) {
      __mmask16 take = _mm512_cmp_ps_mask(v[k], best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v[k], v[k], _CMP_UNORD_Q);
      best = _mm512_mask_mov_ps(best, take, v[k]);
      c = _mm512_mask_mov_epi32(c, take, _mm512_set1_epi32(code[k]));
    }
    _mm512_mask_storeu_ps(out + ow, m, best);
    __m512i off = _mm512_add_epi32(c, lane2);  /* index - (i0 + 2 ow), < 2^31: W is a row length */
    __m512i base = _mm512_set1_epi64(i0 + 2 * ow);
    __m512i lo = _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(off)));
    __m512i hi = _mm512_add_epi64(base, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(off, 1)));
    _mm512_mask_storeu_epi64(arg + ow, (__mmask8)(m & 0xFF), lo);
    _mm512_mask_storeu_epi64(arg + ow + 8, (__mmask8)(m >> 8), hi);
  }
}
#else
/* the even and odd lanes of the 16 floats a:b, in order */
V16_INLINE __m256 evens8_(__m256 a, __m256 b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
}
V16_INLINE __m256 odds8_(__m256 a, __m256 b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

static void maxpool2x2_row(const float *r0, int64_t W, int64_t i0, int64_t Wo, float *out, int64_t *arg) {
  const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const float *r1 = r0 + W;
  for (int64_t ow = 0; ow < Wo; ow += 8) {
    int64_t n = Wo - ow < 8 ? Wo - ow : 8;
    v16 a = v16_loadn(r0 + 2 * ow, 2 * n), b = v16_loadn(r1 + 2 * ow, 2 * n);
    __m256 v[4] = {evens8_(a.lo, a.hi), odds8_(a.lo, a.hi), evens8_(b.lo, b.hi), odds8_(b.lo, b.hi)};
    const int32_t code[4] = {0, 1, (int32_t)W, (int32_t)W + 1};
    __m256 best = v[0];
    __m256i c = _mm256_setzero_si256();
    for (int k = 1; k < 4; k++) {
      __m256 take = _mm256_or_ps(_mm256_cmp_ps(v[k], best, _CMP_GT_OQ), _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
      best = _mm256_blendv_ps(best, v[k], take);
      c = _mm256_blendv_epi8(c, _mm256_set1_epi32(code[k]), _mm256_castps_si256(take));
    }
    __m256i m = v16_mask8_(n);
    _mm256_maskstore_ps(out + ow, m, best);
    __m256i off = _mm256_add_epi32(c, lane2);  /* index - (i0 + 2 ow), < 2^31: W is a row length */
    __m256i base = _mm256_set1_epi64x(i0 + 2 * ow);
    __m256i lo = _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(off)));
    __m256i hi = _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(off, 1)));
    _mm256_maskstore_epi64((long long *)(void *)(arg + ow), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(m)), lo);
    _mm256_maskstore_epi64((long long *)(void *)(arg + ow + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m, 1)), hi);
  }
}
#endif

const dl_conv_kernels V16_NAME(dl_conv_kernels) = {copy_rows, add_rows, direct_forward, direct_wgrad, maxpool2x2_row};
