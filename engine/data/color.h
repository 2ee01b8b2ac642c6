/* color.h -- the colour adjustments of the color_jitter transform, as
 * torchvision computes them on tensors (transforms.functional_tensor):
 *   brightness f   x' = f x
 *   contrast f     x' = f x + (1 - f) m, m the mean of the grey image (one channel: of x)
 *   saturation f   x' = f x + (1 - f) g, g the pixel's grey (a no-op on one channel)
 *   hue f          the hue turned by f of a turn (|f| <= 1/2): RGB -> HSV -> RGB with
 *                  torchvision's formulas, uint8 through x / 255 and back by y * 255
 *                  truncated (a no-op on one channel)
 * grey = 0.2989 r + 0.587 g + 0.114 b (rgb_to_grayscale), truncated to an
 * integer for uint8 images; the blends in float, clamped to [0, 1] (float32)
 * or [0, 255] and truncated (uint8), as torchvision's _blend does.
 */
/* See LICENSE */
#ifndef DL_COLOR_H
#define DL_COLOR_H

#include "core/dl.h"

typedef enum { DL_COLOR_BRIGHTNESS, DL_COLOR_CONTRAST, DL_COLOR_SATURATION, DL_COLOR_HUE } dl_color_op;

/* Adjusts x in place: C (1 or 3) planes of hw pixels, uint8 or float32. */
void dl_color_adjust(dl_color_op op, dl_dtype d, void *x, int64_t C, int64_t hw, double f);

#endif
