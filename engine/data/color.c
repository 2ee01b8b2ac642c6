/* color.c -- brightness, contrast and saturation in place (color.h). The
 * factors enter the float arithmetic as torch does with Python scalars: f and
 * 1 - f (computed in double) rounded to float. */
/* See LICENSE */
#include "data/color.h"

#include <math.h>

static float grey_f(float r, float g, float b) { return 0.2989f * r + 0.587f * g + 0.114f * b; }

/* a blended value clamped to [0, 1] */
static float clamp1(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }
/* a blended value clamped to [0, 255] and truncated, as .to(torch.uint8) does */
static uint8_t clamp255(float v) { return (uint8_t)(v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v); }

/* the mean grey level (contrast's m), in float as torch.mean of a float32 image */
static float mean_grey(dl_dtype d, const void *x, int64_t C, int64_t hw) {
  double s = 0;
  if (d == DL_U8) {
    const uint8_t *p = x;
    if (C == 3)
      for (int64_t k = 0; k < hw; k++) s += (double)(uint8_t)grey_f(p[k], p[hw + k], p[2 * hw + k]);
    else
      for (int64_t k = 0; k < hw; k++) s += p[k];
  } else {
    const float *p = x;
    if (C == 3)
      for (int64_t k = 0; k < hw; k++) s += (double)grey_f(p[k], p[hw + k], p[2 * hw + k]);
    else
      for (int64_t k = 0; k < hw; k++) s += (double)p[k];
  }
  return (float)s / (float)hw;
}

/* torch's remainder of a float by 1: fmod, moved into [0, 1) */
static float rem1(float a) {
  float m = fmodf(a, 1.0f);
  return m != 0.0f && m < 0.0f ? m + 1.0f : m;
}

static float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

/* one pixel's hue turned by hf, each step in float as torchvision's
 * _rgb2hsv, the shift, then _hsv2rgb compute it */
static void hue_pixel(float *rgb, float hf) {
  float r = rgb[0], g = rgb[1], b = rgb[2];
  float maxc = r > g ? r : g, minc = r < g ? r : g;
  maxc = maxc > b ? maxc : b;
  minc = minc < b ? minc : b;
  int eqc = maxc == minc;
  float cr = maxc - minc;
  float s = cr / (eqc ? 1.0f : maxc), crd = eqc ? 1.0f : cr;
  float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
  float hr = maxc == r ? bc - gc : 0.0f;
  float hg = maxc == g && maxc != r ? 2.0f + rc - bc : 0.0f;
  float hb = maxc != g && maxc != r ? 4.0f + gc - rc : 0.0f;
  float h = fmodf((hr + hg + hb) / 6.0f + 1.0f, 1.0f);
  h = rem1(h + hf);
  float v = maxc, h6 = h * 6.0f, i = floorf(h6), fr = h6 - i;
  float p = clamp01(v * (1.0f - s)), q = clamp01(v * (1.0f - s * fr)), t = clamp01(v * (1.0f - s * (1.0f - fr)));
  int k = i >= 0.0f && i < 7.0f ? (int)i % 6 : 0;    /* h * 6 may round up to 6: torch's i % 6; NaN: 0 */
  const float table[6][3] = {{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}};
  rgb[0] = table[k][0];
  rgb[1] = table[k][1];
  rgb[2] = table[k][2];
}

static void adjust_hue(dl_dtype d, void *x, int64_t hw, double f) {
  float hf = (float)f, px[3];
  if (d == DL_U8) {
    uint8_t *p = x;
    for (int64_t k = 0; k < hw; k++) {
      for (int c = 0; c < 3; c++) px[c] = (float)p[c * hw + k] / 255.0f;
      hue_pixel(px, hf);
      for (int c = 0; c < 3; c++) p[c * hw + k] = (uint8_t)(px[c] * 255.0f);   /* in [0, 255]: truncated */
    }
  } else {
    float *p = x;
    for (int64_t k = 0; k < hw; k++) {
      for (int c = 0; c < 3; c++) px[c] = p[c * hw + k];
      hue_pixel(px, hf);
      for (int c = 0; c < 3; c++) p[c * hw + k] = px[c];
    }
  }
}

void dl_color_adjust(dl_color_op op, dl_dtype d, void *x, int64_t C, int64_t hw, double f) {
  float a = (float)f, b = (float)(1.0 - f);
  int64_t n = C * hw;
  if ((op == DL_COLOR_SATURATION || op == DL_COLOR_HUE) && C != 3) return;   /* torchvision: no-ops on one channel */
  if (op == DL_COLOR_HUE) {
    adjust_hue(d, x, hw, f);
    return;
  }
  if (op == DL_COLOR_SATURATION) {
    if (d == DL_U8) {
      uint8_t *p = x;
      for (int64_t k = 0; k < hw; k++) {
        float g = b * (float)(uint8_t)grey_f(p[k], p[hw + k], p[2 * hw + k]);
        for (int64_t c = 0; c < 3; c++) p[c * hw + k] = clamp255(a * (float)p[c * hw + k] + g);
      }
    } else {
      float *p = x;
      for (int64_t k = 0; k < hw; k++) {
        float g = b * grey_f(p[k], p[hw + k], p[2 * hw + k]);
        for (int64_t c = 0; c < 3; c++) p[c * hw + k] = clamp1(a * p[c * hw + k] + g);
      }
    }
    return;
  }
  /* brightness blends with 0 (adding (1 - f) * 0 changes nothing), contrast with the mean */
  float m = op == DL_COLOR_CONTRAST ? b * mean_grey(d, x, C, hw) : 0.0f;
  if (d == DL_U8) {
    uint8_t *p = x;
    for (int64_t k = 0; k < n; k++) p[k] = clamp255(a * (float)p[k] + m);
  } else {
    float *p = x;
    for (int64_t k = 0; k < n; k++) p[k] = clamp1(a * p[k] + m);
  }
}
