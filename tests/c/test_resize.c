/* test_resize.c -- the resampler (data/resize.c) and the image transforms of
 * data/transforms.c on examples of different sizes, without Lua: same-size
 * resampling is the identity in every mode, constant images stay constant,
 * a window resamples as the same window copied out, known 1-d values (torch's
 * bilinear and antialiased weights worked by hand), torchvision's shorter-side
 * sizes, and fixed output shapes from random_resized_crop and center_crop
 * whatever the input size. */
/* See LICENSE */
#include "dl_test.h"
#include "data/transforms.h"

#include <stdlib.h>
#include <string.h>

static const dl_interp MODES[3] = {DL_INTERP_BILINEAR, DL_INTERP_AREA, DL_INTERP_NEAREST};

static void test_identity_and_constant(void) {
  float x[2 * 5 * 7], y[2 * 5 * 7];
  for (int i = 0; i < 70; i++) x[i] = (float)((i * 37) % 11) / 7.0f;
  for (int m = 0; m < 3; m++)
    for (int aa = 0; aa < 2; aa++) {
      DL_CHECK(dl_resize(x, DL_F32, 2, 5, 7, 0, 0, 5, 7, 5, 7, MODES[m], aa, y) == 0);
      DL_CHECK(memcmp(x, y, sizeof x) == 0);
    }
  uint8_t c[3 * 9 * 13], o[3 * 4 * 20];
  memset(c, 200, sizeof c);
  for (int m = 0; m < 3; m++) {
    DL_CHECK(dl_resize(c, DL_U8, 3, 9, 13, 0, 0, 9, 13, 4, 20, MODES[m], 1, o) == 0);
    int same = 1;
    for (size_t i = 0; i < sizeof o; i++) same &= o[i] == 200;
    DL_CHECK(same);
  }
}

static void test_window(void) {
  double x[3 * 20 * 30], win[3 * 8 * 11], a[3 * 6 * 5], b[3 * 6 * 5];
  for (int i = 0; i < 1800; i++) x[i] = (double)((i * 7919) % 1009) / 1009.0;
  for (int c = 0; c < 3; c++)
    for (int r = 0; r < 8; r++)
      for (int k = 0; k < 11; k++) win[(c * 8 + r) * 11 + k] = x[(c * 20 + 4 + r) * 30 + 9 + k];
  for (int m = 0; m < 3; m++) {
    DL_CHECK(dl_resize(x, DL_F64, 3, 20, 30, 4, 9, 8, 11, 6, 5, MODES[m], 1, a) == 0);
    DL_CHECK(dl_resize(win, DL_F64, 3, 8, 11, 0, 0, 8, 11, 6, 5, MODES[m], 1, b) == 0);
    DL_CHECK(memcmp(a, b, sizeof a) == 0);
  }
}

