/* resize.c -- separable resampling (resize.h says which arithmetic).
 *
 * For each axis the taps are computed once per call: for output i, a first
 * input index start[i] and k weights (k the largest support on that axis,
 * shorter supports padded with zero weights, start moved left at the right
 * border so that start + k <= in): the loops then have no per-pixel branch.
 * The weights are computed in double and, for uint8 and float32 data, rounded
 * to float after every operation as PyTorch computes them in float; the pixel
 * passes run in float (double for float64). Width first, into a buffer of the
 * window's rows (only those the height taps read), then height, a row at a
 * time so the inner loops run over contiguous columns.
 */
/* See LICENSE */
#include "data/resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE4_1__
#include <smmintrin.h>
#endif

typedef struct {
  int64_t k;          /* taps per output */
  int64_t *start;     /* [out] */
  double *wd;         /* [out * k] */
  float *wf;          /* [out * k] */
  double *count;      /* area: [out] pixels averaged (the weights are 1: sums, divided at the end) */
} taps;

static void taps_free(taps *t) {
  free(t->start);
  free(t->wd);
  free(t->wf);
  free(t->count);
}

/* x rounded to the data's precision: float when single */
static double R(double x, int single) { return single ? (double)(float)x : x; }

/* the triangle filter of bilinear interpolation */
static double tri(double x) {
  x = fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

/* support of output i: first index *lo, count *n, weights into w (room for n) */
static void one_output(int64_t i, int64_t in, int64_t out, dl_interp mode, int aa, int single, int64_t *lo,
                       int64_t *n, double *w) {
  if (mode == DL_INTERP_NEAREST) {
    float scale = (float)in / (float)out;
    int64_t s = in == out ? i : (int64_t)floorf((float)i * scale);
    *lo = s < in - 1 ? s : in - 1;
    *n = 1;
    w[0] = 1.0;
  } else if (mode == DL_INTERP_AREA) {
    int64_t a = i * in / out, b = ((i + 1) * in + out - 1) / out;
    *lo = a;
    *n = b - a;
    for (int64_t j = 0; j < *n; j++) w[j] = 1.0;   /* sums; taps_make records the counts */
  } else if (!aa) {
    /* PyTorch's x86 build contracts scale * (i + 0.5) - 0.5 to one fused
     * multiply-add in double, rounds the fraction to the data's precision
     * and takes 1 - it there */
    double scale = R((double)in / (double)out, single);
    double src = fma(scale, (double)i + 0.5, -0.5);
    if (src < 0) src = 0;
    int64_t i0 = (int64_t)src;
    if (i0 > in - 1) i0 = in - 1;
    double l1 = R(src - (double)i0, single);
    l1 = l1 < 0 ? 0 : l1 > 1 ? 1 : l1;
    double l0 = R(1.0 - l1, single);
    *lo = i0;
    if (i0 < in - 1) {
      *n = 2;
      w[0] = l0;
      w[1] = l1;
    } else {                       /* both taps on the last pixel */
      *n = 1;
      w[0] = R(l0 + l1, single);
    }
  } else {
    double scale = R((double)in / (double)out, single);
    double support = scale >= 1.0 ? scale : 1.0, inv = scale >= 1.0 ? R(1.0 / scale, single) : 1.0;
    double centre = R(scale * ((double)i + 0.5), single);
    int64_t a = (int64_t)(R(centre - support, single) + 0.5), b = (int64_t)(R(centre + support, single) + 0.5);
    if (a < 0) a = 0;
    if (b > in) b = in;
    double total = 0;
    for (int64_t j = 0; j < b - a; j++) {
      w[j] = R(tri(R((R((double)(j + a) - centre, single) + 0.5) * inv, single)), single);
      total = R(total + w[j], single);
    }
    for (int64_t j = 0; j < b - a && total != 0.0; j++) w[j] = R(w[j] / total, single);
    *lo = a;
    *n = b - a;
  }
}

/* the largest support of any output on this axis */
static int64_t max_support(int64_t in, int64_t out, dl_interp mode, int aa) {
  if (mode == DL_INTERP_NEAREST) return 1;
  if (mode == DL_INTERP_AREA) return in / out + 2 < in ? in / out + 2 : in;
  if (!aa || in <= out) return 2 < in ? 2 : in;
  int64_t k = (int64_t)ceil((double)in / (double)out) * 2 + 2;
  return k < in ? k : in;
}

static int taps_make(taps *t, int64_t in, int64_t out, dl_interp mode, int aa, int single) {
  memset(t, 0, sizeof *t);
  int64_t cap = max_support(in, out, mode, aa);
  double *w = malloc((size_t)(out * cap) * sizeof *w);          /* output i's weights at w[i * cap] */
  int64_t *lo = malloc((size_t)out * 2 * sizeof *lo), *n = lo ? lo + out : NULL;
  t->start = malloc((size_t)out * sizeof *t->start);
  t->count = mode == DL_INTERP_AREA ? malloc((size_t)out * sizeof *t->count) : NULL;
  if (!w || !lo || !t->start || (mode == DL_INTERP_AREA && !t->count)) goto fail;
  int64_t k = 1;
  for (int64_t i = 0; i < out; i++) {          /* supports, and the common width k */
    one_output(i, in, out, mode, aa, single, &lo[i], &n[i], w + i * cap);
    if (n[i] > k) k = n[i];
  }
  t->k = k;
  t->wd = calloc((size_t)(out * k), sizeof *t->wd);
  t->wf = malloc((size_t)(out * k) * sizeof *t->wf);
  if (!t->wd || !t->wf) goto fail;
  for (int64_t i = 0; i < out; i++) {
    int64_t s = lo[i] + k <= in ? lo[i] : in - k;   /* k <= in: every support fits in the input */
    t->start[i] = s;
    if (t->count) t->count[i] = (double)n[i];
    for (int64_t j = 0; j < n[i]; j++) t->wd[i * k + (lo[i] - s) + j] = w[i * cap + j];
  }
  for (int64_t i = 0; i < out * k; i++) t->wf[i] = (float)t->wd[i];
  free(w);
  free(lo);
  return 0;
fail:
  free(w);
  free(lo);
  taps_free(t);
  return -1;
}

/* ------------------------------------------------------------ float passes (uint8, float32) */

/* The width pass runs on 8 rows at once: their pixels interleaved (pixel x of
 * row l at [8 x + l]), each tap is one 8-lane multiply-add (two SSE
 * operations, or one AVX2 in the AVX2 copy), so the lanes compute exactly
 * what 8 scalar passes would. */
#define LANES 8
typedef float vecf __attribute__((vector_size(4 * LANES)));

static inline void hpass_k(const vecf *p, const taps *tx, int64_t ow, int64_t k, vecf *o) {
  for (int64_t x = 0; x < ow; x++) {
    const vecf *s = p + tx->start[x];
    const float *wt = tx->wf + x * k;
    vecf acc = wt[0] * s[0];
    for (int64_t j = 1; j < k; j++) acc += wt[j] * s[j];
    o[x] = acc;
  }
}

/* interleaved rows p[0..w) -> interleaved outputs o[0..ow); the common tap
 * counts get loops the compiler unrolls */
DL_SIMD_CLONES static void hpass(const vecf *p, const taps *tx, int64_t ow, vecf *o) {
  switch (tx->k) {
    case 1: hpass_k(p, tx, ow, 1, o); break;
    case 2: hpass_k(p, tx, ow, 2, o); break;
    case 3: hpass_k(p, tx, ow, 3, o); break;
    case 4: hpass_k(p, tx, ow, 4, o); break;
    case 5: hpass_k(p, tx, ow, 5, o); break;
    case 6: hpass_k(p, tx, ow, 6, o); break;
    default: hpass_k(p, tx, ow, tx->k, o); break;
  }
}

/* o[x] = sum over j < k of wt[j] r[j ow + x], summed in j order; a constant k
 * lets the compiler keep the sum in registers */
static inline void vsum_k(const float *r, const float *wt, int64_t k, int64_t ow, float *o) {
  for (int64_t x = 0; x < ow; x++) {
    float acc = wt[0] * r[x];
    for (int64_t j = 1; j < k; j++) acc += wt[j] * r[j * ow + x];
    o[x] = acc;
  }
}

/* height pass of output row y: o[0..ow) from the buffered rows; area sums
 * are divided by the rows, then by the columns averaged (as torch does) */
DL_SIMD_CLONES static void vpass_f(const float *rows, const taps *tx, const taps *ty, int64_t y, int64_t ow,
                                   float *o) {
  int64_t k = ty->k;
  const float *wt = ty->wf + y * k, *r = rows + ty->start[y] * ow;
  switch (k) {
    case 1: vsum_k(r, wt, 1, ow, o); break;
    case 2: vsum_k(r, wt, 2, ow, o); break;
    case 3: vsum_k(r, wt, 3, ow, o); break;
    case 4: vsum_k(r, wt, 4, ow, o); break;
    case 5: vsum_k(r, wt, 5, ow, o); break;
    case 6: vsum_k(r, wt, 6, ow, o); break;
    default:
      for (int64_t x = 0; x < ow; x++) o[x] = wt[0] * r[x];
      for (int64_t j = 1; j < k; j++) {
        const float *rj = r + j * ow;
        float wj = wt[j];
        for (int64_t x = 0; x < ow; x++) o[x] += wj * rj[x];
      }
  }
  if (ty->count) {
    float kh = (float)ty->count[y];
    for (int64_t x = 0; x < ow; x++) o[x] = o[x] / kh / (float)tx->count[x];
  }
}

/* The moves between 4 planar rows and 4 lanes of the interleaved layout
 * (stride LANES), and the uint8 rounding: SSE4.1 (the build's x86-64-v2
 * baseline) with plain loops for other targets and for the tails; both give
 * the same values. */

/* rows s[0..4) (w uint8 pixels each) -> d[LANES x + l] as floats */
static void interleave_u8(const uint8_t *const *s, int64_t w, float *d) {
  int64_t x = 0;
#ifdef __SSE4_1__
  for (; x + 16 <= w; x += 16) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s[0] + x)), b = _mm_loadu_si128((const __m128i *)(s[1] + x));
    __m128i c = _mm_loadu_si128((const __m128i *)(s[2] + x)), e = _mm_loadu_si128((const __m128i *)(s[3] + x));
    __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
    __m128i ce0 = _mm_unpacklo_epi8(c, e), ce1 = _mm_unpackhi_epi8(c, e);
    __m128i q[4] = {_mm_unpacklo_epi16(ab0, ce0), _mm_unpackhi_epi16(ab0, ce0), _mm_unpacklo_epi16(ab1, ce1),
                    _mm_unpackhi_epi16(ab1, ce1)};      /* q[k]: pixels 4k..4k+3, 4 rows each */
    float *o = d + LANES * x;
    for (int k = 0; k < 4; k++, o += 4 * LANES) {
      _mm_storeu_ps(o, _mm_cvtepi32_ps(_mm_cvtepu8_epi32(q[k])));
      _mm_storeu_ps(o + LANES, _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_srli_si128(q[k], 4))));
      _mm_storeu_ps(o + 2 * LANES, _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_srli_si128(q[k], 8))));
      _mm_storeu_ps(o + 3 * LANES, _mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_srli_si128(q[k], 12))));
    }
  }
