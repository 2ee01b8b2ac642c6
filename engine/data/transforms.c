/* transforms.c -- the built-in per-example transforms of the input pipeline.
 *
 * Each rewrites one field of one example (dl_example) and runs on a worker
 * thread with no Lua and no dl_ctx: failures are messages in a buffer. Image
 * transforms take [C, H, W] or [H, W] fields of any size, read from the field
 * at each call (examples may differ in size): crop, flip, translate and
 * center_crop move elements of any dtype; affine interpolates uint8 and
 * float32; resize and random_resized_crop resample uint8, float32 and float64
 * (resize.c); color_jitter adjusts uint8 and float32 (color.c). Random ones
 * draw from a Philox stream keyed per example and stage, so the result
 * depends only on the key. The kinds are rows of a table (name, randomness).
 */
/* See LICENSE */
#include "data/transforms.h"
#include "data/color.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* the kinds, in dl_tf_kind order: name, draws random numbers? */
static const struct {
  const char *name;
  int random;
} kinds[DL_TF_NKINDS] = {
  {"cast", 0}, {"scale", 0}, {"normalize", 0}, {"random_crop", 1}, {"flip", 1}, {"random_translate", 1},
  {"random_affine", 1}, {"one_hot", 0}, {"select", 0}, {"lua", 0}, {"resize", 0}, {"random_resized_crop", 1},
  {"center_crop", 0}, {"color_jitter", 1},
};

const char *dl_transform_kind_name(dl_tf_kind kind) {
  return kind >= 0 && kind < DL_TF_NKINDS ? kinds[kind].name : "?";
}

int dl_transform_kind(const char *name) {
  for (int k = 0; k < DL_TF_NKINDS; k++)
    if (strcmp(name, kinds[k].name) == 0) return k;
  return -1;
}

dl_transform dl_transform_defaults(dl_tf_kind kind, const char *field) {
  dl_transform t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  snprintf(t.field, sizeof t.field, "%s", field ? field : "");
  snprintf(t.name, sizeof t.name, "%s", dl_transform_kind_name(kind));
  t.dtype = DL_F32;
  t.scale = 1.0f;
  t.nch = 1;
  t.mean[0] = 0.0f;
  t.std[0] = 1.0f;
  t.p_h = 0.5f;
  t.p_v = 0.0f;
  t.scale_lo = t.scale_hi = 1.0f;
  if (kind == DL_TF_RESIZED_CROP) {
    t.scale_lo = 0.08f;
    t.ratio_lo = 3.0 / 4.0;
    t.ratio_hi = 4.0 / 3.0;
  }
  t.interp = DL_INTERP_BILINEAR;
  t.antialias = 1;
  t.stage = -1;
  return t;
}

/* ------------------------------------------------------------ helpers */

typedef struct {
  uint64_t key, counter;
  uint32_t b[4];
  int used;
} rng;

static uint32_t next_u32(rng *r) {
  if (r->used == 4) {
    dl_philox(r->key, r->counter++, r->b);
    r->used = 0;
  }
  return r->b[r->used++];
}

static float uniform(rng *r) { return (float)(next_u32(r) >> 8) * (1.0f / 16777216.0f); }

/* uniform double in [0, 1) with 53 random bits */
static double uniform53(rng *r) {
  uint64_t u = (uint64_t)next_u32(r) << 32 | next_u32(r);
  return (double)(u >> 11) * (1.0 / 9007199254740992.0);
}

/* uniform integer in [lo, hi] */
static int64_t uniform_int(rng *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1;
  uint64_t u = (uint64_t)next_u32(r) << 32 | next_u32(r);
  return lo + (int64_t)(u % span);
}

static void shape_str(const dl_exfield *f, char *buf, size_t n) { dl_shape_str(f->shape, f->ndim, buf, n); }

