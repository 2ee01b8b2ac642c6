/* conv_simd.c -- AVX-512 kernels under conv.c, chosen at run time by the CPU.
 *
 * Two kinds of work that the portable loops of conv.c do slowly at CNN sizes:
 *   - short row copies and adds: an im2col row of a 14x14 output is 14 rows of 14
 *     floats, each one masked 16-lane load and store here (the baseline x86-64-v2
 *     build does 3 SSE moves and 2 scalar ones plus the loop per row);
 *   - the first layer's convolution, C*kh*kw = 25 for a 5x5 kernel over one channel:
 *     as a GEMM it is a thin product (K = 25) behind a 25-row patch matrix, below half
 *     the sgemm rate. The direct kernel here keeps 8 output channels x 32 columns of
 *     one output row in registers and adds the 25 taps with fused multiply-adds; its
 *     weight gradient keeps kw taps x 4 output channels of sums over the rows;
 *   - 2x2 max pooling, whose data-dependent branches mispredict: compares and blends.
 * Copies and adds give the portable loops' bits exactly. The direct kernels sum in
 * their own fixed order (stated at each), which depends on the shape only: results
 * do not change with the thread count. Without AVX-512 (or with DLUA_CONV_SIMD=0, the
 * test hook) dl_conv_simd() is 0 and conv.c keeps its portable paths.
 */
/* See LICENSE */
#include "ops/conv_simd.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int simd_on;
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;

static void simd_probe(void) {
#if DL_AVX512_BUILD
  const char *s = getenv("DLUA_CONV_SIMD");
  __builtin_cpu_init();
  simd_on = __builtin_cpu_supports("avx512f") && !(s && strcmp(s, "0") == 0);
#endif
}

int dl_conv_simd(void) {
  pthread_once(&simd_once, simd_probe);
  return simd_on;
}

int dl_conv_direct_fits(int64_t C, int64_t kh, int64_t kw, int64_t Wo) {
  return kw <= 7 && C * kh * kw <= 100 && Wo >= 12;
}

#if DL_AVX512_BUILD

#define TARGET DL_AVX512_TARGET
#define INLINE DL_AVX512_INLINE

/* the first n lanes (none for n <= 0) */
TARGET INLINE __mmask16 lanes(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

TARGET void dl_conv_copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; r++) {
    float *d = dst + r * dld;
    const float *s = src + r * sld;
    int64_t q = 0;
    for (; q + 16 <= len; q += 16) _mm512_storeu_ps(d + q, _mm512_loadu_ps(s + q));
    if (q < len) {
      __mmask16 m = lanes(len - q);
      _mm512_mask_storeu_ps(d + q, m, _mm512_maskz_loadu_ps(m, s + q));
    }
  }
}

TARGET void dl_conv_add_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; r++) {
    float *d = dst + r * dld;
    const float *s = src + r * sld;
    int64_t q = 0;
    for (; q + 16 <= len; q += 16) _mm512_storeu_ps(d + q, _mm512_add_ps(_mm512_loadu_ps(d + q), _mm512_loadu_ps(s + q)));
    if (q < len) {
      __mmask16 m = lanes(len - q);
      _mm512_mask_storeu_ps(d + q, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + q), _mm512_maskz_loadu_ps(m, s + q)));
    }
  }
}

/* Output row h, columns w0.. (NV vectors of 16, masks m0 and m1) of OB output channels:
 * out[b, h, w0 + l] = bias[b] + sum over (c, i, j) in that order of w[b, c, i, j] xp[c, h + i, w0 + l + j].
 * Masked lanes load zeros (never past a row's end: w0 + l + j < Wo + kw - 1 = Wp). */