#endif
  for (; x < w; x++)
    for (int l = 0; l < 4; l++) d[LANES * x + l] = (float)s[l][x];
}

/* rows s[0..4) (w floats each) -> d[LANES x + l] */
static void interleave_f(const float *const *s, int64_t w, float *d) {
  int64_t x = 0;
#ifdef __SSE4_1__
  for (; x + 4 <= w; x += 4) {
    __m128 a = _mm_loadu_ps(s[0] + x), b = _mm_loadu_ps(s[1] + x), c = _mm_loadu_ps(s[2] + x), e = _mm_loadu_ps(s[3] + x);
    _MM_TRANSPOSE4_PS(a, b, c, e);
    _mm_storeu_ps(d + LANES * x, a);
    _mm_storeu_ps(d + LANES * (x + 1), b);
    _mm_storeu_ps(d + LANES * (x + 2), c);
    _mm_storeu_ps(d + LANES * (x + 3), e);
  }
#endif
  for (; x < w; x++)
    for (int l = 0; l < 4; l++) d[LANES * x + l] = s[l][x];
}

/* q[LANES x + l] (n values per lane) -> rows o[l][0..n) for the lanes l < lanes (<= 4) */
static void deinterleave(const float *q, int64_t n, int lanes, float *const *o) {
  int64_t x = 0;
#ifdef __SSE4_1__
  for (; x + 4 <= n; x += 4) {
    __m128 a = _mm_loadu_ps(q + LANES * x), b = _mm_loadu_ps(q + LANES * (x + 1));
    __m128 c = _mm_loadu_ps(q + LANES * (x + 2)), e = _mm_loadu_ps(q + LANES * (x + 3));
    _MM_TRANSPOSE4_PS(a, b, c, e);
    __m128 r[4] = {a, b, c, e};
    for (int l = 0; l < lanes; l++) _mm_storeu_ps(o[l] + x, r[l]);
  }
#endif
  for (; x < n; x++)
    for (int l = 0; l < lanes; l++) o[l][x] = q[LANES * x + l];
}