static int field_or_fail(const dl_transform *tf, dl_example *ex, char *err, size_t n) {
  int i = dl_example_find(ex, tf->field);
  if (i >= 0) return i;
  char have[DL_MAXFIELDS * DL_NAMELEN + 8] = "";
  for (int k = 0; k < ex->n; k++) {
    if (k) strcat(have, ", ");
    strcat(have, ex->f[k].name);
  }
  snprintf(err, n, "no field '%s' (the example has: %s)", tf->field, ex->n ? have : "no fields");
  return -1;
}

static int oom(char *err, size_t n) {
  snprintf(err, n, "out of memory");
  return -1;
}

/* channels, height, width of an image field, or -1 with a message */
static int image_dims(const dl_transform *tf, const dl_exfield *f, int64_t *c, int64_t *h, int64_t *w, char *err,
                      size_t n) {
  if (f->ndim != 2 && f->ndim != 3) {
    char s[96];
    shape_str(f, s, sizeof s);
    snprintf(err, n, "%s needs an image [C, H, W] or [H, W], field '%s' is %s", tf->name, f->name, s);
    return -1;
  }
  *c = f->ndim == 3 ? f->shape[0] : 1;
  *h = f->shape[f->ndim - 2];
  *w = f->shape[f->ndim - 1];
  return 0;
}

static void out_shape(const dl_exfield *f, int64_t h, int64_t w, int64_t *shape) {
  for (int k = 0; k < f->ndim; k++) shape[k] = f->shape[k];
  shape[f->ndim - 2] = h;
  shape[f->ndim - 1] = w;
}

/* ------------------------------------------------------------ value transforms */

static int tf_cast(const dl_transform *tf, dl_example *ex, int i, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t m = dl_exfield_numel(f);
  void *out = dl_example_begin(ex, i, tf->dtype, f->ndim, f->shape);
  if (!out) return oom(err, n);
  if (tf->dtype == DL_F32 && f->dtype == DL_U8) {
    const uint8_t *s = f->data;
    float *o = out;
    for (int64_t k = 0; k < m; k++) o[k] = (float)s[k];
  } else {
    for (int64_t k = 0; k < m; k++) dl_store(out, tf->dtype, k, dl_load(f->data, f->dtype, k));
  }
  dl_example_commit(ex, i);
  return 0;
}

static int tf_scale(const dl_transform *tf, dl_example *ex, int i, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t m = dl_exfield_numel(f);
  float *o = dl_example_begin(ex, i, DL_F32, f->ndim, f->shape);
  if (!o) return oom(err, n);
  float s = tf->scale;
  if (f->dtype == DL_U8) {
    const uint8_t *x = f->data;
    for (int64_t k = 0; k < m; k++) o[k] = (float)x[k] * s;
  } else if (f->dtype == DL_F32) {
    const float *x = f->data;
    for (int64_t k = 0; k < m; k++) o[k] = x[k] * s;
  } else {
    for (int64_t k = 0; k < m; k++) o[k] = (float)dl_load(f->data, f->dtype, k) * s;
  }
  dl_example_commit(ex, i);
  return 0;
}

static int tf_normalize(const dl_transform *tf, dl_example *ex, int i, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t m = dl_exfield_numel(f);
  if (tf->nch > 1 && (f->ndim < 1 || f->shape[0] != tf->nch)) {
    char s[96];
    shape_str(f, s, sizeof s);
    snprintf(err, n, "normalize has %d channel values but field '%s' is %s (channels first)", tf->nch, f->name, s);
    return -1;
  }
  int64_t per = tf->nch > 1 ? m / tf->nch : m;
  float *o = dl_example_begin(ex, i, DL_F32, f->ndim, f->shape);
  if (!o) return oom(err, n);
  for (int c = 0; c < tf->nch; c++) {
    float mu = tf->mean[c], inv = 1.0f / tf->std[c];
    int64_t base = (int64_t)c * per;
    if (f->dtype == DL_F32) {
      const float *x = (const float *)f->data + base;
      for (int64_t k = 0; k < per; k++) o[base + k] = (x[k] - mu) * inv;
    } else {
      for (int64_t k = 0; k < per; k++) o[base + k] = ((float)dl_load(f->data, f->dtype, base + k) - mu) * inv;
    }
  }
  dl_example_commit(ex, i);
  return 0;
}