TARGET INLINE void fwd_block(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                             float *out, int64_t h, int64_t w0, __mmask16 m0, __mmask16 m1, const int OB,
                             const int NV) {
  const int64_t kh = g->kh, kw = g->kw, K = g->C * kh * kw, HW = g->Hp * g->Wp, P = g->Ho * g->Wo;
  __m512 acc[8][2];
  _Pragma("GCC unroll 8")
  for (int b = 0; b < OB; b++) acc[b][0] = acc[b][1] = _mm512_set1_ps(bias ? bias[b] : 0.0f);
  for (int64_t c = 0; c < g->C; c++)
    for (int64_t i = 0; i < kh; i++) {
      const float *row = xp + c * HW + (h + i) * g->Wp + w0;
      const float *wk = w + (c * kh + i) * kw;
      for (int64_t j = 0; j < kw; j++) {
        __m512 x0 = _mm512_maskz_loadu_ps(m0, row + j);
        __m512 x1 = NV > 1 ? _mm512_maskz_loadu_ps(m1, row + j + 16) : x0;
        _Pragma("GCC unroll 8")
        for (int b = 0; b < OB; b++) {
          __m512 wv = _mm512_set1_ps(wk[b * K + j]);
          acc[b][0] = _mm512_fmadd_ps(wv, x0, acc[b][0]);
          if (NV > 1) acc[b][1] = _mm512_fmadd_ps(wv, x1, acc[b][1]);
        }
      }
    }
  _Pragma("GCC unroll 8")
  for (int b = 0; b < OB; b++) {
    float *o = out + b * P + h * g->Wo + w0;
    _mm512_mask_storeu_ps(o, m0, acc[b][0]);
    if (NV > 1) _mm512_mask_storeu_ps(o + 16, m1, acc[b][1]);
  }
}

TARGET void dl_conv_direct_forward(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                                   float *out) {
  const int64_t K = g->C * g->kh * g->kw, P = g->Ho * g->Wo;
  for (int64_t h = 0; h < g->Ho; h++)
    for (int64_t w0 = 0; w0 < g->Wo; w0 += 32) {
      int64_t left = g->Wo - w0;
      __mmask16 m0 = lanes(left), m1 = lanes(left - 16);
      int64_t o = 0;
      if (left > 16) {
        for (; o + 8 <= g->O; o += 8) fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, m0, m1, 8, 2);
        for (; o < g->O; o++) fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, m0, m1, 1, 2);
      } else {
        for (; o + 8 <= g->O; o += 8) fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, m0, m1, 8, 1);
        for (; o < g->O; o++) fwd_block(g, xp, w + o * K, bias ? bias + o : NULL, out + o * P, h, w0, m0, m1, 1, 1);
      }
    }
}

/* Kernel row (c, i), all KW taps j, OB output channels:
 * gw[b, c, i, j] (+)= the lanes of sum over h, then 16-column strips, of gy[b, h, strip] * xp[c, h + i, strip + j],
 * the 16 lanes added by _mm512_reduce_add_ps. */
TARGET INLINE void wg_block(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw, int64_t c,
                            int64_t i, int accumulate, const int OB, const int KW) {
  const int64_t K = g->C * g->kh * KW, HW = g->Hp * g->Wp, P = g->Ho * g->Wo, Wo = g->Wo;
  __m512 acc[7][4];
  _Pragma("GCC unroll 8")
  for (int j = 0; j < KW; j++)
    _Pragma("GCC unroll 8")
    for (int b = 0; b < OB; b++) acc[j][b] = _mm512_setzero_ps();
  for (int64_t h = 0; h < g->Ho; h++) {
    const float *xr = xp + c * HW + (h + i) * g->Wp, *gr = gy + h * Wo;
    for (int64_t w0 = 0; w0 < Wo; w0 += 16) {
      __mmask16 m = lanes(Wo - w0);
      __m512 gv[4];
      _Pragma("GCC unroll 8")
      for (int b = 0; b < OB; b++) gv[b] = _mm512_maskz_loadu_ps(m, gr + b * P + w0);
      _Pragma("GCC unroll 8")
      for (int j = 0; j < KW; j++) {
        __m512 xv = _mm512_maskz_loadu_ps(m, xr + w0 + j);
        _Pragma("GCC unroll 8")
        for (int b = 0; b < OB; b++) acc[j][b] = _mm512_fmadd_ps(gv[b], xv, acc[j][b]);
      }
    }
  }
  _Pragma("GCC unroll 8")
  for (int b = 0; b < OB; b++)
    _Pragma("GCC unroll 8")
    for (int j = 0; j < KW; j++) {
      float s = _mm512_reduce_add_ps(acc[j][b]), *d = gw + b * K + (c * g->kh + i) * KW + j;
      *d = accumulate ? *d + s : s;
    }
}

