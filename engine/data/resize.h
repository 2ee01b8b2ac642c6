/* resize.h -- separable image resampling of a window of [C, H, W] planes, the
 * kernel of the resize and random_resized_crop transforms (transforms.c).
 *
 * The index and weight arithmetic follows PyTorch's CPU interpolation
 * (torch.nn.functional.interpolate, align_corners=False) in the precision of
 * the data (float for uint8 and float32, double for float64):
 *   bilinear          2 taps at src = max(scale * (i + 0.5) - 0.5, 0), scale = in / out
 *   bilinear, antialias  the triangle filter stretched by max(scale, 1), taps
 *                        normalised to sum 1 (torch's antialias=True, PIL's method)
 *   area              the mean over [floor(i * in / out), ceil((i + 1) * in / out))
 *                     (adaptive average pooling), as a row mean of column means
 *   nearest           src = min(floor(i * scale), in - 1), scale = (float)in / out
 * The width is resampled first, then the height; uint8 results are rounded half
 * to even and clamped to 0..255 (torchvision rounds before casting back).
 */
/* See LICENSE */
#ifndef DL_RESIZE_H
#define DL_RESIZE_H

#include "core/dl.h"

typedef enum { DL_INTERP_BILINEAR, DL_INTERP_AREA, DL_INTERP_NEAREST } dl_interp;

/* Resamples the window rows [y0, y0 + h), columns [x0, x0 + w) of each of the
 * C planes H x W of src (dtype d: uint8, float32 or float64; the window inside
 * the planes, h, w >= 1) to oh x ow (>= 1) into out (dtype d, C * oh * ow
 * elements). Returns 0, or -1 when out of memory. */
int dl_resize(const void *src, dl_dtype d, int64_t C, int64_t H, int64_t W, int64_t y0, int64_t x0, int64_t h,
              int64_t w, int64_t oh, int64_t ow, dl_interp mode, int antialias, void *out);

/* torchvision's output size for a shorter side of n: {h, w} of an H x W image. */
void dl_resize_short_side(int64_t H, int64_t W, int64_t n, int64_t *oh, int64_t *ow);

#endif