/* v[0..n) rounded half to even, clamped to 0..255 */
static void round_u8(const float *v, int64_t n, uint8_t *o) {
  int64_t x = 0;
#ifdef __SSE4_1__
  const __m128 lo = _mm_set1_ps(0.0f), hi = _mm_set1_ps(255.0f);
  __m128i k[4];
  for (; x + 16 <= n; x += 16) {
    for (int j = 0; j < 4; j++) {
      __m128 r = _mm_round_ps(_mm_loadu_ps(v + x + 4 * j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      k[j] = _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(r, lo), hi));
    }
    _mm_storeu_si128((__m128i *)(o + x), _mm_packus_epi16(_mm_packs_epi32(k[0], k[1]), _mm_packs_epi32(k[2], k[3])));
  }
#endif
  for (; x < n; x++) {
    float r = rintf(v[x]);
    r = r < 0.0f ? 0.0f : r;
    o[x] = (uint8_t)(r > 255.0f ? 255.0f : r);
  }
}

static void mark_rows(const taps *ty, int64_t oh, unsigned char *need) {
  for (int64_t y = 0; y < oh; y++)
    for (int64_t j = 0; j < ty->k; j++) need[ty->start[y] + j] = 1;
}

static int resize_float(const void *src, int u8, int64_t C, int64_t H, int64_t W, int64_t y0, int64_t x0, int64_t h,
                        int64_t w, int64_t oh, int64_t ow, const taps *tx, const taps *ty, void *out) {
  float *tmp = malloc((size_t)(h * ow) * sizeof *tmp);
  vecf *in8 = aligned_alloc(sizeof(vecf), (size_t)(w + ow) * sizeof *in8);
  float *orow = malloc((size_t)ow * sizeof *orow);
  unsigned char *need = calloc((size_t)h, 1);
  int64_t *rows = malloc((size_t)h * sizeof *rows);
  if (!tmp || !in8 || !orow || !need || !rows) {
    free(tmp);
    free(in8);
    free(orow);
    free(need);
    free(rows);
    return -1;
  }
  mark_rows(ty, oh, need);
  int64_t nrows = 0;
  for (int64_t r = 0; r < h; r++)
    if (need[r]) rows[nrows++] = r;
  vecf *out8 = in8 + w;
  for (int64_t c = 0; c < C; c++) {
    for (int64_t g = 0; g < nrows; g += LANES) {
      int64_t lanes = nrows - g < LANES ? nrows - g : LANES;
      const void *lrow[LANES];
      float *orows[LANES];
      for (int64_t l = 0; l < LANES; l++) {             /* missing lanes repeat the last row */
        int64_t r = rows[g + (l < lanes ? l : lanes - 1)], at = (c * H + y0 + r) * W + x0;
        lrow[l] = u8 ? (const void *)((const uint8_t *)src + at) : (const void *)((const float *)src + at);
        orows[l] = tmp + r * ow;
      }
      for (int half = 0; half < LANES; half += 4) {
        if (u8) interleave_u8((const uint8_t *const *)lrow + half, w, (float *)in8 + half);
        else interleave_f((const float *const *)lrow + half, w, (float *)in8 + half);
      }
      hpass(in8, tx, ow, out8);
      for (int half = 0; half < lanes; half += 4)
        deinterleave((const float *)out8 + half, ow, (int)(lanes - half < 4 ? lanes - half : 4), orows + half);
    }
    for (int64_t y = 0; y < oh; y++) {
      if (!u8) {
        vpass_f(tmp, tx, ty, y, ow, (float *)out + (c * oh + y) * ow);
        continue;
      }
      vpass_f(tmp, tx, ty, y, ow, orow);
      round_u8(orow, ow, (uint8_t *)out + (c * oh + y) * ow);
    }
  }
  free(tmp);
  free(in8);
  free(orow);
  free(need);
  free(rows);
  return 0;
}