static int tf_one_hot(const dl_transform *tf, dl_example *ex, int i, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  if (dl_exfield_numel(f) != 1 || f->ndim > 1) {
    char s[96];
    shape_str(f, s, sizeof s);
    snprintf(err, n, "one_hot needs one label per example, field '%s' is %s", f->name, s);
    return -1;
  }
  double v = dl_load(f->data, f->dtype, 0);
  if (v != floor(v) || v < 1 || v > (double)tf->classes) {
    snprintf(err, n, "one_hot: label %g of field '%s' is outside 1..%lld (labels are 1-based)", v, f->name,
             (long long)tf->classes);
    return -1;
  }
  int64_t c = tf->classes;
  float *o = dl_example_begin(ex, i, DL_F32, 1, &c);
  if (!o) return oom(err, n);
  for (int64_t k = 0; k < c; k++) o[k] = 0.0f;
  o[(int64_t)v - 1] = 1.0f;
  dl_example_commit(ex, i);
  return 0;
}

static int tf_select(const dl_transform *tf, dl_example *ex, char *err, size_t n) {
  for (int s = 0; s < tf->nsel; s++) {
    if (dl_example_find(ex, tf->sel[s]) < 0) {
      dl_transform t = *tf;
      snprintf(t.field, sizeof t.field, "%s", tf->sel[s]);
      return field_or_fail(&t, ex, err, n);
    }
  }
  /* move the selected fields to the front in the order given; drop the rest */
  for (int s = 0; s < tf->nsel; s++) {
    int at = dl_example_find(ex, tf->sel[s]);
    if (at != s) {
      dl_exfield t = ex->f[s];
      ex->f[s] = ex->f[at];
      ex->f[at] = t;
    }
  }
  while (ex->n > tf->nsel) dl_example_remove(ex, ex->n - 1);
  return 0;
}

/* ------------------------------------------------------------ geometric transforms */

/* the fill value as one element of dtype d */
static void fill_elem(dl_dtype d, float v, unsigned char *e) { dl_store(e, d, 0, (double)v); }

/* rewrites field i as the window rows [y0, y0 + h), columns [x0, x0 + w) of
 * its C planes H x W, `fill` where the window leaves the image */
static int copy_window(dl_example *ex, int i, int64_t C, int64_t H, int64_t W, int64_t y0, int64_t x0, int64_t h,
                       int64_t w, float fillv, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t shape[DL_MAXDIM];
  out_shape(f, h, w, shape);
  size_t es = dl_dtype_size(f->dtype);
  unsigned char *o = dl_example_begin(ex, i, f->dtype, f->ndim, shape), fill[8];
  if (!o) return oom(err, n);
  fill_elem(f->dtype, fillv, fill);
  const unsigned char *s = f->data;
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < h; y++) {
      int64_t sy = y0 + y;
      unsigned char *orow = o + ((c * h + y) * w) * (int64_t)es;
      if (sy < 0 || sy >= H) {
        for (int64_t x = 0; x < w; x++) memcpy(orow + x * (int64_t)es, fill, es);
        continue;
      }
      const unsigned char *srow = s + ((c * H + sy) * W) * (int64_t)es;
      int64_t xa = x0 < 0 ? -x0 : 0, xb = W - x0 < w ? W - x0 : w;   /* in-image columns [xa, xb) */
      for (int64_t x = 0; x < xa && x < w; x++) memcpy(orow + x * (int64_t)es, fill, es);
      if (xb > xa) memcpy(orow + xa * (int64_t)es, srow + (x0 + xa) * (int64_t)es, (size_t)(xb - xa) * es);
      for (int64_t x = xb > xa ? xb : xa; x < w; x++) memcpy(orow + x * (int64_t)es, fill, es);
    }
  dl_example_commit(ex, i);
  return 0;
}

