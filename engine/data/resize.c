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
  double *w = malloc((size_t)cap * sizeof *w);
  t->start = malloc((size_t)out * sizeof *t->start);
  t->wd = calloc((size_t)(out * cap), sizeof *t->wd);
  t->wf = malloc((size_t)(out * cap) * sizeof *t->wf);
  t->count = mode == DL_INTERP_AREA ? malloc((size_t)out * sizeof *t->count) : NULL;
  if (!w || !t->start || !t->wd || !t->wf || (mode == DL_INTERP_AREA && !t->count)) {
    free(w);
    taps_free(t);
    return -1;
  }
  int64_t k = 1;
  for (int64_t i = 0; i < out; i++) {          /* supports, then the common width k */
    int64_t lo, n;
    one_output(i, in, out, mode, aa, single, &lo, &n, w);
    if (n > k) k = n;
  }
  t->k = k;
  for (int64_t i = 0; i < out; i++) {
    int64_t lo, n;
    one_output(i, in, out, mode, aa, single, &lo, &n, w);
    int64_t s = lo + k <= in ? lo : in - k;     /* k <= in: every support fits in the input */
    t->start[i] = s;
    if (t->count) t->count[i] = (double)n;
    for (int64_t j = 0; j < n; j++) t->wd[i * k + (lo - s) + j] = w[j];
  }
  for (int64_t i = 0; i < out * k; i++) t->wf[i] = (float)t->wd[i];
  free(w);
  return 0;
}

/* ------------------------------------------------------------ float passes (uint8, float32) */

/* The width pass runs on 4 rows at once: their pixels interleaved (pixel x of
 * row l at [4 x + l]), each tap is one 4-lane multiply-add, so the lanes
 * compute exactly what 4 scalar passes would. */
typedef float v4f __attribute__((vector_size(16)));

static inline void hpass4_k(const v4f *p, const taps *tx, int64_t ow, int64_t k, v4f *o) {
  for (int64_t x = 0; x < ow; x++) {
    const v4f *s = p + tx->start[x];
    const float *wt = tx->wf + x * k;
    v4f acc = wt[0] * s[0];
    for (int64_t j = 1; j < k; j++) acc += wt[j] * s[j];
    o[x] = acc;
  }
}

/* interleaved rows p[0..w) -> interleaved outputs o[0..ow); the common tap
 * counts get loops the compiler unrolls */
static void hpass4(const v4f *p, const taps *tx, int64_t ow, v4f *o) {
  switch (tx->k) {
    case 1: hpass4_k(p, tx, ow, 1, o); break;
    case 2: hpass4_k(p, tx, ow, 2, o); break;
    case 3: hpass4_k(p, tx, ow, 3, o); break;
    case 4: hpass4_k(p, tx, ow, 4, o); break;
    case 5: hpass4_k(p, tx, ow, 5, o); break;
    case 6: hpass4_k(p, tx, ow, 6, o); break;
    default: hpass4_k(p, tx, ow, tx->k, o); break;
  }
}

/* height pass of output row y: o[0..ow) from the buffered rows; area sums
 * are divided by the rows, then by the columns averaged (as torch does) */
static void vpass_f(const float *rows, const taps *tx, const taps *ty, int64_t y, int64_t ow, float *o) {
  int64_t k = ty->k;
  const float *wt = ty->wf + y * k, *r = rows + ty->start[y] * ow;
  for (int64_t x = 0; x < ow; x++) o[x] = wt[0] * r[x];
  for (int64_t j = 1; j < k; j++) {
    const float *rj = r + j * ow;
    float wj = wt[j];
    for (int64_t x = 0; x < ow; x++) o[x] += wj * rj[x];
  }
  if (ty->count) {
    float kh = (float)ty->count[y];
    for (int64_t x = 0; x < ow; x++) o[x] = o[x] / kh / (float)tx->count[x];
  }
}

static void mark_rows(const taps *ty, int64_t oh, unsigned char *need) {
  for (int64_t y = 0; y < oh; y++)
    for (int64_t j = 0; j < ty->k; j++) need[ty->start[y] + j] = 1;
}

static int resize_float(const void *src, int u8, int64_t C, int64_t H, int64_t W, int64_t y0, int64_t x0, int64_t h,
                        int64_t w, int64_t oh, int64_t ow, const taps *tx, const taps *ty, void *out) {
  float *tmp = malloc((size_t)(h * ow) * sizeof *tmp);
  v4f *in4 = aligned_alloc(16, (size_t)(w + ow) * sizeof *in4);
  float *orow = malloc((size_t)ow * sizeof *orow);
  unsigned char *need = calloc((size_t)h, 1);
  int64_t *rows = malloc((size_t)h * sizeof *rows);
  if (!tmp || !in4 || !orow || !need || !rows) {
    free(tmp);
    free(in4);
    free(orow);
    free(need);
    free(rows);
    return -1;
  }
  mark_rows(ty, oh, need);
  int64_t nrows = 0;
  for (int64_t r = 0; r < h; r++)
    if (need[r]) rows[nrows++] = r;
  v4f *out4 = in4 + w;
  for (int64_t c = 0; c < C; c++) {
    for (int64_t g = 0; g < nrows; g += 4) {
      int64_t lanes = nrows - g < 4 ? nrows - g : 4;
      for (int64_t l = 0; l < 4; l++) {                 /* missing lanes repeat the last row */
        int64_t at = (c * H + y0 + rows[g + (l < lanes ? l : lanes - 1)]) * W + x0;
        float *d = (float *)in4 + l;
        if (u8) {
          const uint8_t *s = (const uint8_t *)src + at;
          for (int64_t x = 0; x < w; x++) d[4 * x] = (float)s[x];
        } else {
          const float *s = (const float *)src + at;
          for (int64_t x = 0; x < w; x++) d[4 * x] = s[x];
        }
      }
      hpass4(in4, tx, ow, out4);
      for (int64_t l = 0; l < lanes; l++) {
        float *o = tmp + rows[g + l] * ow;
        const float *q = (const float *)out4 + l;
        for (int64_t x = 0; x < ow; x++) o[x] = q[4 * x];
      }
    }
    for (int64_t y = 0; y < oh; y++) {
      if (!u8) {
        vpass_f(tmp, tx, ty, y, ow, (float *)out + (c * oh + y) * ow);
        continue;
      }
      vpass_f(tmp, tx, ty, y, ow, orow);
      uint8_t *o = (uint8_t *)out + (c * oh + y) * ow;
      for (int64_t x = 0; x < ow; x++) {       /* round half to even (SSE4.1 roundss), clamp */
        float v = rintf(orow[x]);
        v = v < 0.0f ? 0.0f : v;
        o[x] = (uint8_t)(v > 255.0f ? 255.0f : v);
      }
    }
  }
  free(tmp);
  free(in4);
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
  int64_t nl = (int64_t)((double)(n * l) / (double)s);    /* Python's int(n * long / short) */
  *oh = W <= H ? nl : n;
  *ow = W <= H ? n : nl;
}