/* ------------------------------------------------------------ double passes (float64) */

static int resize_double(const double *src, int64_t C, int64_t H, int64_t W, int64_t y0, int64_t x0, int64_t h,
                         int64_t oh, int64_t ow, const taps *tx, const taps *ty, double *out) {
  double *tmp = malloc((size_t)(h * ow) * sizeof *tmp);
  unsigned char *need = calloc((size_t)h, 1);
  if (!tmp || !need) {
    free(tmp);
    free(need);
    return -1;
  }
  mark_rows(ty, oh, need);
  int64_t kx = tx->k, ky = ty->k;
  for (int64_t c = 0; c < C; c++) {
    for (int64_t r = 0; r < h; r++) {
      if (!need[r]) continue;
      const double *p = src + (c * H + y0 + r) * W + x0;
      for (int64_t x = 0; x < ow; x++) {
        const double *s = p + tx->start[x], *wt = tx->wd + x * kx;
        double acc = wt[0] * s[0];
        for (int64_t j = 1; j < kx; j++) acc += wt[j] * s[j];
        tmp[r * ow + x] = acc;
      }
    }
    for (int64_t y = 0; y < oh; y++) {
      double *o = out + (c * oh + y) * ow;
      const double *wt = ty->wd + y * ky, *rw = tmp + ty->start[y] * ow;
      for (int64_t x = 0; x < ow; x++) o[x] = wt[0] * rw[x];
      for (int64_t j = 1; j < ky; j++)
        for (int64_t x = 0; x < ow; x++) o[x] += wt[j] * rw[j * ow + x];
      if (ty->count)
        for (int64_t x = 0; x < ow; x++) o[x] = o[x] / ty->count[y] / tx->count[x];
    }
  }
  free(tmp);
  free(need);
  return 0;
}