/* The image transforms open alike (the field, its [C, H, W] from image_dims) and end alike
 * (commit the new field), by design: one function per transform, dispatched from apply's
 * switch, each with its own loop in between. */
static int tf_crop(const dl_transform *tf, dl_example *ex, int i, rng *r, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t C, H, W;
  if (image_dims(tf, f, &C, &H, &W, err, n) < 0) return -1;
  int64_t p = tf->padding, h = tf->size[0], w = tf->size[1];
  if (h > H + 2 * p || w > W + 2 * p) {
    char s[96];
    shape_str(f, s, sizeof s);
    snprintf(err, n, "random_crop of %lld x %lld does not fit field '%s' %s padded by %lld", (long long)h,
             (long long)w, f->name, s, (long long)p);
    return -1;
  }
  int64_t y0 = uniform_int(r, 0, H + 2 * p - h) - p, x0 = uniform_int(r, 0, W + 2 * p - w) - p;
  return copy_window(ex, i, C, H, W, y0, x0, h, w, tf->fill, err, n);
}

static int tf_flip(const dl_transform *tf, dl_example *ex, int i, rng *r, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t C, H, W;
  if (image_dims(tf, f, &C, &H, &W, err, n) < 0) return -1;
  int fh = uniform(r) < tf->p_h, fv = uniform(r) < tf->p_v;
  if (!fh && !fv) return 0;
  size_t es = dl_dtype_size(f->dtype);
  unsigned char *o = dl_example_begin(ex, i, f->dtype, f->ndim, f->shape);
  if (!o) return oom(err, n);
  const unsigned char *s = f->data;
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < H; y++) {
      const unsigned char *srow = s + ((c * H + (fv ? H - 1 - y : y)) * W) * (int64_t)es;
      unsigned char *orow = o + ((c * H + y) * W) * (int64_t)es;
      if (!fh) memcpy(orow, srow, (size_t)W * es);
      else if (es == 1)
        for (int64_t x = 0; x < W; x++) orow[x] = srow[W - 1 - x];
      else
        for (int64_t x = 0; x < W; x++) memcpy(orow + x * (int64_t)es, srow + (W - 1 - x) * (int64_t)es, es);
    }
  dl_example_commit(ex, i);
  return 0;
}

/* (opens and ends like the other image transforms, by design: see tf_crop) */
static int tf_translate(const dl_transform *tf, dl_example *ex, int i, rng *r, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t C, H, W;
  if (image_dims(tf, f, &C, &H, &W, err, n) < 0) return -1;
  int64_t dy = uniform_int(r, -tf->max_shift[0], tf->max_shift[0]);
  int64_t dx = uniform_int(r, -tf->max_shift[1], tf->max_shift[1]);
  size_t es = dl_dtype_size(f->dtype);
  unsigned char *o = dl_example_begin(ex, i, f->dtype, f->ndim, f->shape), fill[8];
  if (!o) return oom(err, n);
  fill_elem(f->dtype, tf->fill, fill);
  const unsigned char *s = f->data;
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < H; y++) {
      int64_t sy = y - dy;
      unsigned char *orow = o + ((c * H + y) * W) * (int64_t)es;
      for (int64_t x = 0; x < W; x++) {
        int64_t sx = x - dx;
        if (sy < 0 || sy >= H || sx < 0 || sx >= W) memcpy(orow + x * (int64_t)es, fill, es);
        else memcpy(orow + x * (int64_t)es, s + ((c * H + sy) * W + sx) * (int64_t)es, es);
      }
    }
  dl_example_commit(ex, i);
  return 0;
}

/* rotation by angle, zoom by scale and shift, about the centre; each output
 * pixel samples the input bilinearly at the inverse-mapped point */
