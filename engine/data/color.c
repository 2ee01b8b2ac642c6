/* color.c -- brightness, contrast and saturation in place (color.h). The
 * factors enter the float arithmetic as torch does with Python scalars: f and
 * 1 - f (computed in double) rounded to float. */
/* See LICENSE */
#include "data/color.h"

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

void dl_color_adjust(dl_color_op op, dl_dtype d, void *x, int64_t C, int64_t hw, double f) {
  float a = (float)f, b = (float)(1.0 - f);
  int64_t n = C * hw;
  if (op == DL_COLOR_SATURATION && C != 3) return;   /* torchvision: a no-op on one channel */
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