static void test_known_values(void) {
  /* 1 x 4 -> 1 x 2 bilinear, no antialias: scale 2, sources 0.5 and 2.5 */
  double x[4] = {0, 10, 20, 40}, y[2];
  DL_CHECK(dl_resize(x, DL_F64, 1, 1, 4, 0, 0, 1, 4, 1, 2, DL_INTERP_BILINEAR, 0, y) == 0);
  DL_CHECK_CLOSE(y[0], 5, 1e-12);
  DL_CHECK_CLOSE(y[1], 30, 1e-12);
  /* antialiased: scale 2, so centres 1 and 3, support 2, the triangle stretched by 2 */
  DL_CHECK(dl_resize(x, DL_F64, 1, 1, 4, 0, 0, 1, 4, 1, 2, DL_INTERP_BILINEAR, 1, y) == 0);
  /* output 0: centre 1, taps j = 0..2 at distances 0.5, 0.5, 1.5 (scaled by 1/2): 0.75, 0.75, 0.25 */
  DL_CHECK_CLOSE(y[0], (0.75 * 0 + 0.75 * 10 + 0.25 * 20) / 1.75, 1e-12);
  /* output 1: centre 3, taps j = 1..3: 0.25, 0.75, 0.75 */
  DL_CHECK_CLOSE(y[1], (0.25 * 10 + 0.75 * 20 + 0.75 * 40) / 1.75, 1e-12);
  DL_CHECK(dl_resize(x, DL_F64, 1, 1, 4, 0, 0, 1, 4, 1, 2, DL_INTERP_AREA, 0, y) == 0);
  DL_CHECK_CLOSE(y[0], 5, 1e-12);
  DL_CHECK_CLOSE(y[1], 30, 1e-12);
  /* uint8 rounds half to even: (1 + 2) / 2 = 1.5 -> 2, (3 + 4) / 2 = 3.5 -> 4, (2 + 3) / 2 -> 2 */
  uint8_t u[6] = {1, 2, 3, 4, 2, 3}, v[3];
  DL_CHECK(dl_resize(u, DL_U8, 1, 1, 6, 0, 0, 1, 6, 1, 3, DL_INTERP_AREA, 0, v) == 0);
  DL_CHECK(v[0] == 2 && v[1] == 4 && v[2] == 2);
  int64_t h, w;
  dl_resize_short_side(350, 400, 224, &h, &w);
  DL_CHECK(h == 224 && w == 256);
  dl_resize_short_side(400, 350, 224, &h, &w);
  DL_CHECK(h == 256 && w == 224);
  dl_resize_short_side(3, 1000, 2, &h, &w);
  DL_CHECK(h == 2 && w == 666);
}

/* random_resized_crop and center_crop on examples of many sizes: always [3, 24, 20] */
static void test_fixed_shapes(void) {
  dl_transform rrc = dl_transform_defaults(DL_TF_RESIZED_CROP, "image");
  rrc.size[0] = 24;
  rrc.size[1] = 20;
  dl_transform cc = dl_transform_defaults(DL_TF_CENTER_CROP, "image");
  cc.size[0] = 24;
  cc.size[1] = 20;
  dl_transform cj = dl_transform_defaults(DL_TF_COLOR_JITTER, "image");
  for (int k = 0; k < 3; k++) {
    cj.jitter_on[k] = 1;
    cj.jitter[k][0] = 0.5;
    cj.jitter[k][1] = 1.5;
  }
  const int64_t sizes[][2] = {{1, 1}, {3, 500}, {24, 20}, {97, 13}, {350, 400}};
  dl_example ex;
  memset(&ex, 0, sizeof ex);
  for (int s = 0; s < 5; s++)
    for (uint64_t key = 1; key <= 5; key++) {
      int64_t shape[3] = {3, sizes[s][0], sizes[s][1]}, n = 3 * sizes[s][0] * sizes[s][1];
      uint8_t *img = malloc((size_t)n);
      for (int64_t i = 0; i < n; i++) img[i] = (uint8_t)(i * 13 + (int64_t)key);
      const dl_transform *tfs[3] = {&cj, &rrc, &cc};
      for (int t = 0; t < 3; t++) {
        ex.n = 0;
        int f = dl_example_add(&ex, "image");
        ex.f[f].dtype = DL_U8;
        ex.f[f].ndim = 3;
        memcpy(ex.f[f].shape, shape, sizeof shape);
        ex.f[f].data = img;
        char err[256] = "";
        DL_CHECK(dl_transform_apply(tfs[t], &ex, 0, 0, key, err, sizeof err) == 0);
        int64_t want_h = t == 0 ? sizes[s][0] : 24, want_w = t == 0 ? sizes[s][1] : 20;
        DL_CHECK(ex.f[f].dtype == DL_U8 && ex.f[f].ndim == 3 && ex.f[f].shape[0] == 3 && ex.f[f].shape[1] == want_h &&
                 ex.f[f].shape[2] == want_w);
      }
      free(img);
    }
  dl_example_free(&ex);
}

int main(void) {
  test_identity_and_constant();
  test_window();
  test_known_values();
  test_fixed_shapes();
  DL_TEST_END();
}