/* (opens and ends like the other image transforms, by design: see tf_crop) */
static int tf_affine(const dl_transform *tf, dl_example *ex, int i, rng *r, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t C, H, W;
  if (image_dims(tf, f, &C, &H, &W, err, n) < 0) return -1;
  if (f->dtype != DL_U8 && f->dtype != DL_F32) {
    snprintf(err, n, "random_affine supports uint8 and float32 images, field '%s' is %s", f->name,
             dl_dtype_name(f->dtype));
    return -1;
  }
  float ang = (2.0f * uniform(r) - 1.0f) * tf->degrees * 0.017453292519943295f;
  float sc = tf->scale_lo + uniform(r) * (tf->scale_hi - tf->scale_lo);
  float tx = (2.0f * uniform(r) - 1.0f) * tf->translate * (float)W;
  float ty = (2.0f * uniform(r) - 1.0f) * tf->translate * (float)H;
  float ca = cosf(ang) / sc, sa = sinf(ang) / sc;
  float cx = 0.5f * (float)(W - 1), cy = 0.5f * (float)(H - 1);
  void *o = dl_example_begin(ex, i, f->dtype, f->ndim, f->shape);
  if (!o) return oom(err, n);
  for (int64_t y = 0; y < H; y++)
    for (int64_t x = 0; x < W; x++) {
      float dx = (float)x - cx - tx, dy = (float)y - cy - ty;
      float sx = ca * dx + sa * dy + cx, sy = -sa * dx + ca * dy + cy;
      float fx0 = floorf(sx), fy0 = floorf(sy);
      int64_t x0 = (int64_t)fx0, y0 = (int64_t)fy0;
      float ax = sx - fx0, ay = sy - fy0;
      float wts[4] = {(1.0f - ax) * (1.0f - ay), ax * (1.0f - ay), (1.0f - ax) * ay, ax * ay};
      int64_t xs[4] = {x0, x0 + 1, x0, x0 + 1}, ys[4] = {y0, y0, y0 + 1, y0 + 1};
      for (int64_t c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int k = 0; k < 4; k++) {
          float v;
          if (xs[k] < 0 || xs[k] >= W || ys[k] < 0 || ys[k] >= H) v = tf->fill;
          else if (f->dtype == DL_U8) v = (float)((const uint8_t *)f->data)[(c * H + ys[k]) * W + xs[k]];
          else v = ((const float *)f->data)[(c * H + ys[k]) * W + xs[k]];
          acc += wts[k] * v;
        }
        int64_t at = (c * H + y) * W + x;
        if (f->dtype == DL_F32) ((float *)o)[at] = acc;
        else ((uint8_t *)o)[at] = (uint8_t)(acc <= 0.0f ? 0.0f : acc >= 255.0f ? 255.0f : acc + 0.5f);
      }
    }
  dl_example_commit(ex, i);
  return 0;
}

/* ------------------------------------------------------------ resampling and colour */

/* an image field of uint8, float32 (or, with f64, float64) with H, W >= 1 */
static int resample_dims(const dl_transform *tf, const dl_exfield *f, int f64, int64_t *C, int64_t *H, int64_t *W,
                         char *err, size_t n) {
  if (image_dims(tf, f, C, H, W, err, n) < 0) return -1;
  if (f->dtype != DL_U8 && f->dtype != DL_F32 && !(f64 && f->dtype == DL_F64)) {
    snprintf(err, n, "%s supports uint8%s float32 images, field '%s' is %s", tf->name, f64 ? ", float64 and" : " and",
             f->name, dl_dtype_name(f->dtype));
    return -1;
  }
  if (*H < 1 || *W < 1 || *C < 1) {
    char s[96];
    shape_str(f, s, sizeof s);
    snprintf(err, n, "%s needs a non-empty image, field '%s' is %s", tf->name, f->name, s);
    return -1;
  }
  return 0;
}