/* ------------------------------------------------------------ entry points */

int dl_resize(const void *src, dl_dtype d, int64_t C, int64_t H, int64_t W, int64_t y0, int64_t x0, int64_t h,
              int64_t w, int64_t oh, int64_t ow, dl_interp mode, int antialias, void *out) {
  int single = d != DL_F64;
  taps tx, ty;
  if (taps_make(&tx, w, ow, mode, antialias, single) < 0) return -1;
  if (taps_make(&ty, h, oh, mode, antialias, single) < 0) {
    taps_free(&tx);
    return -1;
  }
  int rc = d == DL_F64 ? resize_double(src, C, H, W, y0, x0, h, oh, ow, &tx, &ty, out)
                       : resize_float(src, d == DL_U8, C, H, W, y0, x0, h, w, oh, ow, &tx, &ty, out);
  taps_free(&tx);
  taps_free(&ty);
  return rc;
}

void dl_resize_short_side(int64_t H, int64_t W, int64_t n, int64_t *oh, int64_t *ow) {
  int64_t s = W <= H ? W : H, l = W <= H ? H : W;
  /* Python's int(n * long / short): exact product, one rounded division (sizes past 2^53 aside) */
  double q = l <= INT64_MAX / n ? (double)(n * l) / (double)s : (double)n * ((double)l / (double)s);
  int64_t nl = q < 4e18 ? (int64_t)q : (int64_t)4e18;
  *oh = W <= H ? nl : n;
  *ow = W <= H ? n : nl;
}