TARGET void dl_conv_direct_wgrad(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw,
                                 int accumulate) {
  const int64_t K = g->C * g->kh * g->kw, P = g->Ho * g->Wo;
  for (int64_t o = 0; o < g->O;) {       /* 4 channels' gy rows stay in L1 over every kernel row */
    int ob = g->O - o >= 4 ? 4 : 1;
    for (int64_t c = 0; c < g->C; c++)
      for (int64_t i = 0; i < g->kh; i++) {
        const float *gyo = gy + o * P;
        float *gwo = gw + o * K;
        switch (g->kw) {
#define WG_CASE(KW)                                                               \
  case KW:                                                                        \
    if (ob == 4) wg_block(g, xp, gyo, gwo, c, i, accumulate, 4, KW);              \
    else wg_block(g, xp, gyo, gwo, c, i, accumulate, 1, KW);                      \
    break;
          WG_CASE(1) WG_CASE(2) WG_CASE(3) WG_CASE(4) WG_CASE(5) WG_CASE(6) WG_CASE(7)
#undef WG_CASE
          default: break;                /* dl_conv_direct_fits: kw <= 7 */
        }
      }
    o += ob;
  }
}

/* One output row of 2x2 max pooling at stride 2: rows r0 and r1 of the input (r0[0] has index i0 in
 * its plane, r1 = r0 + W), out[ow] the window's max, arg[ow] its index. The same rule as conv.c's
 * loop: the window is read r0[2ow], r0[2ow+1], r1[2ow], r1[2ow+1] and a later value wins when it
 * is greater or NaN. */
TARGET void dl_conv_maxpool2x2_row(const float *r0, int64_t W, int64_t i0, int64_t Wo, float *out, int64_t *arg) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lane2 = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
  const float *r1 = r0 + W;
  for (int64_t ow = 0; ow < Wo; ow += 16) {
    int64_t n = Wo - ow < 16 ? Wo - ow : 16;
    __mmask16 m = lanes(n), ma = lanes(2 * n), mb = lanes(2 * n - 16);
    __m512 a0 = _mm512_maskz_loadu_ps(ma, r0 + 2 * ow), a1 = _mm512_maskz_loadu_ps(mb, r0 + 2 * ow + 16);
    __m512 b0 = _mm512_maskz_loadu_ps(ma, r1 + 2 * ow), b1 = _mm512_maskz_loadu_ps(mb, r1 + 2 * ow + 16);
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

#else /* the portable build: the copies as loops, the direct kernels never chosen */

void dl_conv_copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = 0; q < len; q++) dst[r * dld + q] = src[r * sld + q];
}

void dl_conv_add_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t rows, int64_t len) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t q = 0; q < len; q++) dst[r * dld + q] += src[r * sld + q];
}

void dl_conv_direct_forward(const dl_conv_direct_geom *g, const float *xp, const float *w, const float *bias,
                            float *out) {
  (void)g; (void)xp; (void)w; (void)bias; (void)out;
}

void dl_conv_direct_wgrad(const dl_conv_direct_geom *g, const float *xp, const float *gy, float *gw, int accumulate) {
  (void)g; (void)xp; (void)gy; (void)gw; (void)accumulate;
}

void dl_conv_maxpool2x2_row(const float *r0, int64_t W, int64_t i0, int64_t Wo, float *out, int64_t *arg) {
  (void)r0; (void)W; (void)i0; (void)Wo; (void)out; (void)arg;
}

#endif