/* rewrites field i as the window (y0, x0, h, w) of its planes resampled to oh x ow */
static int resample(const dl_transform *tf, dl_example *ex, int i, int64_t C, int64_t H, int64_t W, int64_t y0,
                    int64_t x0, int64_t h, int64_t w, int64_t oh, int64_t ow, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t shape[DL_MAXDIM];
  out_shape(f, oh, ow, shape);
  void *o = dl_example_begin(ex, i, f->dtype, f->ndim, shape);
  if (!o || dl_resize(f->data, f->dtype, C, H, W, y0, x0, h, w, oh, ow, tf->interp, tf->antialias, o) < 0)
    return oom(err, n);
  dl_example_commit(ex, i);
  return 0;
}

static int tf_resize(const dl_transform *tf, dl_example *ex, int i, char *err, size_t n) {
  int64_t C, H, W, oh = tf->size[0], ow = tf->size[1];
  if (resample_dims(tf, &ex->f[i], 1, &C, &H, &W, err, n) < 0) return -1;
  if (tf->size[1] == 0) dl_resize_short_side(H, W, tf->size[0], &oh, &ow);
  return resample(tf, ex, i, C, H, W, 0, 0, H, W, oh, ow, err, n);
}

/* torchvision's RandomResizedCrop.get_params: 10 tries of an area fraction and
 * a log-uniform aspect ratio, else the whole image cropped to the ratio range */
static int tf_resized_crop(const dl_transform *tf, dl_example *ex, int i, rng *r, char *err, size_t n) {
  int64_t C, H, W;
  if (resample_dims(tf, &ex->f[i], 1, &C, &H, &W, err, n) < 0) return -1;
  double area = (double)H * (double)W, lr0 = log(tf->ratio_lo), lr1 = log(tf->ratio_hi);
  for (int t = 0; t < 10; t++) {
    double target = area * ((double)tf->scale_lo + (double)(tf->scale_hi - tf->scale_lo) * uniform53(r));
    double ratio = exp(lr0 + (lr1 - lr0) * uniform53(r));
    double fw = rint(sqrt(target * ratio)), fh = rint(sqrt(target / ratio));   /* Python's round: half to even */
    if (fw > 0 && fw <= (double)W && fh > 0 && fh <= (double)H) {
      int64_t h = (int64_t)fh, w = (int64_t)fw;
      int64_t y0 = uniform_int(r, 0, H - h), x0 = uniform_int(r, 0, W - w);
      return resample(tf, ex, i, C, H, W, y0, x0, h, w, tf->size[0], tf->size[1], err, n);
    }
  }
  double in_ratio = (double)W / (double)H;
  int64_t h = H, w = W;
  if (in_ratio < tf->ratio_lo) h = (int64_t)rint((double)w / tf->ratio_lo);
  else if (in_ratio > tf->ratio_hi) w = (int64_t)rint((double)h * tf->ratio_hi);
  if (h < 1) h = 1;
  if (w < 1) w = 1;
  return resample(tf, ex, i, C, H, W, (H - h) / 2, (W - w) / 2, h, w, tf->size[0], tf->size[1], err, n);
}

/* torchvision's center_crop: zero padding (left/top getting the smaller half)
 * where the crop is larger, then the window at round((size - crop) / 2) */
static int tf_center_crop(const dl_transform *tf, dl_example *ex, int i, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t C, H, W, h = tf->size[0], w = tf->size[1];
  if (image_dims(tf, f, &C, &H, &W, err, n) < 0) return -1;
  int64_t pt = h > H ? (h - H) / 2 : 0, pl = w > W ? (w - W) / 2 : 0;
  int64_t ph = H + pt + (h > H ? (h - H + 1) / 2 : 0), pw = W + pl + (w > W ? (w - W + 1) / 2 : 0);
  int64_t top = (int64_t)rint((double)(ph - h) / 2.0), left = (int64_t)rint((double)(pw - w) / 2.0);
  return copy_window(ex, i, C, H, W, top - pt, left - pl, h, w, 0.0f, err, n);
}

/* the four adjustments in an order drawn per example (torchvision draws a
 * permutation too), each factor uniform in its range; 3 + 4 draws always */
static int tf_color_jitter(const dl_transform *tf, dl_example *ex, int i, rng *r, char *err, size_t n) {
  dl_exfield *f = &ex->f[i];
  int64_t C, H, W;
  if (resample_dims(tf, f, 0, &C, &H, &W, err, n) < 0) return -1;
  if (C != 1 && C != 3) {
    char s[96];
    shape_str(f, s, sizeof s);
    snprintf(err, n, "color_jitter needs 1 or 3 channels, field '%s' is %s", f->name, s);
    return -1;
  }
  int order[4] = {0, 1, 2, 3};
  for (int k = 3; k > 0; k--) {                 /* Fisher-Yates */
    int j = (int)uniform_int(r, 0, k), t = order[k];
    order[k] = order[j];
    order[j] = t;
  }
  double fac[4];
  for (int k = 0; k < 4; k++) fac[k] = tf->jitter[k][0] + (tf->jitter[k][1] - tf->jitter[k][0]) * uniform53(r);
  int64_t m = dl_exfield_numel(f);
  void *o = dl_example_begin(ex, i, f->dtype, f->ndim, f->shape);
  if (!o) return oom(err, n);
  memcpy(o, f->data, (size_t)m * dl_dtype_size(f->dtype));
  static const dl_color_op ops[4] = {DL_COLOR_BRIGHTNESS, DL_COLOR_CONTRAST, DL_COLOR_SATURATION, DL_COLOR_HUE};
  for (int k = 0; k < 4; k++)
    if (tf->jitter_on[order[k]]) dl_color_adjust(ops[order[k]], f->dtype, o, C, H * W, fac[order[k]]);
  dl_example_commit(ex, i);
  return 0;
}

/* ------------------------------------------------------------ dispatch */

int dl_transform_apply(const dl_transform *tf, dl_example *ex, int worker, int64_t epoch, uint64_t key, char *err,
                       size_t errlen) {
  if (tf->kind == DL_TF_CALL) return tf->call(tf, worker, ex, epoch, key, err, errlen);
  if (tf->kind == DL_TF_SELECT) return tf_select(tf, ex, err, errlen);
  int i = field_or_fail(tf, ex, err, errlen);
  if (i < 0) return -1;
  rng r = {key, 0, {0, 0, 0, 0}, 4};
  switch (tf->kind) {
    case DL_TF_CAST: return tf_cast(tf, ex, i, err, errlen);
    case DL_TF_SCALE: return tf_scale(tf, ex, i, err, errlen);
    case DL_TF_NORMALIZE: return tf_normalize(tf, ex, i, err, errlen);
    case DL_TF_ONE_HOT: return tf_one_hot(tf, ex, i, err, errlen);
    case DL_TF_CROP: return tf_crop(tf, ex, i, &r, err, errlen);
    case DL_TF_FLIP: return tf_flip(tf, ex, i, &r, err, errlen);
    case DL_TF_TRANSLATE: return tf_translate(tf, ex, i, &r, err, errlen);
    case DL_TF_AFFINE: return tf_affine(tf, ex, i, &r, err, errlen);
    case DL_TF_RESIZE: return tf_resize(tf, ex, i, err, errlen);
    case DL_TF_RESIZED_CROP: return tf_resized_crop(tf, ex, i, &r, err, errlen);
    case DL_TF_CENTER_CROP: return tf_center_crop(tf, ex, i, err, errlen);
    case DL_TF_COLOR_JITTER: return tf_color_jitter(tf, ex, i, &r, err, errlen);
    default: break;
  }
  snprintf(err, errlen, "unknown transform kind %d", (int)tf->kind);
  return -1;
}
